"""What a statement test judged apart may do with the program's input and output (`instrumentation.judged_apart`).

A test judged apart runs in the judge's process (`judge_side`). What the program prints there is written on the
judge's `sys.stdout` and `sys.stderr` as each reply comes, and the program's `input()` asks the judge, which
answers with its own `builtins.input` as it is then. So a test may capture the program's output itself, and feed
its input with a mock, in the judge's process, as KodCode's and BigCodeBench's tests do:

    captured = io.StringIO()
    sys.stdout = captured
    print_board(3)
    sys.stdout = sys.__stdout__
    assert captured.getvalue() == "..."

    with patch("builtins.input", side_effect=["3", "4"]), patch("sys.stdout", new_callable=io.StringIO) as out:
        add_two_numbers()
    assert out.getvalue() == "7\n"

(or `with contextlib.redirect_stdout(buffer)`, or pytest's `capsys`, which the runner gives with the same
redirection). A stream is not plain data and cannot be handed to the program, and `sys`, `io` and `unittest.mock`
name much else that the program's process would have to share (`sys.stdin`, `sys.setrecursionlimit`, `io.open`,
a patch of any other name). So such a test is judged apart only if each name it uses of `sys`, `io` and
`contextlib` is a stream, a way to redirect one or a constant; each `patch` it makes is of `builtins.input`,
`sys.stdout` or `sys.stderr`, named by a literal; and every stream it makes or reads (`io.StringIO()`,
`sys.stdout`, a name bound to one, the mock of a patched stream) is only assigned, redirected to, read through its
own attributes (`captured.getvalue()`) or printed to (`print(..., file=...)`): never passed to anything else, the
program above all. Any other use runs the test in the program's process.
"""

from __future__ import annotations

import ast

# The names a test judged apart may use of each module: streams, ways to capture them, constants.
_STREAMS = frozenset({"stdout", "stderr", "__stdout__", "__stderr__"})  # of `sys`
_REDIRECTIONS = frozenset({"redirect_stdout", "redirect_stderr"})  # of `contextlib`
ALLOWED = {
    "sys": _STREAMS | frozenset({"maxsize", "float_info", "int_info", "version_info", "byteorder"}),
    "io": frozenset({"StringIO"}),
    "contextlib": _REDIRECTIONS | frozenset({"suppress", "nullcontext", "contextmanager"}),
}
# What a test judged apart may patch: the judge's own streams, and the `input` the program's `input()` asks for.
PATCHED_IN_THE_JUDGE = frozenset({"builtins.input", "sys.stdout", "sys.stderr"})


def input_and_output_stay_in_the_judge(tree: ast.Module) -> bool:
    """Whether every use `tree` makes of `sys`, `io`, `contextlib` and `patch` is one the module docstring allows,
    and every stream it makes or reads stays in the judge's process."""
    modules, names = _bound_names(tree)
    if modules is None:
        return False
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    if not _patches_in_the_judge(tree, parents, names):
        return False
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


def _patches_in_the_judge(tree: ast.Module, parents: dict, names: dict) -> bool:
    """Whether each `patch` the test makes (imported from `unittest.mock`, under any name; as a decorator or a
    context manager) is a call whose target, its first argument, is a literal naming one of `PATCHED_IN_THE_JUDGE`;
    `patch.object`, `patch.dict` and a `patch` handed around are not. (`judged_apart` keeps `mock.patch` and the
    other names of `unittest.mock` in the program's process.)"""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and names.get(node.id) == "unittest.mock.patch"
                or isinstance(node, ast.Attribute) and node.attr == "patch"):
            call = parents.get(node)
            if not (isinstance(call, ast.Call) and call.func is node and call.args
                    and isinstance(call.args[0], ast.Constant) and call.args[0].value in PATCHED_IN_THE_JUDGE):
                return False
    return True


def _bound_names(tree: ast.Module) -> tuple[dict[str, str] | None, dict[str, str]]:
    """Names bound to the three modules (`import sys as s`: s -> sys), and to their members (`from io import
    StringIO`: StringIO -> io.StringIO, and `unittest.mock`'s); None when the test imports from the three what
    `ALLOWED` does not list."""
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
        elif isinstance(node, ast.ImportFrom) and node.module == "unittest.mock" and node.level == 0:
            for alias in node.names:  # `patch`, under any name; nothing else of `unittest.mock`
                if alias.name != "patch":
                    return None, {}
                names[alias.asname or alias.name] = "unittest.mock.patch"
    return modules, names


def _module_attribute(node: ast.Name, parents: dict) -> bool:
    parent = parents.get(node)
    return isinstance(parent, ast.Attribute) and parent.value is node


def _is_stream(node: ast.AST, modules: dict, names: dict, streams: set) -> bool:
    """A stream expression: `sys.stdout` (and the like), a call of `StringIO`, a patch of a stream (what its `as`
    binds is its mock), or a name bound to a stream."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return modules.get(node.value.id) == "sys" and node.attr in _STREAMS
    if isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            return function.attr == "StringIO" and modules.get(function.value.id) == "io" or _patches_a_stream(node)
        return isinstance(function, ast.Name) and names.get(function.id) == "io.StringIO" or _patches_a_stream(node)
    if isinstance(node, ast.Name):
        module, _, name = names.get(node.id, "").partition(".")
        return node.id in streams or (module == "sys" and name in _STREAMS)  # `from sys import stdout`
    return False


def _patches_a_stream(call: ast.Call) -> bool:
    function = call.func
    called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    return (called == "patch" and bool(call.args) and isinstance(call.args[0], ast.Constant)
            and call.args[0].value in ("sys.stdout", "sys.stderr"))


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
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node in parent.decorator_list:
        return True  # `@patch("sys.stdout", new_callable=io.StringIO)`: its mock is the test's argument
    if isinstance(parent, ast.keyword) and parent.arg == "file":
        call = parents.get(parent)
        return isinstance(call.func, ast.Name) and call.func.id == "print"
    if isinstance(parent, ast.Call) and node in parent.args and not parent.keywords and len(parent.args) == 1:
        function = parent.func
        called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        return called in _REDIRECTIONS
    return False
