"""Precompiled standard headers: a C++ program compiles as before, without parsing `<bits/stdc++.h>` each time.

Parsing the standard library's headers is most of what compiling a short program costs (`#include
<bits/stdc++.h>`: about 1 s of a 1 s compile; `<iostream>`: 0.2 s of 0.3 s). GCC reads a precompiled header
`<header>.gch` in place of the first header a program includes when it finds one in an include directory and
the file is valid for that compile: same compiler, same flags, no macro defined before the `#include` that
it depends on. When it is not valid GCC ignores it and reads the header itself, so a program compiles to the
same result either way; only the time changes.

The headers are precompiled on the host, outside the sandbox, from the system's own headers: a program only
decides *which* standard header (a name from `STANDARD_HEADERS`, nothing else), never what is compiled. Each
is built once per compiler and flags, the first time a program starts with it, into the user's cache
(`$XDG_CACHE_HOME/trl-ext/cpp-pch`, `TRL_EXT_PCH_DIR` to move it; at most `MAX_CACHE_BYTES` per compiler and
flags), and the sandbox sees that directory read-only.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

__all__ = [
    "MAX_CACHE_BYTES",
    "STANDARD_HEADERS",
    "first_standard_include",
    "precompiled_header_dir",
    "precompiled_headers_root",
]

# The headers worth precompiling that programs put first: GCC's all-in-one header and the C++ library's common
# headers. The C headers (`<cstdio>`, `<cstring>`...) parse in a few milliseconds, less than reading a
# precompiled form saves; the rarer C++ headers would grow the cache (about 20 MB each) for little.
STANDARD_HEADERS = frozenset(
    """
    bits/stdc++.h algorithm array bitset chrono cmath deque fstream functional iomanip iostream limits list map
    numeric queue random set sstream stack string tuple unordered_map unordered_set utility vector
    """.split()
)
# Disk one compiler-and-flags directory may take (every header above: 445 MB with GCC 12; `<bits/stdc++.h>`: 100 MB).
MAX_CACHE_BYTES = 640 << 20
_BUILD_TIMEOUT = 120.0
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_INCLUDE = re.compile(r"#\s*include\s*<([^>\s]+)>")
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()
_failed: set[tuple[str, str]] = set()


def first_standard_include(source: str) -> str | None:
    """The header of the program's first `#include <...>` if it comes before any code and is a standard one.

    GCC can use a precompiled header only for the first header included, before the first token of code.
    Other directives (`#define`, `#pragma`) may come first; GCC then decides whether the header is still valid.
    """
    for line in _COMMENTS.sub(" ", source).splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.startswith("#"):
            return None
        found = _INCLUDE.match(line)
        if found:
            return found.group(1) if found.group(1) in STANDARD_HEADERS else None
        if re.match(r"#\s*include\b", line):
            return None  # a program's own header ("file.h") comes first: no precompiled header applies
    return None


def precompiled_headers_root() -> Path:
    """Where precompiled headers are kept: `TRL_EXT_PCH_DIR`, else `$XDG_CACHE_HOME/trl-ext/cpp-pch`."""
    if os.environ.get("TRL_EXT_PCH_DIR"):
        return Path(os.environ["TRL_EXT_PCH_DIR"]).expanduser().absolute()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache).absolute() / "trl-ext" / "cpp-pch"


@lru_cache(maxsize=None)
def _compiler_identity(compiler: str) -> str:
    """The compiler's version, target and the time its binaries changed: a new compiler gets new headers."""
    described = subprocess.run(
        [compiler, "-dumpfullversion", "-dumpmachine"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    cc1plus = subprocess.run(
        [compiler, "-print-prog-name=cc1plus"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    changed = [os.stat(path).st_mtime_ns for path in (compiler, cc1plus) if os.path.isabs(path) and os.path.exists(path)]
    return f"{os.path.realpath(compiler)}\n{described}\n{changed}"


def precompiled_header_dir(compiler: str, flags: Sequence[str], header: str) -> str | None:
    """A system include directory (`-isystem`) holding `header`'s precompiled form for `compiler` with `flags`,
    built if needed.

    None when `header` is not a standard header or building it failed (the program then compiles without,
    exactly as it would anyway). Safe from several threads and processes: a header is built once, written
    under a temporary name and renamed into place.
    """
    if header not in STANDARD_HEADERS:
        return None
    try:
        identity = _compiler_identity(compiler)
    except (OSError, subprocess.TimeoutExpired):
        return None
    key = hashlib.sha256("\0".join([identity, *flags]).encode()).hexdigest()[:20]
    directory = precompiled_headers_root() / key
    target = directory / f"{header}.gch"
    if target.exists():
        return str(directory)
    with _locks_guard:
        lock = _locks.setdefault((str(directory), header), threading.Lock())
    with lock:
        if target.exists():
            return str(directory)
        if (str(directory), header) in _failed or _bytes_under(directory) > MAX_CACHE_BYTES:
            return None
        if not _build(compiler, flags, header, target):
            _failed.add((str(directory), header))
            return None
    return str(directory)


def _bytes_under(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*.gch")) if directory.exists() else 0


def _build(compiler: str, flags: Sequence[str], header: str, target: Path) -> bool:
    """Precompile `#include <header>` with `flags` into `target`; False (and nothing written) on failure."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        return _build_in(compiler, flags, header, target)
    except OSError:
        return False


def _build_in(compiler: str, flags: Sequence[str], header: str, target: Path) -> bool:
    # Beside `<header>.gch` GCC needs a file `<header>`: where the precompiled form is not used (a second
    # `#include <header>`, or a macro defined before that changes it), GCC opens that file instead. It reads
    # the system's header through `#include_next`, so the program sees what it would without this directory.
    stub = target.with_suffix("")
    if not stub.exists():
        _write_atomically(stub, f"#include_next <{header}>\n".encode())
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as scratch:
        wrapper = os.path.join(scratch, "header.h")
        with open(wrapper, "w", encoding="utf-8") as file:
            file.write(f"#include <{header}>\n")
        built = os.path.join(scratch, "header.gch")
        try:
            finished = subprocess.run(
                [compiler, *flags, "-x", "c++-header", wrapper, "-o", built],
                cwd=scratch, stdin=subprocess.DEVNULL, capture_output=True, timeout=_BUILD_TIMEOUT, check=False,
            )
        except subprocess.TimeoutExpired:
            return False
        if finished.returncode != 0 or not os.path.exists(built):
            return False
        os.chmod(built, 0o644)
        os.replace(built, target)  # atomic: a compile sees the whole file or none
    return True


def _write_atomically(path: Path, content: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".build-", delete=False) as file:
        file.write(content)
    os.chmod(file.name, 0o644)
    os.replace(file.name, path)
