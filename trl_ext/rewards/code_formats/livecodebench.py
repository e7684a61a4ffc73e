"""LiveCodeBench: `public_test_cases` (+ compressed `private_test_cases`), stdin or functional per `metadata`.

The compressed private tests are read by parsing the pickle's opcodes, never by unpickling."""

from __future__ import annotations

import base64
import json
import pickletools
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from .common import LIVECODEBENCH_HEADER, RowTests, TestsFormatError, _call_test, _identifier, _json_value, _stdio


def _livecodebench(row: Mapping[str, Any]) -> RowTests:
    cases = list(_json_value(row.get("public_test_cases"), "public_test_cases") or [])
    private = row.get("private_test_cases")
    if private:
        cases += decode_livecodebench_tests(private)
    return _livecodebench_cases(cases, row, "public_test_cases")


def _livecodebench_cases(cases: Sequence[Mapping[str, Any]], row: Mapping[str, Any], what: str) -> RowTests:
    metadata = _json_value(row.get("metadata"), "metadata") or {}
    tests = []
    for case in cases:
        kind = case.get("testtype", "stdin")
        if kind == "stdin":
            tests.append(_stdio(case["input"], case["output"]))
        elif kind == "functional":
            function = _identifier(metadata.get("func_name") if isinstance(metadata, Mapping) else None,
                                   "metadata.func_name (functional tests)")
            try:
                arguments = [json.loads(line) for line in str(case["input"]).split("\n") if line.strip()]
                expected = json.loads(case["output"])
            except ValueError as error:
                raise TestsFormatError(f"a functional test of {what} is not JSON ({error})") from None
            tests.append(_call_test(function, arguments, [expected]))
        else:
            raise TestsFormatError(f"{what}: unknown testtype {kind!r} (expected 'stdin' or 'functional')")
    return RowTests(tests, prelude=LIVECODEBENCH_HEADER)


# Pickle opcodes that can only build one plain string: no global lookups, no calls, no objects.
_STRING_PICKLE_OPCODES = frozenset(
    {"PROTO", "FRAME", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE", "MEMOIZE", "BINPUT",
     "LONG_BINPUT", "PUT", "STOP"}
)
_MAX_DECOMPRESSED = 1 << 30


def decode_livecodebench_tests(value: str) -> list[Mapping[str, Any]]:
    """LiveCodeBench's `private_test_cases`: plain JSON, or base64 of zlib of a pickled JSON string.

    The pickle is never unpickled here (unpickling untrusted data runs code): its opcodes are parsed with
    `pickletools.genops`, and only a pickle that is exactly one string is accepted."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text[:1] == "[":
        return list(json.loads(text))
    if isinstance(text, list):
        return text
    try:
        compressed = base64.b64decode(text, validate=False)
        decompressor = zlib.decompressobj()
        data = decompressor.decompress(compressed, _MAX_DECOMPRESSED)
    except (ValueError, zlib.error) as error:
        raise TestsFormatError(f"private_test_cases is neither JSON nor base64 zlib data ({error})") from None
    strings = []
    try:
        for opcode, argument, _ in pickletools.genops(data):
            if opcode.name not in _STRING_PICKLE_OPCODES:
                raise TestsFormatError(f"private_test_cases: the pickle holds more than a string ({opcode.name})")
            if isinstance(argument, str) and opcode.name != "PUT":
                strings.append(argument)
    except (ValueError, EOFError) as error:
        raise TestsFormatError(f"private_test_cases: not a readable pickle ({error})") from None
    if len(strings) != 1:
        raise TestsFormatError("private_test_cases: the pickle must hold exactly one JSON string")
    try:
        return list(json.loads(strings[0]))
    except ValueError as error:
        raise TestsFormatError(f"private_test_cases: the pickled string is not JSON ({error})") from None
