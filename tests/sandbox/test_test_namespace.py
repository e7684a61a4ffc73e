"""A test in the program's process keeps its names, its methods and its mocks (`trl_ext.sandbox.test_namespace`),
and a failed check of the test's is final (`instrumentation`). The end-to-end cases are in the red team
(`red_team.py`: reading the test's module through `__globals__`, calling its methods with a spy, silencing its mocks,
probing a callback)."""

import ast
import builtins
import json
import sys
import types
import unittest
import unittest.mock

import pytest

from trl_ext.sandbox.code_provenance import library_roots
from trl_ext.sandbox.instrumentation import (
    ARGUMENT_FUNCTION,
    ENTER_FUNCTION,
    FAIL_FUNCTION,
    HIDE_FUNCTION,
    instrument_checks,
)
from trl_ext.sandbox.call_guard import hider
from trl_ext.sandbox.test_namespace import (
    KeptBuiltins,
    KeptClass,
    KeptNamespace,
    call_argument_hider,
    namespace_keeper,
    nearest_code_is_program,
    test_function_hider as function_hider,  # not a test: pytest would collect it by its name
)

ROOTS = library_roots()


def _keeper(asking_program):
    failures = []

    def fail(reason):
        failures.append(reason)
        raise AssertionError(reason)

    make, hand, restore_mocks, enter, _, _ = namespace_keeper(ROOTS, lambda: asking_program[0], unittest.mock,
                                                   lambda: sys._getframe(3))
    namespace = make({"__builtins__": dict(vars(__builtins__) if isinstance(__builtins__, types.ModuleType)
                                           else __builtins__), "__name__": "__test__", "json": ast})
    return namespace, hand, restore_mocks, (lambda: enter(fail)), failures


def test_the_tests_own_names_are_kept_from_the_dict_and_from_the_program():
    asking_program = [False]
    namespace, *_ = _keeper(asking_program)
    code = compile(
        "import math\nEXPECTED = 7\ndef expected():\n    return EXPECTED\n"
        "class Case:\n    value = EXPECTED\n    root = math.sqrt(4)\nresult = expected() + Case.value\n",
        "<test>", "exec",
    )
    exec(code, namespace)
    assert type(namespace) is KeptNamespace and type(dict.__getitem__(namespace, "__builtins__")) is KeptBuiltins
    assert namespace["result"] == 14 and namespace["expected"]() == 7  # the test's own code reads them
    assert "math" in dict.keys(namespace)  # a module stays in the dict (a class body reads it there)
    assert not {"EXPECTED", "expected", "Case", "result"} & set(dict.keys(namespace))
    asking_program[0] = True  # the program asks: `test_function.__globals__['EXPECTED']`
    with pytest.raises(KeyError):
        namespace["EXPECTED"]
    assert namespace.get("EXPECTED") is None and "EXPECTED" not in namespace
    namespace["EXPECTED"] = 0  # refused: the test's value is unchanged
    asking_program[0] = False
    assert namespace["EXPECTED"] == 7


def test_what_the_program_can_reach_of_the_namespace_refuses_it():
    asking_program = [True]
    namespace, *_ = _keeper(asking_program)
    send = vars(KeptNamespace)["__getitem__"].__self__[0]
    asking_program[0] = False
    namespace["SECRET"] = 42
    asking_program[0] = True
    answers = [send(message) for message in (("get", "SECRET", None), ("set", "SECRET", 0), 7, None)]
    assert 42 not in answers
    asking_program[0] = False
    assert namespace["SECRET"] == 42


def test_a_test_method_runs_inside_the_programs_call_only_when_handed_over():
    asking_program = [False]
    _, hand, _, enter, failures = _keeper(asking_program)

    scope = {"enter": enter}
    # A method of a test class (it calls `enter` first), the test's code that calls it, and the program's.
    exec(compile("def method():\n    enter()\n    return 'ran'\ndef run(function):\n    return function()\n",
                 "<test>", "exec"), scope)
    exec(compile("def call(function):\n    return function()\n", "solution.py", "exec"), scope)
    method = scope["method"]
    assert scope["run"](method) == "ran"  # the test calls its own method
    with pytest.raises(AssertionError):
        scope["call"](method)  # the program calls it, not handed over
    assert failures == ["the program called a method of the test"]
    hand((method,))  # the test hands it to a call of the program (an argument, a mock's side effect)
    assert scope["call"](method) == "ran"


def test_a_mocks_own_methods_come_back_after_the_program_set_them():
    _, hand, restore_mocks, _, _ = _keeper([False])
    mock = unittest.mock.MagicMock()
    child_holder = unittest.mock.MagicMock(side_effect=None)
    hand((mock, child_holder))
    quiet = lambda *args, **kwargs: None  # noqa: E731 - what a program puts in place
    mock.assert_called_once_with = quiet
    type(mock).assert_called_with = quiet
    vars(child_holder)["assert_not_called"] = quiet
    restore_mocks()
    with pytest.raises(AssertionError):
        mock.assert_called_once_with(1)
    with pytest.raises(AssertionError):
        mock.assert_called_with(1)
    child_holder()
    with pytest.raises(AssertionError):
        child_holder.assert_not_called()


def test_handing_runs_no_code_of_the_programs_and_still_finds_a_mock_with_a_spec():
    """`hand` runs for the harness, where the audit hook does not look: a `__class__` property of a value the test
    holds (the program's) must not run there. A mock made with `spec` shows its spec as `__class__`: still watched."""
    _, hand, restore_mocks, _, _ = _keeper([False])
    ran = []

    class Sly:
        @property
        def __class__(self):
            ran.append("asked")
            return unittest.mock.NonCallableMock

    specced = unittest.mock.MagicMock(spec=json.JSONEncoder)
    hand((Sly(), [Sly()], specced))
    specced.assert_called_once_with = lambda *args, **kwargs: None  # what a program puts in place
    restore_mocks()
    assert ran == []
    with pytest.raises(AssertionError):
        specced.assert_called_once_with(1)


def test_nearest_code_decides_whose_call_it_is():
    def from_code(filename):
        scope = {"sys": sys}
        exec(compile("def where():\n    return sys._getframe(0)\n", filename, "exec"), scope)
        return scope["where"]()

    assert nearest_code_is_program(from_code("solution.py"), ROOTS)
    assert not nearest_code_is_program(from_code("<test>"), ROOTS)
    assert nearest_code_is_program(from_code("<string>"), ROOTS)  # code the program compiled


def test_the_instrumented_test_fails_for_good_and_its_case_methods_check_their_caller():
    source = (
        "import unittest\n"
        "class TestCases(unittest.TestCase):\n"
        "    def test_value(self):\n        '''doc'''\n        assert task_func(3) == 7\n"
        "        self.assertEqual(task_func(3), 7)\n"
        "class FakeResponse:\n    def json(self):\n        return {}\n"
    )
    tree = ast.parse(instrument_checks(source))
    case, fake = (node for node in tree.body if isinstance(node, ast.ClassDef))
    method = case.body[0]
    assert ast.get_docstring(method) == "doc" and ENTER_FUNCTION in ast.unparse(method.body[1])
    assert FAIL_FUNCTION in ast.unparse(method) and "raise AssertionError" not in ast.unparse(method)
    assert any(isinstance(statement, ast.Try) for statement in method.body)  # the assertion call's failure is final
    assert ENTER_FUNCTION not in ast.unparse(fake)  # a helper class's objects are the program's to call
    assert [keyword.arg for keyword in case.keywords] == ["metaclass"] and not fake.keywords


def test_a_global_the_tests_functions_assign_reads_back_as_assigned():
    namespace, *_ = _keeper([False])
    exec(compile("calls = 0\ndef side_effect():\n    global calls\n    calls += 1\n    return calls\n"
                 "side_effect()\nside_effect()\nseen = calls\n", "<test>", "exec"), namespace)
    assert namespace["seen"] == 2 and namespace["side_effect"]() == 3


def test_a_test_class_keeps_its_data_attributes_and_its_instances_read_them():
    asking_program = [False]
    namespace, *_ = _keeper(asking_program)
    source = ("import unittest\nclass TestCases(unittest.TestCase):\n    answer = 7\n"
              "    @classmethod\n    def setUpClass(cls):\n        cls.expected = 8\n"
              "    def test_value(self):\n        return self.answer, self.expected, type(self).answer\n"
              "TestCases.setUpClass()\nresult = TestCases('test_value').test_value()\n")
    namespace["__trl_ext_case_class__"] = KeptClass  # what the instrumented test's class names as its metaclass
    tree = ast.parse(source)
    tree.body[1].keywords.append(ast.keyword("metaclass", ast.Name("__trl_ext_case_class__", ast.Load())))
    exec(compile(ast.fix_missing_locations(tree), "<test>", "exec"), namespace)
    cls = namespace["TestCases"]
    assert namespace["result"] == (7, 8, 7)
    assert "answer" not in vars(cls) and "expected" not in vars(cls)
    asking_program[0] = True
    with pytest.raises(AttributeError):
        cls.expected  # noqa: B018 - the program reading the class's attribute


def test_a_bound_method_of_the_test_case_runs_as_a_mocks_side_effect():
    """`patch(..., side_effect=self.fake)` without `as`: the mock is the test's, its side effect a method of the case
    the test runs; a right program calls it inside its call. The same method called on another instance fails."""
    from trl_ext.rewards.code import CodeReward

    test = (
        "import unittest\nimport random\nfrom unittest.mock import patch\n\n"
        "class TestCases(unittest.TestCase):\n"
        "    def fake_randint(self, low, high):\n        return 4\n"
        "    def test_value(self):\n"
        "        with patch('random.randint', side_effect=self.fake_randint):\n"
        "            self.assertEqual(task_func(3), 7)\n"
    )
    right = "import random\ndef task_func(x):\n    return x + random.randint(1, 10)\n"
    spy = (
        "import random, unittest\n"
        "def task_func(x):\n"
        "    for cls in unittest.TestCase.__subclasses__():\n"
        "        if 'fake_randint' in vars(cls):\n"
        "            return x + cls('test_value').fake_randint(1, 10)\n"
        "    return 0\n"
    )
    reward = CodeReward(timeout=4.0, reuse_sandbox=False)
    scores = reward(completions=[f"```python\n{program}```" for program in (right, spy)], test=[test, test])
    assert scores == [1.0, 0.0]


def test_functions_the_test_makes_inside_its_own_are_hidden_and_its_methods_are_not():
    source = (
        "def helper(x):\n    return x\n"
        "class TestCases(unittest.TestCase):\n"
        "    def test_value(self):\n"
        "        expected = 7\n"
        "        def report(value):\n            self.assertEqual(value, expected)\n"
        "        check = lambda value: value == expected\n"
        "        class Fake:\n            def get(self):\n                return expected\n"
        "        task_func(report, check, Fake())\n"
    )
    hidden = [node.args[0] for node in ast.walk(ast.parse(instrument_checks(source)))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Constant)
              and str(node.func.value).endswith(HIDE_FUNCTION)]
    texts = [ast.unparse(node) for node in hidden]
    assert texts[:2] == ["report", "lambda value: value == expected"]
    assert len(texts) == 3 and texts[2].endswith("(Fake)()")  # what a call returns goes through the hider too


def test_what_the_test_reads_as_a_value_is_hidden_and_what_it_calls_or_reads_from_is_not():
    """`self.report` put in a list, an object or a name may be the case's bound method, as may what a call returns
    (`operator.attrgetter('report')(self)`): it goes through the hider;
    `self.assertEqual(...)`, `self.data[0]` and `self.fake.calls` only read from or call what they name."""
    source = (
        "class TestCases(unittest.TestCase):\n"
        "    def test_value(self):\n"
        "        held = SimpleNamespace(report=self.report, other=getattr(self, 'other'))\n"
        "        reports = [self.report, operator.attrgetter('report')(self)]\n"
        "        self.assertEqual(task_func(held, reports, self.data[0], self.fake.calls), 7)\n"
    )
    hidden = [ast.unparse(node.args[0]) for node in ast.walk(ast.parse(instrument_checks(source)))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Constant)
              and str(node.func.value).endswith(HIDE_FUNCTION)]
    assert hidden.count("self.report") == 2 and "self.fake.calls" in hidden
    assert any("getattr" in text and "'other'" in text for text in hidden)
    assert any("operator.attrgetter" in text for text in hidden)  # a bound method a call returns
    assert not any(text.startswith(("self.assertEqual", "self.data", "self.fake)")) for text in hidden)


def test_attributes_a_match_pattern_names_stay_attributes():
    source = ("def test_color():\n    match task_func():\n        case Color.RED if self.strict:\n            pass\n"
              "        case enum.Enum():\n            pass\n")
    compile(instrument_checks(source), "<test>", "exec")  # a call in a pattern would not compile


def test_the_hider_hides_the_tests_functions_and_bound_methods_only():
    namespace = {}
    exec(compile("class Case:\n    def report(self, value):\n        return value\n"
                 "def helper(x):\n    return x\n", "<test>", "exec"), namespace)
    hide = function_hider(hider())
    case = namespace["Case"]()
    hidden_method, hidden_function = hide(case.report), hide(namespace["helper"])
    assert hidden_method(7) == 7 and hidden_function(8) == 8
    assert not hasattr(hidden_method, "__self__") and hidden_method.__closure__[0].cell_contents is not case
    data, library_function = [1, 2], len
    assert hide(data) is data and hide(library_function) is library_function


def test_the_case_the_test_hands_to_the_program_arrives_as_a_view_of_its_data_and_hidden_methods():
    keeper = namespace_keeper(ROOTS, lambda: False, unittest.mock, lambda: None)
    namespace = keeper[0]({"__builtins__": vars(builtins), "unittest": unittest, "KeptClass": KeptClass})
    exec(compile("class Case(unittest.TestCase, metaclass=KeptClass):\n"
                 "    shared = [1, 2]\n"
                 "    def helper(self):\n        return self.expected\n"
                 "    def test_value(self):\n        pass\n", "<test>", "exec"), namespace)
    case = namespace["Case"]("test_value")
    case.expected, case.report = 7, case.helper
    hidden = hider()
    hand_over = call_argument_hider(hidden, function_hider(hidden), keeper[4])
    view = hand_over(case)
    assert view is not case and view.expected == 7 and view.helper() == 7 and view.report() == 7
    assert view.shared == [1, 2]  # a class attribute, kept out of the class's dict
    assert view.assertEqual(1, 1) is None and not hasattr(view, "_outcome") and not hasattr(view, "_cleanups")
    assert not any(hasattr(getattr(view, name), "__self__") for name in ("helper", "report", "assertEqual"))
    view.expected = 0
    assert case.expected == 7  # what the program sets on the view is not the case's
    listed, keyed, plain = hand_over([1, case]), hand_over({"case": (case,)}), [1, 2]
    assert listed[0] == 1 and listed[1].expected == 7 and keyed["case"][0].expected == 7
    assert hand_over(plain) is plain  # a container holding no case is handed as it is
    held = hand_over(types.SimpleNamespace(case=case, size=2))
    assert held.size == 2 and held.case.expected == 7 and held.case is not case
    state = hand_over(vars(case))  # the case's own dict: a copy of the test's data, without unittest's
    assert state is not vars(case) and state["expected"] == 7 and "_outcome" not in state
    state["expected"] = 0
    assert case.expected == 7


def test_the_containers_the_case_holds_reach_the_program_as_copies_it_may_change_in_place():
    keeper = namespace_keeper(ROOTS, lambda: False, unittest.mock, lambda: None)
    namespace = keeper[0]({"__builtins__": vars(builtins), "unittest": unittest, "KeptClass": KeptClass})
    exec(compile("class Case(unittest.TestCase, metaclass=KeptClass):\n"
                 "    shared = [1, [2]]\n"
                 "    def test_value(self):\n        pass\n", "<test>", "exec"), namespace)
    case = namespace["Case"]("test_value")
    case.expected = [6, 7]
    case.table = {"values": [6, 7], "pairs": ([6], [7]), "seen": {1, 2}, "raw": bytearray(b"ab")}
    hidden = hider()
    hand_over = call_argument_hider(hidden, function_hider(hidden), keeper[4])
    for view in (hand_over(case), types.SimpleNamespace(**hand_over(vars(case)))):
        assert view.expected == [6, 7] and view.table == case.table
        view.expected.clear()
        view.table["values"].clear()
        view.table["pairs"][0].clear()
        view.table["seen"].clear()
        view.table["raw"].clear()
    hand_over(case).shared[1].clear()
    assert case.expected == [6, 7] and case.shared == [1, [2]]
    assert case.table == {"values": [6, 7], "pairs": ([6], [7]), "seen": {1, 2}, "raw": bytearray(b"ab")}


class _Loud(type):
    """A metaclass whose comparison records that it ran: telling types apart by `in` or `==` would run it."""

    ran = []

    def __eq__(cls, other):
        _Loud.ran.append(cls)
        return False

    __hash__ = type.__hash__


def test_copying_the_cases_containers_runs_no_code_of_theirs_and_copies_no_dict_keyed_by_objects():
    loud = _Loud("Loud", (), {})
    keeper = namespace_keeper(ROOTS, lambda: False, unittest.mock, lambda: None)
    namespace = keeper[0]({"__builtins__": vars(builtins), "unittest": unittest, "KeptClass": KeptClass})
    exec(compile("class Case(unittest.TestCase, metaclass=KeptClass):\n"
                 "    def test_value(self):\n        pass\n", "<test>", "exec"), namespace)
    case = namespace["Case"]("test_value")
    case.by_object, case.held = {loud(): 1}, [loud()]
    hidden = hider()
    hand_over = call_argument_hider(hidden, function_hider(hidden), keeper[4])
    saved = builtins.all, builtins.zip, builtins.isinstance
    builtins.all = builtins.zip = builtins.isinstance = None  # a program's call may have replaced them
    try:
        view = hand_over(case)
    finally:
        builtins.all, builtins.zip, builtins.isinstance = saved
    assert view.by_object is case.by_object  # copying it would hash its keys: handed as it is
    assert view.held == case.held and view.held is not case.held
    assert _Loud.ran == []


def test_what_the_test_passes_to_a_call_goes_through_the_argument_framer_but_literals():
    tree = ast.parse(instrument_checks("table = defaultdict(task_func(), 3, key=sort_key, name='x')\n"))
    framed = [ast.unparse(node.args[0]) for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Constant)
              and str(node.func.value).endswith(ARGUMENT_FUNCTION)]
    called = ast.unparse(ast.parse(instrument_checks("value = task_func()")).body[0].value)
    assert sorted(framed) == sorted([called, "sort_key"])


def test_a_case_the_program_reached_is_put_back_but_for_what_the_tests_own_code_set():
    asking_program = [False]
    keeper = namespace_keeper(ROOTS, lambda: asking_program[0], unittest.mock, lambda: sys._getframe(3))
    save_cases, restore_cases = keeper[5]
    namespace = keeper[0]({"__builtins__": vars(builtins), "unittest": unittest, "KeptClass": KeptClass})
    exec(compile("class Case(unittest.TestCase, metaclass=KeptClass):\n"
                 "    def test_value(self):\n        pass\n", "<test>", "exec"), namespace)
    case = namespace["Case"]("test_value")
    case.expected = 7
    send = vars(namespace["Case"])["__setattr__"].__defaults__[0][0]
    send(("case", case, None))  # the test's own code ran a method of it
    token = save_cases()
    asking_program[0] = True  # the program's code: an attribute, the dict, the dict itself and the class
    case.expected = 0
    vars(case)["stolen"] = 1
    asking_program[0] = False
    case.seen = "set by the test's callback"  # the test's own code, while the program's code runs
    restore_cases(token)
    assert (case.expected, case.seen, hasattr(case, "stolen")) == (7, "set by the test's callback", False)
    token = save_cases()
    asking_program[0] = True
    object.__setattr__(case, "__dict__", {"expected": 0})
    own_token = send(("case_save", None, None))  # the program reaches the keeper: its own save, a guessed restore
    send(("case_restore", 0, None))
    send(("case_restore", own_token, None))
    restore_cases(token)
    assert case.expected == 7 and case.seen == "set by the test's callback"
