"""ConformerEncoder: convolution-augmented Transformer for speech (Gulati et al. 2020), with
NeMo's Fast Conformer subsampling (Rekesh et al. 2023) and stochastic depth as options."""

from __future__ import annotations

import math
import weakref
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.conformer.attention import relative_position_encoding
from open_seq2seq.parts.conformer.modules import (CONV_NORMS, ConformerBlock,
                                                  stochastic_depth_probs)
from open_seq2seq.parts.conformer.streaming import (cached_frames_valid, chunk_visibility,
                                                    visibility_bias)
from open_seq2seq.parts.conformer.subsampling import (CAUSAL_PAD, KINDS, ConvSubsampling,
                                                      subsampled_lengths)
from open_seq2seq.parts.dropout import dropout, dropout_seed_generator
from open_seq2seq.parts.transformer.utils import get_padding_bias
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param, int_list


#: Each streaming encoder's chunk loop traced for eager calls (see ``stream_utterances``).
_EAGER_LOOPS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


class ConformerEncoder(Encoder):
  """Conformer encoder with padding masks.

  Input features [B, T, F] go through a convolutional subsampling (``subsampling``:
  ``conv2d4``, two 3x3 stride-2 conv2d + ReLU as in the paper, or ``dw_striding8``, Fast
  Conformer's depthwise-separable x8; see :mod:`open_seq2seq.parts.conformer.subsampling`)
  and a linear projection to ``d_model``, are scaled by sqrt(d_model) (``xscaling``, as
  NeMo and ESPnet do), then through ``num_layers`` Conformer blocks
  (:mod:`open_seq2seq.parts.conformer.modules`: macaron half feed-forwards, relative-position
  self-attention, the convolution module, a final LayerNorm). Returns ``outputs``
  [B, T', d_model] (zero past each length) and ``src_lengths`` [B] int32, what the CTC
  decoder reads.

  Padding never changes an utterance's outputs: frames past each length are zeroed before
  every convolution, attention masks padded keys, batch norm takes its statistics over real
  frames, and the lengths follow the conv arithmetic (``ceil(L / 2)`` per stride-2 stage).

  Stochastic depth (NeMo's ``stochastic_depth_*``): in training, block ``l`` is skipped
  (output = input) with probability ``p_l`` and otherwise its change is scaled by
  ``1 / (1 - p_l)``, so inference runs every block unscaled. One draw per block and step
  from a seeded generator whose state is a checkpointed variable, as ``TDNNEncoder``'s
  block dropping.

  Streaming (``att_context_size`` and ``conv_causal``): training masks the attention to
  chunks (:mod:`open_seq2seq.parts.conformer.streaming`) and every convolution is causal, so
  no output frame depends on a frame after its chunk. :meth:`stream_step` then encodes a
  chunk of features with the state :meth:`initial_state` starts, and inference (``call``
  without ``training``) runs the utterances chunk by chunk that way: memory grows with the
  length, not with its square, and the outputs are the whole-utterance ones.
  """

  PARAMS = {
      "d_model": Param(int, 144, "Width of the frames through the blocks (144: Conformer-S; "
                       "256: M; 512: L)."),
      "num_layers": Param(int, 16, "Number of Conformer blocks."),
      "num_heads": Param(int, 4, "Attention heads; must divide d_model."),
      "ff_expansion_factor": Param(int, 4, "Feed-forward inner width = factor * d_model."),
      "conv_kernel_size": Param(int, 31, "Depthwise conv kernel of the convolution module "
                                "(odd: centred)."),
      "conv_norm_type": Param(str, "batch_norm", "Norm after the depthwise conv (batch_norm: "
                              "statistics over real frames only).", choices=CONV_NORMS),
      "subsampling": Param(str, "conv2d4", "conv2d4 (two 3x3 stride-2 conv2d + ReLU, time "
                           "x4) or dw_striding8 (Fast Conformer's depthwise-separable, x8).",
                           choices=tuple(KINDS)),
      "subsampling_channels": Param((int, None), None, "Filters of the subsampling convs "
                                    "(None: d_model)."),
      "xscaling": Param(bool, True, "Multiply the projected frames by sqrt(d_model)."),
      "dropout": Param(float, 0.1, "Dropout on the subsampled frames, inside the feed-forward "
                       "modules and on every module's output before its residual add."),
      "attention_dropout": Param(float, 0.1, "Dropout on the attention probabilities."),
      "stochastic_depth_drop_prob": Param(float, 0.0, "Training: probability of skipping the "
                                          "last block (linear) or of each block (uniform); 0 "
                                          "disables stochastic depth."),
      "stochastic_depth_mode": Param(str, "linear", "linear: probabilities rise from 0 to "
                                     "stochastic_depth_drop_prob over the blocks; uniform: "
                                     "the same for each.", choices=("linear", "uniform")),
      "stochastic_depth_start_layer": Param(int, 1, "Blocks before this 1-based index are "
                                            "never skipped."),
      "use_bias": Param(bool, True, "Biases in the linear and conv layers of the blocks."),
      "bn_momentum": Param(float, 0.9, "Batch-norm moving-average momentum (PyTorch's 0.1)."),
      "bn_epsilon": Param(float, 1e-5, "Batch-norm epsilon."),
      "att_context_size": Param((int_list(2, 0), None), None, "[left, right] subsampled "
                                "frames: chunked limited attention (NeMo's chunked_limited), "
                                "chunks of right + 1 frames attending to themselves and the "
                                "left / (right + 1) chunks before (left a multiple of right "
                                "+ 1); None: the whole utterance."),
      "conv_causal": Param(bool, False, "Causal depthwise convs and subsampling (no frame "
                           "reads a later one). With att_context_size the encoder streams: "
                           "stream_step, and chunk-by-chunk inference."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self._check(p)
    policy, init = self.dtype_policy, self.kernel_initializer()
    self.subsampling = ConvSubsampling(p["subsampling"], p["d_model"],
                                       p["subsampling_channels"] or p["d_model"],
                                       kernel_initializer=init, causal=p["conv_causal"],
                                       dtype=policy, name="subsampling")
    # chunked attention: chunk (subsampled frames), chunks seen before, cached frames
    left, right = p["att_context_size"] or (0, 0)
    self.chunk = right + 1 if p["att_context_size"] else None
    self.left_chunks, self.memory = left // (right + 1), left
    self.streaming = self.chunk is not None and p["conv_causal"]
    self.blocks = [
        ConformerBlock(p["d_model"], p["num_heads"], p["ff_expansion_factor"],
                       p["conv_kernel_size"], p["conv_norm_type"], p["dropout"],
                       p["attention_dropout"], p["bn_momentum"], p["bn_epsilon"],
                       use_bias=p["use_bias"], kernel_initializer=init,
                       conv_causal=p["conv_causal"], dtype=policy, name=f"block{i + 1}")
        for i in range(p["num_layers"])]
    self.drop_probs = stochastic_depth_probs(
        p["num_layers"], p["stochastic_depth_drop_prob"], p["stochastic_depth_mode"],
        p["stochastic_depth_start_layer"])
    # the RNG state is a variable: checkpoints hold it, so a resumed run draws the same skips
    self.stochastic_depth_seed = (keras.random.SeedGenerator(name="stochastic_depth_seed")
                                  if any(self.drop_probs) else None)
    # blocks built now (their sizes are known): variables exist before the first trace; the
    # subsampling builds on its first call, when the number of features is known
    self.build()

  @staticmethod
  def _check(p: dict) -> None:
    where = "encoder_params"
    for key in ("d_model", "num_layers", "num_heads", "ff_expansion_factor",
                "conv_kernel_size"):
      if p[key] <= 0:
        raise ConfigError(f"{where}/{key}: must be positive, got {p[key]}")
    if p["d_model"] % p["num_heads"]:
      raise ConfigError(f"{where}/num_heads: {p['num_heads']} does not divide d_model "
                        f"{p['d_model']}")
    if p["conv_kernel_size"] % 2 == 0 and not p["conv_causal"]:
      raise ConfigError(f"{where}/conv_kernel_size: {p['conv_kernel_size']} is even; the "
                        "centred depthwise conv needs an odd kernel (e.g. 31)")
    if p["att_context_size"] is not None:
      left, right = p["att_context_size"]
      if left % (right + 1):
        raise ConfigError(f"{where}/att_context_size: left context {left} is not a multiple "
                          f"of the chunk, right + 1 = {right + 1} frames")
    if p["subsampling_channels"] is not None and p["subsampling_channels"] <= 0:
      raise ConfigError(f"{where}/subsampling_channels: must be positive or None, got "
                        f"{p['subsampling_channels']}")
    for key in ("dropout", "attention_dropout", "stochastic_depth_drop_prob"):
      if not 0.0 <= p[key] < 1.0:
        raise ConfigError(f"{where}/{key}: must be in [0, 1), got {p[key]}")
    if not 1 <= p["stochastic_depth_start_layer"] <= p["num_layers"]:
      raise ConfigError(f"{where}/stochastic_depth_start_layer: must be in [1, num_layers="
                        f"{p['num_layers']}], got {p['stochastic_depth_start_layer']}")

  def build(self, input_shape=None):
    for block in self.blocks:
      block.build()
    self.seed_generator = dropout_seed_generator(self.params["dropout"])

  def embed(self, x: tf.Tensor, lengths: tf.Tensor, training: bool | None = None
            ) -> tuple[tf.Tensor, tf.Tensor]:
    """Features [B, T, F] -> the blocks' input [B, T', d_model] and lengths T'."""
    x, lengths = self.subsampling(tf.cast(x, self.compute_dtype), tf.cast(lengths, tf.int32))
    if self.params["xscaling"]:
      x = x * tf.cast(math.sqrt(self.params["d_model"]), x.dtype)
    return dropout(x, self.params["dropout"], training, self.seed_generator), lengths

  def layer_scales(self, training: bool | None) -> tf.Tensor | None:
    """Training with stochastic depth: float32 [num_layers], per block 0 (skipped) or
    1 / (1 - p_l) (kept), one seeded draw per block; otherwise None (every block runs)."""
    if not training or self.stochastic_depth_seed is None:
      return None
    probs = tf.constant(self.drop_probs, tf.float32)
    draws = tf.convert_to_tensor(keras.random.uniform([len(self.drop_probs)],
                                                      seed=self.stochastic_depth_seed))
    return tf.cast(draws >= probs, tf.float32) / (1.0 - probs)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    features, lengths = input_dict["source_tensors"]
    if self.streaming and not training:
      x, lengths = self.stream_utterances(features, lengths)
    else:
      x, lengths = self.encode(features, lengths, training)
    return {"outputs": x, "src_lengths": lengths}

  def encode(self, features: tf.Tensor, lengths: tf.Tensor, training: bool | None = None
             ) -> tuple[tf.Tensor, tf.Tensor]:
    """Whole utterances in one pass (with the chunk mask of ``att_context_size``):
    features [B, T, F] -> outputs [B, T', d_model] (zero past each length), lengths T'."""
    x, lengths = self.embed(features, lengths, training)
    length = tf.shape(x)[1]
    mask = tf.sequence_mask(lengths, length)
    bias = get_padding_bias(lengths, length, tf.float32)
    if self.chunk is not None:
      bias += visibility_bias(chunk_visibility(length, self.chunk, self.left_chunks))
    positions = tf.cast(relative_position_encoding(length, self.params["d_model"]), x.dtype)
    scales = self.layer_scales(training)
    for i, block in enumerate(self.blocks):
      y = block(x, positions, mask, bias, training=training)
      if scales is not None and self.drop_probs[i] > 0:
        y = x + tf.cast(scales[i], x.dtype) * (y - x)
      x = y
    return x * tf.cast(mask, x.dtype)[:, :, None], lengths

  # ----------------------------------------------------------------- streaming
  @property
  def chunk_frames(self) -> int:
    """Feature frames of one attention chunk: what :meth:`stream_step` takes (or a
    multiple)."""
    self.require_streaming()
    return self.chunk * self.subsampling.factor

  def require_streaming(self) -> None:
    """A one-line ConfigError unless the encoder streams (att_context_size, conv_causal)."""
    if not self.streaming:
      raise ConfigError("encoder_params: streaming needs att_context_size: [left, right] and "
                        f"conv_causal: True (this encoder has att_context_size "
                        f"{self.params['att_context_size']}, conv_causal "
                        f"{self.params['conv_causal']})")

  def initial_state(self, batch_size: Any, num_features: int) -> dict[str, tf.Tensor]:
    """The state before an utterance's first chunk, a flat dict of zero tensors:
    ``frames`` [B] int32 (subsampled frames encoded so far), ``subsampling<i>``
    [B, 2, bins, channels] (the last input frames of each strided subsampling conv),
    ``block<l>_keys`` / ``block<l>_values`` [B, heads, memory, depth] (the attention's
    cache of the last ``left`` frames) and ``block<l>_conv`` [B, conv_kernel_size - 1,
    d_model] (the causal conv's last inputs)."""
    self.require_streaming()
    p, dtype = self.params, self.compute_dtype
    state = {"frames": tf.zeros([batch_size], tf.int32)}
    for i, (bins, channels) in enumerate(self.subsampling.stage_inputs(num_features)):
      state[f"subsampling{i + 1}"] = tf.zeros([batch_size, CAUSAL_PAD, bins, channels], dtype)
    heads = p["num_heads"]
    for i in range(len(self.blocks)):
      for name in ("keys", "values"):
        state[f"block{i + 1}_{name}"] = tf.zeros(
            [batch_size, heads, self.memory, p["d_model"] // heads], dtype)
      state[f"block{i + 1}_conv"] = tf.zeros(
          [batch_size, p["conv_kernel_size"] - 1, p["d_model"]], dtype)
    return state

  def stream_step(self, features: tf.Tensor, lengths: tf.Tensor, state: dict[str, tf.Tensor]
                  ) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    """Encodes the next chunk of each utterance (inference).

    Args:
      features: [B, n * chunk_frames, F], the frames after those of earlier steps.
      lengths: [B] real frames of each row; a row given fewer than the chunk's frames ends
        there (its later steps give nothing).
      state: :meth:`initial_state` for the first chunk, then what the last step returned.

    Returns:
      ``(outputs [B, n * chunk, d_model] zero past each length, lengths [B], new state)``.
    """
    self.require_streaming()
    step = self.chunk_frames
    features = tf.cast(features, self.compute_dtype)
    if features.shape[1] is not None and features.shape[1] % step:
      raise ValueError(f"stream_step takes a multiple of {step} feature frames (chunks of "
                       f"{self.chunk} x {self.subsampling.factor}), got {features.shape[1]}")
    if not self.subsampling.built:
      self.subsampling.build(features.shape)
    count = len(self.subsampling.stage_inputs(int(features.shape[-1])))
    x, lengths, sub_caches = self.subsampling.stream(
        features, tf.cast(lengths, tf.int32),
        [state[f"subsampling{i + 1}"] for i in range(count)])
    if self.params["xscaling"]:
      x = x * tf.cast(math.sqrt(self.params["d_model"]), x.dtype)
    length = tf.shape(x)[1]
    mask = tf.sequence_mask(lengths, length)
    keys_valid = tf.concat([cached_frames_valid(state["frames"], self.memory), mask], axis=1)
    visible = chunk_visibility(length, self.chunk, self.left_chunks, self.memory)
    bias = visibility_bias(keys_valid[:, None, None, :] & visible[None, None])
    positions = tf.cast(relative_position_encoding(length, self.params["d_model"],
                                                   self.memory), x.dtype)
    new_state = {"frames": state["frames"] + lengths}
    new_state.update({f"subsampling{i + 1}": c for i, c in enumerate(sub_caches)})
    for i, block in enumerate(self.blocks):
      names = {key: f"block{i + 1}_{key}" for key in ("keys", "values", "conv")}
      x, cache = block.stream(x, positions, mask, bias,
                              {key: state[name] for key, name in names.items()})
      new_state.update({name: cache[key] for key, name in names.items()})
    return x * tf.cast(mask, x.dtype)[:, :, None], lengths, new_state

  def stream_utterances(self, features: tf.Tensor, lengths: tf.Tensor
                        ) -> tuple[tf.Tensor, tf.Tensor]:
    """:meth:`encode`'s outputs, computed chunk by chunk with :meth:`stream_step` in a
    ``tf.while_loop`` (inference of a streaming encoder)."""
    features = tf.cast(features, self.compute_dtype)
    lengths = tf.cast(lengths, tf.int32)
    if not self.subsampling.built:
      self.subsampling.build(features.shape)
    if not tf.executing_eagerly():
      return self._stream_loop(features, lengths)
    # Eager (the model's first batch creates its variables so): a loop of small steps run
    # op by op costs ~0.4 s per second of audio; traced once, ~50 times less. The function
    # lives outside the layer so that no SavedModel of the layer holds it.
    loop = _EAGER_LOOPS.get(self)
    if loop is None:
      this = weakref.ref(self)
      loop = tf.function(lambda f, n: this()._stream_loop(f, n),  # pylint: disable=protected-access
                         reduce_retracing=True, autograph=False)
      _EAGER_LOOPS[self] = loop
    return loop(features, lengths)

  def _stream_loop(self, features: tf.Tensor, lengths: tf.Tensor
                   ) -> tuple[tf.Tensor, tf.Tensor]:
    step, num_features = self.chunk_frames, int(features.shape[-1])
    batch, frames = tf.shape(features)[0], tf.shape(features)[1]
    chunks = tf.maximum((frames + step - 1) // step, 1)
    features = tf.pad(features, [[0, 0], [0, chunks * step - frames], [0, 0]])
    features = tf.reshape(features, [batch, chunks, step, num_features])
    outputs = tf.TensorArray(self.compute_dtype, size=chunks,
                             element_shape=[None, self.chunk, self.params["d_model"]])

    def body(i, state, outputs):
      chunk_lengths = tf.clip_by_value(lengths - i * step, 0, step)
      y, _, state = self.stream_step(tf.gather(features, i, axis=1), chunk_lengths, state)
      return i + 1, state, outputs.write(i, y)

    _, _, outputs = tf.while_loop(lambda i, *_: i < chunks, body,
                                  (tf.constant(0), self.initial_state(batch, num_features),
                                   outputs))
    x = tf.transpose(outputs.stack(), [1, 0, 2, 3])
    x = tf.reshape(x, [batch, chunks * self.chunk, self.params["d_model"]])
    kind = self.params["subsampling"]
    return x[:, :subsampled_lengths(frames, kind)], subsampled_lengths(lengths, kind)
