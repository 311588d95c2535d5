"""How the translation decoders decode at inference: the keys they share (``n_best`` and
sampling), their checks, and one function running greedy search, beam search or sampling.

* ``n_best``: hypotheses returned per input, best first. Beam search returns the ``n_best``
  best of its beam (so ``n_best`` <= the beam width); sampling draws ``n_best`` samples.
  With ``n_best`` > 1 the decoder's output also holds ``"nbest_outputs"`` [B, N, T],
  ``"nbest_scores"`` [B, N] and ``"nbest_lengths"`` [B, N]; ``"outputs"``, ``"scores"`` and
  ``"final_sequence_lengths"`` stay those of the best.
* ``sampling`` (fairseq's ``--sampling``): draw random sequences instead of searching, with
  ``sampling_temperature`` (OpenNMT-tf's name, fairseq's ``--temperature``), ``sampling_topk``
  and ``sampling_topp`` (OpenNMT-tf / CTranslate2 names, fairseq's ``--sampling-topk`` /
  ``--sampling-topp``); see :mod:`open_seq2seq.parts.sampling`. Sampling needs a beam width
  of 1 (OpenNMT-tf asks the same): each sample is drawn on its own, token by token. The
  samples are reproducible: a function of the run's ``random_seed``, the source sentence
  and the sample's index.

Every search bans PAD and GO: no hypothesis holds them, whatever the model's logits.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Mapping

import tensorflow as tf

from open_seq2seq.errors import ConfigError
from open_seq2seq.parts import beam_search, sampling
from open_seq2seq.utils.params import Param

#: ``decoder_params`` keys of every translation decoder (Transformer, RNN, ConvS2S).
DECODING_PARAMS = {
    "n_best": Param(int, 1, "Inference: hypotheses returned per input, best first, with "
                    "scores (<= the beam width; with sampling, the samples drawn per input)."),
    "sampling": Param(bool, False, "Inference: draw random sequences instead of searching "
                      "(fairseq's --sampling; needs a beam width of 1), reproducible given "
                      "random_seed."),
    "sampling_temperature": Param((float, None), None, "Sampling: divides the log-"
                                  "probabilities (< 1 sharper, > 1 flatter; default 1)."),
    "sampling_topk": Param((int, None), None, "Sampling: only from the K most likely tokens "
                           "(1: greedy; 0 or unset: all)."),
    "sampling_topp": Param((float, None), None, "Sampling: only from the smallest set of most "
                           "likely tokens holding this probability (nucleus; unset: 1, all)."),
}

_SAMPLING_KEYS = ("sampling_temperature", "sampling_topk", "sampling_topp")


@dataclasses.dataclass(frozen=True)
class Decoding:
  """What one inference decode does (from a decoder's params, checked)."""

  beam_width: int
  n_best: int = 1
  sampling: bool = False
  temperature: float = 1.0
  topk: int = 0
  topp: float = 1.0

  @property
  def rows(self) -> int:
    """Hypotheses decoded per example (what the memory a step reads is tiled to)."""
    return self.n_best if self.sampling else self.beam_width

  @classmethod
  def from_params(cls, params: Mapping[str, Any], beam_width: int,
                  beam_key: str) -> Decoding:
    """The decoding of ``params`` with beam width ``beam_width`` (its key ``beam_key``, or
    "" for a decoder without a beam search).

    Raises:
      ConfigError: a value out of range, or keys that contradict each other.
    """
    n_best, sample = params["n_best"], params["sampling"]
    if n_best < 1:
      raise ConfigError(f"decoder_params/n_best: must be >= 1, got {n_best}")
    if not sample:
      for key in _SAMPLING_KEYS:
        if params[key] is not None:
          raise ConfigError(f"decoder_params/{key}: takes effect only with sampling: True; "
                            f"set it, or remove {key}")
      if n_best > beam_width:
        wider = (f"{beam_key} >= {n_best}" if beam_key else
                 "BeamSearchRNNDecoderWithAttention with beam_width >= n_best")
        raise ConfigError(f"decoder_params/n_best: {n_best} hypotheses need {wider} (the beam "
                          f"width is {beam_width}), or sampling: True to draw {n_best} samples")
      return cls(beam_width, n_best)
    if beam_width != 1:
      raise ConfigError(f"decoder_params/sampling: draws each sample on its own (beam width 1; "
                        f"n_best samples per input); set {beam_key} to 1, not {beam_width}")
    temperature = params["sampling_temperature"]
    temperature = 1.0 if temperature is None else temperature
    topk = params["sampling_topk"] or 0
    topp = params["sampling_topp"]
    topp = 1.0 if topp is None else topp
    if temperature <= 0:
      raise ConfigError(f"decoder_params/sampling_temperature: must be > 0, got {temperature}")
    if topk < 0:
      raise ConfigError(f"decoder_params/sampling_topk: must be >= 0 (0: every token), "
                        f"got {topk}")
    if not 0.0 < topp <= 1.0:
      raise ConfigError(f"decoder_params/sampling_topp: must be in (0, 1], got {topp}")
    return cls(1, n_best, True, temperature, topk, topp)


def decode(decoding: Decoding, step: beam_search.StepFn, go: tf.Tensor, decode_lengths: Any,
           params: Mapping[str, Any], vocab_size: int, *, alpha: float = 0.0,
           states: Any = None, buffers: Any = None, coverage_penalty: float = 0.0,
           coverage_fn: Callable | None = None, seed: int | None = None,
           sources: tuple | None = None) -> dict:
  """Greedy search, beam search or sampling, as ``decoding`` says; the decoder's output.

  Args:
    decoding: what to do.
    step, go, decode_lengths, states, buffers: the step function, initial ids [B], most
      tokens per example, and what it carries (see :mod:`open_seq2seq.parts.beam_search`).
    params: the decoder's params (symbols, ``min_decode_length``, ``beam_stop``,
      ``beam_finish``).
    vocab_size: logits per step.
    alpha, coverage_penalty, coverage_fn: beam search's penalties.
    seed: the base seed of samples: the run's ``random_seed`` (None, an unseeded run: a
      fresh draw from Python's RNG each time a decode is built).
    sources: the batch's ``(source ids, lengths)``: each example's samples follow from its
      source sentence (None: from its row in the batch).

  Returns:
    ``"outputs"`` [B, T], ``"final_sequence_lengths"`` [B], ``"scores"`` [B] of the best
    hypothesis and, with ``n_best`` > 1, ``"nbest_outputs"`` [B, N, T], ``"nbest_scores"``
    and ``"nbest_lengths"`` [B, N].
  """
  p = params
  end = p["END_SYMBOL"]
  common = dict(states=states, pad_id=p["PAD_SYMBOL"], min_length=p["min_decode_length"],
                buffers=buffers,
                banned_ids=tuple(i for i in (p["PAD_SYMBOL"], p["GO_SYMBOL"]) if i != end))
  if decoding.sampling:
    ids, lengths = (None, None) if sources is None else sources
    seed = random.getrandbits(32) if seed is None else seed
    seeds = sampling.example_seeds(seed, tf.shape(go)[0], ids, lengths)
    result = sampling.sample_decode(step, go, decode_lengths, end, seeds, decoding.n_best,
                                    decoding.temperature, decoding.topk, decoding.topp,
                                    **common)
  elif decoding.beam_width == 1:
    ids, scores, lengths = beam_search.greedy_decode(step, go, decode_lengths, end, **common)
    return {"outputs": ids, "final_sequence_lengths": lengths, "scores": scores}
  else:
    extra = {} if coverage_fn is None else {"coverage_penalty": coverage_penalty,
                                            "coverage_fn": coverage_fn}
    result = beam_search.beam_search(step, go, decoding.beam_width, decode_lengths,
                                     vocab_size, alpha, end, stop=p["beam_stop"],
                                     finish=p["beam_finish"], **extra,
                                     **common)
  out = {"outputs": result.ids[:, 0], "final_sequence_lengths": result.lengths[:, 0],
         "scores": result.scores[:, 0]}
  n = decoding.n_best
  if n > 1:
    out.update(nbest_outputs=result.ids[:, :n], nbest_scores=result.scores[:, :n],
               nbest_lengths=result.lengths[:, :n])
  return out
