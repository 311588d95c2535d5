"""Speech2Text: speech recognition, CTC (DeepSpeech2, Wave2Letter+, Jasper, QuartzNet),
attention-based (Listen-Attend-Spell, joint CTC-attention) or transducer (RNN-T)."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from open_seq2seq.data.description import DataDescription, SpeechDescription
from open_seq2seq.data.speech2text.targets import TargetEncoder
from open_seq2seq.decoders.transducer_decoder import TransducerDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.transducer_loss import RNNTLoss
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import CsvRows, InferenceOutput, NpzArrays, PickledObject
from open_seq2seq.utils.metrics import edit_distance


#: Where ``infer_logits_to_pickle`` writes by default (relative to the run's directory).
LOGITS_FILE = "infer_logits.npz"
#: An ``infer_logits_file`` with one of these endings gets OpenSeq2Seq's pickle instead.
PICKLE_SUFFIXES = (".pickle", ".pkl")


def _edits(ref: str, hyp: str) -> tuple[int, int, int, int]:
  """(word edits, reference words, character edits, reference characters)."""
  ref_words, hyp_words = ref.split(), hyp.split()
  ref_chars, hyp_chars = " ".join(ref_words), " ".join(hyp_words)
  return (edit_distance(ref_words, hyp_words), len(ref_words),
          edit_distance(ref_chars, hyp_chars), len(ref_chars))


class Speech2Text(Model):
  """Speech recognition model family: audio features in, character (or BPE) ids out.

  Eval reports ``WER`` (word edits / reference words, over the whole eval set) and ``CER``
  (character edits / reference characters); the best checkpoint is the lowest WER. Infer
  writes ``wav_filename,predicted_transcript`` rows in input order and, with the decoder's
  ``infer_logits_to_pickle``, every utterance's logits [T, V] by ``wav_filename`` for
  offline decoding (``scripts/decode.py``): an ``.npz`` that loads without unpickling
  (:class:`~open_seq2seq.outputs.NpzArrays`, ``<logdir>/infer_logits.npz`` unless the
  decoder's ``infer_logits_file`` says otherwise), or OpenSeq2Seq's pickle of
  ``{wav_filename: logits}`` when ``infer_logits_file`` ends in ``.pickle`` or ``.pkl``.

  The data layer's description must be a
  :class:`~open_seq2seq.data.description.SpeechDescription`: the decoder is offered
  ``vocab_size`` (CTC classes, blank included) and the alphabet ``idx2char``. With
  ``data_layer_params/autoregressive`` (attention decoders) the alphabet holds ``<S>`` and
  ``</S>``: the decoder is also offered their ids as ``go_symbol`` and ``end_symbol``, and the
  loss ``end_symbol``; transcripts end at the first ``</S>``.

  A :class:`~open_seq2seq.decoders.TransducerDecoder` trains with
  :class:`~open_seq2seq.losses.RNNTLoss` (its [B, T, U+1, V] logits) and, like the CTC
  decoders, gives eval and infer the decoded ids (``outputs``) that become the transcripts;
  the two go together (:meth:`connect_components`).
  """

  best_metric = ("WER", False)
  chance_level = 1.0  # no word right (an empty transcript, or all wrong)

  # ------------------------------------------------------------------ wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    """The decoder gets the number of CTC classes and the alphabet (for LM decoding)."""
    if not isinstance(description, SpeechDescription):
      raise ConfigError(f"data_layer: Speech2Text needs a data layer describing speech "
                        f"(SpeechDescription), got {type(description).__name__}")
    symbols = {}
    if TargetEncoder.START in description.char2idx:  # autoregressive targets
      symbols = {"go_symbol": description.char2idx[TargetEncoder.START],
                 "end_symbol": description.char2idx[TargetEncoder.END]}
    if slot == "decoder":
      return {"vocab_size": description.tgt_vocab_size, "idx2char": description.idx2char,
              **symbols}
    if slot == "loss":
      return {"end_symbol": symbols.get("end_symbol")}
    return {}

  def connect_components(self) -> None:
    """A transducer decoder and the RNN-T loss need each other, with the blank last."""
    transducer = isinstance(self.decoder, TransducerDecoder)
    if self.loss is None:
      return
    if transducer and not isinstance(self.loss, RNNTLoss):
      raise ConfigError(f"loss: TransducerDecoder's [B, T, U+1, V] logits need RNNTLoss, got "
                        f"{type(self.loss).__name__}")
    if isinstance(self.loss, RNNTLoss) and not transducer:
      raise ConfigError(f"loss: RNNTLoss needs a transducer's logits (decoder: "
                        f"TransducerDecoder), got {type(self.decoder).__name__}")
    if transducer and self.loss.params["blank"] not in (-1, self.decoder.vocab_size - 1):
      raise ConfigError(f"loss_params/blank: TransducerDecoder's blank is its last class "
                        f"({self.decoder.vocab_size - 1}); set blank: -1")

  # ------------------------------------------------------------------ decoding to text
  @property
  def _targets(self):
    return self.data_layer.targets

  def decode_outputs(self, outputs: dict[str, np.ndarray], limit: int | None = None
                     ) -> list[str]:
    """Transcripts of a batch of decoder outputs (of its first ``limit`` rows if given).

    With the decoder's ``use_language_model``, the logits are decoded here — in the
    evaluator's per-replica hook, so on every process for its own shard — by the decoder's
    beam search fused with the n-gram LM, in parallel over the batch's utterances.
    """
    if self.decoder.params.get("use_language_model"):
      return self.decoder.decode_with_lm(outputs["logits"][:limit], outputs["src_lengths"][:limit])
    ids = [row[:n] for row, n in zip(outputs["outputs"][:limit],
                                     outputs["final_sequence_lengths"][:limit])]
    return [self._targets.decode(row) for row in ids]

  def _references(self, batch: dict[str, np.ndarray]) -> list[str]:
    ids, lengths = batch["target_tensors"]
    return [self._targets.decode(row[:n]) for row, n in zip(ids, lengths)]

  # ------------------------------------------------------------------ family hooks
  def format_samples(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                     max_samples: int = 1) -> list[str]:
    hypotheses = self.decode_outputs(outputs, limit=max_samples)
    lines = []
    if "target_tensors" in batch:
      for ref, hyp in list(zip(self._references(batch), hypotheses))[:max_samples]:
        words = ref.split()
        wer = edit_distance(words, hyp.split()) / max(len(words), 1)
        lines += [f"Sample WER: {wer:.4f}", f"Sample target:     {ref}",
                  f"Sample prediction: {hyp}"]
    else:
      lines += [f"Sample prediction: {hyp}" for hyp in hypotheses[:max_samples]]
    return lines

  def evaluate(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per utterance: (id, (word edits, reference words, char edits, reference chars))."""
    return [(int(index), _edits(ref, hyp)) for index, ref, hyp in
            zip(batch["id"], self._references(batch), self.decode_outputs(outputs))]

  def finalize_evaluation(self, results: list) -> dict[str, float]:
    if not results:
      return {}
    totals = np.sum([r for _, r in results], axis=0, dtype=np.int64)
    return {"WER": float(totals[0] / max(totals[1], 1)),
            "CER": float(totals[2] / max(totals[3], 1))}

  def infer(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> list:
    """Per utterance: (id, (transcript, logits [T, V] if infer_logits_to_pickle else None))."""
    texts = self.decode_outputs(outputs)
    if not self.decoder.params.get("infer_logits_to_pickle"):
      return [(int(index), (text, None)) for index, text in zip(batch["id"], texts)]
    return [(int(index), (text, np.asarray(logits[:n], np.float32)))
            for index, text, logits, n in zip(batch["id"], texts, outputs["logits"],
                                               outputs["src_lengths"])]

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    """The transcript of each typed audio path."""
    return self.decode_outputs(outputs)

  def scoring_results(self, results: list) -> list:
    """The transcripts (scoring reads no logits)."""
    return [(i, (text, None)) for i, (text, _) in results]

  def score_inference(self, results: list) -> dict[str, float]:
    """WER/CER of the transcripts when the infer CSVs have a ``transcript`` column."""
    layer = self.data_layer
    if not results or layer.interactive_inputs or not any(layer.transcripts):
      return {}
    return self.finalize_evaluation([(i, _edits(layer.transcripts[i], text))
                                     for i, (text, _) in results])

  def serving_adapter(self):
    """Exported recognizers take waveforms and return transcripts (the decoder's in-graph
    decoding: greedy CTC, the attention decoder's search or the transducer's greedy / beam
    search; an n-gram LM is not exported)."""
    from open_seq2seq.serving.speech import SpeechToTextServing  # pylint: disable=import-outside-toplevel
    layer = self.data_layer
    return SpeechToTextServing(layer.extractor.features_graph,
                               layer.params["num_audio_features"], layer.params["pad_to"],
                               layer.targets, layer.params["sample_freq"])

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    """``wav_filename,predicted_transcript`` rows, and the logits if asked for."""
    layer = self.data_layer
    outputs: list[InferenceOutput] = [
        CsvRows([(i, (layer.wav_filename(i), text)) for i, (text, _) in results],
                columns=("wav_filename", "predicted_transcript"))]
    if self.decoder.params.get("infer_logits_to_pickle"):
      # A path the user gives is relative to the working directory; the default goes to the
      # run's directory (relative paths of outputs are relative to it).
      given = self.decoder.params["infer_logits_file"]
      path = os.path.abspath(given) if given else LOGITS_FILE
      logits = {layer.wav_filename(i): logits for i, (_, logits) in results}
      if path.endswith(PICKLE_SUFFIXES):  # OpenSeq2Seq's format, for tools that read it
        outputs.append(PickledObject(logits, path))
      else:
        outputs.append(NpzArrays(logits, path))
    return outputs
