"""What a client sends the judge service for one completion, and what it answers (JSON over HTTP).

A job is one completion and its dataset row, as the `code` reward sees them:

    POST /v1/judge   Authorization: Bearer <token>
    {"completion": "...", "row": {"tests": [...], ...}, "language": null, "index": 3,
     "reward": {"timeout": 4.0, "partial_credit": true, ...}}

`row` holds the row's columns in any format the `code` reward reads (HumanEval, APPS, CodeContests...,
detected as locally or named by `reward.tests_format`); `reward` holds `CodeReward` arguments (`REWARD_SETTINGS`;
where programs run and how many at once are the server's). The answer:

    {"score": 1.0 | null, "report": {"outcomes": [{"passed", "status", "detail"}...], ...} | null,
     "warnings": ["row 3 of the batch: ..."]}

is what `CodeReward` computes locally for that row: the same score, per-test verdicts and warnings.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ..sandbox.testing import CodeTestReport, TestOutcome

__all__ = [
    "REWARD_SETTINGS", "JobError", "job_payload", "parse_job", "report_from_json", "report_to_json", "with_index",
]

PROTOCOL_VERSION = 1
# `CodeReward` arguments a job may set. Where and how programs run (isolation, workers, reused sandboxes) and
# the service itself are the server's choice.
REWARD_SETTINGS = frozenset({
    "tests_column", "partial_credit", "scoring", "timeout", "memory_mb", "max_processes", "max_output_bytes",
    "output_match", "site_packages", "language", "language_column", "compile_timeout", "compile_memory_mb",
    "cpp_flags", "tests_format", "rel_tol", "abs_tol", "tolerance_column", "checker_column", "checker_order",
    "precompiled_headers",
})


# Compiler flags a job may pass: a language standard, optimisation, debug info, macros, libraries. Anything else
# (`-wrapper`, `-B`, `-fplugin=`, `-Wl,`, `@file`...) could run or read something on the server's host.
SAFE_CPP_FLAG = re.compile(r"-std=(c|gnu)\+\+\w+|-O[0-3sgz]?|-pipe|-g|-w|-D[A-Za-z_]\w*(=\w*)?|-l[A-Za-z]\w*")
# What any job may ask at most, whatever the server: processes a program may have at once, stdout kept per test.
MAX_PROCESSES, MAX_OUTPUT = 256, 64 << 20


class JobError(ValueError):
    """A job the server refuses (HTTP 422): `field` names what is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def job_payload(completion: str, row: Mapping[str, Any], language: Any, settings: Mapping[str, Any]) -> bytes:
    """The request body for one row, without its index (`with_index` adds it: the same body is the client's key
    for judging a completion on a row once). Columns whose values JSON cannot carry (images, arrays of objects)
    are left out: the `code` reward reads text, numbers, lists and mappings only."""
    body = {"completion": completion, "row": dict(row), "language": language, "reward": dict(settings)}
    try:
        return json.dumps(body, allow_nan=False, default=_plain).encode()
    except (TypeError, ValueError):
        body["row"] = {name: value for name, value in row.items() if _carried(value)}
        return json.dumps(body, allow_nan=False, default=_plain).encode()


def with_index(payload: bytes, index: int) -> bytes:
    """`payload` (from `job_payload`) naming the row's index in the client's batch, for the warnings."""
    return b'{"index": %d, ' % index + payload[1:]


def _carried(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False, default=_plain)
    except (TypeError, ValueError):
        return False
    return True


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):  # NumPy arrays and scalars, as `datasets` may hand them over
        return value.tolist()
    raise TypeError(type(value).__name__)


def parse_job(body: Any, max_timeout: float, max_memory_mb: int) -> dict[str, Any]:
    """The job in a decoded request body, checked field by field; raises `JobError` naming the field. The
    server's caps bound what a job may ask for (`timeout`, `compile_timeout`, `memory_mb`, `compile_memory_mb`),
    and so do `MAX_PROCESSES` and `MAX_OUTPUT`."""
    if not isinstance(body, dict):
        raise JobError("body", "must be a JSON object")
    unknown = set(body) - {"completion", "row", "language", "index", "reward"}
    if unknown:
        raise JobError(sorted(unknown)[0], "is not a field of a job (completion, row, language, index, reward)")
    completion, row = body.get("completion"), body.get("row")
    if not isinstance(completion, str):
        raise JobError("completion", "must be the completion's text (a string)")
    if not isinstance(row, dict):
        raise JobError("row", "must be an object of the row's columns")
    language = body.get("language")
    if language is not None and not isinstance(language, str):
        raise JobError("language", "must be a string or null")
    index = body.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise JobError("index", "must be a non-negative integer (the row's index in the client's batch)")
    settings = body.get("reward", {})
    if not isinstance(settings, dict):
        raise JobError("reward", "must be an object of CodeReward arguments")
    for name, value in settings.items():
        if name not in REWARD_SETTINGS:
            raise JobError(f"reward.{name}", f"is not an argument a job may set (one of {sorted(REWARD_SETTINGS)})")
        if isinstance(value, float) and not math.isfinite(value):
            raise JobError(f"reward.{name}", "must be finite")
    caps = (("timeout", max_timeout), ("compile_timeout", max_timeout), ("memory_mb", max_memory_mb),
            ("compile_memory_mb", max_memory_mb), ("max_processes", MAX_PROCESSES), ("max_output_bytes", MAX_OUTPUT))
    for name, cap in caps:
        value = settings.get(name)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value > cap):
            raise JobError(f"reward.{name}", f"must be a number at most {cap} (this server's cap)")
    if "cpp_flags" in settings:
        flags = settings["cpp_flags"]
        if not isinstance(flags, list) or not all(isinstance(flag, str) for flag in flags):
            raise JobError("reward.cpp_flags", "must be a list of strings")
        unsafe = [flag for flag in flags if not SAFE_CPP_FLAG.fullmatch(flag)]
        if unsafe:  # the compiler also runs on the server's host, to precompile headers: no -wrapper, -B, -fplugin...
            raise JobError("reward.cpp_flags", f"{unsafe} not allowed; a job may pass -std=, -O, -pipe, -g, -w, "
                           "-D<NAME>[=<value>] and -l<library>")
        settings = {**settings, "cpp_flags": tuple(flags)}
    return {"completion": completion, "row": row, "language": language, "index": index, "settings": settings}


def report_to_json(report: CodeTestReport | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "outcomes": [{"passed": o.passed, "status": o.status, "detail": o.detail} for o in report.outcomes],
        "isolation": report.isolation,
        "wall_time": report.wall_time,
        "sandbox_timed_out": report.sandbox_timed_out,
        "run_id": report.run_id,
        "compile": dict(report.compile) if report.compile is not None else None,
    }


def report_from_json(data: Mapping[str, Any] | None) -> CodeTestReport | None:
    if data is None:
        return None
    outcomes = tuple(TestOutcome(bool(o["passed"]), str(o["status"]), str(o.get("detail", ""))) for o in data["outcomes"])
    return CodeTestReport(
        outcomes, str(data["isolation"]), float(data["wall_time"]), bool(data.get("sandbox_timed_out", False)),
        str(data.get("run_id", "")), compile=data.get("compile"),
    )
