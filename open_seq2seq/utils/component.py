"""The Keras-layer base shared by encoders and decoders, and how they receive sizes.

Components never hold the model: the model reads its data layer's description and hands
each component what it needs (``dtype=``, ``vocab_size=`` ...) as constructor keywords.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import keras

from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.regularizers import make_regularizer
from open_seq2seq.utils import initializers, keras_compat
from open_seq2seq.utils.params import AnyType, Configurable, Param, callable_or_class
from open_seq2seq.utils.precision import dtype_policy


def accepted_kwargs(component: Callable, offered: Mapping[str, Any]) -> dict[str, Any]:
  """The keyword arguments of ``offered`` that ``component``'s constructor names.

  A family offers every component of a slot the same inputs (a Text2Text loss is offered
  ``vocab_size``); each component takes those it declares, so a loss that needs no
  vocabulary size does not have to accept one. Only offers are filtered: what the caller
  requires (``mode``, ``dtype``, ``name``, an ``initializer``) is passed as is, so a
  constructor that does not name it fails with a TypeError naming the class and keyword.
  A constructor with ``**kwargs`` is offered everything and must refuse what it cannot use
  (Keras layers do).
  """
  try:
    parameters = inspect.signature(component).parameters.values()
  except (TypeError, ValueError):  # no introspectable signature: offer everything
    return dict(offered)
  if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
    return dict(offered)
  names = {p.name for p in parameters
           if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
  return {key: value for key, value in offered.items() if key in names}


def resolve_size(params: dict[str, Any], key: str, given: int | None, where: str) -> int:
  """``params[key]`` when the config sets it (OpenSeq2Seq configs do), else ``given``.

  Args:
    params: the component's params.
    key: the size's key in them, e.g. ``"tgt_vocab_size"``.
    given: the size the model passed (from its data layer's description), or None.
    where: the params' config key for errors, e.g. ``"decoder_params"``.

  Raises:
    ConfigError: when neither is set, or the size is not a positive int.
  """
  size = params.get(key)
  if size is None:
    size = given
  if size is None:
    raise ConfigError(f"{where}/{key}: unknown; set it in {where} or build the component "
                      f"through a model whose data layer describes it")
  if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
    raise ConfigError(f"{where}/{key}: must be a positive int, got {size!r}")
  return size


class LayerComponent(Configurable, keras.layers.Layer):
  """A configurable Keras layer whose dtype policy follows the model's ``dtype``.

  ``params`` are checked against the declarations and get their defaults here, so a
  component built directly (tests, library code) behaves as one built from a config;
  subclasses never validate again. ``params["dtype"]`` (when set) overrides ``dtype`` for
  this component alone, e.g. a float32 decoder under a mixed-precision model.

  Args:
    params: the component's params (e.g. ``encoder_params``).
    mode: "train", "eval" or "infer".
    name: the layer's name (the prefix of its variables' paths).
    dtype: the model's dtype ("float32", "mixed", a tf.DType ...).
    initializer: the model-level kernel initializer (the config's top-level
      ``initializer``), used by :meth:`kernel_initializer` when the component's own params
      set none.
  """

  #: Config key of this component's params: the prefix of its error messages.
  PARAMS_KEY = "params"
  #: The layer's name when the constructor is given none.
  DEFAULT_NAME = "component"

  PARAMS = {
      "dtype": Param(AnyType, None,
                     "Overrides the model's dtype for this component (None: the model's)."),
      "regularizer": Param((callable_or_class, None), None,
                           "Weight regularizer of this component's kernels and embeddings, "
                           "instead of the top-level one (as OpenSeq2Seq's encoders and "
                           "decoders took)."),
      "regularizer_params": Param(dict, {}, "Keyword arguments of this component's "
                                  "regularizer (L2/L1 take OpenSeq2Seq's {'scale': x})."),
  }

  def __init__(self, params: dict[str, Any], *, mode: str = "train", name: str | None = None,
               dtype: Any = "float32", initializer: Any = None):
    self.params = self.validate_params(params, prefix=self.PARAMS_KEY)
    self.mode = mode
    keras.layers.Layer.__init__(
        self, name=name or self.DEFAULT_NAME, dtype=dtype_policy(self.params["dtype"] or dtype))
    keras_compat.set_untracked(self, "_default_initializer", initializer)
    if self.params["regularizer_params"] and self.params["regularizer"] is None:
      raise ConfigError(f"{self.PARAMS_KEY}/regularizer_params: given, but "
                        f"{self.PARAMS_KEY}/regularizer is not set")
    # Checked now, so that a wrong key fails before training starts.
    make_regularizer(self.params["regularizer"], self.params["regularizer_params"],
                     f"{self.PARAMS_KEY}/regularizer_params")

  def kernel_initializer(self) -> Any:
    """The initializer of this component's kernels: its own ``initializer`` param if set,
    else the model-level one, else Glorot uniform (a new instance per call)."""
    return initializers.kernel_initializer(self.params, self._default_initializer,
                                           self.PARAMS_KEY)

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    raise NotImplementedError
