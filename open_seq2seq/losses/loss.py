"""Base class of every loss."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from open_seq2seq.utils.params import Configurable


class Loss(Configurable):
  """A loss maps the decoder output and the targets to a scalar, always in float32.

  :meth:`compute_loss` takes ``{"decoder_output": dict, "target_tensors": (ids, lengths)}``
  and returns ``(loss_sum, weight)``: the loss *summed* over the batch's ``weight`` units
  (real target tokens, utterances), both float32 scalars. The trainer divides by the weight
  of the whole global batch, so gradient accumulation and data-parallel backends combine
  batches by their true sizes and ``iter_size`` equals one large batch exactly.

  ``params`` are checked against the declarations and get their defaults here (subclasses
  never validate again). What the model knows from the data (``vocab_size=`` ...) arrives
  as extra keyword arguments a subclass names in its constructor.
  """

  #: Config key of the params: the prefix of error messages.
  PARAMS_KEY = "loss_params"

  PARAMS = {}

  def __init__(self, params: dict[str, Any] | None = None, *, name: str = "loss"):
    self.params = self.validate_params(params, prefix=self.PARAMS_KEY)
    self.name = name

  def compute_loss(self, input_dict: dict) -> tuple[tf.Tensor, tf.Tensor]:
    raise NotImplementedError
