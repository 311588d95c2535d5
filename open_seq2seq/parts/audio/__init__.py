"""Audio signal processing for speech synthesis, in TensorFlow.

- ``spectrogram``: STFT magnitude, mel filterbank, log compression, silence trimming.
- ``griffin_lim``: Griffin-Lim waveform reconstruction, spectral convergence, mel to linear.

Names are imported from the modules themselves: re-exporting the function ``griffin_lim``
here would shadow the module of the same name.
"""
