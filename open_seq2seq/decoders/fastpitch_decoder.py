"""FastPitchDecoder: aligner + MAS, duration and pitch predictors, length regulator, FFT
decoder and mel projection (Łańcucki 2021, with Badlani et al. 2021's learned alignment)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.fastpitch.alignment import (average_per_symbol, beta_binomial_log_prior,
                                                    durations_of, monotonic_alignment_search)
from open_seq2seq.parts.fastpitch.layers import (FFT_PARAMS, Aligner, TemporalPredictor,
                                                 check_fft_params, conv1d, fft_stack, masked)
from open_seq2seq.parts.fastpitch.length_regulator import regulate_length
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param


class FastPitchDecoder(Decoder):
  """Everything of FastPitch after the text encoder.

  Durations come from an aligner learned jointly with the model (no teacher Tacotron, no
  attention that may fail to align): keys from the symbol embeddings, queries from the mel
  frames, a soft alignment = softmax over symbols of their negative squared distance plus,
  unless ``use_prior`` is off, the log of a beta-binomial prior favouring the diagonal
  (``parts/fastpitch/alignment.py``). Monotonic alignment search turns it into a hard path
  in the graph each step; its durations always sum to the target length and improve as the
  aligner learns. The loss reads the soft and hard alignments (forward-sum and
  binarization terms).

  Teacher forced (``target_tensors`` = mel frames, stop tokens, lengths, frame pitch): the
  frame pitch (normalised, 0 where unvoiced) is averaged per symbol over its MAS frames
  (voiced frames only); the pitch embedding (a convolution over the symbols) of that pitch
  is added to the encoder output, each symbol's vector is repeated for its MAS duration
  (length regulator), and the decoder's FFT blocks and a linear projection give the mel
  frames. The duration predictor (log(1 + frames)) and the pitch predictor read the encoder
  output and are trained against the MAS durations and the per-symbol pitch.

  Free running (no targets): durations are the predicted ones divided by ``pace`` and
  rounded (at least 0, at most ``max_duration``; an utterance never gets 0 frames in all),
  and the pitch is the predicted one plus ``pitch_shift`` (normalised units: the model
  converts Hz through the corpus's pitch standard deviation).

  Outputs: ``spectrogram`` [B, T, mel] float32, ``final_sequence_lengths``, ``src_lengths``,
  ``durations`` (MAS or predicted), ``log_duration_predictions``, ``pitch_predictions``,
  ``pitch`` (the per-symbol pitch the embedding read) and ``alignments`` [B, T, N] (the hard
  path); teacher forced also ``pitch_targets``, ``alignment_log_probs`` and
  ``soft_alignments``.
  """

  PARAMS = {
      **FFT_PARAMS,
      "predictor_filter_size": Param(int, 256, "Channels of the duration/pitch predictors."),
      "predictor_kernel_size": Param(int, 3, "Kernel of the predictors' convolutions."),
      "predictor_dropout": Param(float, 0.1, "Dropout in the predictors (training)."),
      "predictor_layers": Param(int, 2, "Convolutions of each predictor."),
      "pitch_embedding_kernel_size": Param(int, 3, "Kernel of the pitch embedding convolution."),
      "aligner_channels": Param(int, 80, "Channels of the aligner's keys and queries."),
      "aligner_temperature": Param(float, 0.0005, "Scale of the negative squared distance "
                                   "before the aligner's softmax."),
      "use_prior": Param(bool, True, "Add the log beta-binomial prior to the soft alignment."),
      "prior_scaling": Param(float, 1.0, "Scaling of the prior's alpha and beta (smaller: "
                             "a wider band)."),
      "max_duration": Param(int, 75, "Inference: at most this many frames per symbol."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "decoder",
               dtype: Any = "float32", initializer: Any = None, num_mel_features: int = 80,
               pace: float = 1.0, pitch_shift: float = 0.0):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    where = self.PARAMS_KEY
    check_fft_params(p, where)
    for key in ("predictor_filter_size", "predictor_kernel_size", "predictor_layers",
                "pitch_embedding_kernel_size", "aligner_channels", "max_duration"):
      if p[key] <= 0:
        raise ConfigError(f"{where}/{key}: must be positive, got {p[key]}")
    if not 0.0 <= p["predictor_dropout"] < 1.0:
      raise ConfigError(f"{where}/predictor_dropout: must be in [0, 1), got "
                        f"{p['predictor_dropout']}")
    for key in ("aligner_temperature", "prior_scaling"):
      if p[key] <= 0:
        raise ConfigError(f"{where}/{key}: must be positive, got {p[key]}")
    if pace <= 0:
      raise ConfigError(f"pace: must be positive (2.0 speaks twice as fast), got {pace}")
    self.num_mel = num_mel_features
    #: Inference controls: frames per symbol are divided by pace; pitch_shift (normalised)
    #: is added to the predicted pitch.
    self.pace, self.pitch_shift = float(pace), float(pitch_shift)
    policy, init, d = self.dtype_policy, self.kernel_initializer(), p["d_model"]
    self.aligner = Aligner(d, num_mel_features, p["aligner_channels"], p["aligner_temperature"],
                           init, dtype=policy, name="aligner")
    predictor = dict(input_size=d, filter_size=p["predictor_filter_size"],
                     kernel_size=p["predictor_kernel_size"], dropout_rate=p["predictor_dropout"],
                     num_layers=p["predictor_layers"], initializer=init, dtype=policy)
    self.duration_predictor = TemporalPredictor(**predictor, name="duration_predictor")
    self.pitch_predictor = TemporalPredictor(**predictor, name="pitch_predictor")
    self.pitch_embedding = conv1d(d, p["pitch_embedding_kernel_size"], policy,
                                  "pitch_embedding", init)
    self.stack = fft_stack(p, policy, init, "fft")
    self.projection = keras.layers.Dense(num_mel_features, kernel_initializer=init,
                                         dtype=policy, name="mel_projection")

  def build(self, input_shape=None):
    d = self.params["d_model"]
    for layer in (self.aligner, self.duration_predictor, self.pitch_predictor, self.stack):
      layer.build()
    self.pitch_embedding.build((None, None, 1))
    self.projection.build((None, d))

  # ------------------------------------------------------------------ pieces
  def align(self, embeddings: tf.Tensor, text_lengths: tf.Tensor, mel: tf.Tensor,
            mel_lengths: tf.Tensor) -> dict:
    """The aligner's log-probabilities and soft alignment, and MAS's hard path."""
    symbols, frames = tf.shape(embeddings)[1], tf.shape(mel)[1]
    text_mask = tf.sequence_mask(text_lengths, symbols)
    mel_mask = tf.sequence_mask(mel_lengths, frames)
    log_probs = self.aligner(embeddings, text_mask, mel[:, :, :self.num_mel], mel_mask)
    if self.params["use_prior"]:
      log_probs += beta_binomial_log_prior(text_lengths, mel_lengths, symbols, frames,
                                           self.params["prior_scaling"])
    log_probs = tf.where(text_mask[:, None, :], log_probs, -float("inf"))
    soft = tf.where(mel_mask[:, :, None], tf.nn.softmax(log_probs, axis=-1), 0.0)
    hard = monotonic_alignment_search(log_probs, text_lengths, mel_lengths)
    return {"alignment_log_probs": log_probs, "soft_alignments": soft, "alignments": hard}

  def predicted_durations(self, log_durations: tf.Tensor, text_mask: tf.Tensor) -> tf.Tensor:
    """Frames per symbol at inference: (exp(log d) - 1) / pace, rounded, in [0, max]."""
    frames = tf.maximum(tf.exp(log_durations) - 1.0, 0.0) / self.pace
    durations = tf.minimum(tf.cast(tf.round(frames), tf.int32), self.params["max_duration"])
    durations *= tf.cast(text_mask, tf.int32)
    silent = tf.cast(tf.reduce_sum(durations, 1) == 0, tf.int32)  # never an empty output
    return durations + silent[:, None] * tf.one_hot(0, tf.shape(durations)[1], dtype=tf.int32)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    enc = input_dict["encoder_output"]
    outputs, text_lengths = enc["outputs"], tf.cast(enc["src_lengths"], tf.int32)
    if outputs.shape[-1] is not None and outputs.shape[-1] != self.params["d_model"]:
      raise ConfigError(f"decoder_params/d_model: {self.params['d_model']} differs from the "
                        f"encoder's width {outputs.shape[-1]}; make them equal")
    text_mask = tf.sequence_mask(text_lengths, tf.shape(outputs)[1])
    log_durations = self.duration_predictor(outputs, text_mask, training=training)
    pitch_predictions = self.pitch_predictor(outputs, text_mask, training=training)
    result = {"src_lengths": text_lengths, "log_duration_predictions": log_durations,
              "pitch_predictions": pitch_predictions}
    targets = input_dict.get("target_tensors")
    if targets is not None:
      mel, _, mel_lengths, frame_pitch = targets[:4]
      mel_lengths = tf.cast(mel_lengths, tf.int32)
      result.update(self.align(enc["embeddings"], text_lengths, mel, mel_lengths))
      durations = durations_of(result["alignments"])
      pitch = average_per_symbol(frame_pitch, result["alignments"])
      result["pitch_targets"] = pitch
      max_frames = tf.shape(mel)[1]
    else:
      durations = self.predicted_durations(log_durations, text_mask)
      pitch = tf.where(text_mask, pitch_predictions + self.pitch_shift, 0.0)
      max_frames = None
    pitch_input = masked(tf.cast(pitch, self.compute_dtype)[:, :, None], text_mask)
    conditioned = outputs + masked(self.pitch_embedding(pitch_input), text_mask)
    frames, lengths, index = regulate_length(conditioned, durations, max_frames)
    mel_mask = tf.sequence_mask(lengths, tf.shape(frames)[1])
    decoded = self.stack(frames, mel_mask, training=training)
    spectrogram = masked(tf.cast(self.projection(decoded), tf.float32), mel_mask)
    if targets is None:
      result["alignments"] = tf.one_hot(index, tf.shape(outputs)[1], dtype=tf.float32)
    result.update(spectrogram=spectrogram, final_sequence_lengths=lengths, durations=durations,
                  pitch=pitch)
    return result
