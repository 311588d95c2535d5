"""LMEncoder: OpenSeq2Seq's LSTM language model, also the encoder of its text classifiers.

One component, three uses, as in OpenSeq2Seq (``LSTMLM`` with ``FakeDecoder``):

* **language model** (the model passes ``num_classes=None``): embeddings -> stacked recurrent
  layers -> logits over the vocabulary at every step, or, in training with ``num_sampled``,
  what :class:`~open_seq2seq.losses.BasicSampledSequenceLoss` needs for a sampled softmax;
* **generation** (LM in ``infer`` mode): reads each prompt, then emits ``num_tokens_gen``
  words, greedily or sampled with a ``temperature``, stopping a row at ``<eos>``;
* **classifier** (``num_classes`` given): the last layer's final state (``use_cell_state``:
  with its cell state) -> class logits, or the state itself as features for a decoder such as
  FullyConnectedDecoder (``classify=False``).

The regularisation is AWD-LSTM's (Merity et al., 2017) in OpenSeq2Seq's names: dropout on the
entries of the embedding matrix, on each layer's inputs and outputs (``variational_recurrent``:
one mask per sequence), on the cells' candidate values and DropConnect of their weights
(WeightDropLayerNormBasicLSTMCell), and tied input/output embeddings. Variable names do not
depend on the use, so a classifier takes a language model's embedding and recurrent weights
with ``load_model``.
"""

from __future__ import annotations

import inspect
from typing import Any

import keras
import tensorflow as tf

from open_seq2seq.encoders.encoder import Encoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.rnns.cells import make_cell
from open_seq2seq.parts.rnns.stack import RecurrentStack
from open_seq2seq.parts.rnns.weight_drop import (WeightDropLayerNormBasicLSTMCell, WeightDropLSTM,
                                                 awd_initializer)
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS, fresh
from open_seq2seq.utils.params import AnyType, Param, callable_or_class

_KEEP = "Keep probability of dropout on "
#: Cell keywords the encoder fills from its own params (OpenSeq2Seq's single_cell did too).
_CELL_DROPOUTS = {"dropout_keep_prob": "recurrent_keep_prob",
                  "input_weight_keep_prob": "input_weight_keep_prob",
                  "recurrent_weight_keep_prob": "recurrent_weight_keep_prob",
                  "weight_variational": "weight_variational",
                  "dropout_prob_seed": "dropout_seed"}
_FUSED = (keras.layers.LSTM, keras.layers.GRU)


def _takes(cell: Any, keyword: str) -> bool:
  try:
    return keyword in inspect.signature(cell).parameters
  except (TypeError, ValueError):
    return False


class LMEncoder(Encoder):
  """Embeddings, stacked recurrent layers and an output layer (see the module doc).

  Inputs: ``source_tensors`` = (word ids [batch, time], lengths [batch]). Outputs: language
  model — ``logits`` [batch, time, vocab] (or ``hidden``, ``softmax_weights``,
  ``softmax_bias``, ``num_sampled`` for a sampled softmax in training) and ``outputs``, the
  most likely next words; generation — ``outputs`` [batch, num_tokens_gen] and
  ``final_sequence_lengths``; classifier — ``logits`` [batch, classes] and ``outputs`` (the
  predicted classes), or ``outputs`` = the features with ``classify=False``.
  """

  #: Variables indexed by the vocabulary (mapped by token on load_model): the embedding's
  #: rows and the language-model output's (a classifier's layer is indexed by classes).
  VOCAB_INDEXED = {"embedding": ("input", 0), "output_bias": ("output", 0),
                   "output_layer.kernel": ("output", 1), "output_layer.bias": ("output", 0)}

  PARAMS = {
      "vocab_size": Param((int, None), None, "Vocabulary size (default: the data's)."),
      "emb_size": Param(int, doc="Word embedding size (with weight_tied also the last layer's "
                        "units)."),
      "encoder_layers": Param(int, doc="Number of stacked recurrent layers."),
      "encoder_use_skip_connections": Param(bool, False, "Residual connection around each "
                                            "layer (input and output sizes must match)."),
      "core_cell": Param((callable_or_class, None), None,
                         "Cell of each layer: WeightDropLayerNormBasicLSTMCell, "
                         "keras.layers.LSTMCell, keras.layers.GRUCell."),
      "core_cell_params": Param(dict, {}, "Keyword arguments of core_cell (num_units, "
                                "forget_bias ...)."),
      "use_cudnn_rnn": Param(bool, False, "Fused recurrent layers (cudnn_rnn_type, cuDNN "
                             "kernels on GPUs) of emb_size units each, as in OpenSeq2Seq."),
      "cudnn_rnn_type": Param(AnyType, None, "keras.layers.LSTM or keras.layers.GRU (TF 1: "
                              "tf.contrib.cudnn_rnn.CudnnLSTM / CudnnGRU)."),
      "encoder_dp_input_keep_prob": Param(float, 1.0, _KEEP + "the inputs of every layer "
                                          "but the last."),
      "encoder_dp_output_keep_prob": Param(float, 1.0, _KEEP + "the outputs of every layer "
                                           "but the last."),
      "encoder_last_input_keep_prob": Param(float, 1.0, _KEEP + "the last layer's inputs."),
      "encoder_last_output_keep_prob": Param(float, 1.0, _KEEP + "the last layer's outputs."),
      "encoder_emb_keep_prob": Param(float, 1.0, _KEEP + "the entries of the embedding "
                                     "matrix."),
      "recurrent_keep_prob": Param(float, 1.0, _KEEP + "the cells' candidate values "
                                   "(WeightDropLayerNormBasicLSTMCell)."),
      "input_weight_keep_prob": Param(float, 1.0, "DropConnect keep probability of the cells' "
                                      "input weights (WeightDropLayerNormBasicLSTMCell)."),
      "recurrent_weight_keep_prob": Param(float, 1.0, "DropConnect keep probability of the "
                                          "cells' recurrent weights (same cell)."),
      "weight_variational": Param(bool, False, "The WeightDrop cell's weight_variational "
                                  "(OpenSeq2Seq never implemented it: True is an error)."),
      "variational_recurrent": Param(bool, False, "One dropout mask per sequence on layer "
                                     "inputs and outputs (instead of one per step)."),
      "dropout_seed": Param(int, 1822, "Seed of the dropout masks."),
      "awd_initializer": Param(bool, False, "Cell weights uniform in +-1/sqrt(units) "
                               "(AWD-LSTM) instead of the initializer."),
      "weight_tied": Param(bool, False, "The output layer uses the embedding matrix (the last "
                           "layer gets emb_size units)."),
      "fc_use_bias": Param(bool, True, "Bias in the output layer."),
      "num_sampled": Param((int, None), None, "Training: sampled softmax over this many "
                           "words (BasicSampledSequenceLoss); None: full softmax."),
      "use_cell_state": Param(bool, False, "Classifier: the features are the last layer's "
                              "final output and cell state (else the output alone)."),
      "num_tokens_gen": Param(int, 200, "Inference: words generated after each prompt."),
      "temperature": Param(float, 0.0, "Inference: 0 takes the most likely word (OpenSeq2Seq);"
                           " > 0 samples from softmax(logits / temperature)."),
      "schedule_learning": Param(bool, False, "Scheduled sampling (OpenSeq2Seq's "
                                 "ScheduledEmbeddingTrainingHelper): not supported, True is "
                                 "an error."),
      "sampling_prob": Param(float, 0.0, "Ignored: only schedule_learning used it."),
      "fc_dim": Param((int, None), None, "Ignored: the output size is the vocabulary size, or "
                      "the number of classes of a classifier's data."),
      "seed_tokens": Param((list, None), None, "Ignored: prompts come from the data layer "
                           "(data_layer_params/seed_tokens)."),
      "end_token": Param((int, None), None, "Ignored: generation stops at the data's <eos>."),
      "batch_size": Param((int, None), None, "Ignored: taken from the batches."),
      "time_major": Param(bool, False, "Ignored: batches are always batch-major."),
      "use_swap_memory": Param(bool, False, "Ignored: TF 1 while-loop memory option."),
      "proj_size": Param((int, None), None, "Ignored: OpenSeq2Seq declared it, never used it."),
      "num_groups": Param((int, None), None, "Ignored: OpenSeq2Seq declared it, never used "
                          "it."),
      **INITIALIZER_PARAMS,
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               num_classes: int | None = None, classify: bool = True,
               carry_state: bool = False, end_token: int = 0, mode: str = "train",
               name: str = "encoder", dtype: Any = "float32", initializer: Any = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.vocab_size = resolve_size(p, "vocab_size", vocab_size, "encoder_params")
    self.num_classes = num_classes
    self.classify = classify
    self.end_token = end_token
    if p["schedule_learning"]:
      raise ConfigError("encoder_params/schedule_learning: scheduled sampling is not "
                        "supported; remove it or set it to False")
    if p["temperature"] < 0:
      raise ConfigError(f"encoder_params/temperature: must be >= 0, got {p['temperature']}")
    if p["encoder_layers"] < 1:
      raise ConfigError("encoder_params/encoder_layers: must be at least 1")
    num_sampled = p["num_sampled"]
    if num_sampled is not None and not 0 < num_sampled:
      raise ConfigError(f"encoder_params/num_sampled: must be positive, got {num_sampled}")
    self.sampled = num_classes is None and num_sampled is not None and \
        num_sampled < self.vocab_size
    self.embedding_dropout = self._keep("encoder_emb_keep_prob")
    self.stack = self._make_stack(carry_state)
    policy = self.dtype_policy
    self.output_layer = None
    self.classifier = None
    if num_classes is not None:
      if classify:
        self.classifier = keras.layers.Dense(num_classes, use_bias=p["fc_use_bias"],
                                             kernel_initializer=self.kernel_initializer(),
                                             dtype=policy, name="classifier")
    elif not p["weight_tied"]:
      self.output_layer = keras.layers.Dense(self.vocab_size, use_bias=p["fc_use_bias"],
                                             kernel_initializer=self.kernel_initializer(),
                                             dtype=policy, name="output_layer")

  # ------------------------------------------------------------------ construction
  def _keep(self, key: str) -> float:
    keep = self.params[key]
    if not 0.0 < keep <= 1.0:
      raise ConfigError(f"encoder_params/{key}: a keep probability must be in (0, 1], got "
                        f"{keep}")
    return keep

  def _layer_units(self, last: bool) -> int | None:
    """Units of a layer when the encoder decides them (None: the cell params say)."""
    p = self.params
    if p["use_cudnn_rnn"] or (last and p["weight_tied"]):
      return p["emb_size"]
    return None

  def _make_layer(self, index: int, last: bool) -> keras.layers.Layer:
    p = self.params
    units = self._layer_units(last)
    common = {"return_sequences": True, "return_state": True, "dtype": self.dtype_policy,
              "name": f"rnn_{index}"}
    if p["use_cudnn_rnn"]:
      fused = p["cudnn_rnn_type"]
      if not (isinstance(fused, type) and issubclass(fused, _FUSED)):
        raise ConfigError(f"encoder_params/cudnn_rnn_type: use keras.layers.LSTM or "
                          f"keras.layers.GRU with use_cudnn_rnn, got {fused!r}")
      init = awd_initializer(units) if p["awd_initializer"] else self.kernel_initializer()
      return fused(units, kernel_initializer=init, recurrent_initializer=fresh(init), **common)
    cell_class = p["core_cell"]
    if cell_class is None:
      raise ConfigError("encoder_params/core_cell: set a cell class (e.g. "
                        "WeightDropLayerNormBasicLSTMCell) or use_cudnn_rnn")
    cell_params = dict(p["core_cell_params"])
    if units is not None:
      cell_params.pop("units", None)
      cell_params["num_units"] = units
    size = cell_params.get("num_units", cell_params.get("units"))
    extra: dict[str, Any] = {"dtype": self.dtype_policy, "name": f"cell_{index}"}
    for keyword, key in _CELL_DROPOUTS.items():
      if _takes(cell_class, keyword) and keyword not in cell_params:
        extra[keyword] = p[key] + (index if keyword == "dropout_prob_seed" else 0)
    if "kernel_initializer" not in cell_params and "initializer" not in cell_params:
      init = awd_initializer(size) if p["awd_initializer"] and size else \
          self.kernel_initializer()
      extra["kernel_initializer"] = init
      if _takes(cell_class, "recurrent_initializer"):
        extra["recurrent_initializer"] = fresh(init)
    where = "encoder_params/core_cell_params"
    if _takes(cell_class, "num_units"):  # OpenSeq2Seq's own cells keep TF 1's names
      try:
        cell = cell_class(**cell_params, **extra)
      except TypeError as e:
        raise ConfigError(f"{where}: {cell_class.__name__} rejected the parameters: {e}"
                          ) from None
    else:
      cell = make_cell(cell_class, cell_params, where, **extra)
    if isinstance(cell, WeightDropLayerNormBasicLSTMCell):
      return WeightDropLSTM(cell, **common)  # input projections in one matmul
    return keras.layers.RNN(cell, **common)

  def _make_stack(self, carry_state: bool) -> RecurrentStack:
    p = self.params
    count = p["encoder_layers"]
    inner_in, inner_out = self._keep("encoder_dp_input_keep_prob"), \
        self._keep("encoder_dp_output_keep_prob")
    last_in, last_out = self._keep("encoder_last_input_keep_prob"), \
        self._keep("encoder_last_output_keep_prob")
    for key in ("recurrent_keep_prob", "input_weight_keep_prob",
                "recurrent_weight_keep_prob"):
      self._keep(key)
    layers = [self._make_layer(i, i == count - 1) for i in range(count)]
    return RecurrentStack(layers, [inner_in] * (count - 1) + [last_in],
                          [inner_out] * (count - 1) + [last_out],
                          residual=p["encoder_use_skip_connections"],
                          variational=p["variational_recurrent"], carry_state=carry_state,
                          seed=p["dropout_seed"], dtype=self.dtype_policy, name="stack")

  @classmethod
  def ignored_combinations(cls, params: dict[str, Any]) -> list[str]:
    """Keys that change nothing with the other settings (one notice line each)."""
    lines = []
    if params.get("use_cudnn_rnn"):
      for key in ("recurrent_keep_prob", "input_weight_keep_prob",
                  "recurrent_weight_keep_prob"):
        if params.get(key, 1.0) != 1.0:
          lines.append(f"{key}: ignored: fused layers (use_cudnn_rnn) have no cell dropout")
      if params.get("core_cell_params"):
        lines.append("core_cell_params: ignored: fused layers (use_cudnn_rnn) have emb_size "
                     "units, as in OpenSeq2Seq")
    return lines

  def build(self, input_shape: Any) -> None:
    emb = self.params["emb_size"]
    self.embedding = self.add_weight(name="embedding", shape=(self.vocab_size, emb),
                                     initializer=self.kernel_initializer())
    if self.num_classes is None and self.params["weight_tied"] and self.params["fc_use_bias"]:
      self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                         initializer="zeros")
    else:
      self.output_bias = None
    super().build(input_shape)

  # ------------------------------------------------------------------ pieces
  def _embedding_matrix(self, training: bool | None) -> tf.Tensor:
    matrix = tf.cast(self.embedding, self.compute_dtype)
    keep = self.embedding_dropout
    if training and keep < 1.0:
      matrix = tf.nn.dropout(matrix, rate=1.0 - keep)
    return matrix

  def _softmax_weights(self) -> tuple[tf.Tensor, tf.Tensor | None]:
    """(weights [vocab, units], bias [vocab] or None) of the language-model output."""
    if self.output_layer is None:
      return self.embedding, self.output_bias
    layer = self.output_layer
    return tf.transpose(layer.kernel), layer.bias

  def lm_logits(self, hidden: tf.Tensor) -> tf.Tensor:
    """Logits over the vocabulary for hidden states [..., units]."""
    if self.output_layer is not None:
      return self.output_layer(hidden)
    logits = tf.matmul(hidden, tf.cast(self.embedding, hidden.dtype), transpose_b=True)
    if self.output_bias is not None:
      logits += tf.cast(self.output_bias, logits.dtype)
    return logits

  # ------------------------------------------------------------------ call
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    ids, lengths = input_dict["source_tensors"][:2]
    ids = tf.cast(ids, tf.int32)
    lengths = tf.cast(lengths, tf.int32)
    if self.num_classes is None and self.mode == "infer":
      return self.generate(ids, lengths)
    embedded = tf.gather(self._embedding_matrix(training), ids)
    if self.num_classes is not None:
      mask = tf.sequence_mask(lengths, tf.shape(ids)[1])
      _, finals = self.stack(embedded, step_mask=mask, training=training)
      last = finals[-1]
      features = tf.concat([last[0], last[1]], -1) if self.params["use_cell_state"] and \
          len(last) > 1 else last[0]
      if self.classifier is None:
        return {"outputs": features}
      logits = tf.cast(self.classifier(features), tf.float32)
      return {"logits": logits, "outputs": tf.argmax(logits, -1, output_type=tf.int32)}
    # Language-model chunks are full length (no mask): every step is a real word.
    hidden, _ = self.stack(embedded, training=training)
    if training and self.sampled:
      weights, bias = self._softmax_weights()
      return {"hidden": hidden, "softmax_weights": weights, "softmax_bias": bias,
              # a tensor: Keras passes only tensors between layers (the loss reads it back)
              "num_sampled": tf.constant(self.params["num_sampled"], tf.int32)}
    logits = self.lm_logits(hidden)
    return {"logits": logits, "outputs": tf.argmax(logits, -1, output_type=tf.int32)}

  def generate(self, ids: tf.Tensor, lengths: tf.Tensor) -> dict:
    """Reads the prompts, then generates ``num_tokens_gen`` words per row.

    Returns ``outputs`` [batch, num_tokens_gen] int32 (``<eos>`` after a row has ended) and
    ``final_sequence_lengths``: generated words before the first ``<eos>``.
    """
    embedding = self._embedding_matrix(False)  # cast once, not at every generated word
    embedded = tf.gather(embedding, ids)
    mask = tf.sequence_mask(lengths, tf.shape(ids)[1])
    hidden, states = self.stack(embedded, step_mask=mask, training=False)
    last = tf.gather(hidden, tf.maximum(lengths - 1, 0), batch_dims=1)
    steps = self.params["num_tokens_gen"]
    temperature = self.params["temperature"]
    batch = tf.shape(ids)[0]
    seed = tf.constant([self.params["dropout_seed"], 0], tf.int32)

    def pick(hidden_t: tf.Tensor, t: tf.Tensor) -> tf.Tensor:
      logits = tf.cast(self.lm_logits(hidden_t), tf.float32)
      if temperature == 0.0:
        return tf.argmax(logits, -1, output_type=tf.int32)
      draw = tf.random.stateless_categorical(logits / temperature, 1,
                                             seed=seed + tf.stack([0, t]))
      return tf.cast(draw[:, 0], tf.int32)

    def body(t, token, states, done, words, length):
      words = words.write(t, tf.where(done, self.end_token, token))
      ended = done | tf.equal(token, self.end_token)
      length += tf.cast(~ended, tf.int32)
      x = tf.gather(embedding, token)
      out, states = self.stack.step(x, states)
      return t + 1, pick(out, t + 1), states, ended, words, length

    start = (tf.constant(0), pick(last, tf.constant(0)), states,
             tf.zeros([batch], tf.bool), tf.TensorArray(tf.int32, size=steps),
             tf.zeros([batch], tf.int32))
    _, _, _, _, words, length = tf.while_loop(lambda t, *_: t < steps, body, start)
    return {"outputs": tf.transpose(words.stack()), "final_sequence_lengths": length}


__all__ = ["LMEncoder"]
