"""Base model: owns the components a config names and the top-level parameters.

The model wires its components: it builds the data layer, reads what the data layer
provides (``data_layer.description``) and hands sizes, dtype and shared layers to the
encoder, decoder and loss, which never hold the model. A model family (Text2Text,
Speech2Text, ...) subclasses :class:`Model`, says what its components receive
(:meth:`Model.component_kwargs`, :meth:`Model.connect_components`) and implements the
hooks that turn numpy batches and outputs into printed samples, eval metrics and inference
lines. Training, distribution, precision and checkpoints live in ``open_seq2seq.training``
and never change for a new family.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import DataDescription
from open_seq2seq.errors import ConfigError
from open_seq2seq.outputs import InferenceOutput, SampleSummary, TextLines
from open_seq2seq.parts import data_init
from open_seq2seq.utils.component import accepted_kwargs
from open_seq2seq.utils.initializers import make_initializer
from open_seq2seq.utils.params import AnyType, Configurable, Param, callable_or_class


@dataclasses.dataclass(frozen=True)
class UpdateGroup:
  """One optimizer's share of a training step (:mod:`open_seq2seq.training.update_group`).

  Attributes:
    name: the group's name: the key of its settings under the run's ``optimizers``.
    layers: the names (in :attr:`Model.named_layers`) of the layers whose trainable
      variables the group updates; None: every layer that no other group names.
    loss: ``(batch, training) -> (loss_sum, weight, outputs)`` with float32 terms, what the
      group's optimizer minimises (gradients of the sum, divided by the weight summed over
      every replica, as :meth:`Model.compute_loss`).
  """

  name: str
  layers: tuple[str, ...] | None
  loss: Callable[..., tuple]


class Model(Configurable):
  """A sequence model made of a data layer, an encoder, a decoder and a loss.

  ``PARAMS`` declares what shapes the model: its components and their params, the dtype,
  the batch size its data layer reads and the seed. How the model is trained (steps,
  optimizer, checkpoints, logs, devices) is the run's (``training/run_params.py``): the
  model keeps only its own keys of the config it is given.

  Args:
    params: the validated config of this mode (top-level keys with defaults filled in and
      nested component params validated), as returned by ``config.resolve_config``.
    mode: "train", "eval", "infer" or "interactive_infer": picks how the decoder runs.
  """

  PARAMS = {
      # --- components
      "data_layer": Param(callable_or_class, doc="Data layer class."),
      "data_layer_params": Param(dict, {}, "Parameters of the data layer."),
      "encoder": Param(callable_or_class, doc="Encoder class."),
      "encoder_params": Param(dict, {}, "Parameters of the encoder."),
      "decoder": Param(callable_or_class, doc="Decoder class."),
      "decoder_params": Param(dict, {}, "Parameters of the decoder."),
      "loss": Param((callable_or_class, None), None, "Loss class (not needed to infer)."),
      "loss_params": Param(dict, {}, "Parameters of the loss."),
      "initializer": Param(AnyType, None,
                           "Default kernel initializer of every component that sets none "
                           "(Keras name, class or instance; TF 1's variable-scope default)."),
      "initializer_params": Param(dict, {}, "Keyword arguments of the initializer class."),
      # --- data and precision
      "batch_size_per_gpu": Param(int, doc="Examples per device per step."),
      "eval_batch_size_per_gpu": Param((int, None), None, "Examples per device in eval/infer "
                                       "(default: batch_size_per_gpu)."),
      "random_seed": Param((int, None), None, "Seed of TensorFlow, NumPy and Python RNGs."),
      "dtype": Param(AnyType, "float32",
                     "float32, float16, mixed, mixed_float16 or mixed_bfloat16 (or a tf.DType)."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", num_workers: int = 1,
               worker_id: int = 0):
    declared = self.declared_params()
    self.params = {key: value for key, value in params.items() if key in declared}
    self.mode = mode
    #: The optimizer's update counter (a variable) while training, else None: for a family
    #: whose loss follows a schedule (guided attention's weight). Set by the train step.
    self.training_step: tf.Variable | None = None
    self._variables_created = False
    # The data layer comes first: its description carries the vocabulary sizes (and
    # alphabets, feature counts) that the encoder, decoder and loss are built with.
    self.data_layer = self.make_data_layer(self.params, mode, num_workers, worker_id)
    self.description: DataDescription = self.data_layer.description
    self.build_components(self.description)

  # ----------------------------------------------------------------- components
  def make_data_layer(self, params: dict[str, Any], mode: str, num_workers: int = 1,
                      worker_id: int = 0):
    """Builds the data layer described by ``params`` (a validated mode config).

    ``mode`` may be "interactive_infer": the layer then reads no dataset files.
    """
    if mode == "train":
      batch_size = params["batch_size_per_gpu"]
    else:
      batch_size = params["eval_batch_size_per_gpu"] or params["batch_size_per_gpu"]
    return params["data_layer"](params["data_layer_params"], mode=mode, batch_size=batch_size,
                                num_workers=num_workers, worker_id=worker_id,
                                random_seed=params["random_seed"])

  def build_components(self, description: DataDescription) -> None:
    """Builds the encoder, decoder and loss from the config, then connects them.

    Encoder and decoder get the run's ``mode`` ("infer" for interactive_infer), the
    model's ``dtype`` and, when the config sets the top-level ``initializer``, that
    initializer (their default for kernels whose own params set none); every component also
    gets the keywords of :meth:`component_kwargs` that its constructor names.
    """
    mode = "infer" if self.mode == "interactive_infer" else self.mode
    layer_kwargs = {"mode": mode, "dtype": self.params["dtype"]}
    initializer = make_initializer(self.params["initializer"], self.params["initializer_params"])
    for slot in ("encoder", "decoder"):
      kwargs = dict(layer_kwargs)
      if initializer is not None:
        if not accepted_kwargs(self.params[slot], {"initializer": initializer}):
          raise ConfigError(f"initializer: {self.params[slot].__name__} (the {slot}) takes no "
                            f"initializer keyword, so the model-level initializer cannot reach "
                            f"it; set {slot}_params/initializer instead")
        kwargs["initializer"] = initializer
      setattr(self, slot, self.build_component(slot, description, **kwargs))
    self.loss = None
    if self.params["loss"] is not None:
      self.loss = self.build_component("loss", description)
    self.connect_components()

  def build_component(self, slot: str, description: DataDescription, **kwargs: Any) -> Any:
    """Instance of the config's ``slot`` class ("encoder", "decoder", "loss") with its params."""
    component = self.params[slot]
    offered = accepted_kwargs(component, self.component_kwargs(slot, description))
    return component(self.params[f"{slot}_params"], **kwargs, **offered)

  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    """What the family offers the component of ``slot`` besides its params (sizes ...).

    Args:
      slot: "encoder", "decoder" or "loss".
      description: what the data layer provides.

    Returns:
      Keyword arguments; a component receives those its constructor names.
    """
    return {}

  def connect_components(self) -> None:
    """Links built components to each other (e.g. shared embeddings); nothing by default."""

  @property
  def layers(self) -> list[keras.layers.Layer]:
    return list(self.named_layers.values())

  @property
  def named_layers(self) -> dict[str, keras.layers.Layer]:
    """The layers holding the model's variables, by the name checkpoints use."""
    names = {"encoder": self.encoder, "decoder": self.decoder}
    if isinstance(self.loss, keras.layers.Layer):
      names["loss"] = self.loss
    return names

  @property
  def trainable_variables(self) -> list:
    return [v for layer in self.layers for v in layer.trainable_variables]

  @property
  def variables(self) -> list:
    return [v for layer in self.layers for v in layer.variables]

  # ----------------------------------------------------------------- computation
  def create_variables(self, batch: dict) -> None:
    """Creates every variable by running the model once on ``batch`` (idempotent)."""
    if self._variables_created:
      return
    if "target_tensors" in batch and self.loss is not None:
      self.compute_loss(batch, training=False)
    else:
      self.forward(batch, training=False)
    self._variables_created = True

  def data_init_layers(self) -> list[keras.layers.Layer]:
    """The layers taking part in data-dependent initialization (a component's layers whose
    ``data_init`` is set; see :mod:`open_seq2seq.parts.data_init`), in a fixed order."""
    found = []
    for layer in self.layers:
      for sub in layer._flatten_layers(include_self=True):  # pylint: disable=protected-access
        if getattr(sub, "data_init", False) and hasattr(sub, "data_init_variables"):
          found.append(sub)
    return found

  def data_init_values(self, batch: dict, replica_sum: Callable[[list], list]
                       ) -> list[tf.Tensor]:
    """One data-dependent initialization pass: the forward pass (no dropout) over ``batch``,
    each opted-in layer measuring its pre-activation with ``replica_sum`` summing the
    moments over every replica. Returns the new values of every layer's
    ``data_init_variables()``, flattened in :meth:`data_init_layers` order (the caller
    assigns them)."""
    with data_init.recording(replica_sum) as init:
      self.forward(batch, training=False)
    return init.values_of(self.data_init_layers())

  def forward(self, batch: dict, training: bool) -> dict:
    """Encoder then decoder with teacher forcing (targets given)."""
    encoder_output = self.encoder({"source_tensors": batch["source_tensors"]},
                                  training=training)
    decoder_input = {"encoder_output": encoder_output}
    if "target_tensors" in batch:
      decoder_input["target_tensors"] = batch["target_tensors"]
    return self.decoder(decoder_input, training=training)

  def compute_loss(self, batch: dict, training: bool) -> tuple[tf.Tensor, tf.Tensor, dict]:
    """Returns ``(loss_sum, weight, decoder_output)``; loss terms are float32."""
    decoder_output = self.forward(batch, training)
    loss_sum, weight = self.loss.compute_loss({
        "decoder_output": decoder_output, "target_tensors": batch["target_tensors"]})
    return tf.cast(loss_sum, tf.float32), tf.cast(weight, tf.float32), decoder_output

  def update_groups(self) -> list[UpdateGroup]:
    """The updates of a training step, in order: one group over every variable,
    minimising :meth:`compute_loss`. An adversarial family returns a discriminator group and
    then a generator group; the last group's update counter is the global step."""
    return [UpdateGroup("model", None, self.compute_loss)]

  def predict(self, batch: dict) -> dict:
    """Predictions without targets (beam search, greedy CTC ...)."""
    inputs = {k: v for k, v in batch.items() if k != "target_tensors"}
    return self.forward(inputs, training=False)

  def eval_outputs(self, batch: dict) -> dict:
    """What an eval/infer pass needs of one batch: ``predictions`` and, when the batch has
    targets and the model a loss, ``loss_sum`` and ``weight``.

    :meth:`predict` and :meth:`compute_loss` run separately (a translation's beam search is
    not the teacher-forced pass of its loss), unless :attr:`predictions_from_loss_pass`: then
    the loss's forward pass gives the predictions too, once.
    """
    has_loss = "target_tensors" in batch and self.loss is not None
    if has_loss and self.predictions_from_loss_pass:
      loss_sum, weight, outputs = self.compute_loss(batch, training=False)
      return {"predictions": outputs, "loss_sum": loss_sum, "weight": weight}
    out = {"predictions": self.predict(batch)}
    if has_loss:
      out["loss_sum"], out["weight"], _ = self.compute_loss(batch, training=False)
    return out

  # ----------------------------------------------------------------- family hooks (numpy)
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    """Human-readable lines (source / reference / prediction) for the console."""
    return []

  def sample_summaries(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                       ) -> list[SampleSummary]:
    """Images, audio or text of the same samples for TensorBoard (e.g. an attention map)."""
    return []

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per-example eval results ``[(id, result), ...]`` gathered across batches/workers."""
    return []

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    """Metrics of a whole eval pass from the results of :meth:`evaluate` in file order."""
    return {}

  #: Whether the teacher-forced pass of the loss also gives the eval predictions (classifiers,
  #: language models): eval then runs one forward pass per batch (:meth:`eval_outputs`).
  predictions_from_loss_pass: bool = False

  #: Name of the metric used to select the best checkpoint and whether higher is better.
  best_metric: tuple[str, bool] = ("loss", False)
  #: The best metric's value for a model that learned nothing (WER 1.0, BLEU 0), or None: a
  #: run that ends no better gets a warning (training/trainer.py).
  chance_level: float | None = None

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per-example inference results ``[(id, result), ...]`` gathered across workers."""
    return []

  def interactive_outputs(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                          ) -> list[InferenceOutput]:
    """Files ``interactive_infer`` writes for the batch (e.g. synthesized audio; relative
    paths are relative to the run's directory); none here."""
    return []

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    """What ``interactive_infer`` prints for each input of the batch.

    ``resolve`` maps a path of :meth:`interactive_outputs` (relative to the run's directory)
    to where the toolkit wrote it, for lines that name the files.
    """
    return [str(result) for _, result in sorted(self.infer(batch, outputs), key=lambda r: r[0])]

  def score_inference(self, results: list) -> dict[str, float]:
    """Metrics of inference results against references the data layer knows (if any).

    Runs on the chief, on every worker's :meth:`scoring_results`, in input order.
    """
    return {}

  def scoring_results(self, results: list) -> list:
    """What :meth:`score_inference` needs of some :meth:`infer` results: sent to the chief.

    All of them by default; families whose results are bulky (audio, logits) keep only what
    scoring reads, or nothing when they do not score.
    """
    return results

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    """The outputs to write, formatted from some of this worker's :meth:`infer` results.

    Called on every worker for each chunk of its own results (a few batches, ids in any
    order), never with another worker's: formatting and vocoding scale with the workers.
    The toolkit's :class:`~open_seq2seq.output_sink.OutputSink` writes the chunks on the chief,
    records in input order, files atomically. An output without a path goes to
    ``--infer_output_file``; other paths are relative to the run's directory (e.g.
    ``infer_audio/<name>.wav``): models never choose where a run's files go.
    """
    return [TextLines(results)]

  def serving_adapter(self):
    """The raw-inputs -> outputs wrapper of an exported model (``--mode=export``): a
    :class:`~open_seq2seq.serving.adapter.ServingAdapter`. Families override it."""
    raise ConfigError(f"{type(self).__name__} models cannot be exported yet "
                      f"(--mode=export)")

  def extra_serving_signatures(self):
    """Signatures an export adds beside ``serving_default`` (``--mode=export``): None, or a
    ``tf.Module`` with ``signatures()`` (name -> concrete function) and
    ``describe_signatures()`` (name -> inputs/outputs), such as a streaming recognizer's."""
    return None
