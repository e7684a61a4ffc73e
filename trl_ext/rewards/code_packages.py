"""Which installed packages a row's Python tests need, and whether the sandbox can offer them."""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Sequence

from ..sandbox.testing import CodeTest, imported_modules

__all__ = ["needed_packages", "packages_problem"]

# What a test may import without installed packages: the standard library, the program itself (KodCode's `from
# solution import f`) and pytest, which KodCode's tests get a stand-in for (see `code_formats.kodcode`).
_STANDARD_LIBRARY = frozenset(sys.stdlib_module_names) | {"solution", "pytest"}
# Packages installed under another name than the one imported (BigCodeBench's tests import several).
_DISTRIBUTIONS = {
    "sklearn": "scikit-learn", "skimage": "scikit-image", "cv2": "opencv-python", "PIL": "pillow",
    "bs4": "beautifulsoup4", "yaml": "pyyaml", "dateutil": "python-dateutil", "Crypto": "pycryptodome",
    "docx": "python-docx", "dotenv": "python-dotenv",
}


def needed_packages(tests: Sequence[CodeTest]) -> list[str]:
    """The modules outside the standard library that the tests import (raises `SyntaxError` if one does not
    parse)."""
    return sorted(imported_modules(tests) - _STANDARD_LIBRARY)


def packages_problem(packages: Sequence[str], site_packages: bool | str, same_interpreter: bool) -> str | None:
    """Why a row whose tests import `packages` cannot be judged, or None. `same_interpreter`: the sandbox runs
    this process's interpreter, so what it lacks can be named (with the `pip install` that fixes it)."""
    if site_packages is False:
        return (f"its tests import {list(packages)}, outside the standard library, and site_packages=False keeps "
                "installed packages out of the sandbox: pass site_packages='auto' (the default) or True")
    if same_interpreter:
        missing = [name for name in packages if not _installed(name)]
        if missing:
            install = " ".join(_DISTRIBUTIONS.get(name, name) for name in missing)
            return f"its tests import {missing}, which is not installed: pip install {install}"
    return None


@functools.lru_cache(maxsize=None)
def _installed(module: str) -> bool:
    """Whether this interpreter can import the top-level module `module` (found without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
