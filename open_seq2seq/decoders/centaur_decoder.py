"""CentaurDecoder: a non-recurrent spectrogram decoder of causal convolutions and attention.

OpenSeq2Seq's Centaur (2019). A decoder step is a group of ``reduction_factor`` (r) frames;
its input is the previous group (mel and, for output_type "both", magnitude frames, as
OpenSeq2Seq fed back both), zeros for the first. Per step::

    prenet -> linear projection (hidden_size) -> + position encoding
    -> attention_layers x [causal conv block -> attention over the text (+ its position
       encoding) -> linear feed-forward]      (parts/centaur/attention.py)
    -> layer norm -> causal conv_layers -> mel projection (r frames) and stop logits (r)
                                         -> causal mag_conv_layers -> magnitude projection

Every operation reads the current and earlier steps only, so

* **training / teacher-forced eval** (targets given) runs all steps at once, in parallel;
* **free running** (no targets: eval predictions, infer) runs a ``tf.while_loop`` that feeds
  back its own frames one step at a time, each convolution keeping its last ``k - 1`` inputs
  (no recomputation of the past, unlike OpenSeq2Seq's loop), and gives exactly what teacher
  forcing on those frames would. It stops when every sequence has emitted a stop token
  (sigmoid > ``stop_threshold``) or after ``max_frames_per_symbol`` frames per input symbol.
  With ``window_size`` the attention of the ``force_layers`` may only move forward (see
  ``parts/centaur/attention.py``), in free running only, as in OpenSeq2Seq.

There is no postnet: ``spectrogram`` and ``decoder_spectrogram`` are the same tensor (the loss
counts the mel error twice, as OpenSeq2Seq's did). ``alignments`` are one block's attention
weights averaged over its heads (``alignment_layer``; "mean" averages every block), float32
like the stop logits under mixed precision.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.encoders.centaur_encoder import check_dropout
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.centaur.attention import AttentionBlock, position_encoding, window_mask
from open_seq2seq.parts.centaur.conv_block import CONV_PARAMS, ConvBlock, check_conv_layer
from open_seq2seq.parts.centaur.prenet import Prenet
from open_seq2seq.parts.cnns.conv_blocks import sequence_mask
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param, callable_or_class, dict_of, list_of


def _decoder_conv(layer: dict, path: str) -> dict:
  layer = check_conv_layer(layer, path, causal_default=True)
  if not layer["is_causal"]:
    raise ConfigError(f"{path}/is_causal: the decoder's convolutions must be causal (a frame "
                      f"may not read later frames); set it True with padding 'VALID'")
  return layer


def _conv_list(owner: str) -> Any:
  return list_of(CONV_PARAMS, owner, _decoder_conv)


class CentaurDecoder(Decoder):
  """Centaur decoder; see the module docstring.

  Returns ``spectrogram`` = ``decoder_spectrogram`` ([B, T, F_mel]), ``magnitude`` ("both"
  only), ``stop_token_logits`` [B, T] float32, ``alignments`` [B, steps, N] float32,
  ``final_sequence_lengths`` (frames; in free running where the stop token fired) and
  ``src_lengths``. Frames and alignments past each length are zero.
  """

  PARAMS = {
      "prenet_layers": Param(int, doc="Prenet layers."),
      "prenet_hidden_size": Param(int, doc="Units per prenet layer."),
      "hidden_size": Param(int, doc="Width of the attention blocks."),
      "conv_layers": Param(_conv_list("a conv_layers entry"), doc="Causal conv blocks after "
                           "the attention blocks (num_channels -1: n_mel x r)."),
      "mag_conv_layers": Param((_conv_list("a mag_conv_layers entry"), None), None,
                               "Causal conv blocks before the magnitude projection "
                               "(output_type 'both' only; num_channels -1: n_mag x r)."),
      "attention_dropout": Param(float, doc="Dropout on the attention weights (training)."),
      "layer_postprocess_dropout": Param(float, doc="Dropout on each attention and "
                                         "feed-forward output before its residual."),
      "prenet_activation_fn": Param(callable_or_class, tf.nn.relu, "Prenet activation."),
      "prenet_dropout": Param(float, 0.5, "Prenet dropout rate."),
      "prenet_use_inference_dropout": Param(bool, False, "Keep the prenet dropout on in eval "
                                            "and inference."),
      "cnn_dropout_prob": Param(float, 0.5, "Dropout of conv_layers and mag_conv_layers."),
      "bn_momentum": Param(float, 0.95, "Batch-norm momentum of conv_layers and "
                           "mag_conv_layers (the attention blocks' is 0.95, as OpenSeq2Seq)."),
      "bn_epsilon": Param(float, 1e-8, "Batch-norm epsilon of conv_layers and mag_conv_layers."),
      "reduction_factor": Param(int, 1, "Frames per decoder step (r)."),
      "attention_layers": Param(int, 4, "Attention blocks."),
      "self_attention_conv_params": Param(
          (dict_of(CONV_PARAMS, "self_attention_conv_params", _decoder_conv), None), None,
          "The causal conv block at the start of every attention block (None: none; "
          "num_channels must be hidden_size)."),
      "attention_heads": Param(int, 1, "Heads of each attention; must divide hidden_size."),
      "attention_cnn_dropout_prob": Param(float, 0.5, "Dropout of the attention blocks' conv."),
      "window_size": Param((int, None), None, "Free running: symbols a forced head may attend "
                           "to, from where it attended most at the previous step (None: no "
                           "forcing)."),
      "back_step_size": Param((int, None), None, "Free running: how far back of that symbol "
                              "the window starts (None: 0)."),
      "force_layers": Param((list, None), None, "Indices of the attention blocks whose "
                            "attention window_size forces (None: all)."),
      "alignment_layer": Param((int, str), -1, "The attention block whose weights, averaged "
                               "over heads, are the reported alignments (metrics, pictures, "
                               "guided attention): an index (-1: the last) or 'mean' (all)."),
      "stop_threshold": Param(float, 0.5, "Free running stops when sigmoid(stop logit) "
                              "exceeds this."),
      "max_frames_per_symbol": Param(float, 10.0, "Free running stops after this many frames "
                                     "per input symbol."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "decoder",
               dtype: Any = "float32", initializer: Any = None, num_mel_features: int = 80,
               num_magnitude_features: int = 0):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    policy, init = self.dtype_policy, self.kernel_initializer()
    self._check(p)
    self.num_mel, self.num_mag = num_mel_features, num_magnitude_features
    self.r = p["reduction_factor"]
    self.hidden = p["hidden_size"]
    self.frame_features = self.num_mel + self.num_mag
    self.prenet = Prenet(p["prenet_layers"], p["prenet_hidden_size"], self.frame_features * self.r,
                         p["prenet_activation_fn"], p["prenet_dropout"],
                         p["prenet_use_inference_dropout"], init, dtype=policy, name="prenet")
    self.linear_projection = keras.layers.Dense(self.hidden, use_bias=False, dtype=policy,
                                                kernel_initializer=fresh(init),
                                                name="linear_projection")
    self.blocks = [AttentionBlock(self.hidden, p["attention_heads"], None, p["attention_dropout"],
                                  p["layer_postprocess_dropout"], p["self_attention_conv_params"],
                                  p["attention_cnn_dropout_prob"], 0.95, 1e-8, init,
                                  dtype=policy, name=f"attention_block_{i}")
                   for i in range(p["attention_layers"])]
    self.output_normalization = keras.layers.LayerNormalization(
        epsilon=1e-6, dtype=policy, name="output_normalization")
    self.convs, channels = self._conv_blocks(p["conv_layers"], "conv_layers", self.hidden,
                                             self.num_mel * self.r, init)
    self.conv_channels = channels
    self.stop_projection = keras.layers.Dense(self.r, kernel_initializer=fresh(init),
                                              dtype="float32", name="stop_token_projection")
    self.mel_projection = keras.layers.Dense(self.num_mel * self.r, dtype=policy,
                                             kernel_initializer=fresh(init), name="mel_projection")
    self.mag_convs, self.mag_channels = [], channels
    if self.num_mag:
      self.mag_convs, self.mag_channels = self._conv_blocks(
          p["mag_conv_layers"] or [], "mag_conv_layers", channels, self.num_mag * self.r, init)
      self.mag_projection = keras.layers.Dense(self.num_mag * self.r, dtype=policy,
                                               kernel_initializer=fresh(init),
                                               name="mag_projection")
    layers = p["attention_layers"]
    forced = range(layers) if p["force_layers"] is None else p["force_layers"]
    self.forced = [i in forced for i in range(layers)] if p["window_size"] else [False] * layers
    self.back_step = p["back_step_size"] or 0
    self._layers_built = False

  def _check(self, p: dict) -> None:
    where = self.PARAMS_KEY
    for key in ("prenet_hidden_size", "hidden_size", "reduction_factor", "attention_layers",
                "attention_heads"):
      if p[key] < 1:
        raise ConfigError(f"{where}/{key}: must be at least 1, got {p[key]}")
    if p["prenet_layers"] < 0:
      raise ConfigError(f"{where}/prenet_layers: must be at least 0, got {p['prenet_layers']}")
    if p["hidden_size"] % p["attention_heads"]:
      raise ConfigError(f"{where}/attention_heads: {p['attention_heads']} does not divide "
                        f"hidden_size {p['hidden_size']}")
    check_dropout(p, ("attention_dropout", "layer_postprocess_dropout", "prenet_dropout",
                      "cnn_dropout_prob", "attention_cnn_dropout_prob"), where)
    conv = p["self_attention_conv_params"]
    if conv and conv["num_channels"] != p["hidden_size"]:
      raise ConfigError(f"{where}/self_attention_conv_params/num_channels: must be hidden_size "
                        f"({p['hidden_size']}), got {conv['num_channels']}")
    if p["window_size"] is not None and p["window_size"] < 1:
      raise ConfigError(f"{where}/window_size: must be at least 1, got {p['window_size']}")
    if (p["back_step_size"] or 0) < 0:
      raise ConfigError(f"{where}/back_step_size: must be at least 0, got {p['back_step_size']}")
    layers = p["attention_layers"]
    for i in p["force_layers"] or []:
      if not isinstance(i, int) or not 0 <= i < layers:
        raise ConfigError(f"{where}/force_layers: {i!r} is not an attention block index "
                          f"(0 .. {layers - 1})")
    choice = p["alignment_layer"]
    if choice != "mean" and (not isinstance(choice, int) or not -layers <= choice < layers):
      raise ConfigError(f"{where}/alignment_layer: {choice!r} is neither 'mean' nor a block "
                        f"index in [{-layers}, {layers})")
    if not 0.0 < p["max_frames_per_symbol"]:
      raise ConfigError(f"{where}/max_frames_per_symbol: must be positive, got "
                        f"{p['max_frames_per_symbol']}")

  def _conv_blocks(self, specs: list, key: str, channels: int, features: int, init: Any
                   ) -> tuple[list[ConvBlock], int]:
    p, blocks = self.params, []
    for i, spec in enumerate(specs):
      filters = features if spec["num_channels"] == -1 else spec["num_channels"]
      try:
        blocks.append(ConvBlock(filters, spec["kernel_size"][0], channels, spec["activation_fn"],
                                p["cnn_dropout_prob"], p["bn_momentum"], p["bn_epsilon"],
                                spec["is_residual"], True, init, dtype=self.dtype_policy,
                                name=f"{key}_{i}"))
      except ConfigError as e:
        raise ConfigError(f"{self.PARAMS_KEY}/{key}/{i}/{e}") from None
      channels = filters
    return blocks, channels

  def _build_layers(self, memory_depth: int) -> None:
    """Creates every variable before any loop runs (none may be made inside one)."""
    if self._layers_built:
      return
    self.prenet.build()
    self.linear_projection.build((None, self.prenet.output_size))
    for block in self.blocks:
      block.build(memory_depth)
    self.output_normalization.build((None, self.hidden))
    for conv in self.convs + self.mag_convs:
      conv.build()
    self.stop_projection.build((None, self.conv_channels))
    self.mel_projection.build((None, self.conv_channels))
    if self.num_mag:
      self.mag_projection.build((None, self.mag_channels))
    self._layers_built = True

  # ------------------------------------------------------------------ shared pieces
  def _embed(self, groups: tf.Tensor, positions: tf.Tensor, training: bool) -> tf.Tensor:
    x = self.linear_projection(self.prenet(tf.cast(groups, self.compute_dtype), training=training))
    return x + tf.cast(positions, x.dtype)

  def _memory(self, values: tf.Tensor) -> list[tuple[tf.Tensor, tf.Tensor]]:
    values = tf.cast(values, self.compute_dtype)
    values += position_encoding(tf.shape(values)[1], values.shape[-1], values.dtype)
    return [block.attention.memory_kv(values) for block in self.blocks]

  def _select(self, weights: list[tf.Tensor]) -> tf.Tensor:
    """The reported alignments from every block's float32 weights [B, heads, ...]."""
    choice = self.params["alignment_layer"]
    if choice == "mean":
      return tf.reduce_mean(tf.stack([tf.reduce_mean(w, axis=1) for w in weights]), axis=0)
    return tf.reduce_mean(weights[choice], axis=1)

  # ------------------------------------------------------------------ teacher forced
  def _teacher_forced(self, memory: list, allowed: tf.Tensor, spec: tf.Tensor,
                      lengths: tf.Tensor, training: bool) -> tuple:
    batch, frames = tf.shape(spec)[0], tf.shape(spec)[1]
    steps = -(-frames // self.r)
    spec = tf.pad(spec, [[0, 0], [0, steps * self.r - frames], [0, 0]])
    groups = tf.reshape(spec, [batch, steps, self.frame_features * self.r])
    inputs = tf.concat([tf.zeros_like(groups[:, :1]), groups[:, :-1]], axis=1)
    step_lengths = -(-lengths // self.r)
    x = self._embed(inputs, position_encoding(steps, self.hidden)[None], training)
    weights = []
    for block, kv in zip(self.blocks, memory):
      x, w = block(x, step_lengths, kv, allowed[:, None, None, :], training=training)
      weights.append(w)
    x = self.output_normalization(x)
    for conv in self.convs:
      x = conv(x, step_lengths, training=training)
    stop = tf.reshape(self.stop_projection(tf.cast(x, tf.float32)), [batch, steps * self.r])
    mel = tf.reshape(self.mel_projection(x), [batch, steps * self.r, self.num_mel])
    mag = None
    if self.num_mag:
      for conv in self.mag_convs:
        x = conv(x, step_lengths, training=training)
      mag = tf.reshape(self.mag_projection(x), [batch, steps * self.r, self.num_mag])[:, :frames]
    return mel[:, :frames], mag, stop[:, :frames], self._select(weights)

  # ------------------------------------------------------------------ free running
  def _free_running(self, memory: list, allowed: tf.Tensor, max_steps: tf.Tensor) -> tuple:
    batch, source = tf.shape(allowed)[0], tf.shape(allowed)[1]
    dtype, heads = self.compute_dtype, self.params["attention_heads"]
    table = position_encoding(max_steps, self.hidden)
    convs = self.convs + self.mag_convs
    state = {"buffers": ([b.initial_buffer(batch, dtype) for b in self.blocks],
                         [c.initial_buffer(batch, dtype) for c in convs]),
             "positions": [tf.zeros([batch, heads], tf.int32) for _ in self.blocks],
             "group": tf.zeros([batch, self.frame_features * self.r], dtype)}
    arrays = [tf.TensorArray(t, size=0, dynamic_size=True)
              for t in (dtype, dtype, tf.float32, tf.float32)]  # mel, mag, stop, alignments
    lengths, finished = tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool)
    threshold = self.params["stop_threshold"]

    def body(t, state, lengths, finished, arrays):
      x = self._embed(state["group"], table[t][None], training=False)
      block_buffers, conv_buffers = state["buffers"]
      new_blocks, positions, weights = [], [], []
      for i, (block, kv) in enumerate(zip(self.blocks, memory)):
        mask = allowed[:, None, None, :]
        if self.forced[i]:
          window = window_mask(state["positions"][i], source, self.params["window_size"],
                               self.back_step)
          mask = mask & window[:, :, None, :]
        x, w, buffer = block.step(x, block_buffers[i], kv, mask)
        new_blocks.append(buffer)
        weights.append(w[:, :, None, :])
        positions.append(tf.argmax(w, axis=-1, output_type=tf.int32))
      x = self.output_normalization(x)
      new_convs = []
      for conv, buffer in zip(self.convs, conv_buffers):
        x, buffer = conv.step(x, buffer)
        new_convs.append(buffer)
      stop = self.stop_projection(tf.cast(x, tf.float32))  # [B, r]
      mel = tf.reshape(self.mel_projection(x), [batch, self.r, self.num_mel])
      mag = tf.zeros([batch, self.r, 0], dtype)
      if self.num_mag:
        for conv, buffer in zip(self.mag_convs, conv_buffers[len(self.convs):]):
          x, buffer = conv.step(x, buffer)
          new_convs.append(buffer)
        mag = tf.reshape(self.mag_projection(x), [batch, self.r, self.num_mag])
      fired = tf.sigmoid(stop) > threshold
      first = tf.argmax(tf.cast(fired, tf.int32), axis=1, output_type=tf.int32)
      any_fired = tf.reduce_any(fired, axis=1)
      # A sequence ends with the frame whose stop token fired (that frame included).
      lengths = tf.where(finished, lengths,
                         tf.where(any_fired, t * self.r + first + 1, (t + 1) * self.r))
      group = tf.reshape(tf.concat([mel, tf.cast(mag, mel.dtype)], axis=-1),
                         [batch, self.frame_features * self.r])
      state = {"buffers": (new_blocks, new_convs), "positions": positions, "group": group}
      outputs = (mel, mag, stop, self._select(weights)[:, 0])
      arrays = [a.write(t, v) for a, v in zip(arrays, outputs)]
      return t + 1, state, lengths, finished | any_fired, arrays

    t, _, lengths, _, arrays = tf.while_loop(
        lambda t, _s, _l, finished, _a: (t < max_steps) & ~tf.reduce_all(finished), body,
        (tf.constant(0), state, lengths, finished, arrays))
    mel, mag, stop, aligns = (tf.transpose(a.stack(), perm) for a, perm in zip(
        arrays, ([1, 0, 2, 3], [1, 0, 2, 3], [1, 0, 2], [1, 0, 2])))
    mel = tf.reshape(mel, [batch, t * self.r, self.num_mel])
    mag = tf.reshape(mag, [batch, t * self.r, self.num_mag]) if self.num_mag else None
    return mel, mag, tf.reshape(stop, [batch, t * self.r]), aligns, lengths

  # ------------------------------------------------------------------ call
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    encoder_output = input_dict["encoder_output"]
    values = encoder_output["outputs"]
    src_lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    self._build_layers(values.shape[-1])
    memory = self._memory(values)
    allowed = sequence_mask(src_lengths, tf.shape(values)[1])
    training = bool(training)
    if "target_tensors" in input_dict:
      spec = input_dict["target_tensors"][0][:, :, :self.frame_features]
      lengths = tf.cast(input_dict["target_tensors"][2], tf.int32)
      mel, mag, stop, aligns = self._teacher_forced(memory, allowed, spec, lengths, training)
    else:
      max_steps = tf.cast(tf.math.ceil(self.params["max_frames_per_symbol"] * tf.cast(
          tf.reduce_max(src_lengths), tf.float32) / self.r), tf.int32)
      mel, mag, stop, aligns, lengths = self._free_running(memory, allowed,
                                                           tf.maximum(max_steps, 1))
    mask = sequence_mask(lengths, tf.shape(mel)[1], mel.dtype)[:, :, None]
    mel = mel * mask
    out = {"decoder_spectrogram": mel, "spectrogram": mel, "stop_token_logits": stop,
           "final_sequence_lengths": lengths, "src_lengths": src_lengths}
    if mag is not None:
      out["magnitude"] = mag * tf.cast(mask, mag.dtype)
    step_mask = sequence_mask(-(-lengths // self.r), tf.shape(aligns)[1], tf.float32)
    out["alignments"] = aligns * step_mask[:, :, None]
    return out
