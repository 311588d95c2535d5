"""Speech-to-text data: audio I/O, features, augmentation and the data layer."""
