"""Two "hosts" on one machine: two network namespaces joined by a veth pair.

Each namespace holds its loopback (up) and one end of the pair with its own address
(``10.231.0.1/24`` and ``10.231.0.2/24``, or the next free /24 of 10.231-10.239 when the
machine already uses that one): a process started with ``ip netns exec <name>`` sees only
those two interfaces, reaches the other "host" at its address, and is reachable from nowhere
else (the machine's own network has no route to them). The veth pair is created directly
inside the namespaces, so deleting them deletes everything.

Names carry a prefix, the creating pid and a random token (``oss2s-<pid>-<token>-h0``), so a
crashed earlier run cannot collide; namespaces of the prefix whose creator is no longer
running are deleted first. :func:`two_hosts` always deletes its namespaces (and their
``/etc/netns/<name>`` files) when the test ends, passed or failed.

Needs root and ``ip netns`` (iproute2); the fixture skips with the reason otherwise.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import subprocess

import pytest

PREFIX = "oss2s-"
#: /24 networks tried in order: the first one the machine does not use
SUBNETS = [f"10.{second}.0" for second in range(231, 240)]


@dataclasses.dataclass(frozen=True)
class TwoHosts:
  """The namespaces (``names``), their addresses on the veth pair (``addresses``) and their
  host names (``hostnames``, which resolve to those addresses inside both namespaces)."""

  names: tuple[str, str]
  addresses: tuple[str, str]
  hostnames: tuple[str, str]

  def exec_prefix(self, host: int) -> list[str]:
    """The command prefix that runs a program on ``host`` (0 or 1)."""
    return ["ip", "netns", "exec", self.names[host]]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
  return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def unavailable() -> str | None:
  """Why namespaces cannot be made here, or None."""
  if os.geteuid() != 0:
    return "network namespaces need root (CI runs as root)"
  if shutil.which("ip") is None:
    return "the ip command (iproute2) is not installed"
  listed = _ip("netns", "list", check=False)
  if listed.returncode != 0:
    return f"'ip netns' is unavailable: {listed.stderr.strip()}"
  return None


def _free_subnet() -> str:
  """A /24 that no interface or route of this machine's network uses."""
  used = _ip("-4", "-o", "addr", "show").stdout + _ip("-4", "route", "show", "table",
                                                     "all").stdout
  for subnet in SUBNETS:
    if subnet + "." not in used:
      return subnet
  raise RuntimeError(f"every subnet of {SUBNETS} is in use on this machine")


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def delete(name: str) -> None:
  """Deletes namespace ``name`` (its processes' sockets and its veth end go with it) and its
  ``/etc/netns`` files."""
  _ip("netns", "delete", name, check=False)
  shutil.rmtree(os.path.join("/etc/netns", name), ignore_errors=True)


def clean_leftovers() -> list[str]:
  """Deletes this helper's namespaces left by runs that are no longer running."""
  removed = []
  for line in _ip("netns", "list").stdout.splitlines():
    name = line.split()[0] if line.split() else ""
    if not name.startswith(PREFIX):
      continue
    try:
      creator = int(name[len(PREFIX):].split("-")[0])
    except ValueError:
      creator = -1
    if creator < 0 or not _alive(creator):
      delete(name)
      removed.append(name)
  return removed


def create() -> TwoHosts:
  """Creates the two namespaces; on any failure deletes what it made and raises."""
  clean_leftovers()
  token = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
  names = (f"{token}-h0", f"{token}-h1")
  subnet = _free_subnet()
  addresses = (f"{subnet}.1", f"{subnet}.2")
  hostnames = (f"{token}-h0", f"{token}-h1")
  try:
    for name in names:
      _ip("netns", "add", name)
    # both ends are created inside the namespaces: nothing appears in this machine's network
    _ip("link", "add", "veth0", "netns", names[0], "type", "veth", "peer", "name", "veth1",
        "netns", names[1])
    hosts_file = "".join(f"{a} {h}\n" for a, h in zip(addresses, hostnames))
    for i, name in enumerate(names):
      _ip("-n", name, "link", "set", "lo", "up")
      _ip("-n", name, "addr", "add", f"{addresses[i]}/24", "dev", f"veth{i}")
      _ip("-n", name, "link", "set", f"veth{i}", "up")
      # `ip netns exec` bind-mounts /etc/netns/<name>/hosts over /etc/hosts: the host
      # names resolve inside the namespaces only
      os.makedirs(os.path.join("/etc/netns", name), exist_ok=True)
      with open(os.path.join("/etc/netns", name, "hosts"), "w", encoding="ascii") as f:
        f.write("127.0.0.1 localhost\n" + hosts_file)
  except BaseException:
    for name in names:
      delete(name)
    raise
  return TwoHosts(names=names, addresses=addresses, hostnames=hostnames)


@pytest.fixture
def two_hosts():
  """Two network namespaces joined by a veth pair (:class:`TwoHosts`); deleted at the end."""
  reason = unavailable()
  if reason:
    pytest.skip(reason)
  hosts = create()
  try:
    yield hosts
  finally:
    for name in hosts.names:
      delete(name)
