"""The `code` reward's warnings about rows: each logged once, and collected per thread while a judge server
scores a job (`collected_warnings`), so that they go back to the trainer that sent it."""

from __future__ import annotations

import contextlib
import logging
import threading

logger = logging.getLogger("trl_ext.rewards.code")

_warned: set[str] = set()
_MAX_REMEMBERED = 10_000
_collecting = threading.local()


def warn_once(message: str) -> None:
    collected = getattr(_collecting, "messages", None)
    if collected is not None:  # a judge server: the warning goes back to the client too
        collected.append(message)
    if message not in _warned:
        if len(_warned) >= _MAX_REMEMBERED:  # a judge server runs for weeks: it may say a warning again
            _warned.clear()
        _warned.add(message)
        logger.warning("code reward: %s", message)


@contextlib.contextmanager
def collected_warnings():
    """The warnings this thread's scoring gives while inside (`trl_ext.judge_service` returns them with a job)."""
    _collecting.messages = messages = []
    try:
        yield messages
    finally:
        _collecting.messages = None


def cannot_judge(problem: str) -> None:
    warn_once(f"{problem}; such rows score None (cannot judge).")
    return None
