"""Values that cross from a program to its judge: plain data only (inside the sandbox; standard library only).

`encode_value` turns a value into JSON-able plain data that keeps Python's types apart (exact `int`, `float`,
`complex`, `str`, `bytes`, `bool`, `None`, and `list`/`tuple`/`dict`/`set`/`frozenset` of them), reading every
value with the built-in types' own methods, so that no method of the program runs; `decode_value` builds the
values again, and is what the trainer uses on everything that comes back from the sandbox.

`make_comparisons` gives the instrumented test code its comparisons: they run on plain copies, and a value that
is not plain data takes part only when its class is one the program did not write (a library's class that
existed before the program ran, or one the test trusted), never through a forwarding proxy.
"""

import decimal
import fractions
import sys
import types
import weakref

if __package__:
    from .dispatch_hooks import PROTOCOLS
else:  # inside the sandbox, beside copies of its modules
    from dispatch_hooks import PROTOCOLS

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a `class` statement, not a built-in type
# Methods through which a value can answer a comparison or take part in arithmetic with its own code.
_OWN_ANSWER_METHODS = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__bool__", "__len__", "__hash__",
     "__abs__", "__neg__", "__pos__", "__round__", "__trunc__", "__floor__", "__ceil__", "__float__", "__int__",
     "__index__", "__complex__", "__iter__", "__getitem__"}
    | {f"__{prefix}{name}__" for prefix in ("", "r", "i") for name in
       ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift")}
    | PROTOCOLS  # NumPy's and PyTorch's dispatch
)
# Types that forward comparisons to another object the program chose: never compared as they are.
_FORWARDING_TYPES = (weakref.ProxyType, weakref.CallableProxyType, types.MappingProxyType)
# Built-in types (exactly these, never a subclass) whose values compare as built-in values or by identity: no code of
# a program's runs when one is compared. Inside a built-in container they let it be compared as it is
# (`[len] == [len]`, `date in [date]`; `make_comparisons`). Not a bound method: it compares the functions it binds
# with `==`, and may bind any callable.
_COMPARED_AS_THEY_ARE = frozenset({int, float, complex, str, bytes, bool, type(None), range, slice, object, type,
                                   types.FunctionType, types.BuiltinFunctionType, types.ModuleType})
# A number no value a test checks would be close to: a library's object equal to it (an approximation with an infinite
# tolerance) equals anything.
_UNMATCHABLE = -1.2345678901234567e300


class NotPlainData(AssertionError):
    """A test compared or computed with a value the program made that is not plain data (fails the test)."""


class _Unencodable(Exception):
    pass


# What `encode_value` and `decode_value` call, bound when the module loads: a test's comparison may run while a
# call into the program does, which may have rebound the builtins and this module's names.
_ENCODING_KINDS = (type, bool, str, int, float, complex, bytes, bytearray, list, tuple, frozenset, set, dict, isinstance,
                   getattr, hasattr, _Unencodable)
_DECODING_KINDS = (list, bool, str, dict, int, float, complex, bytes, tuple, set, frozenset, isinstance, len, ValueError,
                   fractions.Fraction, decimal.Decimal)


def encode_value(value, max_items=1_000_000, max_depth=100, *, kinds=_ENCODING_KINDS):
    """A JSON-able encoding of plain data that keeps Python's types apart (tuple vs list, int vs float).

    Instances of subclasses of the built-in types (namedtuple, OrderedDict, an `int` subclass with its own
    `__eq__`) are encoded as the base type's value, read with the base type's own methods, so no method of the
    solution runs and a custom `__eq__` cannot make a wrong value compare equal. NumPy values go through
    `tolist()`. Anything else (a class of the solution) raises `_Unencodable`. What it calls is bound when the
    module loads (`kinds`).
    """
    (type, bool, str, int, float, complex, bytes, bytearray, list, tuple, frozenset, set, dict, isinstance, getattr,
     hasattr, _Unencodable) = kinds
    budget = [max_items]

    def encode(item, depth):
        budget[0] -= 1
        if budget[0] < 0 or depth > max_depth:
            raise _Unencodable("value too large or too deeply nested")
        kind = type(item)
        if item is None or kind is bool or kind is str:
            return item
        if kind is int:
            return {"int": int.__repr__(item)}
        if kind is float:
            return {"float": float.__repr__(item)}
        if isinstance(item, bool):
            return bool(item)
        if isinstance(item, int):
            return {"int": int.__repr__(int.__index__(item))}
        if isinstance(item, float):
            return {"float": float.__repr__(float.__float__(item))}
        if isinstance(item, str):
            return str.__str__(item)
        if isinstance(item, complex):
            return {"complex": [float.__repr__(complex.__getattribute__(item, "real")),
                                float.__repr__(complex.__getattribute__(item, "imag"))]}
        if isinstance(item, (bytes, bytearray)):
            return {"bytes": bytes(item).hex()}
        if isinstance(item, list):
            return [encode(element, depth + 1) for element in list.__iter__(item)]
        if isinstance(item, tuple):
            return {"tuple": [encode(element, depth + 1) for element in tuple.__iter__(item)]}
        if isinstance(item, frozenset):
            return {"frozenset": [encode(element, depth + 1) for element in frozenset.__iter__(item)]}
        if isinstance(item, set):
            return {"set": [encode(element, depth + 1) for element in set.__iter__(item)]}
        if isinstance(item, dict):
            return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(item)]}
        module = getattr(kind, "__module__", "")
        if kind.__name__ == "Fraction" and module == "fractions":
            return {"fraction": [int.__repr__(item.numerator), int.__repr__(item.denominator)]}
        if kind.__name__ == "Decimal" and module in ("decimal", "_decimal", "_pydecimal"):
            return {"decimal": str(item)}
        if module.split(".")[0] == "numpy" and hasattr(item, "tolist"):
            return encode(item.tolist(), depth + 1)
        raise _Unencodable(f"a value of type {kind.__name__} is not plain data")

    return encode(value, 0)


def _write_all(write, fd, data):
    while data:
        data = data[write(fd, data):]


def decode_value(node, *, kinds=_DECODING_KINDS):
    """Inverse of `encode_value`, building only plain data (it never calls code a value names). The trainer decodes
    what comes back from the sandbox with it, so anything that is not an encoded value is a ValueError. What it
    calls is bound when the module loads, as `encode_value`'s is."""
    (list, bool, str, dict, int, float, complex, bytes, tuple, set, frozenset, isinstance, len, ValueError, Fraction,
     Decimal) = kinds

    def decode(node):
        if isinstance(node, list):
            return [decode(item) for item in node]
        if node is None or isinstance(node, (bool, str)):
            return node
        if isinstance(node, dict) and len(node) == 1:
            ((tag, payload),) = node.items()
            if tag == "int":
                return int(payload)
            if tag == "float":
                return float(payload)
            if tag == "complex":
                return complex(float(payload[0]), float(payload[1]))
            if tag == "bytes":
                return bytes.fromhex(payload)
            if tag in ("tuple", "set", "frozenset"):
                return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(item) for item in payload)
            if tag == "dict":
                return {decode(key): decode(value) for key, value in payload}
            if tag == "fraction":
                return Fraction(int(payload[0]), int(payload[1]))
            if tag == "decimal":
                return Decimal(payload)
        raise ValueError(f"not an encoded value: {str(node)[:80]}")

    return decode(node)



_NOT_PLAIN = object()


def value_types(value_modules=("datetime",)):
    """Built-in (C) value types whose comparison is trusted without a copy: the `datetime` module's, and NumPy's
    arrays and dtypes (`array_types`)."""
    found = set(array_types())
    for name in value_modules:
        module = sys.modules.get(name)
        for item in vars(module).values() if module is not None else ():
            if isinstance(item, type):
                found.add(item)
    return found


def array_types():
    """NumPy's array class and its dtypes' classes, where NumPy is loaded (read before any program runs). An array
    takes part in a test's computations as it is, not as a plain copy: `(f(x) == expected).all()`, `f(x) > 0` and
    `f(x).dtype == np.int64` mean what they mean under NumPy. A value of the program's class inside an object
    array answers nothing outside its calls (`answer_traps`)."""
    numpy = sys.modules.get("numpy")
    array, dtype = getattr(numpy, "ndarray", None), getattr(numpy, "dtype", None)
    if not isinstance(array, type) or not isinstance(dtype, type):
        return ()
    found, pending = [array], [dtype]
    while pending:
        found.append(pending.pop())
        pending.extend(type.__subclasses__(found[-1]))
    return tuple(found)


def _known_checker(known_types, trusted, opaque_types, own_anything):
    """`known(item)`: whether `item` may take part in a comparison as it is (`make_comparisons`); `trusted` is the
    set `trust` adds to."""
    is_instance, type_of, object_type, forwarding = isinstance, type, object, _FORWARDING_TYPES
    mro_of = type.__dict__["__mro__"].__get__
    by_identity, containers, max_items = _COMPARED_AS_THEY_ARE, (list, tuple, set, frozenset), 200_000
    unmatchable, comparison_error, dict_, all_ = _UNMATCHABLE, Exception, dict, all

    def known(item):
        """Whether `item` may take part in a comparison as it is: a value of a known class, or a built-in container
        (exact type) of such values, walked without running any code of theirs."""
        stack, budget = [item], max_items
        while stack:
            budget -= 1
            if budget < 0:
                return False
            current = stack.pop()
            kind = type_of(current)
            if kind in by_identity:
                continue
            if kind is dict_:
                stack.extend(current.keys())
                stack.extend(current.values())
            elif kind in containers:
                stack.extend(current)
            elif is_instance(current, forwarding + opaque_types) or not all_(
                    cls in known_types or cls in trusted or cls is object_type for cls in mro_of(kind)) or (
                    current is not own_anything and equals_anything(current)):
                return False
        return True

    def equals_anything(item):
        """Whether a library's object says it equals what nothing could: `unittest.mock.ANY`, a
        `pytest.approx(0, abs=inf)`. Such a value is refused unless the test names one itself."""
        for probe in (object_type(), unmatchable):
            try:
                if (item == probe) is True:
                    return True
            except comparison_error:  # an object that cannot compare with the probe equals nothing
                pass
        return False

    return known


def make_comparisons(known_types, opaque_types=(), own_anything=None):
    """`compare(left, op, right)`, `truth(value)`, `value(v)` and `trust(cls)` for instrumented test code.

    - Plain data (see `encode_value`) is compared as fresh copies: no method of the program runs.
    - A value that is not plain data takes part in a comparison only when its class is in `known_types`
      (classes that existed before the program ran: libraries', the test's own, the standard library's value
      types) or was trusted by the test (`trust`, for `pytest.approx`), and never a forwarding proxy
      (`weakref.proxy`, `MappingProxyType`); so does a built-in container of such values, functions and plain
      values (a list of dates). Anything else is refused: the comparison is False.
    - `value(v)` guards every value an assert computes with (names, calls, attributes, subscripts): plain data
      becomes its plain copy, so arithmetic (`abs(f(x) - y)`) runs on built-in values; a value of a class the
      program wrote that answers comparisons or arithmetic itself raises `NotPlainData` (the test fails).
    - `opaque_types` (references to objects in the program's process, `judge_side.Remote`) pass `value` as they
      are, so a test can call or iterate them, and never take part in a comparison or a truth test.
    - A library's object that equals anything (`unittest.mock.ANY`) is refused, alone or in a container, but
      `own_anything`: the test's own `ANY` (`own_anything`), which only the test's code holds.
    """
    encode, decode, unencodable, not_plain = encode_value, decode_value, _Unencodable, _NOT_PLAIN
    heap, own_answer, type_flags = _HEAP_TYPE, _OWN_ANSWER_METHODS, type.__dict__["__flags__"].__get__
    mro_of, vars_of, forwarding, refused = type.__dict__["__mro__"].__get__, type.__dict__["__dict__"].__get__, \
        _FORWARDING_TYPES, NotPlainData
    is_instance, type_of, any_, opaque_types, bool_ = isinstance, type, any, tuple(opaque_types), bool
    not_encoded = (unencodable, RecursionError, ValueError, TypeError)
    # `known_types` is read, never copied or changed: a set of every class the loaded modules hold, shared with
    # the harness's other forks (copying it would write each class's reference count, a page copied per class).
    trusted = set()
    known = _known_checker(known_types, trusted, opaque_types, own_anything)
    operators = {
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "in": lambda a, b: a in b,
        "not in": lambda a, b: a not in b,
    }

    array = (*array_types(), None)[0]

    def plain(item):
        try:
            return decode(encode(item, max_items=200_000))
        except not_encoded:
            return not_plain

    def computed(item):
        """`plain(item)`, but for NumPy's array: computed with as it is, element by element (`array_types`). An
        assert's own comparison (`compare`) still compares plain copies: `assert f(x) == np.array(...)`."""
        return not_plain if type_of(item) is array else plain(item)

    def answers_itself(item):
        # A class the program wrote (unknown, made by a `class` statement) with its own comparison or arithmetic.
        for cls in mro_of(type_of(item)):
            if type_flags(cls) & heap and cls not in known_types and cls not in trusted:
                if any_(name in own_answer for name in vars_of(cls)):
                    return True
        return False

    def compare(left, op, right):
        plain_left, plain_right = plain(left), plain(right)
        if plain_left is not not_plain and plain_right is not not_plain:
            return operators[op](plain_left, plain_right)
        if plain_left is not_plain and not known(left) or plain_right is not_plain and not known(right):
            return False
        return operators[op](left if plain_left is not_plain else plain_left,
                             right if plain_right is not_plain else plain_right)

    def truth(item):
        plain_item = computed(item)
        if plain_item is not not_plain:
            return bool_(plain_item)
        return known(item) and bool_(item)

    def value(item):
        plain_item = computed(item)
        if plain_item is not not_plain:
            return plain_item
        if is_instance(item, opaque_types):
            return item
        if is_instance(item, forwarding) or answers_itself(item):
            raise refused(f"a value of type {type_of(item).__name__} made by the program is not plain data")
        return item

    def trust(cls):
        trusted.add(cls)
        return cls

    return compare, truth, value, trust
