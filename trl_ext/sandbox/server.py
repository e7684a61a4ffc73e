"""`SandboxServer`: a sandbox run that stays up and answers requests, for callers that reuse one sandbox
(`Sandbox.start_python_server`)."""

from __future__ import annotations

import os
import secrets
import selectors
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .processes import (
    _JOIN_CGROUPS,
    _SUPERVISOR_PROCESSES,
    _kill_pid_namespace,
    _kill_process_group,
    _pid_namespace_below,
    _remove_tree,
    _RunCgroups,
)

if TYPE_CHECKING:
    from .limits import SandboxLimits

__all__ = ["SandboxServer"]


class _Launcher(Protocol):
    """What a server needs of its `Sandbox` (`core.Sandbox`, which starts it; not imported here: it imports us)."""

    isolation: str

    def _command(self, argv, workdir, limits, run_id, interactive, harness): ...


class SandboxServer:
    """A sandbox run that stays up: one bubblewrap (or other backend) process tree, with the same namespaces,
    mounts, rlimits and cgroups as `Sandbox.run_python`, whose Python script answers requests line by line.

    `exchange(request, deadline)` writes one line and reads lines until the script's `{"done": true}` line;
    past the deadline, or when the script dies or writes too much, the whole run is killed and cleaned up as a
    finished `Sandbox.run` is (`close`), and `exchange` returns `ok=False`. Not thread-safe: one user at a time.
    """

    _DONE = b'{"done": true}'

    def __init__(
        self, sandbox: _Launcher, argv: list[str], files: Mapping[str, str | bytes], limits: SandboxLimits,
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
