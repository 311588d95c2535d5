"""Audio signal processing for speech synthesis, in TensorFlow.

- ``spectrogram``: STFT magnitude, windows, mel filterbank, dB/log compression, DCT
  (MFCC), silence trimming; shared with the speech-recognition features.
- ``griffin_lim``: Griffin-Lim waveform reconstruction, spectral convergence, mel to linear.

Names are imported from the modules themselves: re-exporting the function ``griffin_lim``
here would shadow the module of the same name.
"""
