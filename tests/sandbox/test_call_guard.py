"""The call guard's snapshot (`trl_ext.sandbox.call_guard`): what a call into the program changes in modules and
classes is put back when it returns, also when the copies of an earlier snapshot are used again (dicts whose
version tag shows no change), when snapshots nest, and where the interpreter keeps no version tags. The end-to-end
cases are in the red team (`red_team.py`, tests in the program's process)."""

import json
import sys

import pytest
from sandbox_helpers import in_a_forked_child

from trl_ext.sandbox import call_guard
from trl_ext.sandbox.test_process import _VERSIONS

VERSIONS = {"version tags": _VERSIONS, "no version tags": None}


def _state():
    return {"dumps": json.dumps.__name__, "encoder extra": hasattr(json.JSONEncoder, "extra"),
            "decoder decode": "decode" in vars(json.JSONDecoder), "json added": hasattr(json, "added")}


@pytest.mark.parametrize("versions", list(VERSIONS))
def test_changes_are_put_back_with_copies_used_again_and_nested_snapshots(versions):
    def body():
        bound = call_guard.context(sys.modules, {}, (None,) * 6, VERSIONS[versions])
        call_guard.take_snapshot(bound)()  # copies made: the next snapshot uses them again where nothing changed
        json.added = "by the test"  # the test's own change between calls: kept
        restore = call_guard.take_snapshot(bound)
        json.dumps = lambda *args, **kwargs: ""  # the program's, inside the call
        inner_restore = call_guard.take_snapshot(bound)  # a call into the program from code the program called
        json.JSONEncoder.extra = 1
        del json.JSONDecoder.decode
        inner_restore()
        inner = _state()
        restore()
        return {"inner": inner, "outer": _state(), "added": json.added}

    result = in_a_forked_child(body)
    assert result["inner"] == {"dumps": "<lambda>", "encoder extra": False, "decoder decode": True,
                               "json added": True}
    assert result["outer"] == {"dumps": "dumps", "encoder extra": False, "decoder decode": True, "json added": True}
    assert result["added"] == "by the test"


def test_copies_made_before_the_fork_serve_unchanged_dicts_and_changed_ones_are_copied_again():
    json.warmed = "before the fork"
    warm = call_guard.warm_copies(sys.modules, _VERSIONS)  # in this process, as the harness makes them

    def body():
        json.warmed = "in the test process"  # changed after the warm copies: they must not put it back
        bound = call_guard.context(sys.modules, {}, (None,) * 6, _VERSIONS, copies=warm)
        restore = call_guard.take_snapshot(bound)
        cache = bound[25][0]
        json.warmed, json.dumps = "by the program", None
        restore()
        reused = cache[id(vars(sys.modules["os"]))] is warm[id(vars(sys.modules["os"]))]
        return {"warmed": json.warmed, "dumps": json.dumps.__name__, "os copy reused": reused,
                "json copied again": cache[id(vars(json))] is not warm[id(vars(json))]}

    try:
        assert in_a_forked_child(body) == {"warmed": "in the test process", "dumps": "dumps", "os copy reused": True,
                                           "json copied again": True}
    finally:
        del json.warmed
    assert call_guard.warm_copies(sys.modules, None) is None  # no version tags: nothing to tell a change by


def test_a_namespace_the_call_left_alone_is_not_rewritten():
    def body():
        watch, read = _VERSIONS[:2]
        bound = call_guard.context(sys.modules, {}, (None,) * 6, _VERSIONS)
        views = {name: watch(vars(sys.modules[name])) for name in ("json", "os")}
        restore = call_guard.take_snapshot(bound)
        before = {name: read(view) for name, view in views.items()}
        json.dumps = None
        restore()
        return {name: read(view) == before[name] for name, view in views.items()}

    assert in_a_forked_child(body) == {"json": False, "os": True}


def test_a_librarys_plain_dicts_are_put_back_and_the_programs_own_are_not():
    """`copyreg.dispatch_table` (whose reducers `copy` calls) and `re`'s cache are put back after the call; a dict
    the program fills across its calls (`solution`'s registry) keeps what it was given."""

    def body():
        import copyreg
        import re
        import types

        program = types.ModuleType("solution")
        program.REGISTRY = {}
        sys.modules["solution"] = program
        bound = call_guard.context(sys.modules, {}, (None,) * 6, _VERSIONS)
        restore = call_guard.take_snapshot(bound)
        copyreg.dispatch_table[json.JSONEncoder] = lambda value: (setattr, (json, "dumps", None))
        re._cache[(str, "planted", 0)] = re.compile(".*")
        program.REGISTRY["a"] = 1
        restore()
        return {"reducer": json.JSONEncoder in copyreg.dispatch_table,
                "cache": (str, "planted", 0) in re._cache, "registry": program.REGISTRY}

    assert in_a_forked_child(body) == {"reducer": False, "cache": False, "registry": {"a": 1}}


def test_a_hidden_function_runs_as_itself_and_shows_nothing_it_holds():
    expected = 42
    calls = []

    def report(value, *, scale=1):
        """the test's callback"""
        calls.append(value * scale)
        if value != expected:
            raise AssertionError(value)
        return "ok"

    hidden = call_guard.hider()(report)
    assert hidden(42, scale=1) == "ok" and calls == [42]
    with pytest.raises(AssertionError):
        hidden(0)
    assert hidden.__name__ == "report" and hidden.__qualname__ == report.__qualname__
    held = [cell.cell_contents for cell in hidden.__closure__]
    assert report not in held and expected not in held and not any(getattr(item, "__self__", None) is report
                                                                    for item in held)

    def countdown(n):
        return 0 if n == 0 else hidden_countdown(n - 1)

    hidden_countdown = call_guard.hider()(countdown)
    assert hidden_countdown(50) == 0  # a hidden function that calls itself, through the program and back
