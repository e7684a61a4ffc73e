"""What every format shares: the row's tests (`RowTests`), the error (`TestsFormatError`), the standard-library
header LeetCode-style tasks assume, and small helpers to read JSON columns, build stdin/stdout and call tests, and
tell what kind of Python test code a column holds."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ...sandbox.parsing import parse
from ...sandbox.testing import Checker, CodeTest


class TestsFormatError(ValueError):
    """A row's test columns fit no format, or several, or cannot be read in the format asked for."""

    __test__ = False  # not a pytest test class, whatever its name


@dataclass(frozen=True)
class RowTests:
    """What one row asks of a program: the tests, code to put before the program (`prelude`: imports and
    helpers the dataset assumes), the language if the row says, a checker, and how outputs compare.

    `continues` is the prompt a base model's completion continues (HumanEval's harness runs prompt + completion):
    a completion that does not define `entry_point` itself, a function body, runs after it."""

    tests: list[CodeTest]
    prelude: str = ""
    continues: str = ""
    entry_point: str = ""
    language: str | None = None
    checker: Checker | None = None
    output_match: str | None = None
    notes: tuple[str, ...] = field(default=())


# What LeetCode-style programs use without importing it, as LiveCodeBench's harness puts it before each program:
# every public name of these standard-library modules (`reduce`, `xor`, `pairwise`, `defaultdict`, `List`...), the
# builtins again (a star import must not hide `pow` or `open`), the modules themselves, and a deep recursion limit.
# LeetCode's judge also provides `sortedcontainers` (a pure-Python dependency of trl-ext): see `header_for`.
_MODULE_NAMES = "string re datetime collections heapq bisect copy math random statistics itertools functools operator"
LIVECODEBENCH_MODULES = (*_MODULE_NAMES.split(), "io", "sys", "json")
LIVECODEBENCH_HEADER = (
    "from typing import *\n"  # first: typing's `Counter` and `OrderedDict` must not hide collections' classes
    + "".join(f"from {module} import *\n" for module in LIVECODEBENCH_MODULES)
    + "from builtins import *\n"
    + "".join(f"import {module}\n" for module in LIVECODEBENCH_MODULES)
    + "sys.setrecursionlimit(50000)\n"
)
SORTEDCONTAINERS_IMPORT = "from sortedcontainers import SortedDict, SortedKeyList, SortedList, SortedSet\n"
_SORTEDCONTAINERS_NAME = re.compile(r"\bSorted(?:Dict|KeyList|List|Set)\b")


def header_for(prelude: str, program: str) -> str:
    """What runs before `program`: the row's `prelude`, and with LiveCodeBench's header, `sortedcontainers`'
    classes when the program names one (LeetCode's judge provides them; only those programs then need the
    installed packages)."""
    if prelude == LIVECODEBENCH_HEADER and _SORTEDCONTAINERS_NAME.search(program):
        return prelude + SORTEDCONTAINERS_IMPORT
    return prelude


# ------------------------------------------------------------------------------------------------ helpers


def _json_value(value: Any, what: str) -> Any:
    if isinstance(value, (str, bytes)):
        text = value.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as error:
            raise TestsFormatError(f"{what} is not valid JSON ({error})") from None
    return value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "\n".join(str(line) for line in value)
    return str(value)


def _stdio(stdin: Any, expected: Any) -> CodeTest:
    return CodeTest("stdio", stdin=_text(stdin), expected=_text(expected))


def _call_test(function: str, arguments: Sequence[Any], accepted: list[Any]) -> CodeTest:
    """A test calling `function(*arguments)` (or the method of a LeetCode-style `class Solution`), the value
    compared here with the accepted values (never sent to the sandbox)."""
    call = (
        f"(Solution().{function} if 'Solution' in globals() and hasattr(Solution, {function!r}) else {function})"
        f"(*{list(arguments)!r})"
    )
    return CodeTest("value", call, expected=accepted, operator="any of")


def _identifier(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise TestsFormatError(f"{what} must name a function, got {name!r}")
    return name


def textwrap_dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def _pairs(inputs: Sequence[Any], outputs: Sequence[Any], what: str) -> RowTests:
    if len(inputs) != len(outputs):
        raise TestsFormatError(f"{what} has {len(inputs)} inputs but {len(outputs)} outputs")
    return RowTests([_stdio(i, o) for i, o in zip(inputs, outputs)])


# ------------------------------------------------------------------------------------------- Python test code


def _names_test_case(base: ast.expr) -> bool:
    return (isinstance(base, ast.Name) and base.id == "TestCase") or (
        isinstance(base, ast.Attribute) and base.attr == "TestCase"
    )


@lru_cache(maxsize=1024)
def _parse(source: str, what: str) -> ast.Module:
    try:
        return parse(source)
    except SyntaxError as error:
        raise TestsFormatError(f"{what} does not parse ({error.msg}, line {error.lineno})") from None


@lru_cache(maxsize=4096)
def _test_code_kind(source: str) -> str:
    """What a `test` column's code is: "unittest", "pytest", "check" (defines check()), or "asserts"."""
    try:
        tree = parse(source)
    except SyntaxError:
        return "unreadable"
    top = tree.body
    if any(isinstance(node, ast.ClassDef) and any(_names_test_case(b) for b in node.bases) for node in top):
        return "unittest"
    if any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in top):
        return "check"
    imports_solution = any(
        (isinstance(node, ast.ImportFrom) and node.module == "solution")
        or (isinstance(node, ast.Import) and any(alias.name == "solution" for alias in node.names))
        for node in top
    )
    defines_tests = any(
        (isinstance(node, ast.FunctionDef) and node.name.startswith("test"))
        or (isinstance(node, ast.ClassDef) and node.name.startswith("Test"))
        for node in top
    )
    if imports_solution or defines_tests:
        return "pytest"
    return "asserts"
