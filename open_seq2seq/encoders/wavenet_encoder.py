"""WavenetEncoder: OpenSeq2Seq's WaveNet, a stack of gated causal dilated convolutions.

The network, as OpenSeq2Seq wired it: the one-hot mu-law input goes through a causal
"preprocess" convolution + batch norm; then ``blocks`` x ``layers_per_block`` layers with
dilations 1, 2, 4, ... 2^(layers_per_block - 1). In each layer the first half of the residual
channels feeds the *filter* convolution and the second half the *gate* convolution (each
causal, kernel ``kernel_size``, + batch norm); the mel conditioning, split the same way into
halves and projected by one 1x1 convolution each (shared by every layer), is added before
``tanh(filter) * sigmoid(gate)``; 1x1 convolutions of that give the residual (added to the
layer's input) and the skip (summed over layers). ``relu(skips + residual stream)`` -> 1x1 ->
relu -> 1x1 gives the logits over ``quantization_channels`` (float32 under mixed precision).
The dilated layers' weights are stacked along a layer axis (``parts/wavenet/layers.py``: few
variables, so the first training step is traced quickly).

Local conditioning is upsampled by repetition: frame ``i`` conditions samples
``i * hop .. (i + 1) * hop - 1`` (OpenSeq2Seq repeated frames in its data layer; here the
encoder repeats the projected frames, so batches carry frames, not samples).

Training and eval are teacher forced (one parallel pass). Inference samples autoregressively
inside the graph (``tf.while_loop``) with *fast generation*: each convolution keeps a queue of
its past inputs (``(kernel_size - 1) * dilation`` steps), so a step costs one column of the
network instead of a pass over the receptive field. Batch norm uses its moving statistics
there, exactly as the teacher-forced pass in eval/infer mode does (a test checks that both
give the same logits).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.wavenet.layers import DilatedStack, bn_step, conv_step
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import Param


def receptive_field(kernel_size: int, blocks: int, layers_per_block: int) -> int:
  """Past samples a prediction sees: the preprocess convolution plus every dilated one.

  OpenSeq2Seq's ``_get_receptive_field`` left out the preprocess convolution's
  ``kernel_size - 1`` samples.
  """
  dilations = blocks * (2 ** layers_per_block - 1)
  return (kernel_size - 1) * (1 + dilations) + 1


def silence_id(quantization_channels: int) -> int:
  """The mu-law id of 0.0: the input before the first sample."""
  return quantization_channels // 2


class WavenetEncoder(Encoder):
  """WaveNet over mu-law ids, locally conditioned on mel frames (see the module docstring).

  Inputs (``source_tensors``, from
  :class:`~open_seq2seq.data.text2speech.wavenet.WavenetDataLayer`):

  * teacher forced: ``(input ids [B, T], lengths [B], mel [B, F, M], frames [B])``, the input
    at ``t`` being the id of sample ``t - 1``; returns ``logits`` [B, T, Q] float32 (also as
    ``outputs``) and ``src_lengths``;
  * generation: ``(mel [B, F, M], frames [B])``; returns ``audio_ids`` [B, F * hop] int32 (also
    as ``outputs``) and ``audio_lengths`` = frames * hop (also as ``src_lengths``).

  Sampling draws from ``softmax(logits / temperature)`` with stateless random ops seeded by the
  run's ``random_seed`` (the same seed gives the same audio); ``temperature: 0`` takes the most
  likely bin, as OpenSeq2Seq's naive inference script did.

  Args:
    quantization_channels: the data layer's mu-law bins (the ``quantization_channels`` param,
      if set, must agree).
    hop_length: samples per conditioning frame.
    random_seed: seed of the sampling (None: a fresh seed per call).
  """

  PARAMS = {
      "layer_type": Param(str, "conv1d", "Convolution type (only 'conv1d', as OpenSeq2Seq).",
                          choices=("conv1d",)),
      "kernel_size": Param(int, doc="Width of every causal convolution."),
      "strides": Param(int, 1, "Stride (only 1: WaveNet keeps the sample rate)."),
      "padding": Param(str, "VALID", "Ignored: every convolution is causal (left-padded), as "
                       "OpenSeq2Seq's were."),
      "blocks": Param(int, doc="Number of dilation cycles."),
      "layers_per_block": Param(int, doc="Dilated layers per cycle (dilations 1 .. 2^(n-1))."),
      "filters": Param(int, doc="Residual, skip and gate channels (at least 2)."),
      "quantization_channels": Param((int, None), None, "Mu-law bins of the input and the "
                                     "softmax (None: the data layer's)."),
      "local_conditioning": Param(bool, True, "Condition every layer on the mel frames."),
      "bn_momentum": Param(float, 0.1, "Batch-norm moving-average momentum (OpenSeq2Seq's "
                           "default: the moving statistics follow the last batches)."),
      "bn_epsilon": Param(float, 1e-5, "Batch-norm epsilon."),
      "temperature": Param(float, 1.0, "Inference: sample from softmax(logits / temperature); "
                           "0 takes the most likely bin."),
      "data_format": Param(str, "channels_last", "Ignored: the layout is internal (channels "
                           "last).", choices=("channels_first", "channels_last")),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str = "encoder",
               dtype: Any = "float32", initializer: Any = None,
               quantization_channels: int | None = None, hop_length: int = 256,
               random_seed: int | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    given = p["quantization_channels"]
    if given is not None and quantization_channels is not None and \
        given != quantization_channels:
      raise ConfigError(f"encoder_params/quantization_channels: {given}, but the data layer "
                        f"quantizes to {quantization_channels} (data_layer_params/"
                        f"quantization_channels); set them equal")
    self.quantization_channels = resolve_size(p, "quantization_channels", quantization_channels,
                                              "encoder_params")
    for key in ("kernel_size", "blocks", "layers_per_block"):
      if p[key] < 1:
        raise ConfigError(f"encoder_params/{key}: must be at least 1, got {p[key]}")
    if p["filters"] < 2:
      raise ConfigError(f"encoder_params/filters: must be at least 2 (the gate and filter "
                        f"convolutions each take half of them), got {p['filters']}")
    if p["strides"] != 1:
      raise ConfigError(f"encoder_params/strides: WaveNet predicts every sample; use 1, got "
                        f"{p['strides']}")
    if p["temperature"] < 0:
      raise ConfigError(f"encoder_params/temperature: must be >= 0, got {p['temperature']}")
    if hop_length < 1:
      raise ConfigError(f"hop_length: must be at least 1, got {hop_length}")
    self.hop_length, self.random_seed = hop_length, random_seed
    self.receptive_field = receptive_field(p["kernel_size"], p["blocks"], p["layers_per_block"])
    self._build_layers()

  def _build_layers(self) -> None:
    p, policy = self.params, self.dtype_policy
    filters, k = p["filters"], p["kernel_size"]
    def init():  # a new instance per weight: unseeded Keras initializers repeat themselves
      return fresh(self.kernel_initializer())
    self.preprocess = keras.layers.Conv1D(filters, k, padding="causal", use_bias=False,
                                          kernel_initializer=init(), dtype=policy,
                                          name="preprocess")
    self.preprocess_bn = keras.layers.BatchNormalization(
        momentum=p["bn_momentum"], epsilon=p["bn_epsilon"], dtype=policy, name="preprocess_bn")
    dilations = [2 ** layer for _ in range(p["blocks"]) for layer in range(p["layers_per_block"])]
    self.stack = DilatedStack(filters, k, dilations, p["bn_momentum"], p["bn_epsilon"], init,
                              dtype=policy, name="dilated_stack")
    self.filter_condition = self.gate_condition = None
    if p["local_conditioning"]:
      # No bias, as OpenSeq2Seq's: the batch norm before the gate has one.
      self.filter_condition = keras.layers.Dense(filters, use_bias=False,
                                                 kernel_initializer=init(), dtype=policy,
                                                 name="filter_condition")
      self.gate_condition = keras.layers.Dense(filters, use_bias=False,
                                               kernel_initializer=init(), dtype=policy,
                                               name="gate_condition")
    self.postprocess_1 = keras.layers.Dense(filters, kernel_initializer=init(), dtype=policy,
                                            name="postprocess_1")
    # The softmax's logits in float32 under mixed precision (a 256-way softmax in bfloat16
    # loses the small probabilities that sampling needs).
    self.postprocess_2 = keras.layers.Dense(self.quantization_channels,
                                            kernel_initializer=init(), dtype="float32",
                                            name="postprocess_2")

  def build(self, input_shape=None):
    """Builds every sublayer from the known channel counts (generation runs the layers
    inside a while loop, where no variable may be created)."""
    filters, q = self.params["filters"], self.quantization_channels
    if not self.preprocess.built:
      self.preprocess.build((None, None, q))
      self.preprocess_bn.build((None, None, filters))
      self.stack.build((None, None, filters))
      self.postprocess_1.build((None, filters))
      self.postprocess_2.build((None, filters))
    super().build(input_shape)

  def _build_conditioning(self, num_features: int) -> None:
    if self.filter_condition is not None and not self.filter_condition.built:
      if num_features < 2:
        raise ConfigError(f"num_audio_features: local conditioning splits the mel channels "
                          f"into filter and gate halves; needs at least 2, got {num_features}")
      half = num_features // 2
      self.filter_condition.build((None, half))
      self.gate_condition.build((None, num_features - half))

  # ------------------------------------------------------------------ shared pieces
  def _frame_conditions(self, mel: tf.Tensor) -> tf.Tensor | None:
    """[filter | gate] projections of each frame, [B, F, 2 * filters] (None: unconditioned)."""
    if self.filter_condition is None:
      return None
    self._build_conditioning(int(mel.shape[-1]))
    mel = tf.cast(mel, self.compute_dtype)
    half = int(mel.shape[-1]) // 2
    return tf.concat([self.filter_condition(mel[..., :half]),
                      self.gate_condition(mel[..., half:])], axis=-1)

  def _logits(self, residual: tf.Tensor, skips: tf.Tensor) -> tf.Tensor:
    out = tf.nn.relu(self.postprocess_1(tf.nn.relu(skips + residual)))
    return self.postprocess_2(tf.cast(out, tf.float32))

  # ------------------------------------------------------------------ teacher forcing
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    source = input_dict["source_tensors"]
    self.build()
    if len(source) == 2:
      return self.generate(*source)
    ids, lengths, mel, _ = source
    logits = self.teacher_forced(ids, lengths, mel, training=training)
    return {"logits": logits, "outputs": logits, "src_lengths": tf.cast(lengths, tf.int32)}

  def teacher_forced(self, ids: tf.Tensor, lengths: tf.Tensor, mel: tf.Tensor,
                     training: bool | None = None) -> tf.Tensor:
    """float32 logits [B, T, Q]: position t predicts the sample after input id t."""
    self.build()
    steps = tf.shape(ids)[1]
    mask = tf.sequence_mask(lengths, steps)
    x = tf.one_hot(ids, self.quantization_channels, dtype=self.compute_dtype)
    cond = self._frame_conditions(mel)
    if cond is not None:
      # frame i conditions samples i * hop .. (i + 1) * hop - 1
      cond = tf.repeat(cond, self.hop_length, axis=1)[:, :steps]
    x = tf.cast(self.preprocess_bn(self.preprocess(x), training=training, mask=mask),
                self.compute_dtype)
    x, skips = self.stack(x, cond, valid=mask, training=training)
    return self._logits(x, skips)

  # ------------------------------------------------------------------ generation
  def generate(self, mel: tf.Tensor, mel_lengths: tf.Tensor, return_logits: bool = False
               ) -> dict:
    """Samples ``F * hop`` ids per input from mel frames [B, F, M], one step at a time.

    With ``return_logits`` the output also holds every step's ``logits`` [B, F * hop, Q]
    (tests compare them with the teacher-forced pass over the generated ids).
    """
    self.build()
    dtype, q, hop = self.compute_dtype, self.quantization_channels, self.hop_length
    filters = self.params["filters"]
    batch = tf.shape(mel)[0]
    steps = tf.shape(mel)[1] * hop
    cond = self._frame_conditions(mel)
    seed = self.random_seed
    seed = (tf.constant(seed, tf.int64) if seed is not None else
            tf.random.uniform([], 0, 2 ** 31 - 1, dtype=tf.int64))
    temperature = self.params["temperature"]
    k = self.params["kernel_size"]
    weights = self.stack.weights_by_layer(dtype)  # read once, outside the loop
    queues = [tf.zeros([batch, k - 1, q], dtype)] + [
        tf.zeros([batch, self.stack.queue_length(layer), filters], dtype)
        for layer in range(len(weights))]
    first = tf.fill([batch], silence_id(q))
    ids_out = tf.TensorArray(tf.int32, size=steps, element_shape=[None])
    logits_out = tf.TensorArray(tf.float32, size=steps if return_logits else 0,
                                element_shape=[None, q])

    def body(t, previous, queues, ids_out, logits_out):
      x = tf.one_hot(previous, q, dtype=dtype)
      taps = tf.concat([queues[0], x[:, None]], axis=1)
      h = bn_step(self.preprocess_bn, conv_step(self.preprocess.kernel, taps))
      new_queues = [taps[:, 1:]]
      step_cond = None
      if cond is not None:
        step_cond = tf.gather(cond, t // hop, axis=1)
      skips = tf.zeros_like(h)
      for layer, queue in enumerate(queues[1:]):
        h, skip, queue = self.stack.step(layer, weights[layer], h, queue, step_cond)
        skips += skip
        new_queues.append(queue)
      logits = self._logits(h, skips)
      if temperature > 0:
        sample = tf.random.stateless_categorical(logits / temperature, 1,
                                                 seed=tf.stack([seed, tf.cast(t, tf.int64)]),
                                                 dtype=tf.int32)[:, 0]
      else:
        sample = tf.argmax(logits, axis=-1, output_type=tf.int32)
      ids_out = ids_out.write(t, sample)
      if return_logits:
        logits_out = logits_out.write(t, logits)
      return t + 1, sample, new_queues, ids_out, logits_out

    _, _, _, ids_out, logits_out = tf.while_loop(
        lambda t, *_: t < steps, body, (tf.constant(0), first, queues, ids_out, logits_out))
    ids = tf.transpose(ids_out.stack(), [1, 0])
    lengths = tf.cast(mel_lengths, tf.int32) * hop
    out = {"audio_ids": ids, "audio_lengths": lengths, "outputs": ids, "src_lengths": lengths}
    if return_logits:
      out["logits"] = tf.transpose(logits_out.stack(), [1, 0, 2])
    return out
