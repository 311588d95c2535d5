"""The alignment figure of speech synthesis (issue 38): a labelled colour picture, not the
bare matrix, drawn with the input's symbols for the PNG infer writes and TensorBoard."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.models import text2speech
from open_seq2seq.models.text2speech import Text2Speech
from open_seq2seq.outputs import ImageSample, PngFile
from open_seq2seq.parts.tacotron import alignment
from open_seq2seq.parts.tacotron.alignment import alignment_figure, symbol_labels
from tests.unit.test_text2speech_data import model_config


def _diagonal(steps, symbols):
  s = np.arange(steps)[:, None] / steps - np.arange(symbols)[None, :] / symbols
  weights = np.exp(-(s * 12.0) ** 2)
  return weights / weights.sum(axis=1, keepdims=True)


def test_the_figure_is_larger_than_the_matrix_and_in_colour():
  weights = _diagonal(63, 57)
  image = alignment_figure(np.pad(weights, ((0, 5), (0, 4))), 63, 57,  # padding left out
                           labels=[chr(ord("a") + i % 26) for i in range(57)],
                           title="LJ001-0001: free-running attention", frames_per_step=3)
  assert image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.float32
  assert image.shape[0] > 2 * 57 and image.shape[1] > 2 * 63  # axes, labels, a colour bar
  assert 0.0 <= image.min() and image.max() <= 1.0
  colourful = np.abs(image[..., 0] - image[..., 2]) > 0.2  # a grey pixel has r == g == b
  assert colourful.mean() > 0.1


def test_the_drawing_gets_the_labels_axes_and_title(monkeypatch):
  drawn = {}
  monkeypatch.setattr(alignment, "heatmap_figure",
                      lambda matrix, **kwargs: drawn.update(kwargs, matrix=matrix))
  labels = symbol_labels(("<p>", "<s>", "</s>", " ", "a", "b", "@AA1"), [1, 4, 3, 6, 5, 2])
  assert labels == ["<s>", "a", "\u2423", "AA1", "b", "</s>"]
  alignment_figure(_diagonal(10, 6), 10, 6, labels=labels, title="t", frames_per_step=2)
  assert drawn["y_tick_labels"] == labels and drawn["title"] == "t"
  assert drawn["matrix"].shape == (6, 10)  # symbols upwards, decoder steps to the right
  assert drawn["x_label"] == "decoder step (2 frames each)"
  assert drawn["y_label"] == "encoder step (input symbol)"
  assert drawn["colorbar_label"] == "attention weight"
  alignment_figure(_diagonal(10, 6), 10, 5, labels=labels)  # labels of another input
  assert drawn["y_tick_labels"] is None  # indices rather than wrong labels


def test_labels_are_drawn():
  weights = _diagonal(20, 8)
  bare = alignment_figure(weights, 20, 8)
  labelled = alignment_figure(weights, 20, 8, labels=list("<abcdef>"))
  assert bare.shape == labelled.shape and np.abs(bare - labelled).max() > 0.5


@pytest.fixture(name="model")
def fixture_model(tmp_path):
  config = dict(model_config(None, tmp_path, dataset_files=None), save_to_tensorboard=True)
  return Text2Speech(resolve_config(Text2Speech, config, "interactive_infer"),
                     "interactive_infer")


def _batch_and_outputs(model):
  batch = next(iter(model.data_layer.dataset_from_inputs(["Hi you.", "Bye"])))
  batch = tf.nest.map_structure(lambda t: t.numpy(), batch)
  symbols = batch["source_tensors"][1]
  outputs = {"spectrogram": np.random.default_rng(1).normal(-2.0, 1.0, (2, 9, 10)),
             "final_sequence_lengths": np.array([9, 6]), "src_lengths": symbols,
             "alignments": np.full((2, 3, symbols.max()), 1.0 / symbols.max())}
  return batch, outputs


def _record(monkeypatch):
  calls = []

  def recording(*args, **kwargs):
    calls.append(kwargs)
    return alignment_figure(*args, **kwargs)

  monkeypatch.setattr(text2speech, "alignment_figure", recording)
  return calls


HI_YOU = ["<s>", "h", "i", "\u2423", "y", "o", "u", ".", "</s>"]  # as the encoder reads it


def test_infer_draws_each_sentence_with_its_symbols(model, monkeypatch):
  calls = _record(monkeypatch)
  batch, outputs = _batch_and_outputs(model)
  pngs = [f for f in model.interactive_outputs(batch, outputs) if isinstance(f, PngFile)]
  assert [c["labels"] for c in calls] == [HI_YOU, ["<s>", "b", "y", "e", "</s>"]]
  assert [c["title"] for c in calls] == [f"interactive_{i}: free-running attention"
                                         for i in (0, 1)]
  assert all(c["frames_per_step"] == 3 for c in calls)  # the decoder's reduction factor
  assert pngs[0].image.ndim == 3 and pngs[0].image.shape[2] == 3


def test_tensorboard_gets_the_same_free_running_figure(model, monkeypatch):
  calls = _record(monkeypatch)
  batch, outputs = _batch_and_outputs(model)
  images = {s.name: s.image for s in model.sample_summaries(batch, outputs)
            if isinstance(s, ImageSample)}
  assert calls[0]["labels"] == HI_YOU and "free-running" in calls[0]["title"]
  assert images["alignment"].ndim == 3 and images["alignment"].shape[2] == 3
