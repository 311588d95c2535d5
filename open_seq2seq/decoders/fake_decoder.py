"""FakeDecoder: passes the encoder's output through (models whose encoder does it all).

OpenSeq2Seq's LSTM language model and its text classifiers compute their logits in the
encoder (LMEncoder) and name this decoder to fill the model's decoder slot; the name is kept.
"""

from __future__ import annotations

from typing import Any

from open_seq2seq.decoders.decoder import Decoder


class FakeDecoder(Decoder):
  """Returns ``encoder_output`` unchanged, dtypes included (no parameters, no weights)."""

  PARAMS = {}

  def __init__(self, params: dict[str, Any] | None = None, *, mode: str = "train",
               name: str = "decoder", dtype: Any = "float32", initializer: Any = None):
    super().__init__(params or {}, mode=mode, name=name, dtype=dtype, initializer=initializer)
    # A pass-through keeps the encoder's dtypes (float32 logits or audio under mixed
    # precision), which Keras would otherwise cast to the compute dtype on the way in.
    self.autocast = False

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    return dict(input_dict["encoder_output"])


__all__ = ["FakeDecoder"]
