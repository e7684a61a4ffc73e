"""Every ```python example of the documentation and the README runs, and prints what its comments say.

The blocks of one page run in order in one namespace, in a fresh working directory, as a reader would paste them.
A `print(...)` followed, on its line or the next, by a comment that is a Python literal (`# [1.0, 0.0]`) must
print that value; other comments are prose. A block preceded by `<!-- docs-test: skip REASON -->` is not run
(the reason is required: a model from the Hub, a GPU). Examples that are not Python, or not meant to run, use
another fence (```text, ```bash, ```yaml).
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
BLOCK = re.compile(r"(?P<marker><!-- docs-test: (?P<directive>[^>]*)-->\n)?^```python\n(?P<code>.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(first line number, code, skip reason or None) of each ```python block."""
    blocks = []
    for match in BLOCK.finditer(text):
        line = text[: match.start("code")].count("\n") + 1
        directive = (match.group("directive") or "").strip()
        reason = directive.removeprefix("skip").strip() if directive.startswith("skip") else None
        if directive and reason is None or reason == "":
            raise ValueError(f"line {line}: write <!-- docs-test: skip REASON --> with a reason, got {directive!r}")
        blocks.append((line, match.group("code"), reason))
    return blocks


def expected_outputs(code: str) -> dict[int, object]:
    """Line of each print call -> the literal its comment promises."""
    lines = code.split("\n")
    expected = {}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            end = node.end_lineno
            candidates = [lines[end - 1].partition("#")[2] if "#" in lines[end - 1] else ""]
            if end < len(lines) and lines[end].lstrip().startswith("#"):
                candidates.append(lines[end].lstrip()[1:])
            for comment in candidates:
                try:
                    expected[node.lineno] = ast.literal_eval(comment.strip())
                    break
                except (ValueError, SyntaxError):
                    continue
    return expected


def run_page(path: Path, root: Path = ROOT) -> None:
    namespace: dict = {"__name__": "__docs_example__"}
    for first_line, code, skip_reason in python_blocks(path.read_text()):
        if skip_reason:
            continue
        printed: dict[int, list[str]] = {}
        filename = f"{path.relative_to(root)}:{first_line}"

        def recording_print(*args, **kwargs):
            import sys

            frame = sys._getframe(1)
            if frame.f_code.co_filename == filename:
                printed.setdefault(frame.f_lineno, []).append(" ".join(map(str, args)))
            builtins.print(*args, **kwargs)

        namespace["print"] = recording_print
        exec(compile(code, filename, "exec"), namespace)
        for line, literal in expected_outputs(code).items():
            assert line in printed, f"{filename} line {line}: the print did not run"
            got = printed[line][-1]
            try:
                value = ast.literal_eval(got)
            except (ValueError, SyntaxError):
                value = got
            assert value == literal, f"{filename} line {line}: printed {got!r}, the comment says {literal!r}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_examples_run_and_print_what_they_say(page, tmp_path, monkeypatch):
    if not python_blocks(page.read_text()):
        pytest.skip("no Python example")
    monkeypatch.chdir(tmp_path)
    run_page(page)


def test_the_collector_catches_a_wrong_promise(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1 + 1)   # 3\n```\n")
    with pytest.raises(AssertionError, match="the comment says 3"):
        run_page(page, root=tmp_path)
    page.write_text("```python\nprint(1 + 1)   # 2\nprint('prose')  # any words\n```\n")
    run_page(page, root=tmp_path)
