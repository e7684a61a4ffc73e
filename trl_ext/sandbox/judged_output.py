"""Which uses of `sys`, `io` and `contextlib` a statement test judged apart may make (`instrumentation.judged_apart`).

A test judged apart runs in the judge's process, and what the program prints there is written on the judge's
`sys.stdout` and `sys.stderr` as each reply comes (`judge_side._ProgramOutput`). So a test may capture the
program's output itself, in the judge's process, as KodCode's tests do:

    captured = io.StringIO()
    sys.stdout = captured
    print_board(3)
    sys.stdout = sys.__stdout__
    assert captured.getvalue() == "..."

(or `with contextlib.redirect_stdout(buffer)`, or pytest's `capsys`, which the runner gives with the same
redirection). A stream is not plain data and cannot be handed to the program, and `sys` and `io` name much else
that the program's process would have to share (`sys.stdin`, `sys.setrecursionlimit`, `io.open`). So such a
test is judged apart only if each name it uses of these modules is a stream, a way to redirect one or a constant,
and every stream it makes or reads (`io.StringIO()`, `sys.stdout`, a name bound to one) is only assigned,
redirected to, read through its own attributes (`captured.getvalue()`) or printed to (`print(..., file=...)`):
never passed to anything else, the program above all. Any other use runs the test in the program's process.
"""

from __future__ import annotations

import ast

# The names a test judged apart may use of each module: streams, ways to capture them, constants.
STREAMS = {"sys": frozenset({"stdout", "stderr", "__stdout__", "__stderr__"}), "io": frozenset({"StringIO"})}
_REDIRECTIONS = frozenset({"redirect_stdout", "redirect_stderr"})
_OTHER_NAMES = {
    "sys": frozenset({"maxsize", "float_info", "int_info", "version_info", "byteorder"}),
    "contextlib": _REDIRECTIONS | frozenset({"suppress", "nullcontext", "contextmanager"}),
}
ALLOWED = {module: STREAMS.get(module, frozenset()) | _OTHER_NAMES.get(module, frozenset())
           for module in ("sys", "io", "contextlib")}


def output_stays_in_the_judge(tree: ast.Module) -> bool:
    """Whether every use `tree` makes of `sys`, `io` and `contextlib` is one of `ALLOWED`, and every stream it
    makes or reads stays in the judge's process (module docstring)."""
    modules, names = _bound_names(tree)
    if modules is None:
        return False
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            if node.attr not in ALLOWED[modules[node.value.id]]:
                return False
        elif isinstance(node, ast.Name) and node.id in modules and not _module_attribute(node, parents):
            return False  # the module itself used as a value
    streams, grown = set(), True  # names bound to a stream (`captured = StringIO()`, `old = sys.stdout`, `as`)
    while grown:
        bound = {name for node in ast.walk(tree) if _is_stream(node, modules, names, streams)
                 for name in _names_bound_to(node, parents)}
        grown, streams = not bound <= streams, streams | bound
    return all(_stays(node, parents, modules) for node in ast.walk(tree) if _is_stream(node, modules, names, streams))


def _bound_names(tree: ast.Module) -> tuple[dict[str, str] | None, dict[str, str]]:
    """Names bound to the three modules (`import sys as s`: s -> sys), and to their members (`from io import
    StringIO`: StringIO -> io.StringIO); None when the test imports from them what `ALLOWED` does not list."""
    modules, names = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ALLOWED:
                    modules[alias.asname or alias.name] = alias.name
                elif alias.name.partition(".")[0] in ALLOWED:
                    return None, {}
        elif isinstance(node, ast.ImportFrom) and node.module in ALLOWED and node.level == 0:
            for alias in node.names:
                if alias.name not in ALLOWED[node.module]:
                    return None, {}
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return modules, names


def _module_attribute(node: ast.Name, parents: dict) -> bool:
    parent = parents.get(node)
    return isinstance(parent, ast.Attribute) and parent.value is node


def _is_stream(node: ast.AST, modules: dict, names: dict, streams: set) -> bool:
    """A stream expression: `sys.stdout` (and the like), a call of `StringIO`, or a name bound to a stream."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return modules.get(node.value.id) == "sys" and node.attr in STREAMS["sys"]
    if isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            return function.attr == "StringIO" and modules.get(function.value.id) == "io"
        return isinstance(function, ast.Name) and names.get(function.id) == "io.StringIO"
    if isinstance(node, ast.Name):
        module, _, name = names.get(node.id, "").partition(".")
        return node.id in streams or (module == "sys" and name in STREAMS["sys"])  # `from sys import stdout`
    return False


def _names_bound_to(node: ast.AST, parents: dict) -> set[str]:
    """The plain names a stream expression is assigned to (`a = b = StringIO()`) or bound to by `with ... as`."""
    parent = parents.get(node)
    if isinstance(parent, ast.Assign) and parent.value is node:
        return {target.id for target in parent.targets if isinstance(target, ast.Name)}
    if isinstance(parent, ast.withitem) and isinstance(parent.optional_vars, ast.Name):
        return {parent.optional_vars.id}
    return set()


def _stays(node: ast.AST, parents: dict, modules: dict) -> bool:
    """Whether a stream expression is used only where it stays in the judge's process."""
    if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return True  # `captured = ...`, `sys.stdout = captured`
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return True  # its own attributes: `captured.getvalue()`, `sys.stdout.write(...)`
    if isinstance(parent, ast.Assign) and parent.value is node:  # to a name, or to `sys.stdout`
        return all(isinstance(target, ast.Name) or _is_stream(target, modules, {}, set()) for target in parent.targets)
    if isinstance(parent, ast.withitem) and parent.context_expr is node:
        return True
    if isinstance(parent, ast.keyword) and parent.arg == "file":
        call = parents.get(parent)
        return isinstance(call.func, ast.Name) and call.func.id == "print"
    if isinstance(parent, ast.Call) and node in parent.args and not parent.keywords and len(parent.args) == 1:
        function = parent.func
        called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        return called in _REDIRECTIONS
    return False
