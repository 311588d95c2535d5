"""Speech2Text: speech recognition, CTC (DeepSpeech2, Wave2Letter+, Jasper, QuartzNet),
attention-based (Listen-Attend-Spell, joint CTC-attention) or transducer (RNN-T)."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from open_seq2seq.data.description import DataDescription, SpeechDescription
from open_seq2seq.decoders.transducer_decoder import TransducerDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses.transducer_loss import RNNTLoss
from open_seq2seq.models.model import Model
from open_seq2seq.outputs import CsvRows, InferenceOutput, NpzArrays, PickledObject
from open_seq2seq.utils import word_timestamps as wt
from open_seq2seq.utils.metrics import edit_distance
from open_seq2seq.utils.params import Param


#: Where ``infer_logits_to_pickle`` writes by default (relative to the run's directory).
LOGITS_FILE = "infer_logits.npz"
#: An ``infer_logits_file`` with one of these endings gets OpenSeq2Seq's pickle instead.
PICKLE_SUFFIXES = (".pickle", ".pkl")
#: The modes whose outputs carry word timestamps (export builds an interactive_infer model).
TIMESTAMP_MODES = ("infer", "interactive_infer")
#: Feature frames and target tokens of the slice that creates a model's variables
#: (:meth:`Speech2Text.create_variables`): a multiple of every encoder's ``pad_to``.
VARIABLES_FRAMES = 256
VARIABLES_TOKENS = 8


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

  With ``word_timestamps`` (infer, interactive_infer and export), every word of a transcript
  gets its start and end in seconds (:mod:`open_seq2seq.utils.word_timestamps`): the infer
  CSV gains a ``words`` column (``one:0.21-0.52 two:0.70-1.02``), interactive lines a tab
  and the same text, the export ``words``/``word_start``/``word_end``/``num_words``
  outputs. The decoder (CTC or transducer) is built with ``token_frames``; a CTC beam
  search's or the LM's transcript is aligned to the logits here (Viterbi).
  """

  PARAMS = {
      "word_timestamps": Param(bool, False, "Infer, interactive_infer and export: give each "
                               "word's start and end in seconds (the CSV's words column)."),
      "word_start_offset": Param(float, 0.0, "Seconds added to every word start (fit with "
                                 "scripts/calibrate_timestamps.py)."),
      "word_end_offset": Param(float, 0.0, "Seconds added to every word end (fit with "
                               "scripts/calibrate_timestamps.py)."),
      "word_timestamp_scale": Param(float, 1.0, "Factor on frame times before the offsets "
                                    "(calibrate_timestamps.py --fit_scale)."),
  }

  best_metric = ("WER", False)
  chance_level = 1.0  # no word right (an empty transcript, or all wrong)

  # ------------------------------------------------------------------ wiring
  def component_kwargs(self, slot: str, description: DataDescription) -> dict[str, Any]:
    """The decoder gets the number of CTC classes and the alphabet (for LM decoding)."""
    if not isinstance(description, SpeechDescription):
      raise ConfigError(f"data_layer: Speech2Text needs a data layer describing speech "
                        f"(SpeechDescription), got {type(description).__name__}")
    symbols = {}
    if description.end_id is not None:  # autoregressive targets
      symbols = {"go_symbol": description.start_id, "end_symbol": description.end_id}
    if slot == "decoder":
      frames = {"token_frames": True} if self.timestamps else {}
      return {"vocab_size": description.tgt_vocab_size, "idx2char": description.idx2char,
              **symbols, **frames}
    if slot == "loss":
      return {"end_symbol": symbols.get("end_symbol")}
    return {}

  def connect_components(self) -> None:
    """A transducer decoder and the RNN-T loss need each other, with the blank last; word
    timestamps need a decoder that times its tokens."""
    transducer = isinstance(self.decoder, TransducerDecoder)
    if self.timestamps:
      if not getattr(self.decoder, "token_frames", False):
        raise ConfigError(f"word_timestamps: needs a CTC or transducer decoder (the frame of "
                          f"each output token), got {type(self.decoder).__name__}")
      # which tokens start words, which belong to none
      self.token_tables = wt.token_tables(self._targets.idx2char, self.decoder.vocab_size,
                                          self._targets.bpe)
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

  def create_variables(self, batch: dict) -> None:
    """Creates the variables on a short slice of the batch (the first utterance's first
    :data:`VARIABLES_FRAMES` frames and first targets): their shapes do not depend on the
    lengths, and this first pass runs op by op, which for a long recording's decoding (a
    transducer's greedy search over minutes of audio) took minutes."""
    features, lengths = batch["source_tensors"]
    short = {"source_tensors": (features[:1, :VARIABLES_FRAMES],
                                tf.minimum(lengths[:1], VARIABLES_FRAMES))}
    if "target_tensors" in batch:
      ids, id_lengths = batch["target_tensors"]
      short["target_tensors"] = (ids[:1, :VARIABLES_TOKENS],
                                 tf.minimum(id_lengths[:1], VARIABLES_TOKENS))
    super().create_variables(short)

  # ------------------------------------------------------------------ decoding to text
  @property
  def _targets(self):
    return self.data_layer.targets

  @property
  def timestamps(self) -> bool:
    """Whether this model's outputs carry word timestamps (``word_timestamps``, infer modes)."""
    return bool(self.params.get("word_timestamps")) and self.mode in TIMESTAMP_MODES

  def _token_spans(self, outputs: dict[str, np.ndarray], row: int, text: str
                   ) -> list[wt.TokenSpan]:
    """The output tokens of utterance ``row`` with their encoder frames."""
    logits = outputs["logits"][row, :outputs["src_lengths"][row]] if "logits" in outputs \
        else None
    if self.decoder.params.get("use_language_model"):  # align the LM's transcript
      ids = self._targets.encode(text)
    else:
      ids = outputs["outputs"][row, :outputs["final_sequence_lengths"][row]]
      if "token_start_frames" in outputs:  # greedy CTC, transducer
        return [wt.TokenSpan(int(i), int(s), int(e)) for i, s, e in zip(
            ids, outputs["token_start_frames"][row], outputs["token_end_frames"][row])]
    blank = logits.shape[-1] - 1
    path = wt.ctc_forced_path(logits, ids, blank)  # a beam search's best alignment
    return [] if path is None else wt.ctc_path_spans(path, blank)

  def word_timestamps(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                      texts: list[str]) -> list[list[tuple[str, float, float]]]:
    """``(word, start, end)`` (seconds) of each transcript of a batch (class doc)."""
    p, targets = self.params, self._targets
    feature_lengths = batch["source_tensors"][1]
    stride = float(self.data_layer.params["window_stride"])
    frame_seconds = stride * wt.subsampling_factor(feature_lengths[:len(texts)],
                                                   outputs["src_lengths"][:len(texts)])
    result = []
    for row, text in enumerate(texts):
      words = wt.word_spans(self._token_spans(outputs, row, text), *self.token_tables)
      times = wt.word_times(words, frame_seconds, p["word_start_offset"],
                            p["word_end_offset"], p["word_timestamp_scale"],
                            duration=float(feature_lengths[row]) * stride)
      result.append([(targets.decode(word.tokens).strip(), start, end)
                     for word, (start, end) in zip(words, times)])
    return result

  def decode_outputs(self, outputs: dict[str, np.ndarray], limit: int | None = None
                     ) -> list[str]:
    """Transcripts of a batch of decoder outputs (of its first ``limit`` rows if given).

    With the decoder's ``use_language_model``, the logits (a transducer's: its projected
    encoder frames) are decoded here — in the evaluator's per-replica hook, so on every
    process for its own shard — by the decoder's beam search fused with the n-gram LM (CTC: in
    parallel over the batch's utterances).
    """
    if self.decoder.params.get("use_language_model"):
      key = "frames" if isinstance(self.decoder, TransducerDecoder) else "logits"
      return self.decoder.decode_with_lm(outputs[key][:limit], outputs["src_lengths"][:limit])
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
    """Per utterance: (id, (transcript, logits [T, V] if infer_logits_to_pickle else None)),
    with word_timestamps (id, (transcript, logits or None, its words' (word, start, end)))."""
    texts = self.decode_outputs(outputs)
    if self.decoder.params.get("infer_logits_to_pickle"):
      logits = [np.asarray(l[:n], np.float32)
                for l, n in zip(outputs["logits"], outputs["src_lengths"])]
    else:
      logits = [None] * len(texts)
    if not self.timestamps:
      return [(int(index), (text, l)) for index, text, l in zip(batch["id"], texts, logits)]
    return [(int(index), (text, l, words)) for index, text, l, words in
            zip(batch["id"], texts, logits, self.word_timestamps(batch, outputs, texts))]

  def interactive_lines(self, batch: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                        resolve: Callable[[str], str] = str) -> list[str]:
    """The transcript of each typed audio path (and, with word_timestamps, a tab and its
    words' ``word:start-end``)."""
    texts = self.decode_outputs(outputs)
    if not self.timestamps:
      return texts
    return [f"{text}\t{wt.format_words(words)}"
            for text, words in zip(texts, self.word_timestamps(batch, outputs, texts))]

  def scoring_results(self, results: list) -> list:
    """The transcripts (scoring reads no logits)."""
    return [(i, (text, None)) for i, (text, *_) in results]

  def score_inference(self, results: list) -> dict[str, float]:
    """WER/CER of the transcripts when the infer CSVs have a ``transcript`` column."""
    layer = self.data_layer
    if not results or layer.interactive_inputs or not any(layer.transcripts):
      return {}
    return self.finalize_evaluation([(i, _edits(layer.transcripts[i], text))
                                     for i, (text, *_) in results])

  def extra_serving_signatures(self):
    """A streaming encoder's export also holds ``stream_initial_state`` and ``stream_step``
    (audio chunk + state in, text + state out; docs/speech-recognition.md)."""
    # pylint: disable-next=import-outside-toplevel
    from open_seq2seq.serving.speech_streaming import streaming_extension
    return streaming_extension(self)

  def serving_adapter(self):
    """Exported recognizers take waveforms and return transcripts (the decoder's in-graph
    decoding: greedy CTC, the attention decoder's search or the transducer's greedy / beam
    search; an n-gram LM is not exported), with word_timestamps also word times (greedy CTC
    or transducer)."""
    # pylint: disable-next=import-outside-toplevel
    from open_seq2seq.serving.speech import SpeechToTextServing, TimestampSettings
    layer, p = self.data_layer, self.params
    timing = None
    if self.timestamps:
      if self.decoder.params.get("use_beam_search") and not isinstance(self.decoder,
                                                                       TransducerDecoder):
        raise ConfigError("word_timestamps: an exported CTC model times words on its greedy "
                          "path only; export with --decoder_params/use_beam_search=False")
      timing = TimestampSettings(float(layer.params["window_stride"]), p["word_start_offset"],
                                 p["word_end_offset"], p["word_timestamp_scale"],
                                 *self.token_tables)
    return SpeechToTextServing(layer.extractor.features_graph,
                               layer.params["num_audio_features"], layer.params["pad_to"],
                               layer.targets, layer.params["sample_freq"], timing)

  def finalize_inference(self, results: list) -> list[InferenceOutput]:
    """``wav_filename,predicted_transcript`` rows (with word_timestamps, and ``words``), and
    the logits if asked for."""
    layer = self.data_layer
    if self.timestamps:
      rows = CsvRows([(i, (layer.wav_filename(i), text, wt.format_words(words)))
                      for i, (text, _, words) in results],
                     columns=("wav_filename", "predicted_transcript", "words"))
    else:
      rows = CsvRows([(i, (layer.wav_filename(i), text)) for i, (text, *_) in results],
                     columns=("wav_filename", "predicted_transcript"))
    outputs: list[InferenceOutput] = [rows]
    if self.decoder.params.get("infer_logits_to_pickle"):
      # A path the user gives is relative to the working directory; the default goes to the
      # run's directory (relative paths of outputs are relative to it).
      given = self.decoder.params["infer_logits_file"]
      path = os.path.abspath(given) if given else LOGITS_FILE
      logits = {layer.wav_filename(i): logits for i, (_, logits, *_) in results}
      if path.endswith(PICKLE_SUFFIXES):  # OpenSeq2Seq's format, for tools that read it
        outputs.append(PickledObject(logits, path))
      else:
        outputs.append(NpzArrays(logits, path))
    return outputs
