"""Which dicts changed, read from their version tags (inside the sandbox; standard library only).

CPython changes a dict's version tag (PEP 509) on every change of the dict and never on a read. The test process
(`test_process._module_snapshot`) and the call guard (`call_guard`) read these tags to put back only what the
program's code changed. A test process is forked from the harness, so each page it writes is copied: reading a tag
must touch neither the dict nor anything it holds, and a check of a thousand dicts must not touch a Python object
per dict: a gatherer reads all of them in C, through one read-only view of the process's memory.
"""

import gc
import itertools
import operator
import sys

try:
    import ctypes
except ImportError:  # no tags are read then (`VERSIONS` is None): every namespace is put back
    ctypes = None


def _tag_offset():
    """Where a dict's version tag lies from its address (after the object header and `ma_used`), or None where this
    interpreter's layout is not CPython's (an object's id is its address there)."""
    if sys.implementation.name != "cpython" or ctypes is None:
        return None
    offset = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)
    return offset if dict.__basicsize__ >= offset + ctypes.sizeof(ctypes.c_uint64) else None


_OFFSET = _tag_offset()


def version_views():
    """`(watch, read, gatherer)`: `watch(d)` is a view of dict `d`'s version tag and `read(view)` its value, read
    without touching `d` or anything it holds; `gatherer` reads many at once (`_gatherer`). Each binds what it
    calls now, before any program runs: the program may replace any builtin or module attribute later. None where
    this interpreter keeps no such tag: checked on probe dicts."""
    if _OFFSET is None:
        return None
    at, read, offset, id_ = ctypes.c_uint64.from_address, ctypes._SimpleCData.__dict__["value"].__get__, _OFFSET, id

    def watch(dictionary):
        return at(id_(dictionary) + offset)

    gatherer = _gatherer(offset)
    probe, other = {"probe": 0}, {"probe": 0}
    probe_view, other_view = watch(probe), watch(other)
    seen = [read(probe_view)]
    for change in (lambda: probe.__setitem__("probe", 1), lambda: probe.__setitem__("added", 0),
                   lambda: probe.pop("added"), probe.clear):
        untouched = read(other_view)
        change()
        seen.append(read(probe_view))
        if seen[-1] in seen[:-1] or read(other_view) != untouched or read(probe_view) != seen[-1]:
            return None
    if gatherer([probe, other, probe])() != (read(probe_view), read(other_view), read(probe_view)):
        return None
    return watch, read, gatherer


def _gatherer(offset):
    """`gatherer(dicts)`: a function returning the version tags of `dicts` (which the caller keeps alive) as a tuple
    in their order, read in C (`operator.itemgetter` over a read-only view of the memory from the lowest tag to the
    highest, C's `PyMemoryView_FromMemory`) without touching the dicts. Comparing two such tuples writes to neither,
    so a forked process copies almost no page to check a thousand dicts. Making one takes one ctypes call."""
    view_of = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)(
        ("PyMemoryView_FromMemory", ctypes.pythonapi))
    list_, map_, id_, min_, max_, len_, tuple_ = list, map, id, min, max, len, tuple
    shift, minus, repeat, getter = operator.rshift, operator.sub, itertools.repeat, operator.itemgetter

    def gatherer(dicts):
        ids = list_(map_(id_, dicts))
        if not ids:
            return tuple_
        first = min_(ids)
        memory = view_of(first + offset, max_(ids) - first + 8, 0x100).cast("Q")  # PyBUF_READ; 8-byte aligned dicts
        positions = list_(map_(shift, map_(minus, ids, repeat(first)), repeat(3)))
        if len_(positions) == 1:  # `itemgetter` of one position returns the item, not a tuple
            return lambda: (memory[positions[0]],)
        read = getter(*positions)
        return lambda: read(memory)

    return gatherer


VERSIONS = version_views()


def changed_since(saved, classes):
    """For the lists of `(namespace, its copy)` and `(class, copy of its dict)` saved now: a function returning
    those of each whose dict changed since (all of them where dict versions cannot be read). It reads every
    version at once (`gatherer`) and touches no saved object, so a forked process copies only the pages of what it
    puts back."""
    if VERSIONS is None:
        return lambda: (saved, classes)
    watched, unwatched = [], ([], [])
    for kind, pairs in enumerate((saved, classes)):
        for pair in pairs:
            held = [pair[0]] if kind == 0 else gc.get_referents(vars(pair[0]))  # a class's dict, behind its proxy
            if len(held) == 1 and type(held[0]) is dict:
                watched.append((kind, pair, held[0]))
            else:
                unwatched[kind].append(pair)
    gather = VERSIONS[2]([held for _, _, held in watched])
    versions = gather()
    list_, append, map_, ne, compress, positions = (list, list.append, map, operator.ne, itertools.compress,
                                                    range(len(watched)))
    watched = [(kind, pair) for kind, pair, _ in watched]

    def changed():  # no name lookups: the solution may have replaced any builtin
        found = (list_(unwatched[0]), list_(unwatched[1]))
        now = gather()
        if now != versions:  # tuples of ints: no code of the solution runs, and no saved tag is touched
            for index in compress(positions, map_(ne, versions, now)):
                kind, pair = watched[index]
                append(found[kind], pair)
        return found

    return changed
