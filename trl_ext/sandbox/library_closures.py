"""The closures of the libraries' functions, put back (inside the sandbox; standard library only).

The call guard puts back what the program's code changes in the namespaces of modules and classes
(`call_guard`, `test_process._module_snapshot`). A function holds more than a namespace shows: its code, its
defaults, and the cells of its closure. While the program runs, the audit hook refuses it the code and defaults of
a library's function (`code_provenance`), but a cell's contents change with no audit event: pandas' checks are
decorated, and `pd.testing.assert_frame_equal.__closure__[0].cell_contents = lambda *args, **kwargs: None` would
make the decorator call the program's function for every later check of the test's.

So every cell of the functions that loaded modules and their classes hold (their functions, methods, static and
class methods, properties' accessors, and the functions those cells hold in turn) is read once, where no program
runs (the harness, before it forks a test process), and put back each time the program's code returns to the test.
"""

import operator
import sys
import types

_FUNCTION = types.FunctionType
_ACCESSORS = (property.fget.__get__, property.fset.__get__, property.fdel.__get__)
_CONTENTS = types.CellType.cell_contents


def _functions_in(value):
    """The functions `value`, an item of a module's or class's namespace, runs as it is (not what it makes)."""
    kind = type(value)
    if kind is _FUNCTION:
        return (value,)
    if kind is staticmethod or kind is classmethod:
        return (value.__func__,) if type(value.__func__) is _FUNCTION else ()
    if kind is property:
        return tuple(accessor for get in _ACCESSORS if type(accessor := get(value)) is _FUNCTION)
    return ()


def closure_cells(modules):
    """`(cells, contents)`: every non-empty cell of the functions that the modules in `modules` (`sys.modules`)
    and their classes hold, and what each holds now. Read where no program runs."""
    seen, cells, contents = set(), [], []
    pending = []
    for module in list(modules.values()):
        namespace = getattr(module, "__dict__", None) if type(module) is types.ModuleType else None
        if type(namespace) is not dict:
            continue
        for value in list(namespace.values()):
            if isinstance(value, type):
                for item in list(type.__dict__["__dict__"].__get__(value).values()):
                    pending.extend(_functions_in(item))
            else:
                pending.extend(_functions_in(value))
    while pending:
        function = pending.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        for cell in function.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:  # not yet assigned
                continue
            cells.append(cell)
            contents.append(held)
            if type(held) is _FUNCTION:
                pending.append(held)
    return tuple(cells), tuple(contents)


def _pointer_views():
    """`(view, read)`: `view(cell)` is a view of the pointer a cell holds, and `read(view)` its value (the id of
    what the cell holds, None where it holds nothing), read without touching the cell or what it holds, so a forked
    process copies none of their pages. None where this interpreter's cells cannot be read so: checked on a probe."""
    if sys.implementation.name != "cpython":  # the layout below is CPython's (an object's id is its address)
        return None
    try:
        import ctypes
    except ImportError:
        return None
    offset = types.CellType.__basicsize__ - ctypes.sizeof(ctypes.c_void_p)  # after the object header
    at, read, id_ = ctypes.c_void_p.from_address, ctypes._SimpleCData.__dict__["value"].__get__, id

    def view(cell):
        return at(id_(cell) + offset)

    first, second = object(), object()
    probe = types.CellType(first)
    probe_view = view(probe)
    seen = read(probe_view)
    probe.cell_contents = second
    if seen != id(first) or read(probe_view) != id(second):
        return None
    del probe.cell_contents
    return (view, read) if read(probe_view) is None else None


def _put_back(state):
    """Put back every cell whose contents changed since `closure_cells` read them (by identity: no comparison runs,
    which an object of the program's or an approximation could answer as it likes)."""
    cells, contents, pointers, get, set_, all_, map_, is_, tuple_, zip_, error = state
    if pointers is not None:
        views, read, addresses = pointers
        if tuple_(map_(read, views)) == addresses:  # ints only
            return
    else:
        try:
            if all_(map_(is_, map_(get, cells), contents)):
                return
        except error:  # a cell the program emptied
            pass
    for cell, held in zip_(cells, contents):
        try:
            if get(cell) is held:
                continue
        except error:
            pass
        set_(cell, held)


def cells_keeper(saved):
    """`put_back()` for `saved = closure_cells(...)`, bound now: the program may replace any builtin later. Its
    state is a tuple (`MethodType`: neither can be changed). Where it can, it reads the cells' pointers
    (`_pointer_views`) rather than the cells, so that each forked test process copies no page of theirs."""
    cells, contents = saved
    pointers = _POINTERS
    if pointers is not None:
        view, read = pointers
        pointers = (tuple(map(view, cells)), read, tuple(map(id, contents)))
    return types.MethodType(_put_back, (cells, contents, pointers, operator.attrgetter("cell_contents"),
                                        _CONTENTS.__set__, all, map, operator.is_, tuple, zip, ValueError))


_POINTERS = _pointer_views()

# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (_put_back,)
