"""DeepSpeech2Encoder: 2-D convolutions, recurrent layers, optional row convolution, FC."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.parts.cnns.conv_blocks import (check_padding, conv_output_lengths,
                                                 sequence_mask)
from open_seq2seq.parts.rnns.weight_drop import WeightDropLayerNormBasicLSTMCell, WeightDropLSTM
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param, callable_or_class, int_list, list_of

CONV_PARAMS = {
    "kernel_size": Param(int_list(2),
                         doc="[time, frequency] kernel."),
    "stride": Param(int_list(2), [1, 1],
                    "[time, frequency] stride."),
    "num_channels": Param(int, doc="Output channels."),
    "padding": Param(str, "SAME", "SAME or VALID (any case)."),
}


def _check_conv_layer(layer: dict, path: str) -> dict:
  """Upper-cases ``padding`` after checking it."""
  layer["padding"] = check_padding(layer["padding"], f"{path}/padding")
  return layer


RNN_TYPES = ("cudnn_gru", "cudnn_lstm", "gru", "lstm", "rnn_gru", "rnn_lstm", "layernorm_lstm")


class RowConvolution(keras.layers.Layer):
  """DeepSpeech2's row convolution as OpenSeq2Seq built it (``row_conv`` in its encoder).

  One filter per channel over ``width`` frames, padded as TensorFlow's "SAME" pads a stride-1
  convolution: output frame t sees input frames t - (width - 1) // 2 .. t + width // 2
  (3 past, the current and 4 future frames for width 8). Then batch norm and ``activation``,
  as after the conv layers.

  Frames outside ``mask`` are zeroed before the convolution, so an utterance's last frames
  see zeros whatever the batch's length, and they are left out of batch-norm statistics.
  """

  def __init__(self, width: int, activation: Any, *, momentum: float, epsilon: float,
               initializer: Any = "glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.supports_masking = True  # the RNN's Keras mask passes through (we take it explicitly)
    self.width, self.activation = width, activation
    self.conv = keras.layers.DepthwiseConv1D(width, padding="valid", use_bias=False,
                                             depthwise_initializer=initializer,
                                             dtype=self.dtype_policy, name="conv")
    self.norm = keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon,
                                                dtype=self.dtype_policy, name="bn")

  def call(self, x: tf.Tensor, mask: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    """x: [B, T, C]; mask: bool [B, T], True on valid frames. Returns [B, T, C]."""
    x = x * tf.cast(mask, x.dtype)[:, :, None]
    x = self.conv(tf.pad(x, [[0, 0], [(self.width - 1) // 2, self.width // 2], [0, 0]]))
    return self.activation(tf.cast(self.norm(x, training=training, mask=mask), x.dtype))


class DeepSpeech2Encoder(Encoder):
  """DeepSpeech 2 (Amodei et al., 2016) with padding masks.

  Input features [B, T, F] go through 2-D conv + batch norm + activation layers (time and
  frequency strides), are flattened to [B, T', F' * C], then through ``num_rnn_layers``
  GRU/LSTM layers (bidirectional unless ``rnn_unidirectional``; lengths respected), an
  optional row convolution and a fully connected layer of ``n_hidden`` units.

  The row convolution (:class:`RowConvolution`) is OpenSeq2Seq's: ``row_conv_width`` frames
  centred as TF's "SAME" padding centres them (3 past and 4 future frames for width 8), then
  batch norm and ``activation_fn``. A width below 2 leaves the RNN outputs unchanged, as in
  OpenSeq2Seq. ``cudnn_*`` types map to Keras layers, which pick the cuDNN
  kernel on GPUs by themselves. ``layernorm_lstm`` is TF 1's ``LayerNormBasicLSTMCell``
  (layer norm on each gate and on the cell state, see
  :class:`~open_seq2seq.parts.rnns.weight_drop.WeightDropLayerNormBasicLSTMCell`); as in
  OpenSeq2Seq, its dropout is the cell's candidate (recurrent) dropout with
  ``dropout_keep_prob``, instead of dropout on the layer's outputs.
  """

  PARAMS = {
      "conv_layers": Param(list_of(CONV_PARAMS, "a conv_layers entry", _check_conv_layer),
                           doc="2-D conv layers, each followed by batch norm and activation."),
      "num_rnn_layers": Param(int, 1, "Recurrent layers (0 for none)."),
      "rnn_cell_dim": Param(int, 512, "Units per direction."),
      "rnn_type": Param(str, "cudnn_gru", "GRU or LSTM.", choices=RNN_TYPES),
      "rnn_unidirectional": Param(bool, False, "Forward-only recurrent layers."),
      "use_cudnn_rnn": Param(bool, True, "Ignored: Keras picks the fused kernel itself."),
      "row_conv": Param(bool, False, "Row convolution (+ batch norm, activation) after the RNNs."),
      "row_conv_width": Param(int, 8, "Row convolution window: (w-1)//2 past, w//2 future frames."),
      "n_hidden": Param(int, 1024, "Units of the final fully connected layer."),
      "dropout_keep_prob": Param(float, 1.0, "Keep probability of dropout."),
      "activation_fn": Param(callable_or_class, tf.nn.relu, "Activation of conv and FC layers."),
      "bn_momentum": Param(float, 0.99, "Batch-norm moving-average momentum."),
      "bn_epsilon": Param(float, 1e-3, "Batch-norm epsilon."),
      **INITIALIZER_PARAMS,
      "data_format": Param(str, "channels_last", "Ignored: the layout is internal (channels last).",
                           choices=("channels_first", "channels_last", "BCTF", "BTFC", "BCFT",
                                    "BFTC")),
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    policy = self.dtype_policy
    init = self.kernel_initializer()
    self.conv_specs, self.convs, self.conv_norms = [], [], []
    for i, spec in enumerate(p["conv_layers"]):  # validated by CONV_PARAMS
      self.conv_specs.append(spec)
      self.convs.append(keras.layers.Conv2D(
          spec["num_channels"], spec["kernel_size"], strides=spec["stride"], padding="valid",
          use_bias=False, kernel_initializer=init, dtype=policy, name=f"conv{i + 1}"))
      self.conv_norms.append(keras.layers.BatchNormalization(
          momentum=p["bn_momentum"], epsilon=p["bn_epsilon"], dtype=policy, name=f"bn{i + 1}"))
    rnn_class = keras.layers.LSTM if "lstm" in p["rnn_type"] else keras.layers.GRU
    self.layer_norm_rnn = p["rnn_type"] == "layernorm_lstm"
    self.rnns = []
    for i in range(p["num_rnn_layers"]):
      if self.layer_norm_rnn:
        cell = WeightDropLayerNormBasicLSTMCell(
            p["rnn_cell_dim"], recurrent_keep_prob=p["dropout_keep_prob"],
            kernel_initializer=init, dtype=policy,
            name=f"rnn{i + 1}_cell")
        rnn = WeightDropLSTM(cell, return_sequences=True, dtype=policy, name=f"rnn{i + 1}")
      else:
        rnn = rnn_class(p["rnn_cell_dim"], return_sequences=True, kernel_initializer=init,
                        dtype=policy, name=f"rnn{i + 1}")
      if not p["rnn_unidirectional"]:
        rnn = keras.layers.Bidirectional(rnn, dtype=policy, name=f"birnn{i + 1}")
      self.rnns.append(rnn)
    self.row_conv = None
    if p["row_conv"] and p["row_conv_width"] >= 2:  # OpenSeq2Seq skips narrower ones
      self.row_conv = RowConvolution(p["row_conv_width"], p["activation_fn"],
                                     momentum=p["bn_momentum"], epsilon=p["bn_epsilon"],
                                     initializer=init, dtype=policy, name="row_conv")
    self.fc = keras.layers.Dense(p["n_hidden"], kernel_initializer=init, dtype=policy,
                                 name="fully_connected")
    rate = 1.0 - p["dropout_keep_prob"]
    self.dropout = keras.layers.Dropout(rate, dtype=policy) if rate > 0 else None

  def _drop(self, x, training):
    return self.dropout(x, training=training) if self.dropout is not None else x

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    x, lengths = input_dict["source_tensors"]
    x = tf.cast(x, self.compute_dtype)[:, :, :, None]  # [B, T, F, 1]
    lengths = tf.cast(lengths, tf.int32)
    act = self.params["activation_fn"]
    for spec, conv, norm in zip(self.conv_specs, self.convs, self.conv_norms):
      time_mask = sequence_mask(lengths, tf.shape(x)[1], x.dtype)
      x = x * time_mask[:, :, None, None]
      (k_t, k_f), (s_t, s_f) = spec["kernel_size"], spec["stride"]
      if spec["padding"] == "SAME":
        # time: fixed left padding (independent of the batch's length); frequency: TF SAME
        num_freq = x.shape[2]
        pad_f = max((-(-num_freq // s_f) - 1) * s_f + k_f - num_freq, 0)
        x = tf.pad(x, [[0, 0], [(k_t - 1) // 2, k_t - 1 - (k_t - 1) // 2],
                       [pad_f // 2, pad_f - pad_f // 2], [0, 0]])
      x = conv(x)
      lengths = conv_output_lengths(lengths, k_t, s_t, 1, spec["padding"])
      mask = sequence_mask(lengths, tf.shape(x)[1])
      mask = tf.broadcast_to(mask[:, :, None], tf.shape(x)[:3])
      x = act(tf.cast(norm(x, training=training, mask=mask), x.dtype))
    shape = tf.shape(x)
    x = tf.reshape(x, [shape[0], shape[1], x.shape[2] * x.shape[3]])
    mask = sequence_mask(lengths, tf.shape(x)[1])
    for rnn in self.rnns:
      x = rnn(x, mask=mask, training=training)
      if not self.layer_norm_rnn:  # its dropout is inside the cell
        x = self._drop(x, training)
    if self.row_conv is not None:
      x = self.row_conv(x, mask, training=training)
    x = self._drop(act(self.fc(x)), training)
    x = x * tf.cast(mask, x.dtype)[:, :, None]
    return {"outputs": x, "src_lengths": lengths}
