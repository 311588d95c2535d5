"""ListenAttendSpellEncoder: the "listener" of Listen, Attend and Spell (Chan et al., 2016).

As OpenSeq2Seq built it: optional 1-D convolution blocks (``convnet_layers``; a stride above
1 shortens the sequence), then bidirectional recurrent blocks (``recurrent_layers``). Each
recurrent block is two independent stacks of ``num_layers`` LSTM or GRU layers, one reading
left to right and one right to left, whose outputs are concatenated (TF 1's
``bidirectional_dynamic_rnn`` over two ``MultiRNNCell`` stacks), optionally followed by a max
pooling over time (``pool``, ``pool_size``, ``stride``): the *pyramidal* time reduction that
makes the attention's memory several times shorter than the audio.

Lengths follow every reduction: ``ceil(L / s)`` for a SAME convolution, ``(L - k) // s + 1``
for a pooling window ``k`` and stride ``s`` (windows never reach into the padding). Padded
frames never change a real frame's output: convolutions read zeros there, the recurrent
layers skip them (the right-to-left direction reads each utterance reversed within its own
length), and the outputs are zero past each length.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.encoders.tdnn_encoder import LAYER_PARAMS as TDNN_LAYER_PARAMS
from open_seq2seq.encoders.tdnn_encoder import check_conv_widths
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import (NORMALIZATIONS, ConvBlock1D, check_padding,
                                                 sequence_mask)
from open_seq2seq.parts.rnns.stack import RecurrentStack
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, callable_or_class, int_list, list_of

#: Keys of one ``convnet_layers`` entry (OpenSeq2Seq's LAS took these).
CONV_PARAMS = {key: TDNN_LAYER_PARAMS[key] for key in
               ("type", "repeat", "kernel_size", "stride", "dilation", "num_channels",
                "padding", "dropout_keep_prob")}

#: Keys of one ``recurrent_layers`` entry.
RNN_PARAMS = {
    "type": Param(str, "lstm", "Cell of the block: lstm or gru.", choices=("lstm", "gru")),
    "num_layers": Param(int, 1, "Layers per direction."),
    "hidden_dim": Param(int, doc="Units per layer and direction (the block returns twice "
                        "this many features)."),
    "dropout_keep_prob": Param((float, None), None,
                               "Keep probability of the dropout on each layer's output "
                               "(default: the encoder's)."),
    "pool": Param(bool, False, "Max-pool over time after the block (pyramidal reduction)."),
    "pool_size": Param(list, [-1], "[k]: pooling window in frames (with pool)."),
    "stride": Param(list, [-1], "[s]: pooling stride (with pool)."),
}


def _check_conv(block: dict, path: str) -> dict:
  block["padding"] = check_padding(block["padding"], f"{path}/padding")
  return check_conv_widths(block, path)


def _check_rnn(block: dict, path: str) -> dict:
  if block["num_layers"] < 1 or block["hidden_dim"] < 1:
    raise ConfigError(f"{path}: num_layers and hidden_dim must be at least 1")
  if block["pool"]:
    for key in ("pool_size", "stride"):
      value = block[key]
      if not int_list(1)(value):
        raise ConfigError(f"{path}/{key}: with pool, a list of one int >= 1, got {value!r}")
  return block


class ListenAttendSpellEncoder(Encoder):
  """Convolutions, then pyramidal bidirectional LSTM/GRU blocks (module doc).

  Input ``{"source_tensors": (features [B, T, F], lengths [B])}``; returns ``outputs``
  [B, T', D] (D: twice the last block's ``hidden_dim``, or the last conv's channels without
  recurrent blocks; zeros past each length) and ``src_lengths`` [B].
  """

  PARAMS = {
      "convnet_layers": Param(list_of(CONV_PARAMS, "a convnet_layers block", _check_conv),
                              [], "Blocks of 1-D convolutions before the recurrent layers."),
      "recurrent_layers": Param(list_of(RNN_PARAMS, "a recurrent_layers block", _check_rnn),
                                [], "Bidirectional recurrent blocks, each optionally pooled."),
      "dropout_keep_prob": Param(float, 1.0, "Keep probability of dropout after every conv "
                                 "and recurrent layer (training only)."),
      "activation_fn": Param(callable_or_class, tf.nn.relu, "Activation after each conv."),
      "normalization": Param((str, None), "batch_norm", "Of the convs: batch_norm, layer_norm "
                             "or None.", choices=NORMALIZATIONS),
      "bn_momentum": Param(float, 0.9, "Batch-norm moving-average momentum."),
      "bn_epsilon": Param(float, 1e-3, "Batch-norm epsilon."),
      "residual_connections": Param(bool, False, "Ignored: OpenSeq2Seq's LAS encoder "
                                    "declared it and never used it."),
      "data_format": Param(str, "channels_last", "Ignored: the layout is internal (channels "
                           "last).", choices=("channels_first", "channels_last")),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    if not p["convnet_layers"] and not p["recurrent_layers"]:
      raise ConfigError("encoder_params: give convnet_layers, recurrent_layers or both")
    if not 0.0 < p["dropout_keep_prob"] <= 1.0:
      raise ConfigError(f"encoder_params/dropout_keep_prob: must be in (0, 1], got "
                        f"{p['dropout_keep_prob']}")
    init = self.kernel_initializer()
    self.conv_layers: list[ConvBlock1D] = []
    for b, spec in enumerate(p["convnet_layers"]):
      keep = p["dropout_keep_prob"] if spec["dropout_keep_prob"] is None \
          else spec["dropout_keep_prob"]
      for r in range(spec["repeat"]):
        self.conv_layers.append(ConvBlock1D(
            spec["type"], spec["num_channels"], spec["kernel_size"][0], spec["stride"][0],
            spec["dilation"][0], spec["padding"], p["activation_fn"], p["normalization"],
            p["bn_momentum"], p["bn_epsilon"], 1.0 - keep, fresh(init),
            dtype=self.dtype_policy, name=f"conv{b + 1}{r + 1}"))
    self.rnn_blocks: list[tuple[RecurrentStack, RecurrentStack, dict]] = []
    for b, spec in enumerate(p["recurrent_layers"]):
      keep = p["dropout_keep_prob"] if spec["dropout_keep_prob"] is None \
          else spec["dropout_keep_prob"]
      stacks = [self._stack(spec, keep, f"rnn{b + 1}_{direction}", init)
                for direction in ("fw", "bw")]
      self.rnn_blocks.append((*stacks, spec))

  def _stack(self, spec: dict, keep: float, name: str, init: Any) -> RecurrentStack:
    layer_class = keras.layers.LSTM if spec["type"] == "lstm" else keras.layers.GRU
    layers = [layer_class(spec["hidden_dim"], return_sequences=True, return_state=True,
                          kernel_initializer=fresh(init), recurrent_initializer=fresh(init),
                          dtype=self.dtype_policy, name=f"{name}_{i}")
              for i in range(spec["num_layers"])]
    count = len(layers)
    # OpenSeq2Seq's DropoutWrapper(output_keep_prob) around every cell
    stack = RecurrentStack(layers, [1.0] * count, [keep] * count, dtype=self.dtype_policy,
                           name=name)
    stack.supports_masking = True  # it reads the mask as step_mask
    return stack

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    x, lengths = input_dict["source_tensors"][:2]
    x = tf.cast(x, self.compute_dtype)
    lengths = tf.cast(lengths, tf.int32)
    for layer in self.conv_layers:
      x, lengths = layer(x, lengths, training=training)
    for forward, backward, spec in self.rnn_blocks:
      mask = sequence_mask(lengths, tf.shape(x)[1])
      x = x * tf.cast(mask, x.dtype)[:, :, None]
      fw, _ = forward(x, step_mask=mask, training=training)
      reversed_x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
      bw, _ = backward(reversed_x, step_mask=mask, training=training)
      bw = tf.reverse_sequence(bw, lengths, seq_axis=1, batch_axis=0)
      x = tf.concat([fw, tf.cast(bw, fw.dtype)], axis=-1)
      if spec["pool"]:
        size, stride = spec["pool_size"][0], spec["stride"][0]
        x = tf.nn.max_pool1d(x, size, stride, "VALID")
        lengths = tf.maximum((lengths - size) // stride + 1, 0)
    x = x * sequence_mask(lengths, tf.shape(x)[1], x.dtype)[:, :, None]
    return {"outputs": x, "src_lengths": lengths}


__all__ = ["ListenAttendSpellEncoder"]
