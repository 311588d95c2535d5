"""``python run.py ARGS`` without paying TensorFlow's import for every run (5-10 s on 2 cores).

The end-to-end tests start run.py about 200 times. A warm server (this module run as a
script) imports TensorFlow, Keras and the package once, before any TensorFlow context or
thread pool exists, then forks one child per run: the child is a new process whose
``open_seq2seq.cli.main(ARGS)`` is what ``run.py`` calls, with its own working directory,
environment, stdin and exit status, and its stdout/stderr in files. Nothing a run does
reaches the server or the next run (each child starts from the server's untouched state).

Environment variables that take effect when TensorFlow is imported are the server's
(``IMPORT_TIME_VARIABLES``): a run asking for other values of those gets a real
``python run.py`` process instead. ``run(...)`` falls back the same way when fork is not
available, so callers never need to know which one ran.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

from open_seq2seq.process_defaults import apply_process_defaults

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Read once, when TensorFlow (or oneDNN, or the thread pools) start: a run needs the
#: server's values of these to be the run it asks for.
IMPORT_TIME_VARIABLES = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "CUDA_VISIBLE_DEVICES",
                         "OMP_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS",
                         "PYTHONHASHSEED", "PYTHONPATH", "KERAS_BACKEND", "KERAS_HOME",
                         "TF_CPU_ALLOCATOR_USE_BFC")


# ------------------------------------------------------------------------- server side


def _child(request: dict) -> None:
  """In the forked child: becomes the run the request describes, then exits."""
  code = 1
  try:
    os.setsid()  # its own process group: a timeout kills the run and whatever it started
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    apply_process_defaults()  # as run.py does
    for fd, path, flags in ((0, request.get("stdin") or os.devnull, os.O_RDONLY),
                            (1, request["stdout"], os.O_WRONLY | os.O_TRUNC),
                            (2, request["stderr"], os.O_WRONLY | os.O_TRUNC)):
      target = os.open(path, flags)
      if target != fd:
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # pylint: disable=consider-using-with
    sys.argv = [os.path.join(ROOT, "run.py"), *request["args"]]
    from open_seq2seq.cli import main  # pylint: disable=import-outside-toplevel
    code = main(request["args"])
  except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
  except BaseException:  # pylint: disable=broad-except
    import traceback  # pylint: disable=import-outside-toplevel
    traceback.print_exc()
    code = 1
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)  # pylint: disable=protected-access


def serve() -> None:
  """Reads one JSON request per line on stdin; answers ``{"pid": N}`` when the run starts
  and ``{"status": S}`` (a ``subprocess`` return code) when it ends."""
  apply_process_defaults()  # as run.py does, before TensorFlow starts
  # What every run imports: after this, a run pays only for what its own config needs.
  import keras  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import open_seq2seq.cli  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  import open_seq2seq.training.trainer  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  requests = os.fdopen(0, "r", encoding="utf-8")
  answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
  for line in requests:
    pid = os.fork()
    if pid == 0:
      answers.close()
      _child(json.loads(line))
    answers.write(json.dumps({"pid": pid}) + "\n")
    answers.flush()
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    answers.write(json.dumps({"status": code}) + "\n")
    answers.flush()


# ------------------------------------------------------------------------- client side


class _Server:
  """One warm server per test session, started on first use."""

  def __init__(self, env: dict[str, str]):
    self.lock = threading.Lock()
    self.process = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-m", "tests.helpers.warm_cli"], cwd=ROOT, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    self.pending = b""  # answer bytes read past the last full line

  def alive(self) -> bool:
    return self.process.poll() is None

  def _answer(self, timeout: float) -> dict:
    """The server's next answer line (read unbuffered, so that select sees what is left)."""
    fd = self.process.stdout.fileno()
    deadline = time.monotonic() + timeout
    while b"\n" not in self.pending:
      ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
      if not ready:
        raise TimeoutError
      chunk = os.read(fd, 4096)
      if not chunk:
        raise RuntimeError("the warm run.py server stopped")
      self.pending += chunk
    line, self.pending = self.pending.split(b"\n", 1)
    return json.loads(line)

  def run(self, args: list[str], cwd: str, env: dict[str, str], timeout: float,
          stdin_text: str | None = None) -> subprocess.CompletedProcess:
    with self.lock, tempfile.TemporaryDirectory() as tmp:
      out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
      for path in (out, err):
        open(path, "w", encoding="utf-8").close()  # pylint: disable=consider-using-with
      request = {"args": args, "cwd": cwd, "env": env, "stdout": out, "stderr": err}
      if stdin_text is not None:
        request["stdin"] = os.path.join(tmp, "stdin")
        with open(request["stdin"], "w", encoding="utf-8") as f:
          f.write(stdin_text)
      self.process.stdin.write((json.dumps(request) + "\n").encode())
      self.process.stdin.flush()
      pid = self._answer(60)["pid"]
      try:
        status = self._answer(timeout)["status"]
      except TimeoutError:
        os.killpg(pid, signal.SIGKILL)
        self._answer(60)
        raise subprocess.TimeoutExpired(["run.py", *args], timeout) from None
      with open(out, encoding="utf-8", errors="replace") as f_out, \
          open(err, encoding="utf-8", errors="replace") as f_err:
        return subprocess.CompletedProcess(["run.py", *args], status, f_out.read(), f_err.read())


_SERVERS: dict[tuple, _Server] = {}


def _key(env: dict[str, str]) -> tuple:
  return tuple(env.get(name) for name in IMPORT_TIME_VARIABLES)


def run(args: list[str], env: dict[str, str], cwd: str | None = None, timeout: float = 600,
        stdin_text: str | None = None) -> subprocess.CompletedProcess:
  """``python run.py ARGS`` in ``cwd`` with exactly ``env`` (and ``stdin_text`` as its
  standard input, else an empty one); never raises on the exit status
  (``subprocess.TimeoutExpired`` after ``timeout`` seconds, the run killed)."""
  cwd = os.fspath(cwd or ROOT)
  if not hasattr(os, "fork") or os.environ.get("OPEN_SEQ2SEQ_TEST_COLD_RUNS"):
    return subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env, check=False,
                          input=stdin_text if stdin_text is not None else "")
  server = _SERVERS.get(_key(env))
  if server is None or not server.alive():
    server = _SERVERS[_key(env)] = _Server(env)
  return server.run(args, cwd, env, timeout, stdin_text)


def stop_servers() -> None:
  for server in _SERVERS.values():
    if server.alive():
      server.process.stdin.close()
      server.process.wait(timeout=30)
  _SERVERS.clear()


if __name__ == "__main__":
  signal.signal(signal.SIGINT, signal.SIG_DFL)
  serve()
