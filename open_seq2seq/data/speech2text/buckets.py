"""Duration buckets of speech batches: utterance lengths from audio headers, bucket edges and
the audio budget of a batch (``data_layer_params/batching: "duration"``).

The speech layer batches with the shared :class:`~open_seq2seq.data.transforms.Batching`,
whose token budget here counts feature frames: with ``batching: "duration"`` a batch holds at
most ``batch_duration`` seconds of *padded* audio,

    examples in the batch x padded time dimension x seconds per frame <= batch_duration,

which is what memory and compute see (the padded ``[B, T, F]`` tensor; NeMo's and ESPnet's
budgets count the same). An utterance longer than the whole budget is a batch of its own.
Elements are bucketed by their decoded frame count inside the ``tf.data`` graph (after speed
perturbation), so the budget holds for what the model receives; the sizes of the buckets and
the batch count of an epoch come from the frame counts the audio headers give when the layer
is built (``soundfile.info``: no decoding), so ``batches_per_epoch`` counts the batches one
pass makes exactly (without speed perturbation, which moves utterances between buckets).
Bucket edges are given in seconds or placed at quantiles of the audio: each of the
``num_buckets`` buckets then holds about the same seconds of audio, hence about as many
batches.

Training reads whole epochs (:func:`~open_seq2seq.data.transforms.whole_epochs`): each epoch
is a fresh seeded shuffle of the shard's rows, and its buckets' partial batches end it, so
every utterance appears once per epoch in exactly ``batches_per_epoch`` batches, batches of
all durations interleave as the buckets fill, and a checkpointed iterator resumes exactly.
Every bucket holds back at most one partial batch, so the pipeline keeps (and a checkpoint of
the iterator stores) up to ``num_buckets x batch_duration`` of features besides its prefetch
buffer.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np

from open_seq2seq.data import transforms
from open_seq2seq.data.speech2text.audio import check_audio_header
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.params import Param

#: Buckets of ``batching: "duration"`` when neither ``bucket_boundaries`` nor ``num_buckets``
#: is given: ~10 % padding on a LibriSpeech-like mix (3 % with 30 buckets, 44 % with one,
#: 57 % batching 16 utterances; scripts/benchmark_speech_buckets.py), while the partial
#: batches held back stay within 10 budgets.
DEFAULT_NUM_BUCKETS = 10

#: The speech layer's batching keys (merged into Speech2TextDataLayer.PARAMS).
BATCHING_PARAMS = {
    "batching": Param(str, "examples", "'examples': batch_size_per_gpu utterances per batch; "
                      "'duration': batch_duration seconds of padded audio per batch.",
                      choices=("examples", "duration")),
    "batch_duration": Param((float, None), None,
                            "With batching 'duration': seconds of audio per batch, padding "
                            "included (utterances x padded longest); a longer utterance is a "
                            "batch of its own."),
    "bucket_boundaries": Param((list, None), None,
                               "Bucket edges in seconds, increasing: utterances of [b_i, b_i+1) "
                               "are batched together (None: num_buckets)."),
    "num_buckets": Param((int, None), None,
                         "Buckets with edges at quantiles of the audio, each holding about the "
                         f"same seconds (None: {DEFAULT_NUM_BUCKETS} with 'duration', one "
                         "with 'examples')."),
    "batch_size_multiple": Param(int, 1, "With batching 'duration': round each bucket's batch "
                                 "size down to a multiple of this (8 suits half precision)."),
}


def check_batching_params(p: Mapping[str, Any]) -> None:
  """Rules across the batching keys (one-line ConfigErrors)."""
  where = "data_layer_params"
  if p["pad_to"] < 1:
    raise ConfigError(f"{where}/pad_to: must be at least 1, got {p['pad_to']}")
  by_duration = p["batching"] == "duration"
  if by_duration and (p["batch_duration"] is None or p["batch_duration"] <= 0):
    raise ConfigError(f"{where}/batch_duration: batching 'duration' needs a positive number "
                      f"of seconds per batch, got {p['batch_duration']}")
  if not by_duration and p["batch_duration"] is not None:
    raise ConfigError(f"{where}/batch_duration: only used with batching: 'duration' (batches "
                      "are batch_size_per_gpu utterances now); set batching or remove it")
  edges = p["bucket_boundaries"]
  if edges is not None:
    numbers = all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in edges)
    if not edges or not numbers or edges[0] <= 0 or any(
        b <= a for a, b in zip(edges, edges[1:])):
      raise ConfigError(f"{where}/bucket_boundaries: expected increasing positive seconds, "
                        f"got {edges}")
    if p["num_buckets"] is not None:
      raise ConfigError(f"{where}: give bucket_boundaries or num_buckets, not both")
  if p["num_buckets"] is not None and p["num_buckets"] < 1:
    raise ConfigError(f"{where}/num_buckets: must be at least 1, got {p['num_buckets']}")
  if p["batch_size_multiple"] < 1:
    raise ConfigError(f"{where}/batch_size_multiple: must be at least 1, got "
                      f"{p['batch_size_multiple']}")


def bucketed(p: Mapping[str, Any]) -> bool:
  """Whether batches depend on durations (else: batch_size_per_gpu utterances, one bucket)."""
  return (p["batching"] == "duration" or p["bucket_boundaries"] is not None
          or (p["num_buckets"] or 1) > 1)


def resampled_length(num_samples: int, rate: int, sample_freq: int) -> int:
  """Samples of ``num_samples`` at ``rate`` Hz once resampled to ``sample_freq`` (what
  :func:`~open_seq2seq.data.speech2text.audio.resample_signal` returns: scipy's polyphase
  filter makes ``ceil(n * up / down)`` samples)."""
  if rate == sample_freq or num_samples == 0:
    return num_samples
  ratio = Fraction(sample_freq / rate).limit_denominator(1000)
  return -(-num_samples * ratio.numerator // ratio.denominator)


def hop_seconds(extractor) -> float:
  """The features' hop in seconds (what the pipeline's ``duration`` counts per frame)."""
  return extractor.hop_length / extractor.sample_freq


class HeaderLengths:
  """Feature frames of each CSV row, from its audio header, read when first asked for.

  A layer's shard copies (:meth:`DataLayer.shard` is a shallow copy) share this object, so a
  header is read at most once per process however many shards it builds.

  Args:
    paths: the rows' audio files.
    sample_freq, resample: the layer's (files are resampled to ``sample_freq``).
    extractor: the layer's FeatureExtractor (``num_frames`` of a number of samples).
  """

  def __init__(self, paths: Sequence[str], sample_freq: int, resample: bool, extractor):
    self._paths = paths
    self._sample_freq = sample_freq
    self._resample = resample
    self._extractor = extractor
    self._frames = np.full(len(paths), -1, np.int64)

  def frames(self, rows: np.ndarray) -> np.ndarray:
    """Frames of the given rows (int64), reading the headers not read yet."""
    import soundfile  # imported lazily, as audio.py does
    rows = np.asarray(rows, np.int64)
    for row in rows[self._frames[rows] < 0]:
      path = self._paths[row]
      try:
        info = soundfile.info(path)
      except (OSError, RuntimeError):
        info = None
      if info is None or info.frames == 0 or (info.samplerate != self._sample_freq
                                              and not self._resample):
        # a row of a shard the layer did not check when it read the CSVs: its one-line error
        check_audio_header(path, self._sample_freq, self._resample, f"row {row + 1}")
        info = info or soundfile.info(path)
      self._frames[row] = self._extractor.num_frames(
          resampled_length(info.frames, info.samplerate, self._sample_freq))
    return self._frames[rows]

  def shard(self, num_shards: int, index: int, limits: Mapping[str, Any] | bool = False
            ) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, frames)`` of shard ``index`` (row modulo ``num_shards``, as the pipelines
    shard), without the rows outside ``min_duration``/``max_duration`` of ``limits`` (the
    layer's params in train mode) if given."""
    rows = np.arange(index, len(self._paths), num_shards)
    frames = self.frames(rows)
    if not limits:
      return rows, frames
    keep = duration_mask(frames, hop_seconds(self._extractor), limits["min_duration"],
                         limits["max_duration"])
    return rows[keep], frames[keep]


def duration_mask(frames: np.ndarray, seconds_per_frame: float, low: float | None,
                  high: float | None) -> np.ndarray:
  """``min_duration``/``max_duration`` as the training pipeline applies them (float32
  ``(frames - 1) * seconds_per_frame``, limits <= 0 ignored), on header frame counts."""
  duration = (np.asarray(frames, np.int64) - 1).astype(np.float32) * np.float32(
      seconds_per_frame)
  keep = np.ones(len(duration), bool)
  if high is not None and high > 0:
    keep &= duration <= np.float32(high)
  if low is not None and low > 0:
    keep &= duration >= np.float32(low)
  return keep


def edges_from_seconds(seconds: Sequence[float], seconds_per_frame: float) -> list[int]:
  """Frame boundaries of buckets given in seconds: an utterance of ``(f - 1) *
  seconds_per_frame`` seconds lies below ``s`` when ``f < ceil(s / seconds_per_frame) + 1``."""
  edges = [math.ceil(s / seconds_per_frame - 1e-9) + 1 for s in seconds]
  return sorted(set(edges))


def quantile_edges(frames: np.ndarray, num_buckets: int, multiple: int = 1) -> list[int]:
  """Frame boundaries splitting ``frames`` into ``num_buckets`` buckets of about the same total
  length (the audio, not the count, is shared equally: the long tail gets its own buckets).

  Each bucket's longest length is rounded up to ``multiple`` (the padded time dimension), so
  no bucket pays for padding its neighbour does not; duplicates merge.
  """
  frames = np.sort(np.asarray(frames, np.int64))
  if num_buckets <= 1 or len(frames) == 0:
    return []
  mass = np.cumsum(frames) / frames.sum()
  # a bucket ends with the last length before its share of the audio is reached
  picks = np.searchsorted(mass, np.arange(1, num_buckets) / num_buckets) - 1
  uppers = {transforms.round_up(int(frames[max(i, 0)]), multiple) for i in picks}
  return [u + 1 for u in sorted(uppers) if u + 1 <= frames[-1]]


def max_speed(augmentation: Mapping[str, Any]) -> float:
  """Largest length factor of the speed perturbation (1.0 without it)."""
  speed = augmentation.get("speed_perturbation_ratio")
  if speed is None:
    return 1.0
  return max(speed) if isinstance(speed, list) else 1.0 + float(speed)


def make_batching(p: Mapping[str, Any], batch_size: int, frames: np.ndarray, extractor,
                  speed: float = 1.0) -> transforms.Batching:
  """The Batching of a speech layer over utterances of these frame counts.

  Args:
    p: validated data_layer_params.
    batch_size: utterances per batch with batching 'examples'.
    frames: feature frames of the utterances this pipeline reads (this shard, filtered).
    extractor: the layer's FeatureExtractor (the frames' hop).
    speed: largest speed-perturbation factor: the last bucket's batches are sized for the
      longest utterance stretched by it, so they keep to the budget too.
  """
  pad_to, frame_seconds = p["pad_to"], hop_seconds(extractor)
  longest = int(frames.max()) if len(frames) else 1
  longest = max(1, math.ceil(longest * speed) + (1 if speed > 1 else 0))
  if p["bucket_boundaries"] is not None:
    edges = edges_from_seconds(p["bucket_boundaries"], frame_seconds)
  else:
    num_buckets = p["num_buckets"] or (DEFAULT_NUM_BUCKETS if p["batching"] == "duration"
                                       else 1)
    edges = quantile_edges(frames, num_buckets, pad_to)
  edges = tuple(e for e in edges if 1 < e <= longest)  # no bucket left empty by definition
  common = dict(boundaries=edges, max_length=longest, pad_multiple=pad_to,
                length_keys=("source_length",), pad_keys=("source",))
  if p["batching"] != "duration":
    return transforms.Batching(batch_size, **common)
  return transforms.Batching(budget_frames(p["batch_duration"], frame_seconds),
                             by_tokens=True, batch_multiple=p["batch_size_multiple"], **common)


def budget_frames(batch_duration: float, seconds_per_frame: float) -> int:
  """Padded frames per batch that ``batch_duration`` seconds allow."""
  return max(1, math.floor(batch_duration / seconds_per_frame + 1e-6))


def print_over_budget_notice(p: Mapping[str, Any], frames: np.ndarray, extractor,
                             mode: str) -> None:
  """Prints one line on stderr when utterances are longer than the budget (each is then a
  batch of its own)."""
  notice = over_budget_notice(p, frames, hop_seconds(extractor), mode)
  if notice:
    print(notice, file=sys.stderr, flush=True)


def over_budget_notice(p: Mapping[str, Any], frames: np.ndarray, frame_seconds: float,
                       mode: str) -> str | None:
  """The line :func:`print_over_budget_notice` prints, or None."""
  if p["batching"] != "duration" or not len(frames):
    return None
  padded = -(-np.asarray(frames, np.int64) // p["pad_to"]) * p["pad_to"]
  over = padded > budget_frames(p["batch_duration"], frame_seconds)
  if not over.any():
    return None
  longest = (int(frames.max()) - 1) * frame_seconds
  return (f"notice: {int(over.sum())} of {len(frames)} {mode} utterances are longer than "
          f"batch_duration={p['batch_duration']:g} s (longest {longest:.1f} s, padded): each is a "
          "batch of its own; raise batch_duration or set max_duration to drop them")
