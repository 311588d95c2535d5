"""Text2Speech: Tacotron-style speech synthesis (text in, spectrogram and audio out)."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import DataDescription, Text2SpeechDescription
from open_seq2seq.errors import ConfigError
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import (INFER_AUDIO, INTERACTIVE_AUDIO, AudioSample, CsvRows,
                                  ImageSample, InferenceOutput, PngFile, WavFile)
from open_seq2seq.parts.tacotron.alignment import (alignment_figure, band_mass, focus_rate,
                                                   spectrogram_image, symbol_labels)
from open_seq2seq.utils.params import Param

#: Griffin-Lim iterations for TensorBoard clips (quick) and for written audio.
SUMMARY_GL_ITERS, INFER_GL_ITERS = 30, 60
#: A free-running sequence "stops right" when its length is within this share of the truth.
STOP_TOLERANCE = 0.2


class Text2Speech(Model):
  """Speech synthesis model family.

  Eval runs the teacher-forced loss and, on the same batch, free-running synthesis, and
  reports the alignment of both: ``band_mass`` / ``focus_rate`` (teacher forced),
  ``free_band_mass`` (free running) and ``stop_accuracy`` (share of utterances whose free-
  running length is within 20 % of the true one); see ``parts/tacotron/alignment.py``. The
  best checkpoint is the lowest eval loss. Infer writes one WAV per input line (Griffin-Lim)
  and its alignment as a labelled figure (PNG) into ``<logdir>/infer_audio/``, and a CSV of
  what it wrote to ``--infer_output_file``; ``interactive_infer`` writes a WAV per typed
  sentence into ``<logdir>/interactive_audio/`` (paths relative to the run's directory: the
  toolkit's output sink resolves them).

  During training the loss gets the update counter (guided attention's weight schedule).
  """

  PARAMS = {
      "save_to_tensorboard": Param(bool, False, "Send sample alignments, spectrograms and "
                                   "Griffin-Lim audio to TensorBoard (print_samples_steps)."),
  }

  predictions_from_loss_pass = False
  #: A loaded neural vocoder (:class:`~open_seq2seq.models.vocoder_link.ExportedVocoder`, set
  #: by a family that offers one) that written audio and exports use; None: Griffin-Lim.
  vocoder = None

  # ------------------------------------------------------------------ wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    if not isinstance(description, Text2SpeechDescription):
      raise ConfigError(f"data_layer: Text2Speech needs a data layer describing speech "
                        f"synthesis (Text2SpeechDescription), got {type(description).__name__}")
    f = description.features
    # The decoder predicts mel frames (or magnitude frames when that is the only output).
    predicted = f.num_mel if f.num_mel else f.num_magnitude
    magnitude = f.num_magnitude if f.num_mel else 0
    if slot == "encoder":
      return {"src_vocab_size": description.src_vocab_size}
    sizes = {"num_mel_features": predicted, "num_magnitude_features": magnitude}
    if slot == "decoder":
      return dict(sizes, exp_mag=f.exp_mag)
    return dict(sizes, reduction_factor=getattr(self.decoder, "r", 1))

  @property
  def features(self):
    return self.description.features

  # ------------------------------------------------------------------ computation
  def compute_loss(self, batch: dict, training: bool) -> tuple[tf.Tensor, tf.Tensor, dict]:
    decoder_output = self.forward(batch, training)
    loss_input = {"decoder_output": decoder_output, "target_tensors": batch["target_tensors"]}
    if training and self.training_step is not None:
      loss_sum, weight = self.loss.compute_loss(loss_input, step=self.training_step)
    else:
      loss_sum, weight = self.loss.compute_loss(loss_input)
    return tf.cast(loss_sum, tf.float32), tf.cast(weight, tf.float32), decoder_output

  def eval_outputs(self, batch: dict) -> dict:
    """The free-running predictions plus the teacher-forced alignments and loss."""
    out = {"predictions": self.predict(batch)}
    if "target_tensors" in batch and self.loss is not None:
      out["loss_sum"], out["weight"], forced = self.compute_loss(batch, training=False)
      out["predictions"] = dict(out["predictions"], forced_alignments=forced["alignments"])
    return out

  # ------------------------------------------------------------------ numpy helpers
  def _steps(self, frames: int) -> int:
    return -(-int(frames) // getattr(self.decoder, "r", 1))

  def _text(self, ids: np.ndarray, length: int) -> str:
    return self.data_layer.text.decode([int(i) for i in ids[:length]])

  def _audio(self, spectrogram: np.ndarray, magnitude: np.ndarray | None, length: int,
             iters: int) -> np.ndarray:
    if self.vocoder is not None:
      return self.vocoder.synthesize(spectrogram[:length])
    mag = None if magnitude is None else magnitude[None, :length]
    wave = self.features.to_audio(spectrogram[None, :length], mag, num_iters=iters)[0].numpy()
    peak = float(np.max(np.abs(wave))) if wave.size else 0.0
    return wave / peak * 0.9 if peak > 0 else wave

  # ------------------------------------------------------------------ family hooks
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    ids, text_lengths = batch["source_tensors"][:2]
    lines = []
    for b in range(min(max_samples, len(ids))):
      line = f"Sample text: {self._text(ids[b], text_lengths[b])}"
      frames = int(outputs["final_sequence_lengths"][b])
      if "target_tensors" in batch:
        line += f" | frames predicted {frames}, true {int(batch['target_tensors'][2][b])}"
      lines.append(line)
    return lines

  def sample_summaries(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                       ) -> list:
    if not self.params.get("save_to_tensorboard"):
      return []
    frames = int(outputs["final_sequence_lengths"][0])
    symbols = int(outputs["src_lengths"][0])
    labels = self._labels(batch["source_tensors"][0][0][:symbols])
    spec = outputs["spectrogram"][0]
    mag = outputs["magnitude"][0] if "magnitude" in outputs else None
    items = [ImageSample("alignment", self._alignment_figure(
                 outputs["alignments"][0], self._steps(frames), symbols, labels,
                 "free-running attention (first sentence of the batch)")),
             ImageSample("spectrogram", spectrogram_image(spec, frames))]
    if "forced_alignments" in outputs and "target_tensors" in batch:
      true = int(batch["target_tensors"][2][0])
      items.append(ImageSample("teacher_forced_alignment", self._alignment_figure(
          outputs["forced_alignments"][0], self._steps(true), symbols, labels,
          "teacher-forced attention (first sentence of the batch)")))
    if frames > 1:
      items.append(AudioSample("audio", self._audio(spec, mag, frames, SUMMARY_GL_ITERS),
                               self.features.sample_rate))
    return items

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per utterance: (id, (band mass, focus rate, free band mass, stopped right))."""
    results = []
    true_lengths = batch["target_tensors"][2]
    for b, index in enumerate(batch["id"]):
      symbols = int(outputs["src_lengths"][b])
      true_steps = self._steps(true_lengths[b])
      free_frames = int(outputs["final_sequence_lengths"][b])
      forced = outputs.get("forced_alignments")
      tf_band = band_mass(forced[b], true_steps, symbols) if forced is not None else np.nan
      tf_focus = focus_rate(forced[b], true_steps, symbols) if forced is not None else np.nan
      free_band = band_mass(outputs["alignments"][b], self._steps(free_frames), symbols)
      stopped = abs(free_frames - int(true_lengths[b])) <= STOP_TOLERANCE * int(true_lengths[b])
      results.append((int(index), (tf_band, tf_focus, free_band, float(stopped))))
    return results

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    if not results:
      return {}
    values = np.array([r for _, r in results], np.float64)
    names = ("band_mass", "focus_rate", "free_band_mass", "stop_accuracy")
    return {name: float(np.nanmean(values[:, i])) for i, name in enumerate(names)}

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per input: (id, (spectrogram, magnitude or None, alignments, symbols))."""
    results = []
    for b, index in enumerate(batch["id"]):
      frames = int(outputs["final_sequence_lengths"][b])
      steps = self._steps(frames)
      mag = outputs["magnitude"][b][:frames] if "magnitude" in outputs else None
      results.append((int(index), (outputs["spectrogram"][b][:frames], mag,
                                   outputs["alignments"][b][:steps],
                                   int(outputs["src_lengths"][b]))))
    return results

  def _labels(self, ids) -> list[str]:
    return symbol_labels(self.data_layer.text.symbols, ids)

  def _alignment_figure(self, alignments: np.ndarray, steps: int, symbols: int,
                        labels: list[str] | None, title: str) -> np.ndarray:
    return alignment_figure(alignments, steps, symbols, labels=labels, title=title,
                            frames_per_step=getattr(self.decoder, "r", 1))

  def _synthesis_outputs(self, results: list, directory: str) -> tuple[list, list]:
    layer, rate = self.data_layer, self.features.sample_rate
    files, rows = [], []
    for index, (spec, mag, aligns, symbols) in sorted(results, key=lambda r: r[0]):
      known = index < len(layer.names)
      name = os.path.basename(layer.names[index]) if known else str(index)
      wav = f"{directory}/{name}.wav"
      png = f"{directory}/{name}_alignment.png"
      audio = self._audio(spec, mag, len(spec), INFER_GL_ITERS)
      labels = self._labels(layer.symbol_ids(index)) if known else None
      figure = self._alignment_figure(aligns, len(aligns), symbols, labels,
                                      f"{name}: free-running attention")
      files += [WavFile(audio, rate, wav), PngFile(figure, png)]
      rows.append((index, (name, layer.transcripts[index] if known else "", wav,
                           f"{len(audio) / rate:.2f}")))
    return files, rows

  def serving_adapter(self):
    """Exported synthesizers take (normalized) text and return waveforms."""
    from open_seq2seq.serving.speech_synthesis import TextToSpeechServing  # pylint: disable=import-outside-toplevel
    layer = self.data_layer
    if layer.params.get("style_input") is not None:
      raise ConfigError("--mode=export: models reading a style reference (style_input) "
                        "cannot be exported yet")
    if layer.text.cmudict is not None:
      raise ConfigError("--mode=export: the CMU dictionary (cmudict_path) is a Python text "
                        "front end that an exported graph cannot run; export a character "
                        "model")
    return TextToSpeechServing(
        layer.text.symbols, layer.params["pad_EOS"],
        lambda spec, mag: self.features.to_audio(spec, mag, num_iters=INFER_GL_ITERS),
        self.features.hop_length, self.features.sample_rate, vocoder=self.vocoder)

  def scoring_results(self, results: list) -> list:
    return []  # nothing to score: no spectrogram goes to the chief for it

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    """Per input a WAV (Griffin-Lim) and its alignment PNG in ``infer_audio/``, and a CSV
    row (name, transcript, WAV path as written, seconds)."""
    files, rows = self._synthesis_outputs(results, INFER_AUDIO)
    return files + [CsvRows(rows, columns=("name", "transcript", "wav_path", "seconds"),
                            path_columns=("wav_path",))]

  def interactive_outputs(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
                          ) -> list[InferenceOutput]:
    files, _ = self._synthesis_outputs(self.infer(batch, outputs), INTERACTIVE_AUDIO)
    return files

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    lines = []
    for b in range(len(batch["id"])):
      frames = int(outputs["final_sequence_lengths"][b])
      seconds = frames * self.features.hop_length / self.features.sample_rate
      name = self.data_layer.names[int(batch["id"][b])]
      lines.append(f"{resolve(f'{INTERACTIVE_AUDIO}/{name}.wav')} ({seconds:.2f} s)")
    return lines


class Text2SpeechTacotron(Text2Speech):
  """OpenSeq2Seq's later name of the Tacotron model (its configs use either name)."""
