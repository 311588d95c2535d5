"""The GPU-facing distribution options, proven where a CPU can: ``all_reduce`` (NCCL, ring,
hierarchical copy, one device) maps to TensorFlow's implementations and refuses what does not
apply, and ``gpu_memory_growth`` reaches every GPU before TensorFlow initialises them (fake
GPUs stand in for real ones)."""

import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from open_seq2seq.distributed import cluster, factory, strategies
from open_seq2seq.errors import ConfigError
from tests.helpers import toy

GPUS = ["/gpu:0", "/gpu:1"]
CPUS = ["/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1"]
IMPLEMENTATIONS = tf.distribute.experimental.CommunicationImplementation


@pytest.mark.parametrize("choice,devices,expected", [
    ("auto", GPUS, type(None)),  # TensorFlow's own pick: NCCL between GPUs
    ("nccl", GPUS, tf.distribute.NcclAllReduce),
    ("hierarchical_copy", GPUS, tf.distribute.HierarchicalCopyAllReduce),
    ("one_device", GPUS, tf.distribute.ReductionToOneDevice),
    ("auto", CPUS, tf.distribute.ReductionToOneDevice),
    ("hierarchical_copy", CPUS, tf.distribute.HierarchicalCopyAllReduce),
])
def test_towers_sum_with_the_chosen_cross_device_ops(choice, devices, expected):
  assert type(strategies.all_reduce_for_towers(choice, devices)) is expected


@pytest.mark.parametrize("choice,devices,message", [
    ("ring", GPUS, "several processes"),
    ("nccl", CPUS, "needs GPU towers"),
])
def test_towers_refuse_what_does_not_apply(choice, devices, message):
  with pytest.raises(ConfigError, match=message):
    strategies.all_reduce_for_towers(choice, devices)


@pytest.mark.parametrize("choice,has_gpus,expected", [
    ("auto", True, IMPLEMENTATIONS.NCCL),
    ("auto", False, IMPLEMENTATIONS.RING),
    ("nccl", True, IMPLEMENTATIONS.NCCL),
    ("ring", True, IMPLEMENTATIONS.RING),
    ("ring", False, IMPLEMENTATIONS.RING),
])
def test_workers_use_the_chosen_collective(choice, has_gpus, expected):
  assert strategies.all_reduce_for_workers(choice, has_gpus) == expected


@pytest.mark.parametrize("choice,has_gpus,message", [
    ("nccl", False, "needs GPUs"),
    ("hierarchical_copy", True, "towers in one process"),
    ("one_device", False, "towers in one process"),
])
def test_workers_refuse_what_does_not_apply(choice, has_gpus, message):
  with pytest.raises(ConfigError, match=message):
    strategies.all_reduce_for_workers(choice, has_gpus)


@pytest.mark.parametrize("params,message", [
    ({"use_horovod": True, "all_reduce": "nccl"}, "does not apply with use_horovod"),
    ({"all_reduce": "ring"}, "needs several replicas"),
])
def test_the_backend_refuses_an_all_reduce_it_would_not_use(params, message, monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(ConfigError, match=message):
    factory.make_backend(params)


class _FakeGpus:
  def __init__(self, count, initialised=False):
    self.devices = [f"PhysicalDevice(GPU:{i})" for i in range(count)]
    self.initialised, self.grown, self.visible = initialised, [], None

  def list_physical_devices(self, kind=None):
    return list(self.devices) if kind == "GPU" else []

  def set_memory_growth(self, device, enable):
    if self.initialised:
      raise RuntimeError("Physical devices cannot be modified after being initialized")
    self.grown.append((device, enable))

  def set_visible_devices(self, devices, kind=None):
    assert kind == "GPU"
    self.visible = list(devices)


@pytest.fixture
def fake_gpus(monkeypatch):
  def install(count, initialised=False):
    fake = _FakeGpus(count, initialised)
    monkeypatch.setattr(tf.config, "list_physical_devices", fake.list_physical_devices)
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", fake.set_memory_growth)
    monkeypatch.setattr(tf.config, "set_visible_devices", fake.set_visible_devices)
    return fake
  return install


def test_memory_growth_reaches_every_gpu(fake_gpus):
  fake = fake_gpus(3)
  assert strategies.configure_gpu_memory(True) == 3
  assert fake.grown == [(d, True) for d in fake.devices]


def test_memory_growth_off_leaves_the_gpus_alone(fake_gpus):
  fake = fake_gpus(2)
  assert strategies.configure_gpu_memory(False) == 0 and fake.grown == []


def test_memory_growth_too_late_is_one_line(fake_gpus):
  fake_gpus(1, initialised=True)
  with pytest.raises(ConfigError, match="before TensorFlow initialises the GPUs"):
    strategies.configure_gpu_memory(True)


def test_the_backend_applies_memory_growth_first(fake_gpus, monkeypatch):
  """make_backend configures the GPUs before it builds any backend (a single device here)."""
  monkeypatch.delenv("TF_CONFIG", raising=False)
  fake = fake_gpus(2)
  factory.make_backend({"gpu_memory_growth": True, "num_gpus": 1})
  assert len(fake.grown) == 2


def test_hierarchical_copy_towers_sum_on_logical_cpu_devices():
  """The towers backend with ``all_reduce='hierarchical_copy'`` sums the replicas' values
  (own process: logical devices must be made before TensorFlow starts)."""
  script = textwrap.dedent("""
      import tensorflow as tf
      from open_seq2seq.distributed import strategies
      backend = strategies.TowersBackend(strategies.configure_cpu_devices(2),
                                         "hierarchical_copy")
      assert isinstance(backend.cross_device_ops, tf.distribute.HierarchicalCopyAllReduce)
      strategy = backend.strategy
      @tf.function
      def step():
        def replica():
          context = tf.distribute.get_replica_context()
          return context.all_reduce("sum", tf.cast(context.replica_id_in_sync_group + 1,
                                                   tf.float32))
        return strategy.run(replica)
      print([float(v) for v in strategy.experimental_local_results(step())])
  """)
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=toy.ROOT,
                          env={**toy.single_process_env(), "PYTHONPATH": toy.ROOT,
                               "TF_CPP_MIN_LOG_LEVEL": "2"})
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == "[3.0, 3.0]"


@pytest.mark.parametrize("local_rank,per_worker,expected", [(0, 1, [0]), (1, 1, [1]),
                                                            (1, 2, [2, 3]), (0, 4, [0, 1, 2, 3])])
def test_each_process_on_a_machine_sees_its_own_gpus(fake_gpus, local_rank, per_worker,
                                                     expected):
  """Multi-worker: the process of local rank r drives GPUs r*n .. r*n+n-1 (n per worker)."""
  fake = fake_gpus(4)
  info = cluster.ClusterInfo(rank=local_rank + 2, size=4, local_rank=local_rank,
                             local_size=2, source="openmpi")
  strategies._bind_local_gpus(info, per_worker)  # pylint: disable=protected-access
  assert fake.visible == [fake.devices[i] for i in expected]


def test_too_few_gpus_for_a_local_rank_is_one_line(fake_gpus):
  fake_gpus(2)
  info = cluster.ClusterInfo(rank=1, size=2, local_rank=1, local_size=2, source="openmpi")
  with pytest.raises(ConfigError, match="local rank 1 needs GPUs 2..3 but this machine has 2"):
    strategies._bind_local_gpus(info, 2)  # pylint: disable=protected-access
