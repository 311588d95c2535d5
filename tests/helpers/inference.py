"""A tiny translation model whose inference writes every kind of output and says which
examples each process formatted: for the tests of inference over several processes."""

from __future__ import annotations

import os

import numpy as np

from open_seq2seq.models import Text2Text
from open_seq2seq.outputs import PickledObject, PngFile
from tests.helpers import distributed

#: Folder where each process appends ``<worker> <example id>`` per example it formats.
RECORD_VAR = "OPEN_SEQ2SEQ_TEST_FINALIZE_RECORD"


class RecordingText2Text(Text2Text):
  """Text2Text that also writes a PNG per input (``infer_images/<id>.png``), a pickle of the
  translations' lengths (``infer_lengths.pickle``), and records what it formats."""

  def finalize_inference(self, results: list) -> list:
    directory = os.environ.get(RECORD_VAR)
    worker = self.data_layer.worker_id
    if directory:
      with open(os.path.join(directory, f"finalize-{worker}.txt"), "a",
                encoding="utf-8") as f:
        f.writelines(f"{worker} {i}\n" for i, _ in results)
    outputs = super().finalize_inference(results)
    outputs += [PngFile(np.full((1, 2), (i % 5) / 4.0), f"infer_images/{i}.png")
                for i, _ in results]
    outputs.append(PickledObject({i: len(text) for i, text in results}, "infer_lengths.pickle"))
    return outputs


def write_config(directory: str, data_dir: str, infer_batch: int) -> str:
  """tests/helpers/distributed.py's tiny config with this model, ``infer_batch`` inputs
  per inference batch."""
  text = distributed.CONFIG_TEMPLATE.format(data=data_dir)
  text = text.replace("from open_seq2seq.models import Text2Text\n",
                      "from tests.helpers.inference import RecordingText2Text\n")
  text = text.replace("base_model = Text2Text", "base_model = RecordingText2Text")
  old = '''infer_params = {"data_layer": ParallelTextDataLayer, "eval_batch_size_per_gpu": 7,'''
  assert old in text
  text = text.replace(old, f'''infer_params = {{"data_layer": ParallelTextDataLayer,
                "eval_batch_size_per_gpu": {infer_batch},''')
  path = os.path.join(directory, "recording_config.py")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path
