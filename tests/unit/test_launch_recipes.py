"""The multi-host recipes of docs/distributed.md (files of examples/): the doc quotes them as
they are, the Kubernetes manifests have the structure the Kubeflow operators read and run a
config that exists with the shared volume at the log directory, and the environment each
scheduler gives a rank is what our launcher detection reads (rank, size, local rank, hosts,
ports, backend). No cluster here: each environment is built as the scheduler builds it."""

from __future__ import annotations

import json
import os
import re
import shlex

import pytest
import yaml

from open_seq2seq.cli_args import parse_args
from open_seq2seq.distributed import cluster, factory, horovod_backend, strategies

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
#: the recipes docs/distributed.md quotes in full
QUOTED = ["examples/openmpi/hosts", "examples/openmpi/horovod.sh",
          "examples/openmpi/multi_worker.sh", "examples/slurm/train.sbatch"]


def _read(relative: str) -> str:
  with open(os.path.join(ROOT, relative), encoding="utf-8") as f:
    return f.read()


def _manifest(name: str) -> dict:
  return yaml.safe_load(_read(f"examples/kubernetes/{name}"))


def test_the_doc_quotes_the_example_files_as_they_are():
  doc = _read("docs/distributed.md")
  quotes = dict(re.findall(r"^\*\*`(examples/[^`]+)`\*\*\n```[a-z]*\n(.*?)^```$", doc,
                           re.MULTILINE | re.DOTALL))
  assert sorted(quotes) == sorted(QUOTED)
  for path, text in quotes.items():
    assert text == _read(path), f"docs/distributed.md quotes {path} with another text"
  for path in re.findall(r"\(\.\./(examples/[^)]+)\)", doc):  # the manifests it links to
    assert os.path.isfile(os.path.join(ROOT, path)), path


# ---------------------------------------------------------------------- reading the recipes
def _run_py_args(command: list[str]) -> list[str]:
  """The arguments after ``python run.py`` in a command; checks that they parse as run.py's
  and name a config file of the repository."""
  start = command.index("run.py")
  assert command[start - 1] == "python"
  argv = command[start + 1:]
  args, _ = parse_args(argv)
  assert os.path.isfile(os.path.join(ROOT, args.config_file)), args.config_file
  assert args.config_file.startswith("example_configs/") and args.logdir
  assert args.continue_learning  # a restarted job resumes
  return argv


def _script_command(relative: str, program: str) -> list[str]:
  """The command line of ``program`` in a shell script, with its ``${VAR:-default}``."""
  text = _read(relative).replace("\\\n", " ")
  defaults = dict(re.findall(r"^(\w+)=\$\{\1:-([^}]*)\}$", text, re.MULTILINE))
  line = next(line for line in text.splitlines() if line.strip().startswith(program + " "))
  return [re.sub(r"\$\{?(\w+)\}?", lambda m: defaults[m.group(1)], word)
          for word in shlex.split(line)]


def _hostfile_slots(relative: str) -> list[str]:
  """Each rank's host as ``mpiexec --map-by slot`` places them: the first host's slots first."""
  hosts = []
  for line in _read(relative).splitlines():
    if line.strip() and not line.startswith("#"):
      name, slots = re.fullmatch(r"(\S+)\s+slots=(\d+)", line.strip()).groups()
      hosts += [name] * int(slots)
  return hosts


def _option(command: list[str], name: str) -> str:
  return command[command.index(name) + 1]


def _backend_chosen(monkeypatch, env: dict, argv: list[str]):
  """What factory.make_backend builds in a process with ``env`` and the command line ``argv``:
  ("horovod", None) or ("multi_worker", the TF_CONFIG it would write)."""
  for name in list(os.environ):
    if name.startswith(("OMPI_", "PMI_", "PMIX_", "HOROVOD_", "SLURM_", "OPEN_SEQ2SEQ_")) \
        or name in ("TF_CONFIG", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"):
      monkeypatch.delenv(name)
  for name, value in env.items():
    monkeypatch.setenv(name, value)
  monkeypatch.setattr(horovod_backend, "HorovodBackend", lambda params: ("horovod", None))

  def multi_worker(info, params):
    config = info.tf_config if info.source == "tf_config" else cluster.tf_config_for(info)
    return "multi_worker", config

  monkeypatch.setattr(strategies, "MultiWorkerBackend", multi_worker)
  args, _ = parse_args(argv)
  return factory.make_backend({"use_horovod": bool(args.use_horovod), "num_gpus": 1},
                              args.cpu_towers)


# ---------------------------------------------------------------------- Kubernetes
def _containers(spec: dict) -> list[dict]:
  return spec["template"]["spec"]["containers"]


def _assert_mounts_claim_at_logdir(replica: dict, argv: list[str]) -> None:
  """The pod mounts the claim of pvc.yaml at a directory holding --logdir."""
  claim = _manifest("pvc.yaml")
  assert claim["kind"] == "PersistentVolumeClaim"
  assert "ReadWriteMany" in claim["spec"]["accessModes"]  # pods on several nodes
  volumes = {v["name"]: v for v in replica["template"]["spec"]["volumes"]}
  logdir = parse_args(argv)[0].logdir
  mounts = [m for m in _containers(replica)[0]["volumeMounts"]
            if logdir.startswith(m["mountPath"].rstrip("/") + "/")]
  assert len(mounts) == 1, (logdir, mounts)
  volume = volumes[mounts[0]["name"]]
  assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def _tfjob_tf_config(job: dict, namespace: str, task_type: str, index: int) -> str:
  """TF_CONFIG as the training operator writes it for one replica (genTFConfigJSONStr):
  the replica types lower-cased, <job>-<type>-<i>.<namespace>.svc:<port> addresses."""
  specs = job["spec"]["tfReplicaSpecs"]
  cluster_spec = {}
  for replica_type, spec in specs.items():
    ports = [p["containerPort"] for p in _containers(spec)[0].get("ports", [])
             if p["name"] == "tfjob-port"] or [2222]
    kind = replica_type.lower()
    cluster_spec[kind] = [f"{job['metadata']['name']}-{kind}-{i}.{namespace}.svc:{ports[0]}"
                          for i in range(spec["replicas"])]
  return json.dumps({"cluster": cluster_spec, "task": {"type": task_type, "index": index},
                     "environment": "cloud"})


def test_tfjob_manifest_and_the_tf_config_it_gets(monkeypatch):
  job = _manifest("tfjob.yaml")
  assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
  specs = job["spec"]["tfReplicaSpecs"]
  assert set(specs) <= {"Chief", "Worker"}  # no PS, no Evaluator: refused by cluster.detect
  worker = specs["Worker"]
  assert worker["replicas"] == 2
  container = _containers(worker)[0]
  assert container["name"] == "tensorflow"  # the container the operator gives TF_CONFIG
  argv = _run_py_args(container["command"])
  _assert_mounts_claim_at_logdir(worker, argv)

  tf_config = _tfjob_tf_config(job, "default", "worker", 1)
  info = cluster.detect({"TF_CONFIG": tf_config})
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source) == \
      (1, 2, 0, 1, "tf_config")
  name = job["metadata"]["name"]
  assert _backend_chosen(monkeypatch, {"TF_CONFIG": tf_config}, argv) == ("multi_worker", {
      "cluster": {"worker": [f"{name}-worker-0.default.svc:2222",
                             f"{name}-worker-1.default.svc:2222"]},
      "task": {"type": "worker", "index": 1}, "environment": "cloud"})


def test_mpijob_manifest_and_the_environment_of_its_ranks(monkeypatch):
  job = _manifest("mpijob-horovod.yaml")
  assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
  spec = job["spec"]
  assert spec["mpiImplementation"] == "OpenMPI" and set(spec["mpiReplicaSpecs"]) == {
      "Launcher", "Worker"}
  launcher, worker = spec["mpiReplicaSpecs"]["Launcher"], spec["mpiReplicaSpecs"]["Worker"]
  assert launcher["replicas"] == 1
  command = _containers(launcher)[0]["command"]
  assert command[0] == "mpirun"
  size = int(_option(command, "-np"))
  assert size == worker["replicas"] * spec["slotsPerWorker"] == 4
  argv = _run_py_args(command)
  assert parse_args(argv)[0].use_horovod is True
  assert "sshd" in _containers(worker)[0]["command"][0]  # mpirun reaches workers by ssh
  _assert_mounts_claim_at_logdir(worker, argv)  # the ranks run in the workers

  # rank 3: the 4th worker pod, one slot each, as Open MPI's daemon starts it there
  env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
         "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
         "OMPI_COMM_WORLD_NODE_RANK": "3", "OMPI_MCA_ess_base_jobid": "3386114049",
         "OMPI_MCA_orte_launch": "1"}
  info = cluster.detect(env)
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source) == \
      (3, 4, 0, 1, "openmpi")
  assert cluster.mpi_transport_defaults(info, env) == {}  # across pods: TCP stays
  assert _backend_chosen(monkeypatch, env, argv) == ("horovod", None)


# ---------------------------------------------------------------------- Open MPI host file
@pytest.mark.parametrize("script, backend", [("horovod.sh", "horovod"),
                                             ("multi_worker.sh", "multi_worker")])
def test_hostfile_recipes_and_the_environment_of_rank_3(monkeypatch, script, backend):
  command = _script_command(f"examples/openmpi/{script}", "mpiexec")
  hostfile = _option(command, "--hostfile")
  placed = _hostfile_slots(hostfile)
  assert int(_option(command, "-np")) == len(placed) == 4
  argv = _run_py_args(command)
  assert bool(parse_args(argv)[0].use_horovod) == (backend == "horovod")

  rank = 3
  mine = [r for r, host in enumerate(placed) if host == placed[rank]]
  env = {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(len(placed)),
         "OMPI_COMM_WORLD_LOCAL_RANK": str(mine.index(rank)),
         "OMPI_COMM_WORLD_LOCAL_SIZE": str(len(mine)), "OMPI_COMM_WORLD_NODE_RANK": "1",
         "OMPI_MCA_ess_base_jobid": "1234567", "OMPI_MCA_orte_launch": "1"}
  info = cluster.detect(env)
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source) == \
      (3, 4, 1, 2, "openmpi")
  # the ranks announce their host names through one MPI all-gather (no MPI here: its result)
  monkeypatch.setattr(cluster, "gather_hosts_with_mpi", lambda my_host: placed)
  kind, tf_config = _backend_chosen(monkeypatch, env, argv)
  assert kind == backend
  if backend == "multi_worker":
    port = cluster.base_port(info, {})
    assert tf_config == {"cluster": {"worker": [f"node1:{port}", f"node1:{port + 1}",
                                                f"node2:{port + 2}", f"node2:{port + 3}"]},
                         "task": {"type": "worker", "index": 3}}


# ---------------------------------------------------------------------- SLURM
def test_sbatch_recipe_and_the_environment_srun_gives_task_3_of_4_on_2_nodes(monkeypatch):
  text = _read("examples/slurm/train.sbatch")
  options = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)$", text, re.MULTILINE))
  nodes, per_node = int(options["nodes"]), int(options["ntasks-per-node"])
  assert (nodes, per_node) == (2, 2)
  command = _script_command("examples/slurm/train.sbatch", "srun")
  assert "--distribution=block" in command  # where slurm.py expects the ranks
  argv = _run_py_args(command)
  assert not parse_args(argv)[0].use_horovod

  env = {"SLURM_JOB_ID": "81234", "SLURM_JOBID": "81234", "SLURM_STEP_ID": "0",
         "SLURM_STEPID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
         "SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_STEP_NUM_TASKS": "4",
         "SLURM_STEP_NUM_NODES": "2", "SLURM_NNODES": "2",
         "SLURM_JOB_NODELIST": "node[01-02]", "SLURM_STEP_NODELIST": "node[01-02]",
         "SLURM_NODELIST": "node[01-02]", "SLURM_TASKS_PER_NODE": "2(x2)",
         "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS_PER_NODE": "2",
         "SLURMD_NODENAME": "node02", "SLURM_JOB_NAME": options["job-name"]}
  info = cluster.detect(env)
  assert (info.rank, info.size, info.local_rank, info.local_size, info.source) == \
      (3, nodes * per_node, 1, 2, "slurm")
  kind, tf_config = _backend_chosen(monkeypatch, env, argv)
  port = cluster.base_port(info, {})
  assert kind == "multi_worker" and tf_config == {
      "cluster": {"worker": [f"node01:{port}", f"node01:{port + 1}", f"node02:{port + 2}",
                             f"node02:{port + 3}"]},
      "task": {"type": "worker", "index": 3}}
  # OPEN_SEQ2SEQ_PORT chooses the ports
  _, chosen = _backend_chosen(monkeypatch, dict(env, OPEN_SEQ2SEQ_PORT="29400"), argv)
  assert chosen["cluster"]["worker"][3] == "node02:29403"
