"""What a model whose predictions are waveforms writes (WaveNet, the HiFi-GAN vocoder): one
WAV per input under the run (``infer_audio/`` or ``interactive_audio/``, named after the
data layer's ``names``), and for infer a CSV of name, path and seconds."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from open_seq2seq.outputs import INFER_AUDIO, INTERACTIVE_AUDIO, CsvRows, InferenceOutput, WavFile


class WaveformOutputs:
  """Mixin for a :class:`~open_seq2seq.models.model.Model` whose ``infer`` results are
  ``(index, audio samples)`` and whose outputs carry ``audio_lengths``; the model gives
  :attr:`output_sample_rate`."""

  @property
  def output_sample_rate(self) -> int:
    raise NotImplementedError

  def _name(self, index: int) -> str:
    names = self.data_layer.names
    return os.path.basename(names[index]) if 0 <= index < len(names) else str(index)

  def _audio_outputs(self, results: list, directory: str) -> tuple[list, list]:
    rate = self.output_sample_rate
    files, rows = [], []
    for index, audio in sorted(results, key=lambda r: r[0]):
      name = self._name(index)
      path = f"{directory}/{name}.wav"
      files.append(WavFile(audio, rate, path))
      rows.append((index, (name, path, f"{len(audio) / rate:.3f}")))
    return files, rows

  def scoring_results(self, results: list) -> list:
    return []  # nothing to score: no audio goes to the chief for it

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    files, rows = self._audio_outputs(results, INFER_AUDIO)
    return files + [CsvRows(rows, columns=("name", "wav_path", "seconds"),
                            path_columns=("wav_path",))]

  def interactive_outputs(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                          ) -> list[InferenceOutput]:
    return self._audio_outputs(self.infer(batch, outputs), INTERACTIVE_AUDIO)[0]

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    rate = self.output_sample_rate
    return [f"{resolve(f'{INTERACTIVE_AUDIO}/{self._name(int(index))}.wav')} "
            f"({int(outputs['audio_lengths'][b]) / rate:.2f} s)"
            for b, index in enumerate(batch["id"])]
