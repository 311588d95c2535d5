"""Where the ranks of a 2-process job listen: nothing of theirs is reachable from another
machine. TensorFlow's gRPC server listens on every interface whatever the cluster says, so
the local launcher gives its ranks a private network namespace that holds only the loopback;
Horovod ranks on one machine leave Open MPI's TCP transport (which listens on every
interface) for shared memory."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers import distributed as h

#: Run by each rank: builds the backend, prints where this process listens, waits for the
#: test to look, leaves.
JOB = r'''
import json, os, re, sys, time
from open_seq2seq.distributed.factory import make_backend

def listening():
  inodes = set()
  for fd in os.listdir("/proc/self/fd"):
    try:
      found = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
      continue
    if found:
      inodes.add(found.group(1))
  addresses = []
  for table in ("tcp", "tcp6"):  # this process's network namespace
    with open(f"/proc/self/net/{table}") as f:
      for line in list(f)[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # LISTEN, one of our sockets
          addresses.append(fields[1])
  return addresses

backend = make_backend({"use_horovod": sys.argv[1] == "horovod"})
with open("/proc/self/net/dev") as f:
  interfaces = [line.split(":")[0].strip() for line in list(f)[2:]]
print("LISTENING " + json.dumps({
    "rank": backend.worker_index, "listening": listening(), "interfaces": interfaces,
    "netns": os.readlink("/proc/self/ns/net")}), flush=True)
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
  time.sleep(0.1)
backend.barrier()
backend.shutdown()
'''


def _address(entry: str) -> tuple[str, int]:
  """A /proc/net/tcp{,6} local address ("0100007F:1F90") as (ip, port)."""
  hexip, hexport = entry.split(":")
  raw = bytes.fromhex(hexip)
  # the kernel prints the address as 32-bit words in host (little-endian) order
  words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
  family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
  return socket.inet_ntop(family, words), int(hexport, 16)


def _is_loopback(ip: str) -> bool:
  return ip.startswith("127.") or ip in ("::1", "::ffff:127.0.0.1")


def _reports(output: str) -> dict:
  """Each rank's report found in the job's output so far. mpiexec forwards the ranks' lines as
  they come, so two reports can share a line ('LISTENING {...}LISTENING {...}')."""
  found = {}
  for part in output.split("LISTENING ")[1:]:
    try:
      report, _ = json.JSONDecoder().raw_decode(part)
    except json.JSONDecodeError:
      continue  # not complete yet
    found[report["rank"]] = report
  return found


def test_reports_sharing_a_line_are_both_read():
  shared = ('LISTENING {"rank": 0, "listening": []}LISTENING {"rank": 1, "listening": '
            '["0100007F:1F90"]}\nLISTENING {"rank": 2, "list')
  assert _reports(shared) == {0: {"rank": 0, "listening": []},
                              1: {"rank": 1, "listening": ["0100007F:1F90"]}}


def _run_job(command, tmp_path, env):
  """Starts the job, returns (each rank's report, the job's output) once both reported."""
  script, release = tmp_path / "job.py", tmp_path / "release"
  script.write_text(JOB)
  job = subprocess.Popen(command + [str(script), command_backend(command), str(release)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=h.ROOT, start_new_session=True)
  reports, lines = {}, []
  deadline = time.time() + 120
  try:
    while len(reports) < 2 and time.time() < deadline:
      line = job.stdout.readline()
      if not line:
        break
      lines.append(line)
      if "LISTENING " in line:
        reports = _reports("".join(lines))
    checked = {rank: _reachable_from_here(report) for rank, report in reports.items()}
  finally:
    release.touch()
    try:
      _, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
      h.kill_group(job)
      _, err = job.communicate()
  assert len(reports) == 2, "".join(lines)[-3000:] + err[-3000:]
  assert job.returncode == 0, err[-3000:]
  return reports, checked, err


def command_backend(command):
  return "horovod" if command[0] == "mpiexec" else "multi-worker"


def _listening_ports_here() -> set:
  """The ports that some socket of this process's network namespace listens on."""
  ports = set()
  for table in ("tcp", "tcp6"):
    with open(f"/proc/self/net/{table}") as f:
      for line in list(f)[1:]:
        fields = line.split()
        if fields[3] == "0A":  # LISTEN
          ports.add(_address(fields[1])[1])
  return ports


def _reachable_from_here(report) -> list:
  """The rank's listening ports that a connection from this process's network reaches.

  A port that a socket of this namespace also listens on (another test's server that drew
  the same ephemeral port) answers for itself, not for the rank: it does not count."""
  if report["netns"] == os.readlink("/proc/self/ns/net"):
    return ["same namespace"]
  reached = []
  for entry in report["listening"]:
    port = _address(entry)[1]
    with socket.socket() as probe:
      probe.settimeout(2)
      answered = probe.connect_ex(("127.0.0.1", port)) == 0
    if answered and port not in _listening_ports_here():
      reached.append(port)
  return reached


def _assert_only_loopback(report, reachable):
  """Every listening socket is on a loopback address, or in a network namespace (not this
  one) whose only interface is the loopback and whose ports this process cannot reach."""
  for entry in report["listening"]:
    ip, _ = _address(entry)
    if _is_loopback(ip):
      continue
    assert report["interfaces"] == ["lo"] and not reachable, (
        f"rank {report['rank']} listens on {ip} (a wildcard or a host interface) in a "
        f"namespace with {report['interfaces']}; reachable from here: {reachable}")


def test_multi_worker_ranks_of_the_local_launcher_are_reachable_only_on_loopback(tmp_path):
  command = [sys.executable, "-m", "open_seq2seq.launch", "-np", "2", "--timeout", "150"]
  reports, reachable, err = _run_job(command, tmp_path, h.environment())
  if "a private network namespace is not allowed here" in err:
    pytest.skip("this system allows no private network namespace: " + err.splitlines()[0])
  for rank, report in reports.items():
    assert report["listening"], report  # TensorFlow's server of that rank
    _assert_only_loopback(report, reachable[rank])
  assert reports[0]["netns"] == reports[1]["netns"]  # one namespace for the whole job


@pytest.mark.skipif(shutil.which("mpiexec") is None
                    or importlib.util.find_spec("horovod") is None,
                    reason="needs mpiexec and Horovod (scripts/install_horovod.sh)")
def test_horovod_ranks_on_one_machine_listen_on_no_interface(tmp_path):
  command = ["mpiexec", "--oversubscribe", "-np", "2", sys.executable]
  reports, reachable, _ = _run_job(command, tmp_path, h.environment())
  for rank, report in reports.items():
    _assert_only_loopback(report, reachable[rank])
