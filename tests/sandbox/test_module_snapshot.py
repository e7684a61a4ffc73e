"""The test process's module snapshot: what a program changed in the standard library is put back before its
tests run, and what it left alone is not rewritten (so a forked test process copies none of its pages)."""

import json
import os
import sys

import pytest
from sandbox_helpers import in_a_forked_child

from trl_ext.sandbox.dict_versions import VERSIONS, changed_since
from trl_ext.sandbox.dict_versions import version_views as _dict_version_views
from trl_ext.sandbox.test_process import _module_snapshot


def test_this_interpreter_keeps_dict_versions_the_snapshot_can_read():
    # CPython 3.11-3.13 keep PEP 509's tag; where one does not, every namespace is put back (slower, as safe).
    assert _dict_version_views() is not None, f"no dict version tag found on {sys.version}"


def test_a_dict_version_changes_with_every_change_and_never_with_a_read():
    watch, read = _dict_version_views()[:2]
    namespace = {"a": 1, "b": [2]}
    view = watch(namespace)
    seen = [read(view)]
    _ = namespace["a"], namespace.get("b"), list(namespace.items()), "a" in namespace, len(namespace), dict(namespace)
    assert read(view) == seen[-1]
    for change in (lambda: namespace.__setitem__("a", 3), lambda: namespace.update(c=4), lambda: namespace.pop("c"),
                   lambda: namespace.setdefault("d", 5), lambda: namespace.popitem(), namespace.clear):
        change()
        assert read(view) not in seen
        seen.append(read(view))


def test_the_gathered_tags_are_each_dicts_own_read_in_one_call():
    watch, read = _dict_version_views()[:2]
    dicts = [{"n": n} for n in range(50)] + [vars(json), vars(os)]
    gatherer = VERSIONS[2]
    gather = gatherer(dicts + dicts[:3])  # a dict given twice is read twice
    assert gather() == tuple(read(watch(d)) for d in dicts + dicts[:3])
    before = gather()
    dicts[7]["n"] = -1
    after = gather()
    assert [index for index, (then, now) in enumerate(zip(before, after)) if then != now] == [7]
    assert gatherer([dicts[0]])() == (read(watch(dicts[0])),)


def test_the_readers_bind_what_they_call_before_any_program_runs(monkeypatch):
    """In a call into the program, its code may have replaced any builtin (`builtins.id`, `min`) or the module's own
    names when a nested call makes the guard's readers again: they must read the same tags."""
    import builtins

    from trl_ext.sandbox import dict_versions

    watch, read, gatherer = VERSIONS
    dicts = [{"n": n} for n in range(5)]
    expected = tuple(read(watch(d)) for d in dicts)
    for name in ("id", "min", "max", "map", "list", "len"):
        monkeypatch.setattr(builtins, name, lambda *args, **kwargs: 0)
    for name in ("operator", "itertools", "ctypes", "_OFFSET"):
        monkeypatch.setattr(dict_versions, name, None)
    gathered, watched = gatherer(dicts)(), tuple(read(watch(d)) for d in dicts)
    monkeypatch.undo()
    assert gathered == watched == expected


def test_changed_since_finds_the_changed_namespaces_and_classes_even_those_saved_twice():
    class Planted:
        value = 1

    shared, other = {"a": 1}, {"b": 2}
    saved = [(shared, dict(shared)), (other, dict(other)), (shared, dict(shared))]
    changed = changed_since(saved, [(Planted, dict(vars(Planted)))])
    assert changed() == ([], [])
    shared["a"] = 2
    Planted.value = 2
    namespaces, classes = changed()
    assert [pair[0] is shared for pair in namespaces] == [True, True] and [cls for cls, _ in classes] == [Planted]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_what_a_program_changed_is_put_back_and_what_it_did_not_is_left_as_it_was():
    import fractions

    def body():
        watch, read = _dict_version_views()[:2]
        restore = _module_snapshot()
        real_dumps, real_encode, real_limit = json.dumps, json.JSONEncoder.encode, fractions.Fraction.limit_denominator
        os_view = watch(vars(os))  # a namespace the program leaves alone
        os_version = read(os_view)
        # What a program does at import: replace a function, a method, add a class attribute, delete one.
        json.dumps = lambda *args, **kwargs: "[]"
        json.JSONEncoder.encode = lambda self, value: "[]"
        json.JSONEncoder.planted = True
        del fractions.Fraction.limit_denominator
        restore()
        return {
            "dumps": json.dumps is real_dumps,
            "encode": json.JSONEncoder.encode is real_encode,
            "planted": hasattr(json.JSONEncoder, "planted"),
            "limit_denominator": fractions.Fraction.__dict__.get("limit_denominator") is real_limit,
            "os_rewritten": read(os_view) != os_version,
        }

    assert in_a_forked_child(body) == {"dumps": True, "encode": True, "planted": False, "limit_denominator": True,
                                 "os_rewritten": False}


def test_a_snapshot_that_read_the_closures_serves_every_test_and_one_that_did_not_is_taken_again():
    from trl_ext.sandbox import harness

    saved = list(harness._SNAPSHOT)
    try:
        harness._SNAPSHOT[:] = [None, None]
        without = harness._snapshot((), False)
        assert harness._snapshot((), False) is without
        with_cells = harness._snapshot((), True)  # a test in the program's process needs the cells
        assert with_cells is not without
        assert harness._snapshot((), False) is with_cells  # and it serves the others too
    finally:
        harness._SNAPSHOT[:] = saved
