"""Rank, size, hosts and ports from launcher environments; backend choice and its errors."""

import json
import os
import subprocess
import sys

import pytest

from open_seq2seq.distributed import cluster, slurm
from open_seq2seq.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPEN_MPI = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "OMPI_MCA_ess_base_jobid": "12345"}


def test_single_process_without_launcher():
  info = cluster.detect({})
  assert (info.rank, info.size, info.source, info.is_multi_process) == (0, 1, "single", False)


def test_open_mpi_environment():
  info = cluster.detect(OPEN_MPI)
  assert (info.rank, info.size, info.local_rank, info.local_size) == (1, 4, 1, 2)
  assert info.source == "openmpi" and info.job_id == "12345" and not info.all_local


def test_local_launcher_is_told_apart_from_open_mpi():
  env = dict(OPEN_MPI, OMPI_COMM_WORLD_LOCAL_SIZE="4", OPEN_SEQ2SEQ_LAUNCHER="1")
  info = cluster.detect(env)
  assert info.source == "launcher" and info.all_local


def test_mpich_hydra_environment():
  info = cluster.detect({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0",
                         "MPI_LOCALNRANKS": "1"})
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source) == \
      (2, 3, 0, 1, "mpich")


def test_horovodrun_environment_and_job_ids():
  info = cluster.detect({"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": "1",
                         "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1"})
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source, info.job_id) == \
      (1, 2, 1, 2, "horovodrun", "10.0.0.1")
  # Open MPI under PMIx names its job by the namespace when the ess job id is absent
  env = {k: v for k, v in OPEN_MPI.items() if k != "OMPI_MCA_ess_base_jobid"}
  assert cluster.detect(dict(env, PMIX_NAMESPACE="ns-7")).job_id == "ns-7"
  # an MPICH rank without its size is not a job of MPICH's
  assert cluster.detect({"PMI_RANK": "2"}).source == "single"


def test_tf_config_orders_chief_first():
  config = {"cluster": {"chief": ["a:1"], "worker": ["b:2", "a:3"]},
            "task": {"type": "worker", "index": 1}}
  info = cluster.detect({"TF_CONFIG": json.dumps(config)})
  assert (info.rank, info.size, info.source) == (2, 3, "tf_config")
  assert (info.local_rank, info.local_size) == (1, 2)  # a:1 and a:3 share host a


@pytest.mark.parametrize("text, message", [
    ("{not json", "TF_CONFIG is not valid"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "'ps'"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}', "not in"),
])
def test_bad_tf_config_is_one_clear_line(text, message):
  with pytest.raises(ConfigError, match=message) as e:
    cluster.detect({"TF_CONFIG": text})
  assert "\n" not in str(e.value)


def test_bad_rank_variable():
  with pytest.raises(ConfigError, match="OMPI_COMM_WORLD_RANK"):
    cluster.detect(dict(OPEN_MPI, OMPI_COMM_WORLD_RANK="one"))


def test_ports_are_agreed_without_communication():
  info = cluster.detect(OPEN_MPI)
  other = cluster.detect(dict(OPEN_MPI, OMPI_COMM_WORLD_RANK="3"))
  assert cluster.base_port(info, {}) == cluster.base_port(other, {})  # same job id
  assert 20000 <= cluster.base_port(info, {}) < 40000
  assert cluster.base_port(info, {"OPEN_SEQ2SEQ_PORT": "30000"}) == 30000
  assert cluster.base_port(cluster.ClusterInfo(size=2), {}) == cluster.DEFAULT_PORT
  with pytest.raises(ConfigError, match="1024"):
    cluster.base_port(info, {"OPEN_SEQ2SEQ_PORT": "80"})


def test_tf_config_for_local_job_uses_loopback_and_one_port_per_rank():
  info = cluster.ClusterInfo(rank=1, size=2, local_rank=1, local_size=2, source="openmpi")
  config = cluster.tf_config_for(info, {"OPEN_SEQ2SEQ_PORT": "31000"})
  assert config == {"cluster": {"worker": ["127.0.0.1:31000", "127.0.0.1:31001"]},
                    "task": {"type": "worker", "index": 1}}


def test_hosts_from_environment():
  info = cluster.detect(OPEN_MPI)
  hosts = cluster.worker_hosts(info, {"OPEN_SEQ2SEQ_HOSTS": "n0,n0,n1,n1"})
  assert hosts == ["n0", "n0", "n1", "n1"]
  assert cluster.worker_hosts(info, {"OPEN_SEQ2SEQ_HOSTS": "n0"}) == ["n0"] * 4
  with pytest.raises(ConfigError, match="one host per rank"):
    cluster.worker_hosts(info, {"OPEN_SEQ2SEQ_HOSTS": "n0,n1"})


def test_horovod_absent_gives_one_line_pointing_at_the_script(monkeypatch):
  from open_seq2seq.distributed import horovod_backend
  monkeypatch.setitem(sys.modules, "horovod", None)  # makes the import fail
  monkeypatch.setitem(sys.modules, "horovod.tensorflow", None)
  with pytest.raises(ConfigError) as e:
    horovod_backend.import_horovod()
  message = str(e.value)
  assert "scripts/install_horovod.sh" in message and "open_seq2seq.launch" in message
  assert "\n" not in message


def test_factory_rejects_impossible_device_requests(monkeypatch):
  from open_seq2seq.distributed import factory
  monkeypatch.delenv("TF_CONFIG", raising=False)
  for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK"):
    monkeypatch.delenv(name, raising=False)
  with pytest.raises(ConfigError, match="--cpu_towers"):
    factory.make_backend({"num_gpus": 4, "use_horovod": False})  # no GPU on the test host
  with pytest.raises(ConfigError, match="cpu_towers"):
    factory.make_backend({"num_gpus": 1, "use_horovod": True}, cpu_towers=2)
  backend = factory.make_backend({"num_gpus": 1, "use_horovod": False})
  assert (backend.name, backend.num_workers, backend.is_chief) == ("single", 1, True)


def test_a_job_on_one_machine_keeps_open_mpi_off_the_network():
  local = {**OPEN_MPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
  orte = {**local, "OMPI_MCA_orte_launch": "1"}  # Open MPI 4's launcher
  assert cluster.mpi_transport_defaults(cluster.detect(orte), orte) == {
      "OMPI_MCA_btl": "self,vader"}
  assert cluster.mpi_transport_defaults(cluster.detect(local), local) == {
      "OMPI_MCA_btl": "self,sm"}  # Open MPI 5 (PRRTE) renamed the shared-memory transport
  # across machines, under another launcher, or with the user's own choice: nothing
  assert cluster.mpi_transport_defaults(cluster.detect(OPEN_MPI), OPEN_MPI) == {}
  mpich = {"PMI_RANK": "0", "PMI_SIZE": "2"}
  assert cluster.mpi_transport_defaults(cluster.detect(mpich), mpich) == {}
  chosen = {**orte, "OMPI_MCA_btl": "self,tcp"}
  assert cluster.mpi_transport_defaults(cluster.detect(chosen), chosen) == {}


def test_horovod_refuses_the_local_launcher(monkeypatch):
  from open_seq2seq.distributed.horovod_backend import HorovodBackend
  monkeypatch.setenv("OPEN_SEQ2SEQ_LAUNCHER", "1")
  with pytest.raises(ConfigError, match="needs mpiexec or horovodrun"):
    HorovodBackend({"num_gpus": 1})


def test_horovod_defaults_leave_a_users_settings_alone():
  from open_seq2seq.distributed.horovod_backend import environment_defaults
  cpu: dict = {}
  environment_defaults(cpu, has_gpus=False)  # MPI ranks waiting on CPUs yield their core
  assert cpu == {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "600",
                 "OMPI_MCA_mpi_yield_when_idle": "1"}
  gpu: dict = {}
  environment_defaults(gpu, has_gpus=True)  # MPI's own polling on GPU hosts
  assert gpu == {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "600"}
  mine = {"OMPI_MCA_mpi_yield_when_idle": "0", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "60"}
  environment_defaults(mine, has_gpus=False)
  assert mine == {"OMPI_MCA_mpi_yield_when_idle": "0",
                  "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "60"}


def test_horovod_ignores_num_gpus_and_gpu_ids_with_a_one_line_notice():
  from open_seq2seq.distributed.horovod_backend import ignored_devices_notice
  assert ignored_devices_notice({"num_gpus": 1}, 4) is None
  assert ignored_devices_notice({"num_gpus": None, "gpu_ids": None}, 1) is None
  assert ignored_devices_notice({"num_gpus": 8}, 1) == (
      "use_horovod: num_gpus=8 ignored; Horovod runs one device per process "
      "(start 8 processes with mpiexec -np 8; this job has 1 process)")
  assert ignored_devices_notice({"num_gpus": 8}, 8) == (
      "use_horovod: num_gpus=8 ignored; Horovod runs one device per process "
      "(its local rank's GPU; this job has 8 processes)")
  notice = ignored_devices_notice({"num_gpus": 1, "gpu_ids": [2, 3]}, 1)
  assert notice.startswith("use_horovod: gpu_ids=[2, 3] ignored") and "mpiexec -np 2" in notice
  assert "\n" not in notice


def _horovod_missing() -> str | None:
  try:
    import horovod.tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError as e:
    return f"Horovod is not installed ({e}): run scripts/install_horovod.sh"
  return None


@pytest.mark.skipif(_horovod_missing() is not None, reason=str(_horovod_missing()))
def test_horovod_backend_starts_with_num_gpus_8_in_one_process():
  # A fresh interpreter: MPI can be initialised only once per process.
  code = ("from open_seq2seq.distributed.factory import make_backend\n"
          "backend = make_backend({'use_horovod': True, 'num_gpus': 8})\n"
          "print(backend.name, backend.num_replicas, backend.num_workers, backend.is_chief)\n"
          "backend.shutdown()\n")
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMI_", "PMIX_", "HOROVOD_")) and k != "TF_CONFIG"}
  env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines()[-1] == "horovod 1 1 True"
  notices = [line for line in result.stderr.splitlines() if line.startswith("notice:")]
  assert notices == ["notice: use_horovod: num_gpus=8 ignored; Horovod runs one device per "
                     "process (start 8 processes with mpiexec -np 8; this job has 1 process)"]


# ---------------------------------------------------------------------- SLURM
#: what srun sets for task 3 of a 4-task step on 2 nodes (2 tasks each, block distribution)
SLURM = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3",
         "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NTASKS": "4",
         "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "gpu[07-08]",
         "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}


@pytest.mark.parametrize("text, names", [
    ("node[01-03,07],gpu5", ["node01", "node02", "node03", "node07", "gpu5"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),  # no padding unless the first bound has it
    ("a,b", ["a", "b"]),
    ("nid0[2285-2286,2718]", ["nid02285", "nid02286", "nid02718"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("  solo  ", ["solo"]),
])
def test_slurm_host_lists_expand(text, names):
  assert slurm.expand_hostlist(text) == names


@pytest.mark.parametrize("text, message", [
    ("node[01-03", "unbalanced"), ("node]1[", "unbalanced"), ("node[3-1]", "backwards"),
    ("node[a-b]", "not a number"), ("", "not valid"), ("a,,b", "not valid"),
])
def test_bad_slurm_host_lists_are_one_clear_line(text, message):
  with pytest.raises(ConfigError, match=message) as e:
    slurm.expand_hostlist(text)
  assert "\n" not in str(e.value)


def test_slurm_task_counts_expand():
  assert slurm.expand_counts("2(x3),1") == [2, 2, 2, 1]
  assert slurm.expand_counts("4") == [4]
  with pytest.raises(ConfigError, match="tasks per node"):
    slurm.expand_counts("2x3")


def test_srun_step_gives_rank_hosts_and_local_rank():
  info = cluster.detect(SLURM)
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source) == \
      (3, 4, 1, 2, "slurm")
  assert info.hosts == ("gpu07", "gpu07", "gpu08", "gpu08") and not info.all_local
  assert info.job_id == "slurm-4242.0"
  port = cluster.base_port(info, {})
  assert 20000 <= port < 40000  # from the job and step ids: the same on every task
  assert cluster.base_port(cluster.detect(dict(SLURM, SLURM_PROCID="0", SLURM_LOCALID="0",
                                               SLURM_NODEID="0")), {}) == port
  assert cluster.tf_config_for(info, {}) == {
      "cluster": {"worker": [f"gpu07:{port}", f"gpu07:{port + 1}", f"gpu08:{port + 2}",
                             f"gpu08:{port + 3}"]},
      "task": {"type": "worker", "index": 3}}
  # OPEN_SEQ2SEQ_PORT and OPEN_SEQ2SEQ_HOSTS (other interfaces) override SLURM's choice
  env = {"OPEN_SEQ2SEQ_PORT": "30000", "OPEN_SEQ2SEQ_HOSTS": "10.0.0.7,10.0.0.7,10.0.0.8,"
         "10.0.0.8"}
  assert cluster.tf_config_for(info, env)["cluster"]["worker"][2] == "10.0.0.8:30002"
  # another step of the same job gets other ports
  assert cluster.base_port(cluster.detect(dict(SLURM, SLURM_STEP_ID="1")), {}) != port


def test_srun_step_with_uneven_nodes_and_older_variables():
  env = {"SLURM_JOBID": "7", "SLURM_STEPID": "2", "SLURM_PROCID": "2", "SLURM_LOCALID": "0",
         "SLURM_NTASKS": "3", "SLURM_NODELIST": "a,b", "SLURM_TASKS_PER_NODE": "2,1"}
  info = cluster.detect(env)
  assert (info.rank, info.size, info.local_rank, info.local_size) == (2, 3, 0, 1)
  assert info.hosts == ("a", "a", "b") and info.job_id == "slurm-7.2"
  # SLURM_NTASKS_PER_NODE when no per-node list is given, an even split when neither is
  uniform = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_TASKS_PER_NODE"}
  assert cluster.detect(dict(uniform, SLURM_NTASKS_PER_NODE="2")).hosts == \
      cluster.detect(uniform).hosts == ("gpu07", "gpu07", "gpu08", "gpu08")


def test_one_node_slurm_step_uses_loopback():
  env = dict(SLURM, SLURM_STEP_NODELIST="gpu07", SLURM_STEP_TASKS_PER_NODE="4",
             SLURM_LOCALID="3", SLURM_NODEID="0")
  info = cluster.detect(env)
  assert info.all_local and cluster.worker_hosts(info, {}) == ["127.0.0.1"] * 4


def test_the_batch_script_outside_srun_is_one_process():
  batch = {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
           "SLURM_NODEID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "gpu[07-08]",
           "SLURM_TASKS_PER_NODE": "2(x2)"}
  assert cluster.detect(batch).source == "single"


@pytest.mark.parametrize("change, message", [
    ({"SLURM_STEP_TASKS_PER_NODE": "2,1"}, "do not agree"),  # 2 nodes, 3 tasks listed
    ({"SLURM_PROCID": "4"}, "do not agree"),
    ({"SLURM_LOCALID": "0"}, "block distribution"),  # -m cyclic: rank 3 is local task 1
    ({"SLURM_NODEID": "0"}, "block distribution"),
    ({"SLURM_PROCID": "x"}, "SLURM_PROCID='x'"),
])
def test_inconsistent_slurm_steps_are_one_clear_line(change, message):
  with pytest.raises(ConfigError, match=message) as e:
    cluster.detect(dict(SLURM, **change))
  assert "\n" not in str(e.value)
  missing = {k: v for k, v in SLURM.items() if "NODELIST" not in k}
  with pytest.raises(ConfigError, match="no node list"):
    cluster.detect(missing)


def test_precedence_of_launchers_inside_a_slurm_allocation():
  # mpiexec inside sbatch: the ranks carry their daemon's srun step (here one daemon per
  # node, task 1 of 2) as well as Open MPI's variables: Open MPI describes the rank
  under_mpiexec = dict(SLURM, SLURM_PROCID="1", SLURM_LOCALID="0", SLURM_STEP_NUM_TASKS="2",
                       SLURM_NTASKS="2", SLURM_STEP_TASKS_PER_NODE="1(x2)", **OPEN_MPI)
  info = cluster.detect(under_mpiexec)
  assert (info.source, info.rank, info.size, info.hosts) == ("openmpi", 1, 4, None)
  # even when that daemon step cannot be read as a job of ours
  assert cluster.detect(dict(under_mpiexec, SLURM_NODEID="0")).source == "openmpi"
  # srun --mpi=pmi2 starting MPICH ranks itself: both agree, SLURM also knows the nodes
  pmi = dict(SLURM, PMI_RANK="3", PMI_SIZE="4")
  assert cluster.detect(pmi).source == "slurm" and cluster.detect(pmi).hosts[3] == "gpu08"
  # an explicit TF_CONFIG wins over everything
  tf_config = json.dumps({"cluster": {"worker": ["a:1", "b:2"]},
                          "task": {"type": "worker", "index": 0}})
  assert cluster.detect(dict(under_mpiexec, TF_CONFIG=tf_config)).source == "tf_config"
