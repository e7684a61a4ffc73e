"""APPS and TACO: an `input_output` JSON object of `inputs`/`outputs`, stdin/stdout or, with `fn_name`, calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import LIVECODEBENCH_HEADER, RowTests, TestsFormatError, _call_test, _identifier, _json_value, _stdio


def _apps_tests(spec: Any) -> RowTests:
    spec = _json_value(spec, "input_output")
    if not isinstance(spec, Mapping) or "inputs" not in spec or "outputs" not in spec:
        raise TestsFormatError("input_output must be a JSON object with `inputs` and `outputs`")
    inputs, outputs = list(spec["inputs"]), list(spec["outputs"])
    if len(inputs) != len(outputs):
        raise TestsFormatError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")
    function = spec.get("fn_name")
    if not function:
        return RowTests([_stdio(i, o) for i, o in zip(inputs, outputs)], output_match="apps")
    function = _identifier(function, "input_output.fn_name")
    tests = []
    for arguments, expected in zip(inputs, outputs):
        if not isinstance(arguments, list):
            arguments = [arguments]
        # APPS/TACO accept the value itself or, when the expected value is a one-element list, its element.
        accepted = [expected] + ([expected[0]] if isinstance(expected, list) and len(expected) == 1 else [])
        tests.append(_call_test(function, arguments, accepted))
    return RowTests(tests, prelude=LIVECODEBENCH_HEADER)
