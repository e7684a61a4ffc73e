"""The test's own `unittest.mock.ANY`, and pytest's approximations (inside the sandbox; standard library only).

`unittest.mock.ANY` equals everything. A test names it where any value will do
(`mock_get.assert_called_once_with(url, headers=ANY)`, `assertEqual(result, {'id': ANY, 'name': 'x'})`). A
program can name it too, and then every comparison with what it returned or passed holds: `shutil.copy(ANY, ANY)`
satisfies the test's `mock_copy.assert_called_once_with('a.txt', '/backup/a.txt')` inside the mock's own
comparison, and `{'id': 1, 'name': ANY}` the `assertEqual` above.

So where a test runs in the program's process with `unittest.mock` loaded before the program (the test imports
it), the test gets an `ANY` of its own: each `ANY` its code reads (`ANY`, `mock.ANY`; `instrumentation` puts
`__trl_ext_own_any__` around them) becomes a second instance of the class, which only the test's code holds. The
class's `__eq__` and `__ne__` answer as written for that instance; for any other, the library's own `ANY` among
them, they fail the test (final), wherever the comparison happens: a mock's call record, a NumPy object array, the
judge's asserts.

pytest's approximations are the other library objects that equal what their tolerance allows
(`pytest.approx(0, abs=float('inf'))` equals every number): `is_approximation` tells their classes, and
`answer_traps` fails a test where the program's code left one alive.

Nothing here can be read for the test's instance: the comparisons' state (their default, which the audit hook
refuses to the program) holds its id only (raw memory is refused to the program too), and the mapping the test's
code calls is a constant of that code.
"""

import types


def _equal(self, other, _state=None):
    """`__eq__` of the class of `ANY`; its state is its default (`test_anything`), which the audit hook refuses to
    the program."""
    own_id, id_, fail = _state
    if id_(self) == own_id:
        return True
    return fail("a `unittest.mock.ANY` that is not the test's own was compared")


def _unequal(self, other, _state=None):
    """`__ne__` of the class of `ANY` (see `_equal`)."""
    own_id, id_, fail = _state
    if id_(self) == own_id:
        return False
    return fail("a `unittest.mock.ANY` that is not the test's own was compared")


def _own(state, value):
    """What the test's code reads for `value`: its own `ANY` for the library's."""
    library_any, own = state
    return own if value is library_any else value


def _unchanged(value):
    return value


def _nothing():
    return None


def test_anything(mock_module, fail):
    """`(own, mapped, trap)` for one test process, made before the program runs: `own` the test's `ANY`,
    `mapped(value)` what the test's code reads for `value`, `trap()` sets the class's comparisons (again: after the
    modules are put back as they were before the program ran). `fail(reason)`: the final failure of the test
    (`answer_traps`). Where `unittest.mock` is not loaded, `(None, unchanged, nothing)`: the judge's comparisons
    then refuse any object that equals anything (`plain_data.make_comparisons`)."""
    if mock_module is None:
        return None, _unchanged, _nothing
    library_any = mock_module.ANY
    any_class = type(library_any)
    own = object.__new__(any_class)
    for function in (_equal, _unequal):
        function.__defaults__ = ((id(own), id, fail),)
    # Bound now: `trap` runs after the program's top-level code, which may have rebound this module's names.
    set_attribute, equal, unequal = type.__setattr__, _equal, _unequal

    def trap():
        set_attribute(any_class, "__eq__", equal)
        set_attribute(any_class, "__ne__", unequal)

    trap()
    return own, types.MethodType(_own, (library_any, own)), trap


# The base class of pytest's approximations: `(module, name)`.
_APPROXIMATION = ("_pytest.python_api", "ApproxBase")


def is_approximation(state, kind, *, str_=str):
    """Whether `kind` is one of pytest's approximations (`ApproxBase` among its bases, a class of the program's
    too), which equal whatever their tolerance allows (`pytest.approx(0, abs=float('inf'))` equals every number,
    also where a library compares it: NumPy in an object array). A program has no use for one in what it leaves
    for the test. Read through `type`'s own descriptors: no code of the program's runs here."""
    mro_of, name_of, class_dict, proxy_get, type_, module, name = state
    for cls in mro_of(kind):  # names compared only as plain `str`s: a subclass's `__eq__` is the program's code
        cls_name, cls_module = name_of(cls), proxy_get(class_dict(cls), "__module__")
        if type_(cls_name) is str_ and type_(cls_module) is str_ and cls_name == name and cls_module == module:
            return True
    return False


def approximation_check():
    """`is_approximation(kind)`, bound before the program runs."""
    return types.MethodType(is_approximation, (
        type.__dict__["__mro__"].__get__, type.__dict__["__name__"].__get__, type.__dict__["__dict__"].__get__,
        types.MappingProxyType.get, type, *_APPROXIMATION))


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (_equal, _unequal, _own, _unchanged, _nothing, is_approximation)
