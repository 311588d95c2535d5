"""``--mode=infer`` on 2 TF multi-worker processes (127.0.0.1) writes what one process writes:
every input once, in input order; the worker formats its own share only and writes nothing.

Each process runs in a folder of its own holding a copy of the trained run (``--logdir=run``,
``--infer_output_file=out.txt``, both relative), so whatever a process writes lands in its
own folder: the worker's must stay as it was. The tiny model (tests/helpers/inference.py)
also writes a PNG per input and a pickle, and records which examples each process formats.
"""

import os
import pickle
import shutil
import subprocess
import sys

import pytest

from open_seq2seq import launch
from tests.helpers import distributed as h
from tests.helpers.inference import RECORD_VAR, write_config

pytestmark = pytest.mark.slow

EXAMPLES = 43  # h.make_data's test split: shards of 22 and 21 inputs, 8 and 7 batches of 3
TIMEOUT = 300


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  root = tmp_path_factory.mktemp("distributed_inference")
  data = h.make_data(str(root / "data"))
  config = write_config(str(root), data, infer_batch=3)
  logdir = str(root / "trained")
  result = h.run("single", [f"--config_file={config}", "--mode=train", f"--logdir={logdir}",
                            "--max_steps=2"], timeout=TIMEOUT)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return config, logdir


def _folder(root, name, trained_logdir):
  folder = root / name
  shutil.copytree(trained_logdir, folder / "run")
  (folder / "records").mkdir()
  return folder


def _args(config):
  return [sys.executable, *h.run_py(), f"--config_file={config}", "--mode=infer",
          "--logdir=run", "--infer_output_file=out.txt"]


def _tree(folder):
  """Every file under ``folder`` with its size and modification time."""
  found = {}
  for directory, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(directory, name)
      found[os.path.relpath(path, folder)] = (os.path.getsize(path), os.path.getmtime(path))
  return found


def _records(folder):
  """(worker, example id) per example a process formatted."""
  pairs = []
  for name in sorted(os.listdir(folder / "records")):
    with open(folder / "records" / name, encoding="utf-8") as f:
      pairs += [tuple(int(x) for x in line.split()) for line in f]
  return pairs


def _outputs(folder):
  with open(folder / "out.txt", encoding="utf-8") as f:
    lines = f.read()
  with open(folder / "run" / "infer_lengths.pickle", "rb") as f:
    lengths = pickle.load(f)
  return lines, lengths, sorted(os.listdir(folder / "run" / "infer_images"))


def test_two_processes_write_the_one_process_outputs_and_the_worker_writes_nothing(
    trained, tmp_path):
  config, logdir = trained
  single = _folder(tmp_path, "single", logdir)
  result = subprocess.run(_args(config), cwd=single, capture_output=True, text=True,
                          timeout=TIMEOUT,
                          env=h.environment(**{RECORD_VAR: str(single / "records")}))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  expected = _outputs(single)

  chief, worker = _folder(tmp_path, "rank0", logdir), _folder(tmp_path, "rank1", logdir)
  before = _tree(worker / "run")
  port = launch.free_base_port(2)
  procs = []
  for rank, folder in enumerate((chief, worker)):
    env = h.environment(**launch.rank_environment(rank, 2, port),
                        **{RECORD_VAR: str(chief / "records")})  # one folder for both
    procs.append(subprocess.Popen(_args(config), cwd=folder, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE))
  try:
    outs = [proc.communicate(timeout=TIMEOUT) for proc in procs]
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.communicate()
  for proc, (out, err) in zip(procs, outs):
    assert proc.returncode == 0, out[-3000:] + err[-3000:]

  lines, lengths, images = _outputs(chief)
  assert lines.count("\n") == EXAMPLES
  assert (lines, lengths, images) == expected  # complete, in input order, as one process
  assert sorted(lengths) == list(range(EXAMPLES))
  chief_out, worker_out = outs[0][0], outs[1][0]
  assert f"wrote {EXAMPLES} predictions to out.txt" in chief_out
  assert f"wrote {EXAMPLES} records to {os.path.join('run', 'infer_lengths.pickle')}" in chief_out
  assert "wrote" not in worker_out and "BLEU" in chief_out and "BLEU" not in worker_out

  # the worker wrote nothing: its folder is as it was (no out.txt, no image, no pickle)
  assert sorted(os.listdir(worker)) == ["records", "run"]
  assert os.listdir(worker / "records") == []
  assert _tree(worker / "run") == before
  # each process formatted its own shard (ids modulo 2), every example exactly once
  formatted = _records(chief)
  assert sorted(i for _, i in formatted) == list(range(EXAMPLES))
  assert all(i % 2 == worker_id for worker_id, i in formatted)
  assert {worker_id for worker_id, _ in formatted} == {0, 1}
  assert sorted(_records(single)) == [(0, i) for i in range(EXAMPLES)]
