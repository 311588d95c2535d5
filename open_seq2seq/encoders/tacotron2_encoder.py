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
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, callable_or_class, int_list, list_of


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
  [B, N, 2 * rnn_cell_dim] and ``src_length``.
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

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    ids, lengths = input_dict["source_tensors"]
    lengths = tf.cast(lengths, tf.int32)
    x = self.embedding(ids)
    x = self.convs(x, lengths, training=training)
    mask = sequence_mask(lengths, tf.shape(x)[1])
    for rnn in self.rnns:
      x = rnn(x, mask=mask, training=training)
      if self.rnn_dropout is not None:
        x = self.rnn_dropout(x, training=training)
    x = x * tf.cast(mask, x.dtype)[:, :, None]
    return {"outputs": x, "src_length": lengths, "src_lengths": lengths}
