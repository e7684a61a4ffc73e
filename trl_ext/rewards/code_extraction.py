"""The program in a completion: the fenced block a chat model writes, or the whole text of a base model's."""

from __future__ import annotations

import ast
import re

from ..sandbox.parsing import parse

__all__ = ["defines", "extract_cpp_code", "extract_python_code"]

_PYTHON_FENCE_TAGS = frozenset({"python", "py", "python3", "py3"})
_CPP_FENCE_TAGS = frozenset({"cpp", "c++", "cc", "cxx", "hpp"})
_FENCE = re.compile(r"```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _extract(text: str, tags: frozenset[str]) -> str:
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    for wanted in (lambda tag: tag in tags, lambda tag: tag == ""):
        chosen = [body for tag, body in blocks if wanted(tag)]
        if chosen:
            return chosen[-1]
    return "" if blocks else text


def extract_python_code(text: str) -> str:
    """The program in a completion: the last ```python block (also `py`, `python3`), else the last untagged
    ``` block, else the whole text when it has no fenced block at all. Text up to the last `</think>` is
    reasoning and is ignored. A block cut off by the length limit (no closing fence) runs to the end. A
    completion whose only blocks are in other languages has no Python code (empty string)."""
    return _extract(text, _PYTHON_FENCE_TAGS)


def extract_cpp_code(text: str) -> str:
    """Like `extract_python_code`, for C++: the last ```cpp block (also `c++`, `cc`, `cxx`), else the last
    untagged block, else the whole text when it has no fenced block."""
    return _extract(text, _CPP_FENCE_TAGS)


def defines(code: str, name: str) -> bool:
    """Whether `code` parses and defines `name` at its top level (a function, class or assignment)."""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return True
    return False
