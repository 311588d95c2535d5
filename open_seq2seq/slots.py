"""One table of pluggable slots: the config keys that name a part and the keys that configure it.

A slot pairs a choice key (``encoder``) with its params key (``encoder_params``) and says
where the chosen part's declarations come from: a component's ``PARAMS``, the optimizer's
signature, a policy's signature and docstring, the loss scaler's ``PARAMS`` ... The same
table :data:`SLOTS` drives

* validation: :func:`validate_slots`, called once by ``config.resolve_config`` before
  anything is built;
* command-line overrides (``--encoder_params/num_layers=2``): :func:`chosen_declarations`;
* ``run.py --help_params``: :func:`help_params`;
* the generated ``docs/config_reference.md`` (``open_seq2seq.reference``), which lists
  each slot's documented choices (:attr:`Slot.catalog`).

Adding a slot means adding a row here (and declaring its two keys on the model).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
from typing import Any, Callable, Mapping

from open_seq2seq.errors import ConfigError
from open_seq2seq.optimizer_groups import validate_optimizer_groups
from open_seq2seq.utils.params import (Configurable, DeclaredDict, DeclaredList, Param,
                                       format_params_table, validate_params)
from open_seq2seq.utils.signatures import signature_params

Declarations = dict[str, Param]


@dataclasses.dataclass(frozen=True)
class Choice:
  """A documented choice of a slot: a reference section titled ``title``."""

  title: str
  value: Any
  doc: str = ""


@dataclasses.dataclass(frozen=True)
class Slot:
  """One pluggable part of a model.

  Attributes:
    name: the config key naming the part, e.g. ``"encoder"``.
    params_key: the config key of its parameters, e.g. ``"encoder_params"``.
    title: heading of the slot's section in the reference.
    declarations: ``declarations(choice)``: the keys ``choice`` takes, or None when it
      declares none (a user's plain function): its params are then not checked.
    catalog: the documented choices, for the reference.
    partial: the params are keyword arguments that may be completed later (the trainer
      fills ``lr_policy_params/decay_steps``): unknown keys and types are checked, missing
      keys are not, and no defaults are added.
    validator: ``validator(choice, params) -> params`` replacing the generic check, for
      slots with rules of their own (TF 1 spellings of optimizer keys, scaler ranges).
    note: one paragraph shown above the slot's tables.
  """

  name: str
  params_key: str
  title: str
  declarations: Callable[[Any], Declarations | None]
  catalog: Callable[[], list[Choice]]
  partial: bool = False
  validator: Callable[[Any, Mapping | None], dict] | None = None
  note: str = ""

  def owner(self, choice: Any) -> str:
    """How error messages and help name ``choice``."""
    if isinstance(choice, str):
      return choice
    return getattr(choice, "__name__", type(choice).__name__)

  def validate(self, choice: Any, params: Mapping | None) -> dict:
    """``params`` checked against ``choice`` (defaults filled in unless :attr:`partial`).

    Raises:
      ConfigError: naming ``params_key/...``; also when params are given but no part is
        chosen to take them.
    """
    if choice is None:
      if params:
        raise ConfigError(f"{self.params_key}: given, but {self.name} is None; set "
                          f"{self.name} or remove {self.params_key}")
      return dict(params or {})
    if self.validator is not None:
      return self.validator(choice, params)
    declared = self.declarations(choice)
    if declared is None:
      return dict(params or {})
    return validate_params(params, declared, self.params_key, self.owner(choice),
                           partial=self.partial)


# ----------------------------------------------------------------------------- declarations
def _component_declarations(klass: Any) -> Declarations | None:
  return klass.declared_params() if hasattr(klass, "declared_params") else None


def _optimizer_declarations(optimizer: Any) -> Declarations:
  from open_seq2seq.optimizers import optimizer_declarations
  return optimizer_declarations(optimizer)


def _validate_optimizer(optimizer: Any, params: Mapping | None) -> dict:
  from open_seq2seq.optimizers import validate_optimizer_params
  return validate_optimizer_params(optimizer, params, "optimizer_params")


def _lr_policy_declarations(policy: Any) -> Declarations | None:
  from open_seq2seq.optimizers import policy_declarations
  return policy_declarations(policy) if callable(policy) else None


def _regularizer_declarations(regularizer: Any) -> Declarations | None:
  from open_seq2seq.utils.regularizers import regularizer_declarations
  return regularizer_declarations(regularizer) if callable(regularizer) else None


def _loss_scaling_declarations(loss_scaling: Any) -> Declarations | None:
  from open_seq2seq.training.loss_scaling import loss_scaling_declarations
  return loss_scaling_declarations(loss_scaling)


def _validate_loss_scaling(loss_scaling: Any, params: Mapping | None) -> dict:
  from open_seq2seq.training.loss_scaling import validate_loss_scaling_params
  return validate_loss_scaling_params(loss_scaling, params)


# ----------------------------------------------------------------------------- catalogs
def first_doc_line(obj: Any) -> str:
  """The first line of `obj`'s docstring, with Markdown backticks."""
  return (inspect.getdoc(obj) or "").split("\n")[0].replace("``", "`")


def package_choices(package: str) -> list[Choice]:
  """The public Configurable classes of ``open_seq2seq.<package>`` (its ``__all__``)."""
  module = importlib.import_module(f"open_seq2seq.{package}")
  choices = []
  for name in getattr(module, "__all__", []):
    obj = getattr(module, name)
    if inspect.isclass(obj) and issubclass(obj, Configurable):
      choices.append(Choice(f"{obj.__module__}.{obj.__name__}", obj, first_doc_line(obj)))
  return choices


def _optimizer_choices() -> list[Choice]:
  from open_seq2seq.optimizers import OPTIMIZERS, SUMMARIES
  return [Choice(name, name, SUMMARIES[name]) for name in OPTIMIZERS]


def _lr_policy_choices() -> list[Choice]:
  from open_seq2seq.optimizers import POLICIES
  return [Choice(name, policy, first_doc_line(policy)) for name, policy in POLICIES.items()]


def _regularizer_choices() -> list[Choice]:
  from open_seq2seq.utils.regularizers import REGULARIZERS
  return [Choice(f"keras.regularizers.{r.__name__}", r, first_doc_line(r))
          for r in REGULARIZERS]


def _initializer_declarations(initializer: Any) -> Declarations | None:
  from open_seq2seq.utils.initializers import initializer_class
  import keras
  klass = initializer_class(initializer)
  if klass is None:
    return None
  declared = signature_params(klass)
  for key, param in declared.items():
    if not param.doc:  # Keras documents some arguments only in prose
      declared[key] = dataclasses.replace(param, doc=f"{klass.__name__} argument (see Keras).")
  if klass in (keras.initializers.GlorotUniform, keras.initializers.GlorotNormal):
    declared["uniform"] = Param(bool, True, "TF 1 xavier_initializer's spelling: True for "
                                "GlorotUniform, False for GlorotNormal.")
  return declared


def _initializer_choices() -> list[Choice]:
  import keras
  from open_seq2seq.utils.initializers import DOCUMENTED
  return [Choice(f"keras.initializers.{name}", getattr(keras.initializers, name),
                 first_doc_line(getattr(keras.initializers, name))) for name in DOCUMENTED]


def _loss_scaling_choices() -> list[Choice]:
  from open_seq2seq.training.loss_scaling import ALGORITHMS, LossScaler
  choices = [Choice("<number>", 1.0, first_doc_line(LossScaler))]
  for scaler in ALGORITHMS.values():
    name = scaler.__name__[:-len("Scaler")]
    choices.append(Choice(name, name, first_doc_line(scaler)))
  return choices


# ----------------------------------------------------------------------------- the table
def _component(name: str, title: str, package: str) -> Slot:
  return Slot(name, f"{name}_params", title, _component_declarations,
              functools.partial(package_choices, package))


SLOTS: tuple[Slot, ...] = (
    _component("data_layer", "Data layers", "data"),
    _component("encoder", "Encoders", "encoders"),
    _component("decoder", "Decoders", "decoders"),
    _component("loss", "Losses", "losses"),
    Slot("optimizer", "optimizer_params", "Optimizers", _optimizer_declarations,
         _optimizer_choices, validator=_validate_optimizer,
         note="Names are case-insensitive; an optimizer class works too. TF 1 spellings "
              "(`beta1`, `use_nesterov`, RMSProp's `decay`) and Keras ones are both accepted; "
              "with an `lr_policy`, `learning_rate` belongs in `lr_policy_params`. Gradient "
              "clipping, accumulation and loss scaling are top-level keys."),
    Slot("lr_policy", "lr_policy_params", "Learning-rate policies", _lr_policy_declarations,
         _lr_policy_choices, partial=True,
         note="`decay_steps` defaults to the run's length and `steps_per_epoch` is filled in "
              "for runs measured in epochs; other required keys must be given. `lr_policy` may "
              "also be your own function `f(global_step, ...)`."),
    Slot("regularizer", "regularizer_params", "Regularizers", _regularizer_declarations,
         _regularizer_choices, partial=True,
         note="Any Keras regularizer class, instance or factory; applied to kernels and "
              "embeddings (not to biases or normalization parameters)."),
    Slot("initializer", "initializer_params", "Initializers", _initializer_declarations,
         _initializer_choices, partial=True,
         note="The model-level `initializer` is the kernel initializer of every encoder and "
              "decoder whose own params set none (TF 1's variable-scope default); a class "
              "(with `initializer_params`), a Keras name such as `'he_normal'`, or an "
              "instance."),
    Slot("loss_scaling", "loss_scaling_params", "Loss scaling", _loss_scaling_declarations,
         _loss_scaling_choices, validator=_validate_loss_scaling,
         note="`loss_scaling` is a number (a static scale), `'Backoff'` or `'LogMax'` (any "
              "case); only the automatic scalers take `loss_scaling_params`."),
)


# ----------------------------------------------------------------------------- the schema
class Schema:
  """What a config is checked against: the run's keys by group, the slot table and, from
  them, a model's top-level keys. This one reads the code (:data:`CODE`);
  ``config_static_slots.StaticSchema`` reads the parameter index, so that the checks
  (:func:`validate_slots`, ``config.resolve_config``, ``overrides.apply_overrides``) and
  :func:`help_params` run unchanged before TensorFlow is imported."""

  def run_groups(self) -> dict[str, Declarations]:
    """The run's keys by group (:data:`open_seq2seq.training.run_params.GROUPS`)."""
    from open_seq2seq.training.run_params import GROUPS
    return GROUPS

  def slot_table(self) -> tuple[Slot, ...]:
    return SLOTS  # looked up at each call: a test may add a row

  def top_level(self, base_model: type) -> Declarations:
    """The keys a flat config file may set at its top level: the run's and the model
    class's, which may not declare a run key again."""
    run = {key: param for group in self.run_groups().values() for key, param in group.items()}
    declared = base_model.declared_params()
    clash = sorted(set(declared) & set(run))
    if clash:
      raise ConfigError(f"{base_model.__name__}: declares {clash[0]}, a key of the run "
                        f"(training/run_params.py); a model declares only what shapes it")
    return {**run, **declared}

  def slot_of(self, params_key: str) -> Slot | None:
    """The slot whose params key is ``params_key`` (``"encoder_params"``), if any."""
    return next((slot for slot in self.slot_table() if slot.params_key == params_key), None)


#: The schema the code declares.
CODE = Schema()


def top_level_declarations(base_model: type) -> Declarations:
  """:meth:`Schema.top_level` of the code."""
  return CODE.top_level(base_model)


def slot_of(params_key: str) -> Slot | None:
  """:meth:`Schema.slot_of` of the code."""
  return CODE.slot_of(params_key)


def chosen_declarations(slot: Slot, config: Mapping) -> tuple[Declarations | None, str]:
  """``(declarations, owner)`` of the part ``config`` chooses for ``slot``.

  ``(None, "")`` when nothing is chosen yet (an override may set the choice later; the
  config is validated after every override).
  """
  choice = config.get(slot.name)
  if choice is None:
    return None, ""
  return slot.declarations(choice), slot.owner(choice)


def validate_slots(params: Mapping[str, Any], schema: Schema = CODE) -> dict:
  """``params`` with every slot's params validated against the part the config chooses.

  Args:
    params: a config whose top-level keys the model class has validated.
    schema: where the slots come from.

  Raises:
    ConfigError: naming the full key path of the first problem.
  """
  result = dict(params)
  for slot in schema.slot_table():
    if slot.name in result or slot.params_key in result:
      result[slot.params_key] = slot.validate(result.get(slot.name),
                                              result.get(slot.params_key))
  if result.get("optimizers") is not None:  # the update groups' own optimizer settings
    run = {key: param for group in schema.run_groups().values() for key, param in group.items()}
    result["optimizers"] = validate_optimizer_groups(result, schema.slot_table(), run)
  return result


def ignored_settings(base_model: type, config: Mapping[str, Any]) -> list[str]:
  """One line per key the config sets, to another value than its default, that is
  accepted but changes nothing.

  Such keys keep OpenSeq2Seq configs loading (``remove_padding``, ``trie_path`` ...); their
  declaration's doc starts with ``"Ignored: "`` and the reason (:attr:`Param.ignored`). The
  default is what the toolkit does anyway, so setting it needs no notice.
  Looks at the top-level keys, every chosen part's params and the declared dicts and lists
  nested in them. A part may also report keys that change nothing only beside another
  setting: a classmethod ``ignored_combinations(params) -> ["key: ignored: why", ...]``, and
  the model class one taking the whole config (keys that change nothing in its family).
  """
  lines: list[str] = []

  def walk(given: Any, declared: Any, prefix: str) -> None:
    if isinstance(declared, DeclaredList) and isinstance(given, list):
      for index, item in enumerate(given):
        walk(item, declared.item.fields, f"{prefix}/{index}")
      return
    if isinstance(declared, DeclaredDict):
      declared = declared.fields
    if not isinstance(given, Mapping) or not isinstance(declared, Mapping):
      return
    for key, value in given.items():
      param = declared.get(key)
      if param is None:
        continue
      path = f"{prefix}/{key}" if prefix else key
      if param.ignored:
        if not _same(value, param.default):
          lines.append(f"{path}: ignored: {param.ignored}")
      elif param.nested() is not None:
        walk(value, param.nested(), path)

  walk(config, top_level_declarations(base_model), "")
  # keys of the parts that change nothing with this model family
  family = getattr(base_model, "ignored_combinations", None)
  if callable(family):
    lines += family(config)
  for slot in SLOTS:
    declared, _ = chosen_declarations(slot, config)
    if declared is not None:
      walk(config.get(slot.params_key) or {}, declared, slot.params_key)
      # keys that work alone but change nothing beside another setting
      combinations = getattr(config.get(slot.name), "ignored_combinations", None)
      if callable(combinations):
        lines += [f"{slot.params_key}/{line}"
                  for line in combinations(config.get(slot.params_key) or {})]
  return lines


def _same(value: Any, default: Any) -> bool:
  try:
    return bool(value == default)
  except Exception:  # pylint: disable=broad-except  (arrays and the like: not the default)
    return False


def help_params(base_model: type, config: Mapping[str, Any], schema: Schema = CODE) -> str:
  """Markdown tables of the keys of ``base_model``, of the run and of every part ``config``
  chooses."""
  sections = [f"## {base_model.__name__} (top-level keys)\n",
              format_params_table(base_model.declared_params())]
  for title, declared in schema.run_groups().items():
    sections += [f"\n## Run: {title} (top-level keys)\n", format_params_table(declared)]
  for slot in schema.slot_table():
    declared, owner = chosen_declarations(slot, config)
    if declared is None:
      continue
    sections.append(f"\n## {slot.params_key}: {owner}\n")
    if slot.note:
      sections.append(slot.note + "\n")
    sections.append(format_params_table(declared))
  return "\n".join(sections)


__all__ = ["Choice", "Slot", "SLOTS", "Schema", "CODE", "top_level_declarations", "slot_of",
           "chosen_declarations", "validate_slots", "ignored_settings", "help_params",
           "package_choices", "first_doc_line"]
