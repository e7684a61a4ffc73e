"""A sandbox run's processes: its cgroups, reading its output under the limits, and killing whatever is left of it.

Every process of a run is found and killed when it ends (see `trl_ext.sandbox.core` for why): through the run's
`pids` cgroup when cgroups are writable, else by sweeping the run's PID namespace; the process group is killed
either way.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .limits import SandboxLimits

logger = logging.getLogger(__name__)

# After the program exits, how long stray processes may hold its output pipes open before they are killed.
_EXIT_GRACE = 0.5


# --------------------------------------------------------------------------------------------------- cgroups

# `sh -c` script: write the shell's own pid into each cgroup.procs file given before `--`, then exec the rest.
_JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
_CGROUP_PARENT = "trl-ext-sandbox"
# Processes of a run that are not the program's: bubblewrap outside and its init inside; `unshare` itself.
_SUPERVISOR_PROCESSES = {"bwrap": 2, "unshare": 1, "none": 0}


@functools.lru_cache(maxsize=1)
def _cgroup_bases() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Directories under which a run's cgroups are created, with the controllers each one limits.

    cgroup v1: one directory per controller (`pids`, `memory`) under this process's own cgroup of that
    hierarchy. cgroup v2: one directory under this process's own cgroup when `pids` is delegated to it.
    Empty when no writable `pids` controller is found; a memory cgroup alone is not used.
    """
    try:
        own = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else ["<v2>"]:
                own[controller] = path
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            separator = fields.index("-")
            mounts.append((fields[4], fields[separator + 1], fields[separator + 3].split(",")))
    except (OSError, ValueError):
        return ()
    v1 = {}
    for mount_point, fstype, options in mounts:
        if fstype == "cgroup":
            for controller in ("pids", "memory"):
                if controller in options and controller in own and controller not in v1:
                    v1[controller] = os.path.join(mount_point, own[controller].lstrip("/"), _CGROUP_PARENT)
    bases = []
    for controller in ("pids", "memory") if "pids" in v1 else ():
        if controller in v1 and _writable_cgroup_dir(v1[controller], ()):
            bases.append((v1[controller], (controller,)))
    if bases and bases[0][1] == ("pids",):
        return tuple(bases)
    for mount_point, fstype, _ in mounts:
        if fstype == "cgroup2" and "<v2>" in own:
            parent = os.path.join(mount_point, own["<v2>"].lstrip("/"))
            try:
                delegated = Path(parent, "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in delegated:
                base = os.path.join(parent, _CGROUP_PARENT)
                controllers = tuple(c for c in ("pids", "memory") if c in delegated)
                if _writable_cgroup_dir(base, controllers):
                    return ((base, controllers),)
    return ()


def _writable_cgroup_dir(path: str, v2_controllers: tuple[str, ...]) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        if v2_controllers:  # v2: let the run cgroups below use the controllers
            Path(path, "cgroup.subtree_control").write_text(" ".join("+" + c for c in v2_controllers))
        probe = Path(path, f"probe-{os.getpid()}-{secrets.token_hex(4)}")
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


class _RunCgroups:
    """The cgroups of one run: `pids.max` bounds its processes, the memory limit its total memory."""

    def __init__(self, directories: list[tuple[str, tuple[str, ...]]]):
        self.directories = directories

    @classmethod
    def create(cls, run_id: str, limits: SandboxLimits, supervisors: int) -> _RunCgroups | None:
        bases = _cgroup_bases()
        if not bases:
            return None
        created = cls([])
        try:
            for base, controllers in bases:
                directory = os.path.join(base, run_id)
                os.mkdir(directory)
                created.directories.append((directory, controllers))
                v2 = os.path.exists(os.path.join(directory, "cgroup.controllers"))
                if "pids" in controllers:
                    Path(directory, "pids.max").write_text(str(limits.max_processes + supervisors))
                if "memory" in controllers:
                    Path(directory, "memory.max" if v2 else "memory.limit_in_bytes").write_text(str(2 * limits.memory))
        except OSError as error:
            logger.warning("Could not set up the sandbox cgroup (%s); this run has rlimits only.", error)
            created.remove()
            return None
        return created

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(directory, "cgroup.procs") for directory, _ in self.directories]

    def pids(self) -> list[int]:
        found = set()
        for path in self.procs_files:
            try:
                found.update(int(pid) for pid in Path(path).read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every process of the run until none is left (a fork bomb may still be forking)."""
        deadline = time.monotonic() + timeout
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        for directory, _ in reversed(self.directories):
            for _ in range(200):  # rmdir fails with EBUSY until the killed tasks are fully gone
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill_all(timeout=0.5)
                    time.sleep(0.01)
            else:
                logger.warning("Could not remove the sandbox cgroup %s.", directory)


# ----------------------------------------------------------------------------------------------- processes


def _collect_output(
    process: subprocess.Popen, deadline: float, max_output: int, namespace: list[str] | None = None
) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout and stderr until both close or the deadline: `(stdout, stderr, timed_out, overflow)`.

    With `namespace` (an empty list), also note the PID namespace of the run's init into it as soon as /proc
    shows one, for `_kill_pid_namespace` afterwards."""
    buffers = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    timed_out = overflow = False
    exited_at = None
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            if namespace is not None and not namespace and (found := _pid_namespace_below(process.pid)):
                namespace.append(found)
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now >= exited_at + _EXIT_GRACE:
                break  # the program is done; whatever still holds its pipes is a stray, killed next
            for key, _ in selector.select(min(deadline - now, 0.1)):
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer = buffers[key.fd]
                buffer += chunk
                if len(buffer) > max_output:
                    del buffer[max_output:]
                    overflow = True
            if overflow:
                break
    return bytes(buffers[process.stdout.fileno()]), bytes(buffers[process.stderr.fileno()]), timed_out, overflow


def _pid_namespace_below(pid: int) -> str | None:
    """The PID namespace of the first child of `pid` (bubblewrap's or unshare's init of the run), if it is not
    `pid`'s own; None when there is no such child (the run has ended) or /proc does not say."""
    try:
        own = os.readlink(f"/proc/{pid}/ns/pid")
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for child in children:
            namespace = os.readlink(f"/proc/{child}/ns/pid")
            if namespace != own:
                return namespace
    except OSError:
        pass
    return None


def _kill_pid_namespace(namespace: str, timeout: float = 5.0) -> None:
    """SIGKILL every process in the PID namespace `namespace` (`pid:[inode]`) until none is left.

    Once its init is killed the kernel kills the rest, but not at once: a run must not return while a fork
    bomb's processes are still on the host. A process cannot leave its PID namespace, unlike its process group.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/pid") == namespace and not _is_zombie(entry):
                        found.append(int(entry))
                except OSError:
                    pass
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)
    logger.warning("Processes of a sandbox run were still alive %.0f s after it was killed.", timeout)


def _is_zombie(pid: str) -> bool:
    """A process that has exited and waits to be reaped (an orphan's reaper may be slow): it runs nothing more."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def _kill_process_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _remove_tree(path: str) -> None:
    def make_writable_and_retry(function, failed_path, _):
        try:
            os.chmod(os.path.dirname(failed_path), 0o700)
            os.chmod(failed_path, 0o700)
            function(failed_path)
        except OSError:
            pass

    shutil.rmtree(path, onerror=make_writable_and_retry)
