"""What the program's code leaves behind that the interpreter would run later without a frame of its own (inside the
sandbox, for a test in the program's process; standard library only).

A test iterates, indexes, copies and drops what the program handed it. The interpreter's C code then calls what such
an object holds: a `map` or `filter` its function, `itertools.starmap` and its kin theirs, `iter(f, sentinel)` its
`f`, a `defaultdict` its factory, a weak reference its callback, `cmp_to_key` its comparison, a `sqlite3` connection
the functions registered on it. No profile function sees such a call start, so what it changes (a `setattr` that
replaces NumPy's check) would outlive it, and a library function run this way (`MonkeyPatch.setattr`) would run
unguarded with arguments the program chose.

So each time the program's code returns to the test, every object it made that is still alive is read
(`frameless_left`): an object of such a class (`_carriers`, or a class made on one of them) may hold only
callables that cannot change what the test reads (`pure`): the program's own functions (the profile function
guards them), the constructors of built-in values, methods of immutable values and read-only methods, and
built-ins without side effects (`len`, `math`, `operator.add`, NumPy's ufuncs). Anything else fails the test; a
weak reference's callback is held back instead (its referent is kept alive until the test ends). Other objects
hold data, or run only when called (a `partial`: the test's calls of it, and what it passes to calls, are framed
by `answer_traps`). Which objects are new is
the collector's business: the harness freezes every generation when the program's code starts, so what the
collector tracks afterwards was made while it ran; a program that freezes them itself (which would hide what it
made) fails the test: a list the harness made after freezing is then missing.

Nothing here looks up a global or builtin name once the program runs (it may replace any): everything it calls is
bound in `bound()`, made before the program runs.
"""

import builtins
import cmath
import collections
import functools
import gc
import itertools
import math
import operator
import types
import weakref

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a `class` statement (or an extension's heap type)
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: an extension's type, never a `class` statement's
_IMMUTABLE_VALUES = frozenset({int, float, complex, bool, str, bytes, tuple, frozenset, range, slice, type(None)})
# Where loaded: the standard library's immutable values (`defaultdict(Decimal)`, `partial(Fraction, 1)`).
_IMMUTABLE_LIBRARY_VALUES = (("decimal", "Decimal"), ("fractions", "Fraction"), ("datetime", "date"),
                             ("datetime", "time"), ("datetime", "datetime"), ("datetime", "timedelta"))
# Types that make a value from their arguments and call nothing they are given (a `Counter` or `OrderedDict` reads
# what it is given as any iteration does). Not `defaultdict`, which keeps its factory for the interpreter to call:
# a `partial` of it is pure where its arguments are (`pure`).
_VALUE_TYPES = _IMMUTABLE_VALUES | {bytearray, list, dict, set, object, reversed, enumerate, zip, collections.deque,
                                    collections.OrderedDict, collections.Counter, collections.ChainMap}
_READ_ONLY_METHODS = frozenset(
    {"get", "keys", "values", "items", "copy", "count", "index", "fromkeys", "isdisjoint", "issubset", "issuperset",
     "union", "intersection", "difference", "symmetric_difference", "__getitem__", "__contains__", "__len__",
     "__iter__", "__hash__", "__repr__", "__str__", "__format__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
     "__ge__"}
)
# Not `iter` (`iter(f, sentinel)` makes a carrier of `f` while the test runs) nor `getattr` (a library's property).
_PURE_BUILTINS = ("abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash", "hex", "id",
                  "isinstance", "issubclass", "len", "max", "min", "next", "oct", "ord", "pow", "repr", "round",
                  "sorted", "sum")
_IMPURE_OPERATORS = frozenset({"setitem", "delitem", "call", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod",
                               "imul", "imatmul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"})


def _pure_functions():
    """The built-in functions (by identity) that change nothing but their result."""
    chosen = [getattr(builtins, name) for name in _PURE_BUILTINS]
    for module in (math, cmath):
        chosen += [value for value in vars(module).values() if type(value) is types.BuiltinFunctionType]
    chosen += [value for name, value in vars(operator).items()
               if type(value) is types.BuiltinFunctionType and name.strip("_") not in _IMPURE_OPERATORS]
    return frozenset(id(value) for value in chosen), chosen


def _carriers(modules):
    """The built-in classes through which the interpreter calls, on its own, what an object holds: iterators that
    call a function for each item, `iter(f, sentinel)`, `cmp_to_key`, a `defaultdict`'s factory, weak references'
    callbacks, and (where loaded) the functions registered on a `sqlite3` connection or an XML parser."""
    kinds = {map, filter, itertools.starmap, itertools.filterfalse, itertools.takewhile, itertools.dropwhile,
             itertools.accumulate, itertools.groupby, type(iter(int, 1)), type(functools.cmp_to_key(int)),
             collections.defaultdict, weakref.ref, weakref.ProxyType, weakref.CallableProxyType}
    sqlite, expat = modules.get("sqlite3"), modules.get("pyexpat")
    if sqlite is not None:
        kinds.add(sqlite.Connection)
    if expat is not None:
        kinds.add(expat.XMLParserType)
    return frozenset(kinds)


def bound(is_library, modules):
    """Everything `frameless_left` calls, bound now (before the program runs). `is_library(function)`: whether a
    function's code is a library's or the test's (it would run unguarded); `modules`: `sys.modules` (NumPy's ufuncs
    are pure where NumPy is loaded)."""
    pure_ids, kept = _pure_functions()  # `kept` holds the functions, so that no id of theirs is reused meanwhile
    numpy = modules.get("numpy")
    immutable = _IMMUTABLE_VALUES | {getattr(modules[module], name) for module, name in _IMMUTABLE_LIBRARY_VALUES
                                     if module in modules and hasattr(modules[module], name)}
    pure_kinds = frozenset({operator.itemgetter, operator.attrgetter} | ({type(numpy.add)} if numpy is not None else set()))
    descriptor = type.__dict__
    return types.SimpleNamespace(
        type_=type, flags=descriptor["__flags__"].__get__, mro=descriptor["__mro__"].__get__,
        class_dict=descriptor["__dict__"].__get__, proxy_get=types.MappingProxyType.get, is_subclass=issubclass,
        callable_=callable, referents=gc.get_referents, is_library=is_library, pure_ids=pure_ids, kept=kept, id_=id,
        function=types.FunctionType, method=types.MethodType, method_func=types.MethodType.__dict__["__func__"].__get__,
        static=staticmethod, static_func=staticmethod.__dict__["__func__"].__get__,
        partial=functools.partial, partial_parts=(functools.partial.__dict__["func"].__get__,
                                                  functools.partial.__dict__["args"].__get__,
                                                  functools.partial.__dict__["keywords"].__get__),
        values=dict.values, pure_kinds=pure_kinds,
        builtin=types.BuiltinFunctionType, builtin_self=types.BuiltinFunctionType.__dict__["__self__"].__get__,
        builtin_name=types.BuiltinFunctionType.__dict__["__name__"].__get__,
        wrapper=types.MethodWrapperType, wrapper_self=types.MethodWrapperType.__dict__["__self__"].__get__,
        wrapper_name=types.MethodWrapperType.__dict__["__name__"].__get__,
        descriptors={kind: (kind.__dict__["__objclass__"].__get__, kind.__dict__["__name__"].__get__)
                     for kind in (types.MethodDescriptorType, types.WrapperDescriptorType,
                                  types.ClassMethodDescriptorType)},
        module=types.ModuleType, default_dict=collections.defaultdict,
        factory=collections.defaultdict.__dict__["default_factory"].__get__,
        reference=weakref.ref, callback=weakref.ref.__dict__["__callback__"].__get__, referent=weakref.ref.__call__,
        immutable=immutable, value_types=_VALUE_TYPES | immutable, read_only=_READ_ONLY_METHODS,
        carriers=_carriers(modules),
        append=list.append, freeze=gc.freeze, objects=gc.get_objects, new_list=list,
        # this module's functions and constants, which call each other while the program's call runs: by these
        # names, never the module's, which the program may rebind meanwhile
        pure=pure, pure_class=_pure_class, pure_method=_pure_method, found_in_classes=_found_in_classes,
        carrier=_carrier, all_=all, heap=_HEAP_TYPE, immutable_type=_IMMUTABLE_TYPE,
    )


def _found_in_classes(cls, name, b):
    """What `cls` finds for `name` through its classes' own dicts (no lookup the program could answer), and where."""
    for klass in b.mro(cls):
        value = b.proxy_get(b.class_dict(klass), name, b)
        if value is not b:
            return klass, value
    return None, None


def _pure_method(owner_type, name, b):
    return owner_type in b.immutable or name in b.read_only


def pure(value, b, depth=0):
    """Whether the interpreter calling `value`, with arguments the program chose, changes nothing the test reads (see
    the module's docstring). Unknown callables are not pure."""
    if depth > 32:
        return False
    kind = b.type_(value)
    if kind is b.function:
        return not b.is_library(value)
    if kind is b.method:
        return b.pure(b.method_func(value), b, depth + 1)
    if b.is_subclass(kind, b.partial):
        func, args, keywords = (part(value) for part in b.partial_parts)
        parts = (func, *args, *b.values(keywords))
        if func is b.default_dict:  # `partial(defaultdict, int)`: pure where the factory it will be given is
            parts = parts[1:]
        return b.all_(b.pure(part, b, depth + 1) for part in parts if part is func or b.callable_(part))
    if kind in b.pure_kinds:
        return True
    if kind is b.builtin:
        owner = b.builtin_self(value)
        if owner is None or b.type_(owner) is b.module:
            return b.id_(value) in b.pure_ids
        if b.is_subclass(b.type_(owner), b.type_):  # a class method of a built-in type (`dict.fromkeys`)
            return owner in b.value_types
        return b.pure_method(b.type_(owner), b.builtin_name(value), b)
    if kind is b.wrapper:
        return b.pure_method(b.type_(b.wrapper_self(value)), b.wrapper_name(value), b)
    if kind in b.descriptors:
        objclass, name = b.descriptors[kind]
        return b.pure_method(objclass(value), name(value), b)
    if b.is_subclass(kind, b.type_):
        return b.pure_class(value, b)
    _, call = b.found_in_classes(kind, "__call__", b)  # an object of the program's class: its own __call__
    return b.type_(call) is b.function and not b.is_library(call)


def _pure_class(cls, b):
    """Calling a class: a built-in value type, or a class whose `__new__` and `__init__` are the program's own
    functions or a built-in value type's."""
    if cls in b.value_types:
        return True
    if not b.flags(cls) & b.heap or b.flags(cls) & b.immutable_type:
        return False
    for name in ("__new__", "__init__"):
        owner, found = b.found_in_classes(cls, name, b)
        if owner in b.value_types:
            continue
        if b.type_(found) is b.static:
            found = b.static_func(found)
        if b.type_(found) is not b.function or b.is_library(found):
            return False
    return True


def _carrier(kind, b):
    """The built-in class among `kind`'s own classes through which the interpreter calls what an object holds
    (`map`, `defaultdict`, a weak reference, ...), or None: objects of other classes hold data or run only when
    called (a `partial`, a bound method: the test's own calls of those are framed, `answer_traps`)."""
    if kind in b.carriers:
        return kind
    if not b.flags(kind) & b.heap:
        return None
    for klass in b.mro(kind):  # a class of the program's (or a library's) made on one of them
        if klass in b.carriers:
            return klass
    return None


def frameless_left(objects, keep, canary, b):
    """The first object among `objects` (those the program's code made and left alive) through which the interpreter
    would call something impure on its own, `canary` where it is missing from `objects` (the program froze the
    collector's generations, hiding what it made), or None. The referent of a weak reference with a callback is
    kept alive (appended to `keep`), so that its callback does not run while the test does."""
    seen = False
    for value in objects:
        if value is canary:
            seen = True
            continue
        kind = b.type_(value)
        carrier = b.carrier(kind, b)
        if carrier is None:
            continue
        if carrier is b.reference:
            if b.callback(value) is not None:
                b.append(keep, b.referent(value))
        elif carrier is b.default_dict:  # its factory is called without arguments: any function or class will do
            factory = b.factory(value)
            kind_of_factory = b.type_(factory)
            if (factory is not None and kind_of_factory is not b.function
                    and not b.is_subclass(kind_of_factory, b.type_) and not b.pure(factory, b)):
                return value
        else:
            for item in b.referents(value):
                if item is not kind and b.callable_(item) and not b.pure(item, b):
                    return value
    return None if seen else canary


# What the audit hook refuses to rewire (`__code__`, `__defaults__`).
PROTECTED_FUNCTIONS = (frameless_left, pure, _pure_class, _pure_method, _carrier, _found_in_classes)
