"""Building blocks of the WaveNet vocoder (``encoders/wavenet_encoder.py``)."""
