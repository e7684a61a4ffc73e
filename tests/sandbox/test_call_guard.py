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


def test_a_namespace_the_call_left_alone_is_not_rewritten():
    def body():
        watch, read = _VERSIONS
        bound = call_guard.context(sys.modules, {}, (None,) * 6, _VERSIONS)
        views = {name: watch(vars(sys.modules[name])) for name in ("json", "os")}
        restore = call_guard.take_snapshot(bound)
        before = {name: read(view) for name, view in views.items()}
        json.dumps = None
        restore()
        return {name: read(view) == before[name] for name, view in views.items()}

    assert in_a_forked_child(body) == {"json": False, "os": True}
