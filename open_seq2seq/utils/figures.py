"""Labelled figures as RGB arrays, for PNG files (``outputs.PngFile``) and TensorBoard
images (``outputs.ImageSample``).

matplotlib is imported when a figure is drawn, not when this module is: importing the
package stays fast, and processes that never draw never load it. Figures are drawn on
matplotlib's Agg canvas directly (no ``pyplot``): no display, no global figure registry,
nothing to close.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: Points of height a tick label needs; denser labels are thinned to every k-th one.
_LABEL_POINTS = 8.0
_DPI = 100


def heatmap_figure(matrix: np.ndarray, *, title: str, x_label: str, y_label: str,
                   colorbar_label: str, y_tick_labels: Sequence[str] | None = None
                   ) -> np.ndarray:
  """A heat map of ``matrix`` [rows, columns] with axes, a colour bar and a title.

  Row 0 is drawn at the bottom and column 0 on the left; the colours span 0 to the
  matrix's largest value. The figure grows with the matrix (within limits) so that each row
  keeps room for its label.

  Args:
    matrix: the values; rows along the y axis, columns along the x axis.
    title, x_label, y_label, colorbar_label: the texts (drawn as written: no TeX).
    y_tick_labels: one label per row (e.g. the input's characters), or None for the
      row indices. When rows are too dense for every label, every k-th row is labelled.

  Returns:
    [height, width, 3] float32 image in [0, 1].
  """
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  values = np.asarray(matrix, np.float32)
  if values.ndim != 2:
    raise ValueError(f"heatmap_figure needs a 2-D matrix, got shape {values.shape}")
  rows, columns = values.shape
  width = min(max(3.0 + 0.06 * columns, 6.0), 16.0)
  height = min(max(1.6 + 0.11 * rows, 3.5), 14.0)
  figure = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
  canvas = FigureCanvasAgg(figure)
  axes = figure.add_subplot()
  peak = float(values.max()) if values.size else 0.0
  image = axes.imshow(values if values.size else np.zeros((1, 1), np.float32),
                      origin="lower", aspect="auto", interpolation="nearest",
                      cmap="viridis", vmin=0.0, vmax=peak if peak > 0 else 1.0)
  axes.set_title(title, parse_math=False)
  axes.set_xlabel(x_label, parse_math=False)
  axes.set_ylabel(y_label, parse_math=False)
  if y_tick_labels is not None and len(y_tick_labels) == rows and rows:
    plot_points = max((height - 1.2) * 72.0, 72.0)  # the axes' height, less title and labels
    every = max(1, math.ceil(rows * _LABEL_POINTS / plot_points))
    positions = list(range(0, rows, every))
    axes.set_yticks(positions, [str(y_tick_labels[p]) for p in positions], parse_math=False,
                    fontsize=7, fontfamily="monospace")
  figure.colorbar(image, ax=axes, label=colorbar_label, aspect=40, pad=0.02)
  canvas.draw()
  rgba = np.asarray(canvas.buffer_rgba())
  return rgba[..., :3].astype(np.float32) / 255.0
