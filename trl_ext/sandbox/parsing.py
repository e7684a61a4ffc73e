"""Python source parsed one thread at a time.

CPython 3.11 keeps the depth it has reached while building a syntax tree in state its threads share: a thread that
starts `ast.parse` while another is building a tree (the other one paused by a finalizer the collector runs, or by a
switch of the interpreter's lock) overwrites it, and the first fails with `SystemError: AST constructor recursion
depth mismatch` (python/cpython#106905 and the reports around it). The `code` reward reads its rows' tests and
completions from several threads (`CodeReward(num_workers=...)`, the judge server's workers), so every parse on that
path goes through `parse`, which holds one lock for the whole process. Walking or unparsing a tree needs no lock.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

_ONE_AT_A_TIME = threading.RLock()  # reentrant: a finalizer that parses while its thread parses must not hang


def parse(source: str, mode: str = "exec") -> ast.AST:
    """`ast.parse(source, mode=mode)`, never while another thread of this process parses through here."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, mode=mode)
