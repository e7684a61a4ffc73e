"""The documentation site builds with `mkdocs build --strict` (no broken link or anchor, no page left out of the
navigation: `validation` in mkdocs.yml), and every public name of the package is documented in the API reference."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Module -> the API reference page that documents it.
API_PAGES = {
    "trl_ext.trainers": "api/trainers.md",
    "trl_ext.rewards": "api/rewards.md",
    "trl_ext.rewards.math": "api/rewards.md",
    "trl_ext.sandbox": "api/sandbox.md",
    "trl_ext.sampling": "api/sampling.md",
    "trl_ext.objectives": "api/objectives.md",
    "trl_ext.evaluation": "api/evaluation.md",
    "trl_ext.tasks": "api/recipes.md",
    "trl_ext.recipe": "api/recipes.md",
}


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name, value in vars(module).items() if not name.startswith("_")
                 and (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == module_name]
    return list(names)


@pytest.mark.slow
def test_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "trainers" / "index.html").exists()


@pytest.mark.parametrize("module_name", sorted(API_PAGES))
def test_every_public_name_has_a_docstring_and_a_reference_page(module_name):
    page = (ROOT / "docs" / API_PAGES[module_name]).read_text()
    assert f"::: {module_name}" in page, f"docs/{API_PAGES[module_name]} does not document {module_name}"
    module = importlib.import_module(module_name)
    undocumented = [
        name for name in public_names(module_name)
        if (inspect.isclass(obj := getattr(module, name)) or inspect.isfunction(obj)) and not inspect.getdoc(obj)
    ]
    assert not undocumented, f"{module_name}: no docstring for {undocumented}"
