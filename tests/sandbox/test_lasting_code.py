"""What the program's code leaves for the interpreter to run later on its own (`trl_ext.sandbox.lasting_code`): which
callables count as pure, which objects carry one, the collector's generations as the record of what is new, and
the weak references whose callbacks are held back. End to end: `red_team_in_process.LASTING_CASES`."""

import collections
import datetime
import decimal
import functools
import gc
import itertools
import logging
import math
import operator
import sys
import types
import weakref

import numpy as np
import pytest
from sandbox_helpers import in_a_forked_child

from trl_ext.sandbox import lasting_code
from trl_ext.sandbox.answer_traps import _is_library_function
from trl_ext.sandbox.code_provenance import library_roots

ROOTS = library_roots()


def program_function(source: str = "def f(*args):\n    return args\n"):
    """A function as the program writes it (its file is no library's)."""
    scope = {}
    exec(compile(source, "solution.py", "exec"), scope)
    return scope["f"]


@pytest.fixture(scope="module")
def b():
    return lasting_code.bound(lambda function: _is_library_function(function, ROOTS, types.FunctionType, str.startswith),
                              sys.modules)


class Mine:
    pass


ALIVE = Mine()


PURE = {
    "the program's function": program_function(),
    "a bound method of the program's function": types.MethodType(program_function(), object()),
    "len": len,
    "math.sqrt": math.sqrt,
    "operator.add": operator.add,
    "int": int,
    "str.strip": str.strip,
    "a string's join": ", ".join,
    "a dict's get": {}.get,
    "dict.fromkeys": dict.fromkeys,
    "a NumPy ufunc": np.sqrt,
    "operator.itemgetter(1)": operator.itemgetter(1),
    "a partial of max with a pure key": functools.partial(max, key=len),
    "collections.Counter": collections.Counter,
    "collections.deque": collections.deque,
    "collections.OrderedDict": collections.OrderedDict,
    "a partial of defaultdict with a pure factory": functools.partial(collections.defaultdict, int),
    "decimal.Decimal": decimal.Decimal,
    "datetime.timedelta": datetime.timedelta,
}
IMPURE = {
    "setattr": setattr,
    "exec": exec,
    "print": print,
    "operator.setitem": operator.setitem,
    "operator.iadd": operator.iadd,
    "a module dict's __setitem__": vars(math).__setitem__,
    "a list's append": [].append,
    "dict.__setitem__": dict.__setitem__,
    "object.__setattr__": object.__setattr__,
    "a partial of setattr": functools.partial(setattr, math, "tau"),
    "a partial of max whose key pops a module's names": functools.partial(max, key=vars(math).pop),
    "a library's function (functools.update_wrapper)": functools.update_wrapper,
    "a bound method of a library's function": weakref.WeakSet().add,
    "operator.methodcaller": operator.methodcaller("clear"),
    "a class of a library's (logging.FileHandler opens the file it is given)": logging.FileHandler,
    "a partial of defaultdict whose factory is a partial of setattr": functools.partial(
        collections.defaultdict, functools.partial(setattr, math, "tau", 1)),
    "map (it calls what it is given)": map,
    "iter (iter(f, sentinel) calls f)": iter,
}


@pytest.mark.parametrize("name", PURE)
def test_pure_callables(b, name):
    assert lasting_code.pure(PURE[name], b)


def test_the_standard_librarys_values_count_where_their_module_is_loaded():
    import fractions  # loaded again here if another test unloaded it: `bound` reads `sys.modules` as it is

    b = lasting_code.bound(lambda function: _is_library_function(function, ROOTS, types.FunctionType, str.startswith),
                           sys.modules)
    assert lasting_code.pure(functools.partial(fractions.Fraction, 1), b)
    assert not lasting_code.pure(fractions.Fraction, lasting_code.bound(lambda function: True, {}))


@pytest.mark.parametrize("name", IMPURE)
def test_impure_callables(b, name):
    assert not lasting_code.pure(IMPURE[name], b)


def test_the_programs_class_is_pure_only_with_its_own_constructor(b):
    scope = {}
    exec(compile("class Point:\n    def __init__(self, x):\n        self.x = x\nclass Plain:\n    pass\n"
                 "class OnCounter(__import__('collections').Counter):\n    pass\n"
                 "class OnHandler(__import__('logging').FileHandler):\n    pass\n", "solution.py", "exec"), scope)
    assert lasting_code.pure(scope["Point"], b) and lasting_code.pure(scope["Plain"], b)
    assert lasting_code.pure(scope["OnCounter"], b)  # its constructor is Counter's, which calls nothing it is given
    assert not lasting_code.pure(scope["OnHandler"], b)  # a library's constructor (this one opens a file)


CARRYING_IMPURE = {
    "itertools.starmap(setattr, ...)": lambda: itertools.starmap(setattr, [(Mine, "x", 1)]),
    "map(setattr, ...)": lambda: map(setattr, [Mine], ["x"], [1]),
    "filter(partial of setattr, ...)": lambda: filter(functools.partial(setattr, Mine, "x"), [1]),
    "iter(partial of setattr, sentinel)": lambda: iter(functools.partial(setattr, Mine, "x", 1), 1),
    "defaultdict(partial of setattr)": lambda: collections.defaultdict(functools.partial(setattr, Mine, "x", 1)),
    "defaultdict(partial(defaultdict, partial of setattr))": lambda: collections.defaultdict(functools.partial(
        collections.defaultdict, functools.partial(setattr, Mine, "x", 1))),
    "cmp_to_key(a module dict's __setitem__)": lambda: functools.cmp_to_key(vars(math).__setitem__),
    "a program's subclass of map": lambda: type("Lazy", (map,), {})(setattr, [Mine], ["x"], [1]),
    "map(a library's function)": lambda: map(functools.update_wrapper, [Mine], [Mine]),
    "map(iter, ...), which would make iter(partial of setattr, sentinel) later": lambda: map(
        iter, [functools.partial(setattr, Mine, "x", 1)], [1]),
    "a weakref.proxy whose callback is setattr's partial": lambda: weakref.proxy(ALIVE, functools.partial(setattr, Mine, "x")),
}
CARRYING_PURE = {
    "map(int, ...)": lambda: map(int, "12"),
    "map(the program's function)": lambda: map(program_function(), [1]),
    "filter(None, ...)": lambda: filter(None, [1]),
    "zip and enumerate": lambda: (zip([1], [2]), enumerate([1])),
    "defaultdict(list)": lambda: collections.defaultdict(list),
    "defaultdict(a library's lambda)": lambda: collections.defaultdict(lambda: 0),
    "defaultdict(Counter), defaultdict(deque), defaultdict(OrderedDict)": lambda: tuple(
        collections.defaultdict(kind) for kind in (collections.Counter, collections.deque, collections.OrderedDict)),
    "defaultdict(a library's class, called without arguments)": lambda: collections.defaultdict(logging.Logger),
    "defaultdict(partial(defaultdict, int))": lambda: collections.defaultdict(
        functools.partial(collections.defaultdict, int)),
    "defaultdict(Decimal)": lambda: collections.defaultdict(decimal.Decimal),
    "accumulate(..., operator.add)": lambda: itertools.accumulate([1, 2], operator.add),
    "a partial of setattr on its own (the test's call of it is framed)": lambda: functools.partial(setattr, Mine, "x", 1),
    "a list holding setattr (data: nothing calls it)": lambda: [setattr, exec],
}


@pytest.mark.parametrize("name", CARRYING_IMPURE)
def test_objects_through_which_the_interpreter_would_call_something_impure(b, name):
    value = CARRYING_IMPURE[name]()
    assert lasting_code.frameless_left([value, CANARY], [], CANARY, b) is value


@pytest.mark.parametrize("name", CARRYING_PURE)
def test_objects_that_carry_only_pure_callables_or_none(b, name):
    value = CARRYING_PURE[name]()
    values = list(value) if type(value) is tuple else [value]
    assert lasting_code.frameless_left([*values, CANARY], [], CANARY, b) is None


CANARY = []


def test_a_weak_references_callback_is_held_back_by_keeping_its_referent(b):
    target, fired = Mine(), []
    reference = weakref.ref(target, lambda _: fired.append(True))
    keep = []
    assert lasting_code.frameless_left([reference, CANARY], keep, CANARY, b) is None
    assert keep == [target]
    del target
    assert reference() is not None and not fired


def test_a_missing_canary_means_the_generations_were_frozen(b):
    assert lasting_code.frameless_left([map(int, "1")], [], CANARY, b) is CANARY


def test_the_collector_lists_what_was_made_since_the_generations_were_frozen(b):
    def body():
        gc.freeze()
        canary = []
        made = itertools.starmap(setattr, [(Mine, "x", 1)])
        found = lasting_code.frameless_left(gc.get_objects(), [], canary, b)
        gc.freeze()  # the program hides what it made
        hidden = lasting_code.frameless_left(gc.get_objects(), [], canary, b)
        return {"found": found is made, "hidden": hidden is canary}

    assert in_a_forked_child(body) == {"found": True, "hidden": True}


def test_libraries_that_load_and_work_leave_nothing_impure(b):
    """What libraries make on a right program's behalf (NumPy, pandas, Matplotlib figures with their callback
    registries, the standard library's modules loaded for the first time) is not mistaken for the program's."""

    def body():
        gc.freeze()
        canary = []
        import fractions  # noqa: F401 - loaded inside the window
        import json  # noqa: F401
        import pandas as pd
        frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).groupby("b").sum()
        figure = None
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            figure, axes = plt.subplots()
            axes.plot([1, 2], [3, 4])
            axes.set_title("t")
        except ImportError:
            pass
        found = lasting_code.frameless_left(gc.get_objects(), [], canary, b)
        return {"found": None if found is None else repr(found)[:200], "kept": frame is not None and figure is not None}

    assert in_a_forked_child(body)["found"] is None
