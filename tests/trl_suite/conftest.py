"""Runs TRL's GRPO tests offline against the stand-ins, applying the expectations of `expectations.py`.

The tests come from a TRL source checkout (`--trl-source PATH`, `TRL_EXT_TRL_SOURCE`, or `trl-source/` here); without
one, nothing here is collected. `--trl-suite=ci` (the default) runs a subset covering every configuration family;
`--trl-suite=full` runs every test of every variant, TRL's own trainer included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import substitution
from .expectations import expectation_marks, in_ci_subset
from .standins import build_standins
from .substitution import VARIANTS

_SUITE_DIR = Path(__file__).parent
# A TRL checkout placed here is read by `substitution.py`, never collected on its own.
collect_ignore = ["trl-source"]


def pytest_ignore_collect(collection_path, config):
    """The variant modules are collected only when a TRL source checkout is given."""
    if collection_path.parent != _SUITE_DIR or not collection_path.name.startswith("test_grpo_"):
        return None
    substitution.trl_source = substitution.find_trl_source(config.getoption("--trl-source"))
    return True if substitution.trl_source is None else None


@pytest.fixture(scope="session")
def trl_suite_standins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("trl-suite-hub")
    build_standins(root)
    return root


@pytest.fixture(autouse=True)
def _resolve_hub_ids_to_standins(trl_suite_standins, monkeypatch):
    # transformers and datasets look for a local directory named like the Hub id before going online.
    monkeypatch.chdir(trl_suite_standins)


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def _variant_and_test_id(item) -> tuple[str, str]:
    """('dapo', 'TestGRPOTrainer::test_train[...]') for an item of `test_grpo_dapo.py`."""
    variant = item.path.stem.removeprefix("test_grpo_")
    return variant, item.nodeid.split("::", 1)[1]


def pytest_collection_modifyitems(config, items):
    mode = config.getoption("--trl-suite")
    kept, deselected = [], []
    for item in items:
        variant, test_id = _variant_and_test_id(item)
        if item.path.parent != _SUITE_DIR or variant not in VARIANTS:
            kept.append(item)
            continue
        if mode != "full" and not in_ci_subset(variant, test_id):
            deselected.append(item)
            continue
        for mark in expectation_marks(variant, test_id):
            item.add_marker(mark)
        kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


# Outcome counts per variant, printed at the end of a run (RESULTS.md records the latest full run).
_OUTCOMES: dict[str, dict[str, int]] = {}


def _outcome_category(report) -> str | None:
    if report.when == "call" and report.passed:
        return "xpassed" if hasattr(report, "wasxfail") else "passed"
    if report.skipped and hasattr(report, "wasxfail"):
        reason = report.wasxfail
        if reason.startswith("intended:"):
            return "intended difference"
        if reason.startswith("upstream skew:"):
            return "fails with TRL's own trainer too (upstream skew)"
        return "failing, tracked (xfail)"
    if report.skipped:
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        for cause, label in (("GPU:", "skipped: GPU"), ("vLLM", "skipped: vLLM"), ("Hub-only:", "skipped: Hub-only")):
            if cause.lower() in reason.lower():
                return label
        return "skipped: other"
    if report.failed:
        return "failing"
    return None


def pytest_runtest_logreport(report):
    path = Path(report.nodeid.split("::", 1)[0])
    variant = path.stem.removeprefix("test_grpo_")
    if path.parent.name != _SUITE_DIR.name or variant not in VARIANTS:
        return
    if (category := _outcome_category(report)) is not None:
        counts = _OUTCOMES.setdefault(variant, {})
        counts[category] = counts.get(category, 0) + 1


def pytest_terminal_summary(terminalreporter):
    if not _OUTCOMES:
        return
    terminalreporter.section("TRL GRPO suite: outcomes per variant")
    for variant, counts in _OUTCOMES.items():
        summary = ", ".join(f"{category} {count}" for category, count in sorted(counts.items()))
        terminalreporter.write_line(f"{variant}: {summary}")
