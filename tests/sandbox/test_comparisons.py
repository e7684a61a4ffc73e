"""The harness's comparisons for test code (`trl_ext.sandbox.plain_data.make_comparisons`): which values compare as
they are, and which are refused. End to end: `test_unittest_in_process`, the red team."""

import collections
import datetime
import math
import types
from unittest import mock

import pytest

from trl_ext.sandbox.plain_data import make_comparisons, value_types


class Anything:
    """A class as a program writes it: it answers every comparison itself (and can be called)."""

    def __eq__(self, other):
        return True

    def __call__(self, *args):
        return None

    __hash__ = object.__hash__


class ProgramList(list):
    pass


@pytest.fixture(scope="module")
def compare():
    # as the harness knows them: the classes loaded modules define, with their bases
    return make_comparisons(value_types() | {*type(mock.ANY).__mro__, *type(pytest.approx(7)).__mro__})[0]


DATE = datetime.date(2020, 1, 1)
COMPARED = {
    "a built-in function in a list": (len, "in", [len]),
    "lists of built-in functions": ([len], "==", [len]),
    "a date in a list": (DATE, "in", [DATE]),
    "lists of dates": ([DATE, DATE], "==", [DATE, DATE]),
    "a dict of dates and functions": ({"day": DATE, "count": len}, "==", {"day": DATE, "count": len}),
    "an object in a tuple": (object, "in", (object, int)),
    "a value within pytest.approx's tolerance": (7.0000001, "==", pytest.approx(7)),
}
REFUSED = {
    "a list holding a program's always-equal object": ([Anything()], "==", [7]),
    "a dict holding one": ({1: Anything()}, "==", {1: 7}),
    "one in a list": (7, "in", [Anything()]),
    "a program's subclass of list": (ProgramList([1, Anything()]), "==", [1, 7]),
    "a deque (not a built-in container)": (collections.deque([Anything()]), "==", collections.deque([7])),
    "unittest.mock.ANY, which equals anything": (mock.ANY, "==", 7),
    "a list holding it": ([mock.ANY], "==", [7]),
    "an approximation with an infinite tolerance": (pytest.approx(0, abs=math.inf), "==", 7),
    "a bound method of a program's callable (it compares what it binds with ==)": (
        [types.MethodType(Anything(), 1)], "==", [types.MethodType(Anything(), 1)]),
}


@pytest.mark.parametrize("name", COMPARED)
def test_built_in_containers_of_known_values_compare_as_they_are(compare, name):
    left, op, right = COMPARED[name]
    assert compare(left, op, right) is True


@pytest.mark.parametrize("name", REFUSED)
def test_a_container_holding_a_value_of_the_programs_class_is_refused(compare, name):
    left, op, right = REFUSED[name]
    assert compare(left, op, right) is False


def test_a_container_that_holds_itself_is_refused_not_walked_forever(compare):
    looped = []
    looped.append(looped)
    assert compare(looped, "==", [len]) is False


def test_the_tests_own_any_compares_as_it_is_and_no_other():
    known = value_types() | {*type(mock.ANY).__mro__}
    own = object.__new__(type(mock.ANY))
    compare = make_comparisons(known, own_anything=own)[0]
    assert compare({"id": 3, "name": "x"}, "==", {"id": own, "name": "x"}) is True
    assert compare({"id": 3, "name": "y"}, "==", {"id": own, "name": "x"}) is False
    assert compare({"id": 3, "name": mock.ANY}, "==", {"id": own, "name": "x"}) is False  # the library's own ANY
    assert compare([Anything()], "==", [own]) is False  # a program's class is still refused


def test_trust_adds_for_this_test_alone_and_the_known_classes_stay_as_they_are():
    # The harness hands every test process its one frozen set of known classes (`_known_types`): a comparison
    # made from it reads it, never copies or changes it, so what a test trusts stays its own.
    class Tolerance:  # a class the test trusts, as it trusts `pytest.approx`
        def __eq__(self, other):
            return abs(other - 7) < 1e-3

    known = frozenset(value_types())
    compare, _, _, trust = make_comparisons(known)
    assert compare(7.0001, "==", Tolerance()) is False  # not trusted yet: refused
    assert trust(Tolerance) is Tolerance
    assert compare(7.0001, "==", Tolerance()) is True
    assert compare(8, "==", Tolerance()) is False
    assert Tolerance not in known
    assert make_comparisons(known)[0](7.0001, "==", Tolerance()) is False  # another test's comparisons: not trusted
