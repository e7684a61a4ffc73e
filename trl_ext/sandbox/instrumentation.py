"""Test statements rewritten before they enter the sandbox (`instrument_checks`): each `assert` that runs is
counted, and its comparisons and truth tests go through the harness's plain-data comparison; with the modules
a test imports or reaches, which the harness loads before the solution."""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from typing import Any

from .judged_io import input_and_output_stay_in_the_judge
from .parsing import parse
from .test_process import JUDGE_CONSTANT

__all__ = ["ARGUMENT_FUNCTION", "CALL_FUNCTION", "CASE_CLASS", "CHECK_FUNCTION", "COMPARE_FUNCTION", "CONTEXT_FUNCTION",
           "ENTER_FUNCTION", "FAIL_FUNCTION", "HIDE_FUNCTION", "JUDGE_CONSTANT", "JUDGE_NAMES", "OWN_ANY_FUNCTION",
           "TRUST_FUNCTION", "TRUTH_FUNCTION", "VALUE_FUNCTION", "instrument_checks"]

# Names the instrumented test code calls; the harness binds them in each test child (see harness.py).
CHECK_FUNCTION = "__trl_ext_check__"
COMPARE_FUNCTION = "__trl_ext_compare__"
TRUTH_FUNCTION = "__trl_ext_truth__"
VALUE_FUNCTION = "__trl_ext_value__"
TRUST_FUNCTION = "__trl_ext_trust_comparison__"
FAIL_FUNCTION = "__trl_ext_fail__"  # a failed check: final, even where the test or the program catches it
ENTER_FUNCTION = "__trl_ext_enter__"  # the first call of a test class's method (`test_namespace.namespace_keeper`)
CASE_CLASS = "__trl_ext_case_class__"  # the metaclass of a test class (`test_namespace.KeptClass`)
CALL_FUNCTION = "__trl_ext_call__"  # on everything the test calls (`answer_traps.callee_framer`)
HIDE_FUNCTION = "__trl_ext_hide__"  # on the test's functions it hands on (`test_namespace.test_function_hider`)
ARGUMENT_FUNCTION = "__trl_ext_argument__"  # on what the test passes to a call (`answer_traps.argument_framer`)
CONTEXT_FUNCTION = "__trl_ext_context__"  # on what the test's `with` enters (`answer_traps.context_framer`)
OWN_ANY_FUNCTION = "__trl_ext_own_any__"  # on each `ANY` the test reads (`own_anything.test_anything`)
# In the code that enters the sandbox, the harness's functions are not names (a program could rebind a name in the
# test's namespace) but constants: each name below becomes the string constant `JUDGE_CONSTANT + name`, which the
# test process replaces in the compiled code by the function itself (`test_process._bind_judge_functions`).
JUDGE_NAMES = frozenset({CHECK_FUNCTION, COMPARE_FUNCTION, TRUTH_FUNCTION, VALUE_FUNCTION, TRUST_FUNCTION, FAIL_FUNCTION,
                         ENTER_FUNCTION, CASE_CLASS, CALL_FUNCTION, HIDE_FUNCTION, ARGUMENT_FUNCTION, CONTEXT_FUNCTION,
                         OWN_ANY_FUNCTION})
_COMPARE_SYMBOLS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                    ast.In: "in", ast.NotIn: "not in"}
_NOT_LITERAL = object()
_TRUTH_ASSERTIONS = frozenset({"assertTrue", "assertFalse", "assert_", "failUnless", "failIf"})


class _CheckInstrumenter(ast.NodeTransformer):
    """`assert <test>, <message>` becomes `if not <test'>: __trl_ext_fail__(<message>)` followed by a call
    that counts one check; in `<test'>` comparisons and truth tests go through the harness's plain-data
    comparison. An assert on constants alone (`assert True`) checks nothing and counts nothing. A call of an
    assertion function that returns (`np.testing.assert_allclose(...)`, `mock.assert_called_once()`) counts one
    check, and so does an `if` whose body raises, when its condition is evaluated."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if node.name.startswith(("__trl_ext_", "_trl_ext_")):  # a format's runner: it counts its own checks
            return node
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        if node.name.startswith(("__trl_ext_", "_trl_ext_")):
            return node
        self.generic_visit(node)
        if not _is_test_class(node):
            return node
        if not node.keywords and all(_base_name(base).endswith("TestCase") for base in node.bases):
            # its data attributes kept like the module's names (a class of another metaclass keeps its own)
            node.keywords.append(ast.keyword("metaclass", ast.Name(CASE_CLASS, ast.Load())))
        for method in node.body:  # each method first checks who calls it (the program may not, unless handed it)
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = 1 if ast.get_docstring(method, clean=False) is not None else 0
                enter = ast.Expr(ast.Call(ast.Name(ENTER_FUNCTION, ast.Load()), [], []))
                method.body.insert(start, ast.copy_location(enter, method))
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if not _is_assertion_call(node.value):
            return node
        if _called_name(node.value) in _TRUTH_ASSERTIONS and node.value.args:
            # `assertTrue(f(x) == 7)` is `assert f(x) == 7`: its comparisons and truth tests are the harness's too
            node.value.args[0] = _guarded(node.value.args[0])
        # A failed assertion call is final: a program that catches it (a callback it was handed) still fails.
        error = "__trl_ext_error__"
        handler = ast.ExceptHandler(ast.Name("AssertionError", ast.Load()), error, [
            ast.Expr(ast.Call(ast.Name(FAIL_FUNCTION, ast.Load()), [ast.Name(error, ast.Load())], []))])
        guarded = ast.Try([node], [handler], [], [])
        return [ast.copy_location(guarded, node), ast.copy_location(_count_check(), node)]

    def visit_With(self, node: ast.With) -> list[ast.stmt]:
        # `with self.assertRaises(E):` / `with pytest.raises(E):` counts once its block ends as expected.
        self.generic_visit(node)
        if not any(_is_assertion_call(item.context_expr) or _called_name(item.context_expr) == "raises"
                   for item in node.items):
            return [node]
        return [node, ast.copy_location(_count_check(), node)]

    def visit_If(self, node: ast.If) -> list[ast.stmt]:
        self.generic_visit(node)
        if not any(isinstance(statement, ast.Raise) for statement in node.body):
            return [node]
        return [ast.copy_location(_count_check(), node), node]

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        self.generic_visit(node)
        failure = ast.Expr(ast.Call(ast.Name(FAIL_FUNCTION, ast.Load()), [node.msg] if node.msg is not None else [], []))
        statements: list[ast.stmt] = [ast.If(ast.UnaryOp(ast.Not(), _guarded(node.test)), [failure], [])]
        if _literal(node.test) is _NOT_LITERAL:
            statements.append(ast.Expr(ast.Call(ast.Name(CHECK_FUNCTION, ast.Load()), [], [])))
        return [ast.copy_location(statement, node) for statement in statements]


class _ValueGuard(ast.NodeTransformer):
    """Every value an assert computes with (a name, call, attribute or subscript) goes through the harness's
    `value` guard: plain data becomes a plain copy, so `abs(f(x) - y) < eps` or `lo <= f(x) <= hi` computes with
    built-in values, and a value of a class the program wrote that answers comparisons or arithmetic itself
    fails the test. Not guarded: the operands of `is` / `is not` (they keep their identity), a called function
    and the object whose attribute is read (the attribute's value is), and the body of a lambda."""

    def _inner(self, node: ast.expr) -> ast.expr:
        """`node` with its parts guarded, not `node` itself."""
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                node.func = self._inner(node.func)
            node.args = [self.visit(argument) for argument in node.args]
            node.keywords = [self.visit(keyword) for keyword in node.keywords]
            return node
        if isinstance(node, ast.Attribute):
            node.value = self._inner(node.value)
            return node
        if isinstance(node, ast.Name):
            return node
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            node.left = self._inner(node.left)
            node.comparators = [self._inner(operand) for operand in node.comparators]
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        internal = isinstance(node.func, ast.Name) and node.func.id.startswith("__trl_ext_")
        node = self._inner(node)
        return node if internal else _value_call(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and not node.id.startswith("__trl_ext_"):
            return _value_call(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node = self._inner(node)
        return _value_call(node) if isinstance(node.ctx, ast.Load) else node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        return _value_call(node) if isinstance(node.ctx, ast.Load) else node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node


class _CallsFramed(ast.NodeTransformer):
    """`f(x, key=y)` -> `__trl_ext_call__(f)(__trl_ext_argument__(x), key=__trl_ext_argument__(y))`: what the test
    calls goes through the harness first, which frames a callable that would run code without a frame
    (`answer_traps.callee_framer`), and is then called where it was (so `super()`, `locals()` and the like still
    see the test's frame); so does what it passes, where a library may call it (`sorted(data, key=task_func())`:
    `answer_traps.argument_framer`), and what it enters with `with` (`answer_traps.context_framer`). Literals and
    the test's own lambdas pass as they are; a format's runner calls as it is."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node if node.name.startswith(("__trl_ext_", "_trl_ext_")) else self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node if node.name.startswith(("__trl_ext_", "_trl_ext_")) else self.generic_visit(node)

    def visit_With(self, node: ast.With) -> ast.AST:
        self.generic_visit(node)
        for item in node.items:
            item.context_expr = ast.Call(ast.Name(CONTEXT_FUNCTION, ast.Load()), [item.context_expr], [])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id.startswith("__trl_ext_"):
            return node
        node.func = ast.Call(ast.Name(CALL_FUNCTION, ast.Load()), [node.func], [])
        node.args = [_passed(argument) for argument in node.args]
        for keyword in node.keywords:
            if keyword.arg is not None:
                keyword.value = _passed(keyword.value)
        return node


_NOT_A_CALLABLE = (ast.Constant, ast.JoinedStr, ast.Lambda, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp,
                   ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Starred, ast.Compare, ast.BoolOp, ast.BinOp,
                   ast.UnaryOp)


def _passed(argument: ast.expr) -> ast.expr:
    """What the test passes to a call, through the harness's argument framer (not literals and the like)."""
    if isinstance(argument, _NOT_A_CALLABLE):
        return argument
    return ast.Call(ast.Name(ARGUMENT_FUNCTION, ast.Load()), [argument], [])


class _InnerFunctionsHidden(ast.NodeTransformer):
    """A function or lambda the test makes inside one of its own (a callback, a mock's side effect, a fake that
    `patch` puts in the program's way) becomes `__trl_ext_hide__(f)` (`test_namespace.test_function_hider`): it
    runs as itself, but the program, which may be handed it, cannot read what it closes over (the test's expected
    values, `self`). So does a method the test gets as a value rather than calls (`self.fake_get`, `getattr(self,
    name)`, `operator.attrgetter(name)(self)`: an attribute read or a call's result), wherever it then puts it (a
    list, an object, a mock), so that the case it is bound to, with what `setUp` stored, stays the test's; other
    values pass as they are. Functions at the module's top level or in a class body (a test's methods, fixtures)
    stay as they are."""

    def __init__(self):
        self.depth = 0

    def _function(self, node):
        if node.name.startswith(("__trl_ext_", "_trl_ext_")):
            return node
        inner = self.depth > 0
        decorators, node.decorator_list = node.decorator_list, []
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        node.decorator_list = [self._read(decorator) for decorator in decorators]
        if not inner or isinstance(node, ast.AsyncFunctionDef):
            return node
        hide = ast.Assign([ast.Name(node.name, ast.Store())], _hidden(ast.Name(node.name, ast.Load())))
        return [node, ast.copy_location(hide, node)]

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        if node.name.startswith(("__trl_ext_", "_trl_ext_")):
            return node
        depth, self.depth = self.depth, 0  # its methods are methods, wherever the class is made
        node.bases = [self._read(base) for base in node.bases]
        node.keywords = [ast.keyword(keyword.arg, self._read(keyword.value)) for keyword in node.keywords]
        node.body = [statement for part in node.body for statement in _as_list(self.visit(part))]
        node.decorator_list = [self._read(decorator) for decorator in node.decorator_list]
        self.depth = depth
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        inner = self.depth > 0
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return _hidden(node) if inner else node

    def _read(self, node: ast.expr) -> ast.expr:
        """`node` where it is only read from or called (`self.fake.calls`, `self.helper(x)`): its parts visited,
        not itself hidden."""
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node.value = self._read(node.value)
            if isinstance(node, ast.Subscript):
                node.slice = self.visit(node.slice)
            return node
        if isinstance(node, ast.Call):
            if _framed(node):
                node.func.args[0] = self._read(node.func.args[0])
            else:
                node.func = self._read(node.func)
            node.args = [self.visit(argument) for argument in node.args]
            node.keywords = [self.visit(keyword) for keyword in node.keywords]
            return node
        return self.visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        harness = isinstance(node.func, ast.Name) and node.func.id.startswith("__trl_ext_")
        node = self._read(node)
        return node if harness else _hidden(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node.value = self._read(node.value)
        return _hidden(node) if isinstance(node.ctx, ast.Load) else node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        return self._read(node)

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        node.value = self._read(node.value)
        return node

    def visit_match_case(self, node: ast.match_case) -> ast.AST:
        # a pattern names values (`case Color.RED:`), which only a name or an attribute may do: left as it is
        node.guard = self.visit(node.guard) if node.guard is not None else None
        node.body = [statement for part in node.body for statement in _as_list(self.visit(part))]
        return node


def _framed(call: ast.Call) -> bool:
    """Whether `call` is `__trl_ext_call__(f)(...)` (`_CallsFramed`)."""
    return isinstance(call.func, ast.Call) and _names(call.func.func, CALL_FUNCTION)


def _as_list(visited: ast.AST | list[ast.AST]) -> list[ast.AST]:
    return visited if isinstance(visited, list) else [visited]


def _names(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _hidden(node: ast.expr) -> ast.expr:
    return ast.Call(ast.Name(HIDE_FUNCTION, ast.Load()), [node], [])


class _OwnAnything(ast.NodeTransformer):
    """`ANY`, `mock.ANY` and a name `ANY` is imported as, read by the test, become `__trl_ext_own_any__(ANY)`: the
    test's own `ANY`, apart from the one a program can name (`own_anything`). A `case` pattern, which only a name or
    an attribute may be, is left as it is."""

    def __init__(self):
        self.names = {"ANY"}

    def visit_Module(self, node: ast.Module) -> ast.AST:
        self.names |= {alias.asname for statement in ast.walk(node) if isinstance(statement, ast.ImportFrom)
                       for alias in statement.names if alias.name == "ANY" and alias.asname}
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Call(ast.Name(OWN_ANY_FUNCTION, ast.Load()), [node], []), node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "ANY" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Call(ast.Name(OWN_ANY_FUNCTION, ast.Load()), [node], []), node)
        return node

    def visit_match_case(self, node: ast.match_case) -> ast.AST:
        node.guard = self.visit(node.guard) if node.guard is not None else None
        node.body = [statement for part in node.body for statement in _as_list(self.visit(part))]
        return node


class _JudgeNamesAsConstants(ast.NodeTransformer):
    """`__trl_ext_compare__` -> the constant `JUDGE_CONSTANT + "__trl_ext_compare__"` (see `JUDGE_NAMES`)."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in JUDGE_NAMES and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(JUDGE_CONSTANT + node.id), node)
        return node


def _is_test_class(node: ast.ClassDef) -> bool:
    """A class of test cases (a `unittest.TestCase`, a pytest `Test*` class), not a helper class of the test's
    whose objects the program is given (a fake response)."""
    return node.name.startswith("Test") or any(_base_name(base).endswith("TestCase") for base in node.bases)


def _base_name(base: ast.expr) -> str:
    return base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")


def _count_check() -> ast.stmt:
    return ast.Expr(ast.Call(ast.Name(CHECK_FUNCTION, ast.Load()), [], []))


def _called_name(call: ast.AST) -> str:
    if not isinstance(call, ast.Call):
        return ""
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""


def _is_assertion_call(call: ast.AST) -> bool:
    """A call of an assertion function or method (`assert*`, `fail*`), not one of the harness's own."""
    name = _called_name(call)
    return name.startswith(("assert", "fail")) and not name.startswith("__trl_ext_")


def _value_call(node: ast.expr) -> ast.expr:
    return ast.Call(ast.Name(VALUE_FUNCTION, ast.Load()), [node], [])


def _guarded(test: ast.expr) -> ast.expr:
    return _ValueGuard().visit(_compared(test))


def _compared(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.BoolOp):
        return ast.BoolOp(test.op, [_compared(value) for value in test.values])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.UnaryOp(ast.Not(), _compared(test.operand))
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE_SYMBOLS:
        return ast.Call(
            ast.Name(COMPARE_FUNCTION, ast.Load()),
            [test.left, ast.Constant(_COMPARE_SYMBOLS[type(test.ops[0])]), test.comparators[0]],
            [],
        )
    if isinstance(test, ast.Compare):  # `is`, `is not`, chained comparisons: as written
        return test
    return ast.Call(ast.Name(TRUTH_FUNCTION, ast.Load()), [test], [])


@lru_cache(maxsize=4096)
def guarded_expression(source: str) -> str:
    """A value test's expression (the non-literal side of `assert <expr> <op> <literal>`) with every value it
    computes with guarded as an assert's are (`_ValueGuard`): `abs(f(x) - 3.5)` subtracts plain numbers. An
    expression that does not parse goes as it is (the harness reports it)."""
    try:
        tree = parse(source, mode="eval")
    except SyntaxError:
        return source
    return ast.unparse(ast.fix_missing_locations(_JudgeNamesAsConstants().visit(_ValueGuard().visit(tree))))


# What a test may use and still be judged apart from the program's process (`judge_side`): no module that
# would have to be shared with the program (its patched modules, its files, its random state; `sys`, `io` and
# `contextlib` only to capture its output, `judged_io`)...
_SHARED_WITH_THE_PROGRAM = frozenset({
    "os", "pathlib", "tempfile", "shutil", "subprocess", "threading", "multiprocessing", "signal",
    "socket", "random", "builtins", "importlib", "inspect", "gc", "ctypes", "mmap",
})
# ...and no name that patches (but as `judged_io` allows), captures at the descriptors or shares files with it.
_NAMES_SHARED_WITH_THE_PROGRAM = frozenset({
    "mock", "Mock", "MagicMock", "monkeypatch", "capfd", "caplog", "tmp_path", "tmpdir",
    "tmp_path_factory", "open", "input", "exec", "eval", "globals", "__import__", "setattr", "delattr",
})


# Ends the code a dataset format puts before the dataset's own test (its runner: KodCode's pytest stand-in,
# BigCodeBench's unittest runner); `judged_apart` reads what comes after it.
RUNNER_END = "# -- end of the trl-ext test runner --"


_SHARED_NAMES_OR_MODULES = _NAMES_SHARED_WITH_THE_PROGRAM | _SHARED_WITH_THE_PROGRAM


@lru_cache(maxsize=4096)
def judged_apart(source: str) -> bool:
    """Whether a statement test can run in the judge's own process, calling the program over a socket
    (`judge_side`): it imports standard modules only (and the program, as `solution`, and pytest, for which
    KodCode's runner stands in), none that it would have to share with the program's process, and uses no name
    that patches, captures at the descriptors or shares files with it, but to capture the program's output and
    feed its `input()` as `judged_io` allows; a format's runner before `RUNNER_END` is not read. Other tests run in
    the program's process, guarded (`test_process`)."""
    tree = parse(source.rpartition(RUNNER_END)[2])
    standard = set(sys.stdlib_module_names) - _SHARED_WITH_THE_PROGRAM
    for name in _imports(tree):
        top = name.partition(".")[0]
        if top not in standard and top not in ("solution", "pytest"):
            return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _SHARED_NAMES_OR_MODULES:
            return False
        if isinstance(node, ast.Attribute) and node.attr in _NAMES_SHARED_WITH_THE_PROGRAM:
            return False
    return input_and_output_stay_in_the_judge(tree)


def instrument_checks(source: str) -> str:
    """A test statement rewritten so that the sandbox can tell how many checks ran (see `_CheckInstrumenter`)."""
    return _instrumented(source)[0]


@lru_cache(maxsize=4096)
def _instrumented(source: str) -> tuple[str, tuple[str, ...]]:
    tree = parse(source)
    imports = _imports(tree) | _reached_modules(tree)
    tree = _InnerFunctionsHidden().visit(_CallsFramed().visit(_CheckInstrumenter().visit(tree)))
    tree = ast.fix_missing_locations(_JudgeNamesAsConstants().visit(_OwnAnything().visit(tree)))
    return ast.unparse(tree), tuple(sorted(imports))


def _imports(tree: ast.AST) -> set[str]:
    """The modules `tree` imports, by their full names (relative imports left out)."""
    imports = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imports.add(node.module)
    return imports


def _reached_modules(tree: ast.AST) -> set[str]:
    """What the test reaches as attributes of a module it imported (`np.fft.fft` -> `numpy.fft`, `numpy.fft.fft`).

    Packages load some submodules lazily, on first use (NumPy's `fft`, `random`, `testing`): the harness loads
    these too before the solution runs, so that a solution cannot plant its own module under such a name for the
    test to pick up. Names that are not modules simply fail to load there.
    """
    bound = {}  # a name the test binds to a module -> that module's full name
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.partition(".")[0]] = alias.name if alias.asname else alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    reached = {name for name in bound.values() if "." in name}  # `from numpy import fft`: numpy.fft
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            path = []
            while isinstance(node, ast.Attribute):
                path.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in bound:
                reached.add(".".join([bound[node.id], *reversed(path)]))
    return reached


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL
