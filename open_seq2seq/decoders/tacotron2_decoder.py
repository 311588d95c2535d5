"""Tacotron2Decoder: attention-based autoregressive spectrogram decoder (Shen et al., 2018).

Every decoder step reads the previous frame through the prenet, concatenated with the
previous attention context, runs ``decoder_layers`` LSTMs (zoneout, output dropout), queries
the encoder outputs with location-sensitive attention and projects ``[LSTM output; context]``
to ``reduction_factor`` spectrogram frames and as many stop-token logits. The postnet adds a
residual to the whole predicted spectrogram. As in OpenSeq2Seq, the attention wraps the whole
LSTM stack (no separate attention LSTM) and its output is "both" (output and context).

* **Training / teacher-forced eval** (targets given): the step inputs are the true frames
  (the last frame of the previous group of ``r``), so the prenet runs on all of them at once
  and the projections run after the loop; only the recurrent part is sequential.
* **Free running** (no targets: eval predictions, infer): a ``tf.while_loop`` feeds back its
  own frames and stops when every sequence has emitted a stop token (sigmoid > ``stop_threshold``)
  or after ``max_frames_per_symbol`` frames per input symbol.

With ``output_type: "both"`` (mel and magnitude targets concatenated), the decoder predicts
the mel part and a convolutional stack turns the postnet's mel into a magnitude spectrogram,
as OpenSeq2Seq's Tacotron did. Attention weights and stop logits are float32 under mixed
precision.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.encoders.tacotron2_encoder import CONV_PARAMS, _check_conv, is_lstm
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import MaskedConv1D, MaskedNorm, sequence_mask
from open_seq2seq.parts.rnns.attention import BahdanauAttention, attention_context
from open_seq2seq.parts.tacotron.attention import LocationSensitiveAttention
from open_seq2seq.parts.tacotron.cells import ZoneoutLSTMCell
from open_seq2seq.parts.tacotron.layers import Postnet, Prenet
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, callable_or_class, list_of

ATTENTION_TYPES = ("location", "bahdanau", None)


class Tacotron2Decoder(Decoder):
  """Tacotron 2 decoder; see the module docstring.

  Returns ``spectrogram`` (decoder output + postnet residual, [B, T, F_mel]),
  ``decoder_spectrogram`` (before the postnet), ``magnitude`` ("both" only), ``stop_token_logits``
  [B, T], ``alignments`` [B, steps, N] float32, ``final_sequence_lengths`` (frames; in free
  running where the stop token fired) and ``src_lengths``.
  """

  PARAMS = {
      "attention_type": Param((str, None), "location", "'location' (recommended), 'bahdanau' "
                              "or None (no attention).", choices=ATTENTION_TYPES),
      "attention_layer_size": Param(int, 128, "Depth of the attention's keys and query."),
      "attention_bias": Param(bool, False, "Bias inside the location attention's tanh."),
      "bahdanau_normalize": Param(bool, False, "Weight-normalized Bahdanau scores."),
      "location_filters": Param(int, 32, "Filters of the location convolution."),
      "location_kernel_size": Param(int, 31, "Width of the location convolution."),
      "decoder_cell_units": Param(int, 1024, "Units of each decoder LSTM."),
      "decoder_cell_type": Param((callable_or_class, str), "lstm",
                                 "The decoder cells: an LSTM (keras.layers.LSTMCell ...)."),
      "decoder_layers": Param(int, 2, "Decoder LSTM layers."),
      "zoneout_prob": Param(float, 0.0, "Zoneout of the decoder LSTMs' states."),
      "dropout_prob": Param(float, 0.1, "Dropout on each decoder LSTM's output (training)."),
      "enable_prenet": Param(bool, True, "Read the previous frame through the prenet."),
      "prenet_layers": Param(int, 2, "Prenet layers."),
      "prenet_units": Param(int, 256, "Units per prenet layer."),
      "prenet_activation": Param(callable_or_class, tf.nn.relu, "Prenet activation."),
      "prenet_dropout_prob": Param(float, 0.5, "Prenet dropout, on in every mode."),
      "enable_postnet": Param(bool, True, "Add the convolutional postnet's residual."),
      "postnet_conv_layers": Param((list_of(CONV_PARAMS, "a postnet_conv_layers entry",
                                            _check_conv), None), None,
                                   "Postnet conv layers (num_channels -1: the features); "
                                   "needed when enable_postnet."),
      "postnet_bn_momentum": Param(float, 0.1, "Postnet batch-norm momentum."),
      "postnet_bn_epsilon": Param(float, 1e-5, "Postnet batch-norm epsilon."),
      "postnet_enable_bn": Param(bool, True, "Batch norm after each postnet convolution."),
      "postnet_keep_dropout_prob": Param(float, 0.5, "Keep probability of postnet dropout."),
      "postnet_data_format": Param(str, "channels_last", "Ignored: the layout is internal.",
                                   choices=("channels_first", "channels_last")),
      "mask_decoder_sequence": Param(bool, True, "Zero the predicted frames and alignments "
                                     "past each sequence's length."),
      "parallel_iterations": Param(int, 32, "parallel_iterations of the decoding while loop."),
      "reduction_factor": Param(int, 1, "Frames predicted per decoder step (Tacotron's r)."),
      "stop_threshold": Param(float, 0.5, "Free running stops when sigmoid(stop logit) exceeds "
                              "this."),
      "max_frames_per_symbol": Param(float, 10.0, "Free running stops after this many frames "
                                     "per input symbol (OpenSeq2Seq: 10)."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "decoder",
               dtype: Any = "float32", initializer: Any = None, num_mel_features: int = 80,
               num_magnitude_features: int = 0, exp_mag: bool = False):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    policy = self.dtype_policy
    init = self.kernel_initializer()
    if not is_lstm(p["decoder_cell_type"]):
      raise ConfigError(f"decoder_params/decoder_cell_type: {p['decoder_cell_type']!r}: the "
                        f"Tacotron decoder runs LSTM cells (keras.layers.LSTMCell)")
    if p["enable_postnet"] and not p["postnet_conv_layers"]:
      raise ConfigError("decoder_params/postnet_conv_layers: needed when enable_postnet is True")
    if num_magnitude_features and not p["enable_postnet"]:
      raise ConfigError("decoder_params/enable_postnet: output_type 'both' predicts the "
                        "magnitude from the postnet's output; enable the postnet")
    if p["reduction_factor"] < 1:
      raise ConfigError(f"decoder_params/reduction_factor: must be >= 1, got "
                        f"{p['reduction_factor']}")
    self.num_mel, self.num_mag, self.exp_mag = num_mel_features, num_magnitude_features, exp_mag
    self.r = p["reduction_factor"]
    self._steps_built = False
    self.prenet = (Prenet(p["prenet_units"], p["prenet_layers"], p["prenet_activation"],
                          p["prenet_dropout_prob"], init, dtype=policy, name="prenet")
                   if p["enable_prenet"] else None)
    self.cells = [ZoneoutLSTMCell(p["decoder_cell_units"], p["zoneout_prob"], fresh(init),
                                  dtype=policy, name=f"decoder_cell{i + 1}")
                  for i in range(p["decoder_layers"])]
    self.attention = None
    if p["attention_type"] == "location":
      self.attention = LocationSensitiveAttention(
          p["attention_layer_size"], p["attention_bias"], p["location_filters"],
          p["location_kernel_size"], init, dtype=policy, name="attention")
    elif p["attention_type"] == "bahdanau":
      self.attention = BahdanauAttention(p["attention_layer_size"], p["bahdanau_normalize"],
                                         init, dtype=policy, name="attention")
    self.output_projection = keras.layers.Dense(self.num_mel * self.r, kernel_initializer=fresh(
        init), dtype=policy, name="output_proj")
    # Stop logits in float32: a sigmoid near 0/1 in half precision decides when to stop.
    self.stop_projection = keras.layers.Dense(self.r, kernel_initializer=fresh(init),
                                              dtype="float32", name="stop_token_proj")
    self.postnet = None
    if p["enable_postnet"]:
      self.postnet = Postnet(p["postnet_conv_layers"], self.num_mel,
                             1.0 - p["postnet_keep_dropout_prob"], p["postnet_bn_momentum"],
                             p["postnet_bn_epsilon"], p["postnet_enable_bn"], init,
                             dtype=policy, name="postnet")
    if self.num_mag:
      bn = (p["postnet_bn_momentum"], p["postnet_bn_epsilon"])
      self.mag_convs = [MaskedConv1D("conv1d", ch, 4, use_bias=False, kernel_initializer=fresh(
          init), dtype=policy, name=f"mag_conv{i}") for i, ch in enumerate((256, 512))]
      self.mag_norms = [MaskedNorm("batch_norm", *bn, dtype=policy, name=f"mag_norm{i}")
                        for i in range(2)]
      self.mag_projection = keras.layers.Dense(self.num_mag, use_bias=False,
                                               kernel_initializer=fresh(init), dtype=policy,
                                               name="post_net_proj")

  # ------------------------------------------------------------------ one step
  def _context_size(self, memory_depth: int) -> int:
    return memory_depth if self.attention is not None else 0

  def _build_step_layers(self, memory_depth: int) -> None:
    """Creates the variables of everything the while loops call (none may be made inside)."""
    if self._steps_built:
      return
    frame_size = self.num_mel
    if self.prenet is not None:
      for dense in self.prenet.dense:
        dense.build((None, frame_size))
        frame_size = dense.units
    size = frame_size + self._context_size(memory_depth)
    for cell in self.cells:
      cell.build((None, size))
      size = cell.units
    if self.attention is not None:
      self.attention.build(memory_depth, size)
    out = size + self._context_size(memory_depth)
    self.output_projection.build((None, None, out))
    self.stop_projection.build((None, None, out))
    self._steps_built = True

  def _initial_state(self, batch: tf.Tensor, memory: Any, depth: int) -> dict:
    dtype = self.compute_dtype
    source = tf.shape(memory.values)[1] if memory is not None else 1
    first = tf.one_hot(tf.zeros([batch], tf.int32), source, dtype=tf.float32)
    return {"cells": [cell.get_initial_state(batch) for cell in self.cells],
            "context": tf.zeros([batch, self._context_size(depth)], dtype),
            "alignments": first, "cumulative": first}

  def _step(self, frame: tf.Tensor, state: dict, memory: Any, training: bool
            ) -> tuple[tf.Tensor, dict]:
    """One decoder step: ``frame`` is the prenet's output (or the raw previous frame)."""
    x = tf.concat([tf.cast(frame, self.compute_dtype), state["context"]], axis=-1)
    rate = self.params["dropout_prob"]
    new_cells = []
    for cell, cell_state in zip(self.cells, state["cells"]):
      x, cell_state = cell(x, cell_state, training=training)
      if training and rate > 0:
        x = tf.nn.dropout(x, rate=rate)
      new_cells.append(cell_state)
    new_state = dict(state, cells=new_cells)
    if self.attention is None:
      return x, new_state
    if isinstance(self.attention, LocationSensitiveAttention):
      align = self.attention.location_alignments(x, memory, state["alignments"],
                                                 state["cumulative"])
    else:
      align = self.attention.alignments(x, memory)
    context = attention_context(align, memory.values)
    new_state.update(context=context, alignments=align, cumulative=state["cumulative"] + align)
    return tf.concat([x, context], axis=-1), new_state

  def _prenet(self, frames: tf.Tensor) -> tf.Tensor:
    return self.prenet(frames) if self.prenet is not None else frames

  # ------------------------------------------------------------------ the loops
  def _teacher_forced(self, memory: Any, depth: int, spec: tf.Tensor, training: bool):
    batch, frames = tf.shape(spec)[0], tf.shape(spec)[1]
    steps = -(-frames // self.r)
    spec = tf.pad(spec, [[0, 0], [0, steps * self.r - frames], [0, 0]])
    last_of_group = spec[:, self.r - 1::self.r, :]  # [B, steps, F]
    inputs = tf.concat([tf.zeros_like(last_of_group[:, :1]), last_of_group[:, :-1]], axis=1)
    inputs = tf.transpose(self._prenet(tf.cast(inputs, self.compute_dtype)), [1, 0, 2])
    state = self._initial_state(batch, memory, depth)
    outputs = tf.TensorArray(self.compute_dtype, size=steps)
    aligns = tf.TensorArray(tf.float32, size=steps)

    def body(t, state, outputs, aligns):
      out, state = self._step(inputs[t], state, memory, training)
      return t + 1, state, outputs.write(t, out), aligns.write(t, state["alignments"])

    _, _, outputs, aligns = tf.while_loop(
        lambda t, *_: t < steps, body, (tf.constant(0), state, outputs, aligns),
        parallel_iterations=self.params["parallel_iterations"])
    outputs = tf.transpose(outputs.stack(), [1, 0, 2])  # [B, steps, D]
    spectrogram = tf.reshape(self.output_projection(outputs), [batch, steps * self.r, self.num_mel])
    stop = tf.reshape(self.stop_projection(tf.cast(outputs, tf.float32)), [batch, steps * self.r])
    return spectrogram[:, :frames], stop[:, :frames], tf.transpose(aligns.stack(), [1, 0, 2])

  def _free_running(self, memory: Any, depth: int, batch: tf.Tensor, max_steps: tf.Tensor):
    state = self._initial_state(batch, memory, depth)
    specs = tf.TensorArray(self.compute_dtype, size=0, dynamic_size=True)
    stops = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    aligns = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    frame = tf.zeros([batch, self.num_mel], self.compute_dtype)
    lengths = tf.zeros([batch], tf.int32)
    finished = tf.zeros([batch], tf.bool)
    threshold = self.params["stop_threshold"]

    def body(t, state, frame, lengths, finished, specs, stops, aligns):
      out, state = self._step(self._prenet(frame), state, memory, training=False)
      group = tf.reshape(self.output_projection(out), [batch, self.r, self.num_mel])
      stop = self.stop_projection(tf.cast(out, tf.float32))  # [B, r]
      fired = tf.sigmoid(stop) > threshold
      first = tf.argmax(tf.cast(fired, tf.int32), axis=1, output_type=tf.int32)
      any_fired = tf.reduce_any(fired, axis=1)
      # A sequence ends with the frame whose stop token fired (that frame included).
      lengths = tf.where(finished, lengths,
                         tf.where(any_fired, t * self.r + first + 1, (t + 1) * self.r))
      finished = finished | any_fired
      return (t + 1, state, group[:, -1], lengths, finished, specs.write(t, group),
              stops.write(t, stop), aligns.write(t, state["alignments"]))

    loop = tf.while_loop(
        lambda t, _s, _f, _l, finished, *_: (t < max_steps) & ~tf.reduce_all(finished), body,
        (tf.constant(0), state, frame, lengths, finished, specs, stops, aligns),
        parallel_iterations=self.params["parallel_iterations"])
    steps, lengths, specs, stops, aligns = loop[0], loop[3], loop[5], loop[6], loop[7]
    spectrogram = tf.reshape(tf.transpose(specs.stack(), [1, 0, 2, 3]),
                             [batch, steps * self.r, self.num_mel])
    stop = tf.reshape(tf.transpose(stops.stack(), [1, 0, 2]), [batch, steps * self.r])
    return spectrogram, stop, tf.transpose(aligns.stack(), [1, 0, 2]), lengths

  # ------------------------------------------------------------------ call
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    encoder_output = input_dict["encoder_output"]
    values = encoder_output["outputs"]
    src_lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    depth = values.shape[-1]
    self._build_step_layers(depth)
    memory = self.attention.prepare(values, src_lengths) if self.attention is not None else None
    batch = tf.shape(values)[0]
    training = bool(training)
    if "target_tensors" in input_dict:
      spec = input_dict["target_tensors"][0][:, :, :self.num_mel]
      decoded, stop, aligns = self._teacher_forced(memory, depth, spec, training)
      lengths = tf.cast(input_dict["target_tensors"][2], tf.int32)
    else:
      max_steps = tf.cast(tf.math.ceil(self.params["max_frames_per_symbol"] * tf.cast(
          tf.reduce_max(src_lengths), tf.float32) / self.r), tf.int32)
      decoded, stop, aligns, lengths = self._free_running(memory, depth, batch,
                                                          tf.maximum(max_steps, 1))
    frames = tf.shape(decoded)[1]
    spectrogram = decoded
    if self.postnet is not None:
      spectrogram = decoded + self.postnet(decoded, lengths, training=training)
    out = {"decoder_spectrogram": decoded, "spectrogram": spectrogram,
           "stop_token_logits": stop, "final_sequence_lengths": lengths,
           "src_lengths": src_lengths}
    if self.num_mag:
      out["magnitude"] = self._magnitude(spectrogram, lengths, training)
    if self.params["mask_decoder_sequence"]:
      mask = sequence_mask(lengths, frames, spectrogram.dtype)[:, :, None]
      for key in ("decoder_spectrogram", "spectrogram", "magnitude"):
        if key in out:
          out[key] = out[key] * tf.cast(mask, out[key].dtype)
      step_mask = sequence_mask(-(-lengths // self.r), tf.shape(aligns)[1], tf.float32)
      aligns = aligns * step_mask[:, :, None]
    out["alignments"] = aligns
    return out

  def _magnitude(self, mel: tf.Tensor, lengths: tf.Tensor, training: bool) -> tf.Tensor:
    x = mel
    for conv, norm in zip(self.mag_convs, self.mag_norms):
      x, _ = conv(x, lengths)
      x = tf.nn.relu(norm(x, sequence_mask(lengths, tf.shape(x)[1]), training=training))
    if self.exp_mag:
      x = tf.exp(x)
    return self.mag_projection(x)
