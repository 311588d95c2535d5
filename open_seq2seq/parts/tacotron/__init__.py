"""Building blocks of the speech-synthesis decoders: location-sensitive attention, the
zoneout LSTM cell, the prenet and the convolutional postnet, and guided attention."""
