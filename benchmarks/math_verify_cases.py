"""Math-Verify's own equivalence cases, read from the `tests/` of the `math-verify` source distribution.

The sdist of the installed version is downloaded from the package index by pip the first time and cached outside
the tree (`cache_dir()`), or named by `$TRL_EXT_MATH_VERIFY_SDIST`. The cases are read from the test files'
syntax trees (gold, prediction, expected verdict and the options each test runs with); no code from the download
is run. Used by `benchmarks/math_corpus.py` and `tests/rewards/test_math_corpus.py`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# The equivalence tests of Math-Verify's suite (the other files test extraction configs and timeouts).
MATH_VERIFY_TEST_FILES = (
    "tests/test_all.py",
    "tests/test_boxed.py",
    "tests/test_numina_cases.py",
    "tests/test_open_thoughts.py",
    "tests/test_strict.py",
    "tests/test_yujianll.py",
)
# The options a reward runs with; a case run by its test with other options is "not applicable".
REWARD_OPTIONS = {"precision": 6, "strict": True, "allow_set_relation_comp": False}
# A pre-downloaded sdist (an offline machine, a CI cache): used instead of downloading.
SDIST_ENV = "TRL_EXT_MATH_VERIFY_SDIST"


# ------------------------------------------------------------------------------------------ Math-Verify's cases


class MathVerifyCasesUnavailable(RuntimeError):
    """The math-verify source distribution could not be downloaded or read."""


def cache_dir() -> Path:
    """Where downloads are kept between runs: `$TRL_EXT_CACHE`, else `$XDG_CACHE_HOME/trl-ext`, else
    `~/.cache/trl-ext`; never inside the repository."""
    if os.environ.get("TRL_EXT_CACHE"):
        return Path(os.environ["TRL_EXT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trl-ext"


def installed_math_verify_version() -> str:
    return importlib.metadata.version("math-verify")


def math_verify_sdist(version: str | None = None, cache: Path | None = None) -> Path:
    """The `math-verify` source distribution of `version` (default: the installed one), downloaded from the
    package index by pip (`pip download --no-deps --no-binary :all:`) into `cache/math-verify-sdist/<version>/`
    the first time, then reused. `$TRL_EXT_MATH_VERIFY_SDIST` names a tarball to use instead.

    Raises `MathVerifyCasesUnavailable` with pip's reason and the fix when the download fails.
    """
    if os.environ.get(SDIST_ENV):
        path = Path(os.environ[SDIST_ENV])
        if not path.is_file():
            raise MathVerifyCasesUnavailable(f"{SDIST_ENV}={path} is not a file: point it at a math_verify-*.tar.gz.")
        return path
    version = version or installed_math_verify_version()
    target = (cache or cache_dir()) / "math-verify-sdist" / version
    found = sorted(target.glob("*.tar.gz"))
    if found:
        return found[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--dest", download,
                   "--quiet", f"math-verify=={version}"]  # fmt: skip
        try:
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            done = None
        tarballs = sorted(Path(download).glob("*.tar.gz"))
        if done is None or done.returncode != 0 or not tarballs:
            reason = "timed out after 600 s" if done is None else (done.stderr or done.stdout).strip()[-800:]
            raise MathVerifyCasesUnavailable(
                f"Could not download the math-verify {version} source distribution (`{' '.join(command[2:])}`): "
                f"{reason or 'no .tar.gz was saved'}. Fix: make the package index reachable, or download "
                f"math_verify-{version}.tar.gz elsewhere and set {SDIST_ENV} to its path."
            )
        # Moved into place only once complete, so an interrupted download is never taken for a cached one.
        staged = Path(download) / "ready"
        staged.mkdir()
        shutil.move(str(tarballs[0]), staged / tarballs[0].name)
        if target.exists():  # another process finished first
            found = sorted(target.glob("*.tar.gz"))
            if found:
                return found[0]
            shutil.rmtree(target)
        staged.rename(target)
    return min(target.glob("*.tar.gz"))


def _test_sources(sdist: Path) -> dict[str, str]:
    """`{"tests/test_all.py": source, ...}` for the equivalence test files the sdist ships."""
    sources = {}
    try:
        with tarfile.open(sdist, "r:gz") as archive:
            for member in archive.getmembers():
                # Members are `math_verify-0.9.0/tests/test_all.py`: drop the top folder.
                relative = member.name.partition("/")[2]
                if relative in MATH_VERIFY_TEST_FILES and member.isfile():
                    sources[relative] = archive.extractfile(member).read().decode("utf-8")
    except (OSError, tarfile.TarError) as error:
        raise MathVerifyCasesUnavailable(
            f"Cannot read {sdist}: {error}. Delete it so it is downloaded again."
        ) from None
    if not sources:
        raise MathVerifyCasesUnavailable(
            f"{sdist} holds none of {list(MATH_VERIFY_TEST_FILES)}: this math-verify release does not ship its "
            "tests in its sdist; install a release that does (0.9.0 does)."
        )
    return sources


_MATH_FUNCTIONS = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "sin": math.sin, "cos": math.cos}


def _literal(node: ast.AST):
    """A test argument's value: a literal, or an f-string whose fields are `math.<function>(<number>)` with a
    format spec (one case writes `f"{math.sqrt(17):.15f}"`). Evaluated from the syntax tree: no code from the
    download is run."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if not isinstance(node, ast.JoinedStr):
        raise ValueError(f"unsupported test argument {ast.dump(node)[:120]}")  # noqa: TRY004
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
            continue
        call = value.value
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and getattr(call.func.value, "id", None) == "math"
            and call.func.attr in _MATH_FUNCTIONS
        ):
            raise ValueError(f"unsupported f-string field {ast.dump(call)[:120]}")
        number = _MATH_FUNCTIONS[call.func.attr](*(ast.literal_eval(argument) for argument in call.args))
        spec = "".join(str(part.value) for part in value.format_spec.values) if value.format_spec else ""
        parts.append(format(number, spec))
    return "".join(parts)


def _call_options(function: ast.FunctionDef) -> tuple[str, dict]:
    """How a test function compares: `compare_strings(gold, pred, **options)` (its keyword options, constants or
    parameter names) or `verify(parse(gold), parse(pred))` with math-verify's defaults."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "compare_strings":
            options = {}
            for keyword in node.keywords:
                value = keyword.value
                options[keyword.arg] = {"parameter": value.id} if isinstance(value, ast.Name) else _literal(value)
            return "compare_strings", options
    return "parse_defaults", {}


def cases_from_test_source(relative: str, source: str) -> list[dict]:
    """Every parametrised equivalence case of one Math-Verify test file, read from its syntax tree."""
    cases = []
    for function in ast.parse(source).body:
        if not isinstance(function, ast.FunctionDef):
            continue
        for decorator in function.decorator_list:
            if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "parametrize"):
                continue
            names = [name.strip() for name in ast.literal_eval(decorator.args[0]).split(",")]
            if not {"gold", "pred"} <= set(names):
                continue
            harness, call_options = _call_options(function)
            for index, row in enumerate(decorator.args[1].elts):
                values = dict(zip(names, (_literal(element) for element in row.elts)))
                # `compare_strings`' defaults, then what the test passes.
                options = {"match_types": ["latex", "expr"], **REWARD_OPTIONS}
                for key, value in call_options.items():
                    options[key] = values[value["parameter"]] if isinstance(value, dict) else value
                expected = values.get("expected", values.get("result"))
                cases.append(
                    {
                        "id": f"{relative.removeprefix('tests/')}::{function.name}[{index}]",
                        "gold": values["gold"],
                        "pred": values["pred"],
                        "expected": int(expected),
                        "harness": harness,
                        "options": options if harness == "compare_strings" else {},
                    }
                )
    return cases


def import_math_verify_cases(sdist: Path) -> dict:
    """Every parametrised equivalence case of the test files a math-verify sdist ships, with where they came
    from (file name and SHA-256 of the sdist)."""
    sources = _test_sources(sdist)
    cases = [case for relative, source in sorted(sources.items()) for case in cases_from_test_source(relative, source)]
    return {
        "source": f"{sdist.name} (math-verify source distribution from the package index)",
        "sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
        "files": sorted(sources),
        "cases": cases,
    }


_MATH_SPAN = re.compile(r"\$\$.+?\$\$|\$[^$]*\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)


def states_its_answer(prediction: str) -> bool:
    """Whether a prediction marks its answer: a box, an answer phrase math-verify finds with
    `try_extract_without_anchor=False` (as TRL's `accuracy_reward` and open-r1 parse completions), or nothing
    but the answer (no word outside math once a trailing unit or percent word is taken off). Math-Verify's
    suite also tests guessing an answer from unmarked prose (`The identity matrix is $...$.`), which a reward
    does not do: a policy rewarded for it learns to end with any number."""
    from latex2sympy2_extended.math_normalization import units_regex
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    from trl_ext.rewards.extraction import boxed_spans

    if boxed_spans(prediction):
        return True
    anchored = [
        LatexExtractionConfig(try_extract_without_anchor=False),
        ExprExtractionConfig(try_extract_without_anchor=False),
    ]
    if parse(prediction, anchored):
        return True
    outside = re.sub(r"\s*\b(?:percent|percentage|pct)\b", "", _MATH_SPAN.sub(" 0 ", prediction))
    return not re.search(r"[A-Za-z]{3,}", units_regex.sub(r"\1", outside.strip()))


def applicable(case: dict) -> bool:
    """Whether a Math-Verify case runs with the options a reward uses (any extraction targets)."""
    options = case["options"]
    return all(options.get(key, value) == value for key, value in REWARD_OPTIONS.items())
