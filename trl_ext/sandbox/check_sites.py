"""Whether a statement test can check anything, decided from its source alone, before any program runs.

A test that cannot (it only calls the function, its `check` is never called, its TestCase has no test method)
would pass every program: the row is at fault, and it scores None ("cannot judge"). That decision must not
depend on the program: a program that keeps a test's checks from running (it patches the test framework,
returns an empty list to a test that loops over it) fails that test instead (the harness reports a count of
zero checks; `testing._judge` makes it a failure).

The reading is an over-approximation: a check site counts when the test's top-level code can reach it through
calls by name (functions, the test methods and fixtures the formats' runners call, methods called on `self`),
and a loop over a literal empty sequence reaches nothing. A check site is an `assert` on something other than
constants, a call of an assertion function or method (`assert*`, `fail*`, `raises`), or a `raise`.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from .instrumentation import RUNNER_END, _called_name, _is_assertion_call, _literal, _NOT_LITERAL
from .parsing import parse

__all__ = ["can_check"]

# The formats' runners (`trl_ext.rewards.code_formats`): the test methods and functions they call, by name.
_UNITTEST_RUNNER = "__trl_ext_run_unittest__"
_PYTEST_RUNNER = "__trl_ext_run_pytest__"
_FIXTURE_METHODS = ("setUp", "setUpClass", "tearDown", "tearDownClass")


@lru_cache(maxsize=4096)
def can_check(source: str) -> bool:
    """Whether the statement test `source` (a format's runner before `RUNNER_END` is not read) reaches a check."""
    try:
        tree = parse(source.rpartition(RUNNER_END)[2])
    except SyntaxError:
        return True  # the harness reports the syntax error: a failure, not "cannot judge"
    functions: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    top_level = [node for node in tree.body if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef))]
    pending, seen = list(top_level), set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if _is_check_site(node):
            return True
        for child in _reached(node):
            pending.append(child)
        if isinstance(node, ast.Call):
            pending.extend(_called(node, functions, classes))
    return False


def _is_check_site(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return _literal(node.test) is _NOT_LITERAL
    if isinstance(node, ast.Raise):
        return True
    return _is_assertion_call(node) or _called_name(node) == "raises"


def _reached(node: ast.AST) -> list[ast.AST]:
    """The nodes under `node` that run when it does: a definition's body only when it is called (`_called`);
    a loop over a literal empty sequence runs only its `else`."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.decorator_list)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        value = _literal(node.iter)
        if value is not _NOT_LITERAL and hasattr(value, "__len__") and len(value) == 0:
            return [node.iter, *node.orelse]
    return list(ast.iter_child_nodes(node))


def _called(call: ast.Call, functions: dict, classes: dict) -> list[ast.AST]:
    """The bodies a call runs: a function of the test by name, a method by name (`self.helper()`), a class's
    methods when it is instantiated, and what the formats' runners run."""
    name = _called_name(call)
    strings = [argument.value for argument in call.args
               if isinstance(argument, ast.Constant) and isinstance(argument.value, str)]
    if name == _UNITTEST_RUNNER and len(strings) == 2 and strings[0] in classes:
        return _bodies(item for item in classes[strings[0]].body
                       if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and item.name in (strings[1], *_FIXTURE_METHODS))
    if name == _PYTEST_RUNNER and strings:
        owner, _, function = strings[0].rpartition("::")
        found = [item for item in classes[owner].body if getattr(item, "name", None) == function] if owner in classes \
            else functions.get(function, [])
        # Fixtures: any function of the test named as one of the test function's parameters.
        parameters = {argument.arg for item in found for argument in item.args.args}
        return _bodies([*found, *(f for parameter in parameters for f in functions.get(parameter, []))])
    bodies = list(functions.get(name, []))
    if name in classes:
        bodies += [item for item in classes[name].body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return _bodies(bodies)


def _bodies(definitions) -> list[ast.AST]:
    return [statement for definition in definitions for statement in definition.body]
