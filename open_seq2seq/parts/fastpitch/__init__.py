"""FastPitch's parts: the learned aligner and monotonic alignment search, the length
regulator, FFT blocks and the duration/pitch predictors."""

from open_seq2seq.parts.fastpitch.alignment import (average_per_symbol, beta_binomial_log_prior,
                                                    binarization_loss, durations_of,
                                                    forward_sum_loss, monotonic_alignment_search)
from open_seq2seq.parts.fastpitch.layers import Aligner, FFTBlock, FFTStack, TemporalPredictor
from open_seq2seq.parts.fastpitch.length_regulator import regulate_length

__all__ = ["average_per_symbol", "beta_binomial_log_prior", "binarization_loss", "durations_of",
           "forward_sum_loss", "monotonic_alignment_search", "Aligner", "FFTBlock", "FFTStack",
           "TemporalPredictor", "regulate_length"]
