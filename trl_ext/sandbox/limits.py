"""`SandboxLimits`: the resource limits of one sandbox run (its own module so that the backends, the cleanup and
`Sandbox` can all use it without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SandboxLimits"]


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
