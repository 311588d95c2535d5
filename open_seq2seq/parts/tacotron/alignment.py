"""How well an attention aligns text with speech: the numbers the learning tests gate on,
and the alignment picture (a plain array, and a labelled figure).

* **band mass**: the share of attention weight within ``|n / N - s / S| < width`` of the
  diagonal, over a sequence's real steps ``S`` and symbols ``N``. Text and speech advance
  together, so an aligned model puts most of its weight there (a uniform attention puts
  about ``2 * width``);
* **focus rate**: the mean over steps of the largest weight (a sharp attention is near 1; a
  uniform one is ``1 / N``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from open_seq2seq.utils.figures import heatmap_figure

#: How symbols that would be invisible or ambiguous as tick labels are shown.
_SHOWN_AS = {" ": "\u2423", "\t": "\\t", "\n": "\\n"}


def band_mass(alignments: np.ndarray, steps: int, symbols: int, width: float = 0.1) -> float:
  """Share of the weight of ``alignments[:steps, :symbols]`` within the diagonal band."""
  a = np.asarray(alignments, np.float64)[:steps, :symbols]
  if a.size == 0 or a.sum() <= 0:
    return 0.0
  s = np.arange(steps)[:, None] / max(steps, 1)
  n = np.arange(symbols)[None, :] / max(symbols, 1)
  return float(a[np.abs(n - s) < width].sum() / a.sum())


def focus_rate(alignments: np.ndarray, steps: int, symbols: int) -> float:
  """Mean over the real steps of the largest attention weight."""
  a = np.asarray(alignments, np.float64)[:steps, :symbols]
  return float(a.max(axis=1).mean()) if a.size else 0.0


def alignment_image(alignments: np.ndarray, steps: int, symbols: int) -> np.ndarray:
  """[symbols, steps] image in [0, 1], text upwards and time to the right (row 0 on top is
  the last symbol), each column scaled by its maximum so weak steps stay visible."""
  a = np.asarray(alignments, np.float32)[:steps, :symbols].T
  peak = np.maximum(a.max(axis=0, keepdims=True), 1e-8)
  return np.flipud(a / peak)


def symbol_labels(symbols: Sequence[str], ids: Sequence[int]) -> list[str]:
  """Tick labels of the encoder steps fed ``ids``: each id's symbol, a space as ``\u2423``
  and an ARPAbet phoneme without its ``@`` (``@AA1`` -> ``AA1``)."""
  labels = []
  for i in ids:
    i = int(i)
    symbol = symbols[i] if 0 <= i < len(symbols) else f"#{i}"
    if len(symbol) > 1 and symbol.startswith("@"):
      symbol = symbol[1:]
    labels.append(_SHOWN_AS.get(symbol, symbol))
  return labels


def alignment_figure(alignments: np.ndarray, steps: int, symbols: int,
                     labels: Sequence[str] | None = None, title: str = "attention",
                     frames_per_step: int = 1) -> np.ndarray:
  """A labelled figure of ``alignments[:steps, :symbols]``: decoder steps to the right, the
  encoder steps (the input's symbols, ``labels`` when given, else their indices) upwards,
  the attention weight as colour with a colour bar, and ``title``.

  Returns:
    [height, width, 3] float32 image in [0, 1] (larger than the matrix).
  """
  weights = np.asarray(alignments, np.float32)[:steps, :symbols].T
  if labels is not None and len(labels) != weights.shape[0]:
    labels = None  # labels of another input than these weights: show indices instead
  frames = "one frame" if frames_per_step == 1 else f"{frames_per_step} frames"
  return heatmap_figure(weights, title=title, x_label=f"decoder step ({frames} each)",
                        y_label="encoder step (input symbol)",
                        colorbar_label="attention weight", y_tick_labels=labels)


def spectrogram_image(frames: np.ndarray, length: int) -> np.ndarray:
  """[features, frames] image in [0, 1] of a spectrogram's first ``length`` frames, low
  frequencies at the bottom, scaled between its min and max."""
  x = np.asarray(frames, np.float32)[:length].T
  lo, hi = float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 1.0
  return np.flipud((x - lo) / max(hi - lo, 1e-8))
