"""Tacotron2Encoder: character embeddings, a convolution stack and a bidirectional LSTM."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import check_padding, sequence_mask
from open_seq2seq.parts.tacotron.cells import ZoneoutLSTMCell
from open_seq2seq.parts.tacotron.layers import Postnet
from open_seq2seq.parts.tacotron.style_tokens import ReferenceEncoder, StyleTokenLayer
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import (Param, callable_or_class, dict_of, int_list, list_of,
                                       non_negative_int)


def _check_conv(layer: dict, path: str) -> dict:
  layer["padding"] = check_padding(layer["padding"], f"{path}/padding")
  if layer["stride"] != [1]:
    raise ConfigError(f"{path}/stride: Tacotron's convolutions keep the text length; use [1]")
  return layer


CONV_PARAMS = {
    "kernel_size": Param(int_list(1), doc="[width] of the 1-D kernel."),
    "stride": Param(int_list(1), [1], "[stride] (must be [1])."),
    "num_channels": Param(int, doc="Output channels (-1: the input's)."),
    "padding": Param(str, "SAME", "SAME or VALID (any case)."),
    "activation_fn": Param((callable_or_class, None), None,
                           "Activation of this layer (None: the encoder's activation_fn)."),
}


def _check_conv2d(layer: dict, path: str) -> dict:
  layer["padding"] = check_padding(layer["padding"], f"{path}/padding")
  return layer


STYLE_CONV_PARAMS = {
    "kernel_size": Param(int_list(2), doc="[time, frequency] of the 2-D kernel."),
    "stride": Param(int_list(2), [2, 2], "[time, frequency] strides."),
    "num_channels": Param(int, doc="Output channels."),
    "padding": Param(str, "SAME", "SAME or VALID (any case)."),
}


def _check_style(params: dict, path: str) -> dict:
  if params["attention_layer_size"] % params["num_heads"]:
    raise ConfigError(f"{path}/attention_layer_size: {params['attention_layer_size']} is not a "
                      f"multiple of num_heads {params['num_heads']}")
  weights = params["token_weights"]
  if weights is not None and (len(weights) != params["num_tokens"] or
                              not all(isinstance(w, (int, float)) for w in weights)):
    raise ConfigError(f"{path}/token_weights: give num_tokens ({params['num_tokens']}) numbers, "
                      f"got {weights!r}")
  if not (is_lstm(params["rnn_type"]) or is_gru(params["rnn_type"])):
    raise ConfigError(f"{path}/rnn_type: {params['rnn_type']!r} is neither an LSTM nor a GRU")
  return params


#: The GST paper's reference encoder: six 3x3 convolutions with stride 2.
PAPER_STYLE_CONVS = [{"kernel_size": [3, 3], "stride": [2, 2], "num_channels": c,
                      "padding": "SAME"} for c in (32, 32, 64, 64, 128, 128)]

STYLE_PARAMS = {
    "conv_layers": Param(list_of(STYLE_CONV_PARAMS, "a style conv_layers entry", _check_conv2d),
                         PAPER_STYLE_CONVS, "Reference encoder 2-D convs (+ batch norm + "
                         "activation_fn); default the paper's six 3x3/2."),
    "num_rnn_layers": Param(non_negative_int, 1, "Reference encoder recurrent layers."),
    "rnn_cell_dim": Param(int, 128, "Units of the reference encoder's recurrent layers."),
    "rnn_unidirectional": Param(bool, True, "Forward-only reference encoder."),
    "rnn_type": Param((callable_or_class, str), "gru", "GRU (keras.layers.GRU, GRUCell, "
                      "'gru') or LSTM."),
    "reference_size": Param(int, 128, "Units of the tanh projection of the reference."),
    "emb_size": Param(int, 256, "Size of each style token embedding."),
    "attention_layer_size": Param(int, 256, "Size of the style embedding (and attention depth)."),
    "num_tokens": Param(int, 10, "Style tokens."),
    "num_heads": Param(int, 4, "Attention heads over the tokens."),
    "trainable_tokens": Param(bool, False, "Train the token table (the GST paper); False keeps "
                              "its random values, as OpenSeq2Seq (the projections learn)."),
    "token_weights": Param((list, None), None, "infer / interactive_infer: speak in this mix "
                           "of tokens (num_tokens weights, every head) instead of a reference."),
}

STYLE_TYPE = dict_of(STYLE_PARAMS, "style_embedding_params", _check_style)


def is_lstm(rnn_type: Any) -> bool:
  """Whether ``rnn_type`` names an LSTM (a Keras LSTM class, cell class, or "lstm")."""
  if isinstance(rnn_type, str):
    return "lstm" in rnn_type.lower()
  return isinstance(rnn_type, type) and issubclass(
      rnn_type, (keras.layers.LSTM, keras.layers.LSTMCell, ZoneoutLSTMCell))


def is_gru(rnn_type: Any) -> bool:
  if isinstance(rnn_type, str):
    return "gru" in rnn_type.lower()
  return isinstance(rnn_type, type) and issubclass(rnn_type, (keras.layers.GRU,
                                                              keras.layers.GRUCell))


class Tacotron2Encoder(Encoder):
  """Tacotron 2's text encoder (Shen et al., 2018).

  Symbol ids [B, N] are embedded (``src_emb_size``), go through ``conv_layers`` (1-D conv +
  batch norm + activation + dropout, padding never read), then ``num_rnn_layers``
  bidirectional LSTM layers of ``rnn_cell_dim`` units per direction (zoneout when
  ``zoneout_prob`` > 0; dropout ``rnn_dropout_prob`` between layers). Returns ``outputs``
  [B, N, 2 * rnn_cell_dim] and ``src_lengths``.
  """

  PARAMS = {
      "src_vocab_size": Param((int, None), None,
                              "Symbols (default: the data layer's vocabulary)."),
      "src_emb_size": Param(int, 512, "Symbol embedding size."),
      "conv_layers": Param(list_of(CONV_PARAMS, "a conv_layers entry", _check_conv),
                           doc="1-D conv layers after the embedding."),
      "activation_fn": Param(callable_or_class, tf.nn.relu, "Activation of the conv layers."),
      "cnn_dropout_prob": Param(float, 0.5, "Dropout after each conv layer (training)."),
      "bn_momentum": Param(float, 0.1, "Batch-norm moving-average momentum (TF 1 convention, "
                           "as OpenSeq2Seq's Tacotron)."),
      "bn_epsilon": Param(float, 1e-5, "Batch-norm epsilon."),
      "num_rnn_layers": Param(int, 1, "Bidirectional recurrent layers (0 for none)."),
      "rnn_cell_dim": Param(int, 256, "Units per direction."),
      "rnn_unidirectional": Param(bool, False, "Forward-only recurrent layers."),
      "rnn_type": Param((callable_or_class, str), "lstm",
                        "LSTM (keras.layers.LSTM, LSTMCell, 'lstm') or GRU (no zoneout)."),
      "use_cudnn_rnn": Param(bool, True, "Ignored: Keras picks the fused kernel itself."),
      "rnn_dropout_prob": Param(float, 0.0, "Dropout on each recurrent layer's output."),
      "zoneout_prob": Param(float, 0.0, "Zoneout of the LSTM states (training; Tacotron 2: 0.1)."),
      "data_format": Param(str, "channels_last", "Ignored: the layout is internal.",
                           choices=("channels_first", "channels_last")),
      "style_embedding_enable": Param(bool, False, "Global style tokens: append a style "
                                      "embedding of a reference spectrogram to every symbol "
                                      "(data layer style_input 'wav')."),
      "style_embedding_params": Param((STYLE_TYPE, None), None,
                                      "The reference encoder and style tokens (GST)."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None,
               src_vocab_size: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    policy = self.dtype_policy
    init = self.kernel_initializer()
    vocab = resolve_size(p, "src_vocab_size", src_vocab_size, self.PARAMS_KEY)
    lstm, gru = is_lstm(p["rnn_type"]), is_gru(p["rnn_type"])
    if not (lstm or gru):
      raise ConfigError(f"encoder_params/rnn_type: {p['rnn_type']!r} is neither an LSTM nor a GRU")
    if gru and p["zoneout_prob"] > 0:
      raise ConfigError("encoder_params/zoneout_prob: zoneout is implemented for LSTMs; set "
                        "rnn_type to keras.layers.LSTM or zoneout_prob to 0")
    self.embedding = keras.layers.Embedding(vocab, p["src_emb_size"],
                                            embeddings_initializer=fresh(init), dtype=policy,
                                            name="EncoderEmbeddingMatrix")
    layers = [dict(spec, activation_fn=spec["activation_fn"] or p["activation_fn"])
              for spec in p["conv_layers"]]
    self.convs = Postnet(layers, p["src_emb_size"], p["cnn_dropout_prob"], p["bn_momentum"],
                         p["bn_epsilon"], kernel_initializer=init, dtype=policy, name="convs")
    self.rnns = []
    for i in range(p["num_rnn_layers"]):
      if lstm and p["zoneout_prob"] > 0:
        make = lambda: keras.layers.RNN(  # noqa: E731
            ZoneoutLSTMCell(p["rnn_cell_dim"], p["zoneout_prob"], fresh(init), dtype=policy),
            return_sequences=True, dtype=policy)
      else:
        klass = keras.layers.LSTM if lstm else keras.layers.GRU
        make = lambda klass=klass: klass(p["rnn_cell_dim"], return_sequences=True,  # noqa: E731
                                         kernel_initializer=fresh(init), dtype=policy)
      rnn = make()
      if not p["rnn_unidirectional"]:
        rnn = keras.layers.Bidirectional(rnn, dtype=policy, name=f"birnn{i + 1}")
      self.rnns.append(rnn)
    rate = p["rnn_dropout_prob"]
    self.rnn_dropout = keras.layers.Dropout(rate, dtype=policy) if rate > 0 else None
    self.reference_encoder = self.style_tokens = None
    if p["style_embedding_enable"]:
      style = p["style_embedding_params"]
      if style is None:  # the paper's sizes
        style = STYLE_TYPE.validate({}, f"{self.PARAMS_KEY}/style_embedding_params")
      self._build_style(style, init)

  def _build_style(self, s: dict, init: Any) -> None:
    policy = self.dtype_policy
    self.style_params = s
    self.reference_encoder = ReferenceEncoder(
        s["conv_layers"], s["rnn_cell_dim"], s["num_rnn_layers"], s["rnn_unidirectional"],
        keras.layers.LSTM if is_lstm(s["rnn_type"]) else keras.layers.GRU,
        activation=self.params["activation_fn"], reference_size=s["reference_size"],
        bn_momentum=self.params["bn_momentum"], bn_epsilon=self.params["bn_epsilon"],
        kernel_initializer=init, dtype=policy, name="reference_encoder")
    self.style_tokens = StyleTokenLayer(
        s["num_tokens"], s["emb_size"], s["attention_layer_size"], s["num_heads"],
        s["trainable_tokens"], kernel_initializer=init, dtype=policy, name="style_tokens")

  def style_embedding(self, source: tuple, training: bool | None) -> tuple:
    """(style embedding [B, attention_layer_size], token weights [B, heads, tokens] or None)
    from the reference frames in ``source`` (ids, lengths, frames, frame lengths), or from
    ``token_weights`` at inference."""
    weights = self.style_params["token_weights"]
    if weights is not None and self.mode in ("infer", "interactive_infer"):
      batch = tf.shape(source[0])[0]
      mix = tf.constant(weights, tf.float32)
      mix = mix / tf.maximum(tf.reduce_sum(tf.abs(mix)), 1e-9)
      mix = tf.tile(mix[None, None], [batch, self.style_params["num_heads"], 1])
      if not self.style_tokens.built:
        self.style_tokens.build((None, self.style_params["reference_size"]))
      return self.style_tokens.mix(mix), mix
    if len(source) < 4:
      raise ConfigError("encoder_params/style_embedding_enable: the batch has no reference "
                        "spectrogram; set data_layer_params/style_input to 'wav' (and "
                        "style_wav for interactive_infer) or give style_embedding_params/"
                        "token_weights")
    reference = self.reference_encoder(source[2], source[3], training=training)
    return self.style_tokens(reference)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    source = tuple(input_dict["source_tensors"])
    ids, lengths = source[:2]
    lengths = tf.cast(lengths, tf.int32)
    x = self.embedding(ids)
    x = self.convs(x, lengths, training=training)
    mask = sequence_mask(lengths, tf.shape(x)[1])
    for rnn in self.rnns:
      x = rnn(x, mask=mask, training=training)
      if self.rnn_dropout is not None:
        x = self.rnn_dropout(x, training=training)
    x = x * tf.cast(mask, x.dtype)[:, :, None]
    result = {"outputs": x, "src_lengths": lengths}
    if self.style_tokens is not None:
      style, weights = self.style_embedding(source, training)
      style = tf.tile(tf.cast(style, x.dtype)[:, None], [1, tf.shape(x)[1], 1])
      result["outputs"] = tf.concat([x, style * tf.cast(mask, x.dtype)[:, :, None]], axis=-1)
      result["style_token_weights"] = weights
    return result
