"""The program's classes answer comparisons with their own code only inside its calls, and what counts as a
library's code cannot be forged (`trl_ext.sandbox.answer_traps`). The end-to-end cases are in the red team
(`red_team.py`: "values that lie" in the program's process, and code of the program run after its call)."""

import json
import marshal
import os
import sys
import types

import pytest
from sandbox_helpers import in_a_forked_child

from trl_ext.sandbox.answer_traps import (
    ANSWERING,
    answer_traps,
    callee_framer,
    context_framer,
    library_objects_made,
    watcher,
)
from trl_ext.sandbox.code_provenance import forged_library_code, library_roots
from trl_ext.sandbox.plain_data import NotPlainData

ROOTS = library_roots()


def _attempt(expression, scope):
    try:
        return repr(eval(expression, scope))
    except NotPlainData:
        return "trapped"


def test_the_libraries_directories_are_roots():
    assert any(os.path.dirname(json.__file__).startswith(root.rstrip("/")) for root in ROOTS)
    assert any(pytest.__file__.startswith(root) for root in ROOTS)


def test_outside_the_programs_calls_its_answering_methods_are_traps():
    def body():
        enter, leave, sprung, _ = answer_traps(NotPlainData, ROOTS)
        scope = {}
        # The program's top-level code: a class that answers == itself, one whose == is a C slot of int's that
        # answers the opposite, and one that subtracts to 0.
        exec(
            "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
            "class Opposite(int):\n    __eq__ = int.__ne__\n"
            "class Zero:\n    def __sub__(self, other):\n        return 0\n"
            "class Plain:\n    def describe(self):\n        return 'plain'\n",
            scope,
        )
        leave()  # its top-level code ended
        outside = {expression: _attempt(expression, scope) for expression in
                   ("Anything() == 7", "7 in [Anything()]", "Opposite(0) == 7", "Zero() - 7", "Plain().describe()")}
        first_sprung = sprung()
        enter()  # a call into the program: its classes answer as written
        inside = {expression: _attempt(expression, scope) for expression in ("Anything() == 7", "Opposite(0) == 7")}
        leave()
        again = _attempt("Anything() == 7", scope)
        return {"outside": outside, "inside": inside, "again": again, "sprung": [first_sprung, sprung()]}

    result = in_a_forked_child(body)
    assert result["outside"] == {"Anything() == 7": "trapped", "7 in [Anything()]": "trapped",
                                 "Opposite(0) == 7": "trapped", "Zero() - 7": "trapped",
                                 "Plain().describe()": "'plain'"}
    assert result["inside"] == {"Anything() == 7": "True", "Opposite(0) == 7": "True"}
    assert result["again"] == "trapped"
    assert result["sprung"] == [True, True]  # a trap, once sprung, stays sprung


# A library's generator function that sets the attribute it is given when first resumed (as `test.support.swap_attr`).
_SWAPPING_LIBRARY = "def swap(owner, name, value):\n    setattr(owner, name, value)\n    yield\n"


def test_a_library_generator_the_program_made_runs_guarded_when_the_test_resumes_it(tmp_path):
    """A library's generator made by the program's code is guarded when the test resumes it: what it sets is put back
    when it yields. The same generator made by the test's own code, and the call guard's own generators, are left
    alone."""
    (tmp_path / "swapping_library.py").write_text(_SWAPPING_LIBRARY)
    roots = (*ROOTS, f"{tmp_path}/")

    def body():
        from trl_ext.sandbox import call_guard

        sys.path.insert(0, str(tmp_path))
        import swapping_library

        enter, leave, sprung, _ = answer_traps(NotPlainData, roots)
        scope = {"swap": swapping_library.swap, "json": json}
        exec(compile("def f():\n    return swap(json, 'from_the_program', 'set')\n", "solution.py", "exec"), scope)
        bound = call_guard.context(sys.modules, {}, (enter, leave, lambda: None, lambda watching: None,
                                                     lambda args, kwargs: (args, kwargs)))
        watch = watcher(scope, (enter, leave, lambda value: None), call_guard.take_snapshot, bound, roots)
        made_by_the_program = call_guard.guarded(scope["f"], bound)()
        leave()  # the program's top-level code ended
        made_by_the_test = swapping_library.swap(json, "the_tests_own", "set")
        sys.setprofile(watch)
        try:
            next(made_by_the_program)
            after_the_program = getattr(json, "from_the_program", None)
            next(made_by_the_test)
        finally:
            sys.setprofile(None)
        return {"program": after_the_program, "test": getattr(json, "the_tests_own", None), "sprung": sprung()}

    assert in_a_forked_child(body) == {"program": None, "test": "set", "sprung": False}


def test_a_trap_that_was_caught_still_counts_and_cannot_be_reset():
    def body():
        enter, leave, sprung, _ = answer_traps(NotPlainData, ROOTS)
        scope = {}
        exec("class Anything:\n    def __eq__(self, other):\n        return True\n", scope)
        leave()
        try:
            scope["Anything"]() == 7  # noqa: B015 - the comparison is what springs the trap
        except NotPlainData:
            pass
        trap = vars(scope["Anything"])["__eq__"]  # what a program can reach of it: a send that springs it
        trap.__self__[0](None)
        trap.__self__[0](False)
        return {"sprung": sprung()}

    assert in_a_forked_child(body) == {"sprung": True}


def test_classes_the_test_makes_and_library_classes_keep_their_methods():
    def body():
        enter, leave, sprung, _ = answer_traps(NotPlainData, ROOTS)
        leave()
        # The test makes a class between calls into the program; a library defines one while the program runs.
        test_scope = {}
        exec(compile("class Point:\n    def __eq__(self, other):\n        return True\n", "<test>", "exec"),
             test_scope)
        enter()
        import fractions  # a library module first loaded inside a call (its classes are new)

        leave()
        return {"test": test_scope["Point"]() == 1, "library": type(vars(fractions.Fraction)["__eq__"]).__name__,
                "sprung": sprung()}

    sys.modules.pop("fractions", None)
    assert in_a_forked_child(body) == {"test": True, "library": "function", "sprung": False}


def test_a_library_function_the_programs_class_borrows_answers_as_the_programs():
    def body():
        enter, leave, sprung, _ = answer_traps(NotPlainData, ROOTS)
        leave()
        enter()
        # `json` was loaded before the program: its function on a class made in the call answers as the program chose.
        borrowed = type("Borrowed", (), {"__eq__": json.JSONEncoder.default})
        import unittest.mock as mock  # first loaded inside the call: its `ANY` says it equals anything

        leave()
        try:
            mock.ANY == 7  # noqa: B015 - the comparison is what springs the trap
        except NotPlainData:
            pass
        return {"borrowed": type(vars(borrowed)["__eq__"]).__name__, "sprung": sprung()}

    sys.modules.pop("unittest.mock", None)
    assert in_a_forked_child(body) == {"borrowed": "method", "sprung": True}


def test_frameless_callables_the_program_leaves_are_framed_outside_its_calls():
    def body():
        import functools
        import weakref

        seen = []
        weakref.finalize(NotPlainData, seen.append, "before")  # registered before the program ran
        enter, leave, sprung, _ = answer_traps(NotPlainData, ROOTS)
        scope = {"functools": functools, "weakref": weakref, "seen": seen}
        exec(
            "class Sly:\n"  # asked its class, it would run code of the program's inside the judge's bookkeeping
            "    @property\n    def __class__(self):\n        seen.append('asked')\n        return functools.partial\n"
            "class Later:\n"
            "    sly = Sly()\n"
            "    __del__ = functools.partial(seen.append, 'finalized')\n"
            "    note = staticmethod(functools.partial(seen.append, 'static'))\n"
            "    size = property(functools.partial(len))\n"
            "    __hash__ = object.__hash__\n"
            "    count = staticmethod(len)\n"
            "    def describe(self):\n        return 'later'\n"
            "kept = Later()\n"
            "weakref.finalize(kept, seen.append, 'callback')\n",
            scope,
        )
        leave()
        later = vars(scope["Later"])

        def code_file(value):
            inner = getattr(value, "__func__", getattr(value, "fget", value))
            inner = inner.func if type(inner) is functools.partial else inner  # a partial is framed in place
            return getattr(getattr(inner, "__code__", None), "co_filename", type(inner).__name__)

        outside = {name: code_file(later[name]) for name in ("__del__", "note", "size", "__hash__", "count",
                                                               "describe")}
        registry = weakref.finalize._registry
        callbacks = {info.args[0]: code_file(info.func) for info in registry.values()
                     if info.args in (("before",), ("callback",))}
        scope["Later"].note()
        enter()  # inside a call, the class as the program wrote it
        inside = type(vars(scope["Later"])["__del__"]).__name__
        leave()
        del scope["kept"]
        return {"outside": outside, "callbacks": callbacks, "inside": inside, "seen": seen, "sprung": sprung()}

    result = in_a_forked_child(body)
    framed = "<left by the program>"
    assert result["outside"] == {"__del__": framed, "note": framed, "size": framed,
                                 "__hash__": "wrapper_descriptor", "count": "builtin_function_or_method",
                                 "describe": "<string>"}  # a built-in with no arguments bound stays
    assert result["callbacks"] == {"before": "builtin_function_or_method", "callback": framed}
    assert result["inside"] == "partial"
    assert result["seen"] == ["static", "finalized", "callback"]  # framed, they still do what they did
    assert result["sprung"] is False


def test_what_the_test_calls_is_framed_where_it_would_run_code_without_a_frame():
    import functools
    import operator

    frame = callee_framer(ROOTS)

    def source(callee):
        return getattr(getattr(callee, "__code__", None), "co_filename", type(callee).__name__)

    class Sneaky(functools.partial):  # shows a function, calls a built-in
        @property
        def func(self):
            return len

    kept = []
    framed = "<left by the program>"
    callees = {
        "partial of a built-in": functools.partial(setattr, kept, "x"),
        "bound built-in in a partial": functools.partial(kept.append, 1),
        "method of a built-in": types.MethodType(setattr, kept),
        "method caller": operator.methodcaller("append", 1),
        "partial subclass": Sneaky(kept.append, 2),
        "partial of a partial of a built-in": functools.partial(functools.partial(len), [1]),
        "function": len,
        "bound built-in": kept.append,
        "class": int,
        "method of a function": types.MethodType(lambda self: self, kept),
    }
    outcome = {name: "as it is" if frame(callee) is callee else source(frame(callee)) for name, callee in callees.items()}
    assert outcome == {
        "partial of a built-in": framed, "bound built-in in a partial": framed, "method of a built-in": framed,
        "method caller": framed, "partial subclass": framed, "partial of a partial of a built-in": framed,
        "function": "as it is", "bound built-in": "as it is", "class": "as it is", "method of a function": "as it is",
    }
    frame(callees["bound built-in in a partial"])()
    assert kept == [1]  # framed, it does what it did


def test_every_answering_method_is_listed():
    assert {"__eq__", "__ne__", "__lt__", "__contains__", "__bool__", "__sub__", "__rsub__", "__abs__"} <= ANSWERING
    assert not {"__len__", "__iter__", "__getitem__", "__hash__", "__repr__"} & ANSWERING  # they give values


def _source_of(module) -> bytes:
    with open(module.__file__, "rb") as handle:
        return handle.read()


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def test_code_under_a_librarys_file_name_must_be_that_files_content():
    path = json.__file__
    running = lambda: True  # noqa: E731 - a program frame is on the stack
    forged = forged_library_code("compile", (b"def same(a, b):\n    return True\n", path), None, running, ROOTS, _read)
    assert forged == "compiling code under a library's file name"
    assert forged_library_code("compile", (_source_of(json), path), None, running, ROOTS, _read) is None
    assert forged_library_code("compile", (b"x = 1", "<string>"), None, running, ROOTS, _read) is None
    assert forged_library_code("compile", (b"x = 1", "<test>"), None, running, ROOTS, _read) is not None
    # A syntax tree's file name is not shown to the hook: refused while the program runs.
    assert forged_library_code("compile", (object(), None), None, running, ROOTS, _read) is not None
    assert forged_library_code("compile", (object(), None), None, lambda: False, ROOTS, _read) is None


def test_code_objects_and_marshal_loads_cannot_claim_a_library():
    code = (lambda: 0).__code__
    args = (code.co_code, path := json.__file__, "same", 0)
    assert forged_library_code("code.__new__", args, None, lambda: True, ROOTS, _read) is not None
    assert forged_library_code("code.__new__", (code.co_code, "solution.py", "f", 0), None, lambda: True, ROOTS,
                               _read) is None
    data = marshal.dumps(code.replace(co_filename=path))
    caller = sys._getframe()
    assert forged_library_code("marshal.loads", (data,), caller, lambda: True, ROOTS, _read) is not None


def test_a_function_of_a_librarys_code_is_not_made_while_the_program_runs():
    library_code, own_code = json.dumps.__code__, (lambda: 0).__code__.replace(co_filename="solution.py")
    assert forged_library_code("function.__new__", (library_code,), None, lambda: True, ROOTS, _read) is not None
    assert forged_library_code("function.__new__", (library_code,), None, lambda: False, ROOTS, _read) is None
    assert forged_library_code("function.__new__", (own_code,), None, lambda: True, ROOTS, _read) is None


def test_the_import_systems_own_load_of_a_compiled_library_file_is_allowed():
    import importlib.util

    cached = importlib.util.cache_from_source(json.__file__)
    content = _read(cached)
    if content is None:
        pytest.skip("json has no compiled file here")
    seen = {}

    def hook(event, args):
        if event == "marshal.loads" and "verdict" not in seen:
            frame = sys._getframe(1)
            if frame.f_code.co_name == "_compile_bytecode":
                seen["verdict"] = forged_library_code(event, args, frame, lambda: True, ROOTS, _read)
                forged_data = (b"x" + bytes(args[0]),)
                seen["forged"] = forged_library_code(event, forged_data, frame, lambda: True, ROOTS, _read)

    def body():
        sys.addaudithook(hook)
        sys.modules.pop("json.tool", None)
        import json.tool  # noqa: F401 - loaded from its compiled file

        return seen

    result = in_a_forked_child(body)
    if not result:
        pytest.skip("json.tool was not loaded from a compiled file")
    assert result == {"verdict": None, "forged": "loading code objects with marshal"}


def test_a_programs_own_class_is_trapped_whatever_its_methods_claim():
    def body():
        enter, leave, sprung, _ = answer_traps(NotPlainData, ROOTS)
        scope = {}
        exec("import functools, operator\n"
             "class Partial:\n    __eq__ = functools.partialmethod(operator.is_not)\n"
             "class Builtin:\n    __eq__ = operator.is_not\n", scope)
        leave()
        return {name: _attempt(f"{name}() == 7", scope) for name in ("Partial", "Builtin")}

    assert in_a_forked_child(body) == {"Partial": "trapped", "Builtin": "trapped"}


def test_the_profile_function_cannot_be_turned_into_a_guard_by_the_program():
    from trl_ext.sandbox.answer_traps import watcher

    calls = []
    watch = watcher({}, (lambda: calls.append("enter"), lambda: calls.append("leave"), calls.append),
                    lambda bound: (lambda: calls.append("restore")), None, ROOTS)
    send = watch.__self__[2]
    for fake in (("frame", "call", None), (types.SimpleNamespace(f_code=None), "call", None), 7, None,
                 ("a", "b", "c"), (sys._getframe(), "return", None)):
        send(fake)
    assert calls == []


def test_what_the_test_passes_is_framed_only_where_it_would_run_something_impure():
    import functools
    import math
    import operator

    from trl_ext.sandbox.answer_traps import argument_framer, returned_checker

    frame = argument_framer(ROOTS, lambda function, *args: function(*args))
    doubling, planting = functools.partial(operator.mul, 2), functools.partial(setattr, math, "tau")
    assert frame(doubling) is doubling and frame(7) == 7 and frame(len) is len
    framed = frame(planting)
    assert type(framed) is types.FunctionType and framed.__code__.co_filename == "<left by the program>"
    failures = []
    check = returned_checker(ROOTS, failures.append, lambda function, *args: function(*args))
    check(doubling)
    check(planting)
    assert len(failures) == 1


def test_asyncio_may_load_under_the_audit_hook_and_library_code_may_still_not_be_remade():
    """`asyncio` flags its own generators with `types.coroutine` as it loads (`code.replace`, under their file's
    name): allowed there, while the program remaking a library's code object is refused."""

    def body():
        from trl_ext.sandbox import audit_hook

        for name in [name for name in sys.modules if name == "asyncio" or name.startswith("asyncio.")]:
            del sys.modules[name]
        audit_hook.install(ROOTS, True)
        outcome = {}
        for name, source in (("asyncio", "import asyncio\n"),
                             ("remade", "import json\njson.dumps.__code__.replace(co_name='x')\n")):
            try:
                exec(compile(source, "solution.py", "exec"), {})
                outcome[name] = "ran"
            except RuntimeError:
                outcome[name] = "refused"
        return outcome

    assert in_a_forked_child(body) == {"asyncio": "ran", "remade": "refused"}


def _recording_restorer(calls):
    """A stand-in for `call_guard.restoring` that records which method it was asked to run."""
    def restoring(function):
        def run(*args, **kwargs):
            calls.append(function.__name__)
            return function(*args, **kwargs)
        return run
    return restoring


def test_the_libraries_objects_the_programs_code_made_are_known_and_nothing_else():
    def body():
        import contextlib
        import gc

        before = contextlib.ExitStack()
        made = library_objects_made()
        enter, leave, _, _ = answer_traps(NotPlainData, ROOTS, made=made)
        leave()  # the program's top-level code ended
        scope = {"__name__": "solution", "contextlib": contextlib}  # the program's module, as the harness names it
        enter()  # a call into the program: a library's object and one of its own class
        exec("class Own:\n    pass\nstack = contextlib.ExitStack()\nown = Own()\nnumbers = [1, 2]\n", scope)
        leave()
        after = contextlib.ExitStack()
        known = {name: made(("made", value)) for name, value in
                 (("before", before), ("after", after), ("stack", scope["stack"]), ("own", scope["own"]),
                  ("numbers", scope["numbers"]))}
        stack_id = id(scope.pop("stack"))
        gc.collect()
        gone = [value for value in (contextlib.ExitStack() for _ in range(1000)) if id(value) == stack_id]
        reused = [made(("made", value)) for value in gone]  # an id used again is not the program's object
        return known, reused

    known, reused = in_a_forked_child(body)
    assert known == {"before": False, "after": False, "stack": True, "own": False, "numbers": False}
    assert True not in reused


def test_the_tests_calls_and_with_on_the_programs_library_objects_run_under_the_restorer():
    import contextlib

    calls = []
    made = library_objects_made()
    made(("guard", _recording_restorer(calls)))
    made(("guard", lambda function: function))  # only the first restorer is kept (the harness's, sent first)
    theirs, ours = contextlib.ExitStack(), contextlib.ExitStack()
    made(("keep", [theirs]))
    frame, enter_with = callee_framer(ROOTS, made), context_framer(made)
    frame(theirs.callback)(calls.append, "callback")
    assert frame(ours.callback) == ours.callback and enter_with(ours) is ours
    with enter_with(theirs) as entered:
        assert entered is theirs
    assert calls == ["callback", "__enter__", "__exit__", "callback"]  # the callback ran at the exit, as before
    no_context = types.SimpleNamespace()
    made(("keep", [no_context]))
    assert enter_with(no_context) is no_context  # `with` then says it is no context manager, as it would


def test_a_partial_the_programs_code_makes_is_framed_in_place_where_it_would_run_something_impure():
    def body():
        import functools
        import operator

        enter, leave, _, _ = answer_traps(NotPlainData, ROOTS)
        leave()
        holder = types.SimpleNamespace()
        scope = {"__name__": "solution", "functools": functools, "operator": operator, "holder": holder}
        enter()
        exec("setter = functools.partial(setattr, holder, 'x', 1)\ndouble = functools.partial(operator.mul, 2)\n",
             scope)
        leave()
        setter, double = scope["setter"], scope["double"]
        setter()
        return {"setter": setter.func.__code__.co_filename, "double": double.func is operator.mul,
                "still a partial": type(setter) is functools.partial, "set": holder.x}

    assert in_a_forked_child(body) == {"setter": "<left by the program>", "double": True, "still a partial": True,
                                       "set": 1}


def test_a_librarys_function_is_not_rewired_while_the_program_runs():
    # `np.testing.assert_array_equal.__code__ = nothing.__code__` would pass every later check of the test's.
    own = types.FunctionType((lambda: 0).__code__.replace(co_filename="solution.py"), {})
    for attribute in ("__code__", "__defaults__", "__kwdefaults__"):
        assert forged_library_code("object.__setattr__", (json.dumps, attribute, None), None, lambda: True, ROOTS,
                                   _read) == "rewiring a library's function"
        assert forged_library_code("object.__setattr__", (json.dumps, attribute, None), None, lambda: False, ROOTS,
                                   _read) is None
        assert forged_library_code("object.__setattr__", (own, attribute, None), None, lambda: True, ROOTS,
                                   _read) is None


def test_a_class_the_harness_cannot_read_without_running_the_programs_code_is_told_apart():
    from trl_ext.sandbox.answer_traps import _CLASS_ANSWERS, _plain_class

    state = (type.__dict__["__dict__"].__get__, types.MappingProxyType.items, type, issubclass, _CLASS_ANSWERS)

    class Name(str):
        def __hash__(self):
            return 0

    class Hashing(type):  # the program's metaclass: the harness hashes the classes made with it
        def __hash__(cls):
            return 0

    class Plain(type):
        def describe(cls):
            return cls.__name__

    def nothing_is_a_library(value):
        return False

    assert _plain_class(state, type("Holder", (), {"value": 1}), nothing_is_a_library)
    assert not _plain_class(state, type("Holder", (), {Name("value"): 1}), nothing_is_a_library)
    assert not _plain_class(state, Hashing, nothing_is_a_library)
    assert _plain_class(state, Plain, nothing_is_a_library)
    # A library's metaclass that a module loaded while the program ran defines (`typing`'s, for `Protocol`).
    protocol_meta = type(__import__("typing").Protocol)
    assert _plain_class(state, protocol_meta, lambda value: type(value) is types.FunctionType)
    assert not _plain_class(state, protocol_meta, nothing_is_a_library)

