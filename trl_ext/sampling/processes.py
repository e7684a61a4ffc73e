"""The processes of a data-parallel run, as the sampler sees them: a count, a rank and a gather."""

from __future__ import annotations

from typing import Any, Protocol


class Processes(Protocol):
    """The processes of a data-parallel run, as the sampler needs them."""

    num_processes: int
    process_index: int

    def gather(self, value: Any) -> list[Any]:
        """Every process's `value`, in process order (a collective: every process calls it)."""


def local_processes() -> Processes:
    """A single process (no collectives): for simulations and tests of the sampler on its own."""
    return _SingleProcess()


class _SingleProcess:
    num_processes = 1
    process_index = 0

    def gather(self, value: Any) -> list[Any]:
        return [value]
