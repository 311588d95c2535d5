"""FastPitch: non-autoregressive speech synthesis with a learned aligner (text in, mel out)."""

from __future__ import annotations

from typing import Any

import numpy as np

from open_seq2seq.data.description import DataDescription, FastPitchDescription
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.text2speech import STOP_TOLERANCE, Text2Speech
from open_seq2seq.models.vocoder_link import VOCODER, ExportedVocoder
from open_seq2seq.utils.params import Param

#: The loss terms the eval reports (FastPitchLoss.parts), under their metric names.
PART_METRICS = {"mel": "mel_loss", "duration": "duration_loss", "pitch": "pitch_loss",
                "forward_sum": "forward_sum_loss", "binarization": "binarization_loss"}


class FastPitch(Text2Speech):
  """FastPitch (Łańcucki 2021) with the aligner of Badlani et al. 2021, as NeMo trains it.

  Components: a data layer describing pitch (``FastPitchDataLayer``:
  :class:`~open_seq2seq.data.description.FastPitchDescription`, batches with a 4th target,
  the normalised frame pitch), :class:`~open_seq2seq.encoders.fastpitch_encoder.
  FastPitchEncoder`, :class:`~open_seq2seq.decoders.fastpitch_decoder.FastPitchDecoder` and
  :class:`~open_seq2seq.losses.fastpitch_loss.FastPitchLoss`.

  Why a learned aligner: durations come from monotonic alignment search over an alignment
  learned jointly with the model, so there is no teacher Tacotron to train first and no
  attention that may fail to align; the durations improve with training and always sum to
  the target length.

  ``pace`` and ``pitch_shift`` (Hz, turned into normalised units with the corpus's pitch
  standard deviation) change free-running synthesis only; as model keys they can differ per
  mode (``infer_params``) or on the command line (``--pace=1.2``).

  Eval runs the teacher-forced pass (MAS durations) and free-running synthesis on each batch
  and reports every loss term (``mel_loss`` ... ``binarization_loss``, means over
  utterances), ``duration_error`` (mean absolute difference in frames between the predicted
  durations at pace 1 and the MAS ones, over every symbol), ``length_ratio`` (free-running
  frames / true frames, mean over utterances) and ``length_accuracy`` (share of utterances
  within 20 % of their true length) and ``mas_length_error`` (mean absolute difference between
  the sum of the MAS durations and the true length: 0 by construction). Samples, infer (WAVs
  and the hard alignment as a figure), ``interactive_infer`` and ``--mode=export`` are
  Text2Speech's.

  Waveforms come from Griffin-Lim, or with ``vocoder: {"export_dir": DIR}`` from an exported
  HiFi-GAN (:mod:`open_seq2seq.models.vocoder_link`; its mel settings must be this data
  layer's): infer and ``interactive_infer`` write its audio, and ``--mode=export`` saves it
  inside the synthesizer (text in, waveform out, one SavedModel). Only those modes load it;
  training and eval samples stay Griffin-Lim (they need no finished vocoder).
  """

  PARAMS = {
      "pace": Param(float, 1.0, "Free-running speed: predicted durations are divided by it "
                    "(2.0: twice as fast)."),
      "pitch_shift": Param(float, 0.0, "Free-running pitch shift in Hz, added to the "
                           "predicted pitch of every symbol."),
      "vocoder": Param((VOCODER, None), None, "Neural vocoder of infer, interactive_infer "
                       "and export: {'export_dir': a HiFi-GAN export}; None: Griffin-Lim."),
  }

  def __init__(self, params: dict[str, Any], mode: str = "train", num_workers: int = 1,
               worker_id: int = 0):
    super().__init__(params, mode, num_workers, worker_id)
    if self.params.get("vocoder") is not None and mode in ("infer", "interactive_infer"):
      self.vocoder = ExportedVocoder(self.params["vocoder"], self.features)

  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    if not isinstance(description, FastPitchDescription):
      raise ConfigError(f"data_layer: FastPitch needs a data layer that provides frame pitch "
                        f"(FastPitchDataLayer, describing FastPitchDescription), got "
                        f"{type(description).__name__}")
    f = description.features
    if not f.num_mel or f.num_magnitude:
      raise ConfigError("data_layer_params/output_type: FastPitch predicts mel frames; use "
                        "output_type 'mel'")
    if slot == "encoder":
      return {"src_vocab_size": description.src_vocab_size}
    if slot == "decoder":
      if description.pitch_std <= 0:
        raise ConfigError(f"data_layer: the pitch standard deviation must be positive, got "
                          f"{description.pitch_std}")
      return {"num_mel_features": f.num_mel, "pace": self.params["pace"],
              "pitch_shift": self.params["pitch_shift"] / description.pitch_std}
    return {"num_mel_features": f.num_mel}

  def eval_outputs(self, batch: dict) -> dict:
    """Free-running predictions, plus (with targets) the teacher-forced loss, its terms per
    utterance, the MAS path and durations and the predicted log durations."""
    out = {"predictions": self.predict(batch)}
    if "target_tensors" in batch and self.loss is not None:
      out["loss_sum"], out["weight"], forced = self.compute_loss(batch, training=False)
      parts = self.loss.parts(forced, batch["target_tensors"])
      out["predictions"] = dict(
          out["predictions"], forced_alignments=forced["alignments"],
          mas_durations=forced["durations"],
          forced_log_durations=forced["log_duration_predictions"],
          **{f"part_{name}": value for name, value in parts.items()})
    return out

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per utterance: (id, (terms..., |duration error| sum, symbols, length ratio, within
    20 %, |sum of MAS durations - true length|))."""
    results = []
    true_lengths = batch["target_tensors"][2]
    for b, index in enumerate(batch["id"]):
      symbols = int(outputs["src_lengths"][b])
      mas = outputs["mas_durations"][b][:symbols].astype(np.float64)
      predicted = np.maximum(np.round(np.exp(outputs["forced_log_durations"][b][:symbols]) - 1),
                             0.0)
      true, free = int(true_lengths[b]), int(outputs["final_sequence_lengths"][b])
      terms = tuple(float(outputs[f"part_{name}"][b]) for name in PART_METRICS)
      results.append((int(index), terms + (
          float(np.abs(predicted - mas).sum()), float(symbols), free / max(true, 1),
          float(abs(free - true) <= STOP_TOLERANCE * true), abs(mas.sum() - true))))
    return results

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    if not results:
      return {}
    values = np.array([r for _, r in results], np.float64)
    metrics = {name: float(values[:, i].mean()) for i, name in enumerate(PART_METRICS.values())}
    k = len(PART_METRICS)
    metrics["duration_error"] = float(values[:, k].sum() / max(values[:, k + 1].sum(), 1.0))
    metrics["length_ratio"] = float(values[:, k + 2].mean())
    metrics["length_accuracy"] = float(values[:, k + 3].mean())
    metrics["mas_length_error"] = float(values[:, k + 4].mean())
    return metrics
