"""profile_steps traces the steps it names; step_traces reads where their time went."""

import os

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from open_seq2seq.training.profiling import trace_dir
from open_seq2seq.utils import step_traces
from tests.helpers import linear

MS = 10**9  # picoseconds


def _write_trace(path, steps, ops, timestamp_ns=0):
  """A host plane: ``steps`` [(start, end) ms] on a python thread, ``ops`` [(start, end, name,
  type) ms] on a compute thread, and an executor wrapper event that must be ignored."""
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name="/host:CPU")
  names = {}

  def meta(name, display=""):
    if name not in names:
      names[name] = len(names) + 1
      plane.event_metadata[names[name]].id = names[name]
      plane.event_metadata[names[name]].name = name
      plane.event_metadata[names[name]].display_name = display
    return names[name]

  python = plane.lines.add(name="python", timestamp_ns=timestamp_ns)
  for start, end in steps:
    python.events.add(metadata_id=meta("train_step"), offset_ps=start * MS,
                      duration_ps=(end - start) * MS)
  compute = plane.lines.add(name="tf_Compute/1", timestamp_ns=timestamp_ns)
  for start, end, name, kind in ops:
    compute.events.add(metadata_id=meta(f"{name}:{kind}", kind), offset_ps=start * MS,
                       duration_ps=(end - start) * MS)
  compute.events.add(metadata_id=meta("ExecutorState::Process"), offset_ps=0,
                     duration_ps=1000 * MS)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(space.SerializeToString())


def _worker(tmp_path, name, ready, timestamp_ns=0):
  """Two steps of 100 ms: compute to ``ready``, the gradients' all-reduce from then until the
  sum arrives at 90, the update (beside a small all-reduce of the loss) to 100."""
  path = str(tmp_path / name / "plugins" / "profile" / "2026_01_01" / "host.xplane.pb")
  ops = []
  for base in (0, 100):
    ops += [(base, base + ready, "dense/MatMul", "_MklMatMul"),
            (base + ready, base + 90, "allreduce", "CollectiveReduceV2"),
            (base + 90, base + 100, "adam/Sub", "Sub"),
            (base + 95, base + 97, "loss_sum", "CollectiveReduceV2")]
  _write_trace(path, [(0, 100), (100, 200)], ops, timestamp_ns)
  return path


def test_a_step_is_split_into_compute_exchange_and_the_rest(tmp_path):
  path = _worker(tmp_path, "chief", ready=40)
  assert step_traces.latest_trace(str(tmp_path / "chief")) == path
  steps = step_traces.step_traces(*step_traces.read_events(path))
  assert len(steps) == 2
  for step in steps:
    assert step.wall == pytest.approx(100)
    assert step.compute == pytest.approx(40 + 10)
    assert step.exchange == pytest.approx(50)  # the loss's all-reduce overlaps the update
    assert step.other == pytest.approx(0)
    assert step.by_type == pytest.approx({"_MklMatMul": 40, "CollectiveReduceV2": 52,
                                          "Sub": 10})


def test_the_worker_ready_last_gives_the_transfer_the_others_waited_for_it(tmp_path):
  fast = step_traces.step_traces(*step_traces.read_events(_worker(tmp_path, "a", ready=40)))
  slow = step_traces.step_traces(*step_traces.read_events(
      _worker(tmp_path, "b", ready=70, timestamp_ns=5_000_000)))  # its own clock's start
  rows = step_traces.compare_workers([fast, slow])
  assert rows == [pytest.approx({"transfer": 20, "waiting": 30, "wall": 100})] * 2


def test_an_all_reduce_without_op_events_is_the_longest_wait_between_ops(tmp_path):
  """Horovod's ops run on its own thread and leave no event: the step just waits."""
  path = str(tmp_path / "plugins" / "profile" / "1" / "host.xplane.pb")
  _write_trace(path, [(0, 100)], [(0, 30, "a", "_MklMatMul"), (35, 40, "b", "Mul"),
                                  (85, 100, "adam/Sub", "Sub")])
  events = step_traces.read_events(path)
  one_process = step_traces.step_traces(*events)[0]
  assert one_process.exchange == 0 and one_process.other == pytest.approx(50)
  step = step_traces.step_traces(*events, untraced_allreduce=True)[0]
  assert step.compute == pytest.approx(50) and step.exchange == pytest.approx(45)
  assert step.other == pytest.approx(5)


def test_no_trace_is_one_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="train with profile_steps"):
    step_traces.latest_trace(str(tmp_path))


def test_profile_steps_traces_exactly_the_steps_named(tmp_path):
  trainer = linear.trainer(str(tmp_path), max_steps=6, profile_steps=[2, 4])
  trainer.train(trainer.model.data_layer)
  assert trace_dir(str(tmp_path), 0) == str(tmp_path)
  assert trace_dir(str(tmp_path), 1) == str(tmp_path / "worker-1")
  steps, ops = step_traces.read_events(step_traces.latest_trace(str(tmp_path)))
  assert len(steps) == 3  # steps 2, 3 and 4
  assert any(kind == "_MklMatMul" or "MatMul" in kind for _, _, kind in ops)


def test_trace_summary_reads_the_chief_then_workers_by_number(tmp_path):
  from tests.helpers.speech import load_script
  for name in ("worker-10", "worker-2", "worker-x", "worker-1"):
    os.makedirs(tmp_path / name)
  found = load_script("trace_summary")._worker_dirs(str(tmp_path))
  assert [name for name, _ in found] == ["chief", "worker-1", "worker-2", "worker-10"]
  assert found[0][1] == str(tmp_path) and found[3][1] == str(tmp_path / "worker-10")
