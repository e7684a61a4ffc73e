"""The program's own answers to comparisons, outside its calls (inside the sandbox; standard library only).

A test that runs in the program's process computes with what the program returned. Its asserts compare plain
copies (`plain_data.make_comparisons`), but much of a test compares elsewhere: `assertTrue(f(x) == 7)`,
`7 in [f(x)]`, a mock's `assert_called_with`, `pandas.testing.assert_frame_equal` on an object column. There a
value of a class the program wrote answers with its own code: an `__eq__` returning True passes them all.

So while the test runs, every answering method (comparison, containment, truth, arithmetic, NumPy's dispatch:
`ANSWERING`) of a class the program made, and every reducer (`REDUCERS`: `copy` and `pickle` call what it names),
is replaced by a trap: calling it springs the trap (for good) and raises, and the harness fails a test whose trap
sprang. While a call into the program runs (`call_guard`), the program's classes answer with their own methods
again, as the program wrote them.

The program's code can also leave code to run later without a frame of its own, which no profile function sees
start: a callable that binds arguments around a built-in or a library's function is framed (wrapped in a function
the profile function guards) where it is left on the program's classes, registered with `weakref.finalize`, called
by the test or passed on by it, and a `partial` the program's code made is framed in place, wherever it then goes;
one that the interpreter would call on its own (a `map` of `setattr` the test iterates) fails the test
(`lasting_code`), as does one that the program's code run outside its calls hands back.
A library's object that the program's code built with arguments it chose runs a library's code for the test: a
generator of a library's is guarded as the program's code when resumed; the methods the test calls on any other
(a patcher's `start()`) and its `__enter__`/`__exit__` under the test's `with` run under a snapshot put back when
each returns (`call_guard.restoring`), its values still trapped.

A class is the program's when it appeared while the program's code ran (its top-level code, or a call into it)
and an answering method of it is not a function loaded from a library's file (`code_provenance.library_roots`):
classes that libraries define as they load while the program runs keep their methods. The audit hook
(`test_process`) makes such a file name unforgeable: code compiled under a library's file name must be that
file's content. A class the harness could not read without running the program's code (`_plain_class`) fails the
test.

Nothing here can be rewired or read by the program: a trap is a bound method whose state is a tuple holding only
the `send` of a generator that can be sprung, never reset; what decides which classes are trapped lives in
another generator's frame, held by the harness and the call guard only (the audit hook refuses frames). What runs
during a call into the program calls only what it bound before it (the program may rebind any name meanwhile)."""

import functools
import operator
import os
import sys
import types
import weakref

if __package__:
    from . import dispatch_hooks, lasting_code, own_anything
else:  # inside the sandbox, beside copies of its modules
    import dispatch_hooks
    import lasting_code
    import own_anything

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a `class` statement or `type()`
_RESUMABLE = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR (`inspect`, not loaded here)
ANSWERING = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__bool__", "__abs__", "__neg__",
     "__pos__", "__invert__"}
    | {f"__{prefix}{name}__" for prefix in ("", "r", "i") for name in
       ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift",
        "divmod")}
    | dispatch_hooks.PROTOCOLS  # NumPy's dispatch hands these the other operand and the result
)


# Libraries' methods that say their object equals anything, by the code's qualified name and file.
_EQUAL_TO_ANYTHING = {"_ANY.__eq__": "/unittest/mock.py", "_ANY.__ne__": "/unittest/mock.py"}


# What a library does with what these return: `copy` and `pickle` call the callable a reducer names, with the
# arguments it names (`(setattr, (np.testing, ...))`), unguarded. Trapped like the answering methods.
REDUCERS = frozenset({"__reduce__", "__reduce_ex__"})


def _sprung_flag():
    """Sent None, answers whether the trap sprang; sent anything else, springs it (for good)."""
    sprung = False
    message = yield
    while True:
        if message is not None:
            sprung = True
        message = yield sprung


def _spring(state, *args, **kwargs):
    state[0](True)
    raise state[1]("a value of a class the program wrote answered a comparison or arithmetic, or named what a copy "
                   "runs, outside its call")


def _fail(state, reason=None, *, is_instance=isinstance, base_exception=BaseException):
    """A failed check of the test's: final, even if the test or the program catches what it raises."""
    state[0](True)
    if is_instance(reason, base_exception):
        raise reason
    raise state[1](reason or "the test failed")


def _is_library_function(value, roots, function_type, starts, type_=type):
    if type_(value) is not function_type:
        return False
    filename = value.__code__.co_filename
    return filename == "<test>" or starts(filename, roots)


def _is_library_function_of(state, value, *, is_library_function=_is_library_function):
    return is_library_function(value, *state)


def _answers_as_its_library(state, value, *, is_library_function=_is_library_function):
    """Whether `value`, an answering method of a class that appeared while the program's code ran, is its library's
    own: a library's function whose module was loaded while the program's code ran, as its classes were (a library
    the program imports). A library's function taken from a module loaded before (`_ANY.__eq__` on a class of the
    program's, or the method `unittest.mock` wraps around what the program sets as a mock's `__eq__`) answers with
    what the program chose: trapped as the program's."""
    roots, function_type, starts, globals_of, loaded_before, id_, type_, code_of, ends, equal_to_anything, get = state
    if not (is_library_function(value, roots, function_type, starts) and type_(value) is function_type
            and id_(globals_of(value)) not in loaded_before):
        return False
    code = code_of(value)  # nor a library's method that says it equals anything (`ANY`, of a module the program loaded)
    file = equal_to_anything.get(get(code, "co_qualname", None))  # a code's qualified name: Python 3.11 on
    return file is None or not ends(code.co_filename, file)


# Code of the program's that runs without a frame of its own: a callable that binds arguments the program chose to
# a built-in (a `functools.partial` of `setattr`, a bound method of one, `operator.methodcaller`) left as a class
# attribute (a finalizer `__del__`, a special method, a property's getter), as a `weakref.finalize` callback (whose
# arguments are bound too), or handed to the test to call. The profile function (`watcher`) never sees it start,
# so it is wrapped in a function compiled under a name of its own, which the profile function guards as the
# program's code.
_FRAMING_SOURCE = (
    "def framed(inner):\n    def call(*args, **kwargs):\n        return inner(*args, **kwargs)\n    return call\n"
)
# Read through the types' own descriptors (a subclass cannot show another function than the one it calls), and with
# `issubclass` on `type(value)`, never `isinstance`, which reads a `__class__` the program may have made a property.
_FRAMING_KINDS = (functools.partial, functools.partial.__dict__["func"].__get__, types.MethodType,
                  types.MethodType.__dict__["__func__"].__get__, staticmethod, staticmethod.__dict__["__func__"].__get__,
                  classmethod, classmethod.__dict__["__func__"].__get__, property, operator.methodcaller,
                  types.FunctionType, issubclass, type)


def _framing_kinds(roots):
    """`_FRAMING_KINDS` and `is_library(function)`: whether a function is a library's or the test's."""
    return (*_FRAMING_KINDS, types.MethodType(_is_library_function_of, (roots, types.FunctionType, str.startswith)))


def _purity(roots):
    """`(kinds, bound)`: `_framing_kinds(roots)` and `lasting_code.bound` for them, made before the program runs."""
    kinds = _framing_kinds(roots)
    return kinds, lasting_code.bound(kinds[-1], sys.modules)


def _framing():
    """`framed(inner)`: a function calling `inner`, whose code is not a library's (made before the program runs)."""
    scope = {"__builtins__": {}}
    exec(compile(_FRAMING_SOURCE, "<left by the program>", "exec"), scope)  # noqa: S102  (constant source)
    return scope["framed"]


def _calls_frameless(callee, kinds, *, range_=range):
    """Whether calling `callee` runs code without a frame with arguments the program may have chosen: a
    `functools.partial`, a bound method or an `operator.methodcaller` around anything but a function, or a
    `partial` of a library's function (which would run unguarded: `partial(functools.update_wrapper, np.testing,
    holder)` rewrites NumPy's module)."""
    partial_type, partial_func, method_type, method_func, static, static_func, _, _, _, caller_type, \
        function_type, is_subclass, type_, is_library = kinds
    bound = partial = False
    for _ in range_(64):  # a partial of a bound method of a partial ...
        if is_subclass(type_(callee), partial_type):
            callee, bound, partial = partial_func(callee), True, True
        elif type_(callee) is method_type:
            callee, bound = method_func(callee), True
        elif type_(callee) is static:
            callee = static_func(callee)
        elif type_(callee) is caller_type:
            return True
        else:
            return bound and (type_(callee) is not function_type or partial and is_library(callee))
    return True


def _framed_callee(state, callee, *, calls_frameless=_calls_frameless):
    """`callee` as the test's code calls it: framed where it would run code without a frame (`_calls_frameless`);
    a method of an object of a library's class that the program's code made, under a snapshot put back when it
    returns (`_made_keeper`)."""
    framed, kinds, made, method_type, method_self, type_ = state
    if calls_frameless(callee, kinds):
        return framed(callee)
    if type_(callee) is method_type and made(("made", method_self(callee))) is True:
        return made(("restoring", callee))
    return callee


def callee_framer(roots, made=None):
    """`frame(callee)`, made before the program runs, which the test's code calls on everything it calls
    (`instrumentation`): a `partial` of `setattr` that the program handed over in a value (returned, as an
    attribute of an object, an item of a list) runs framed, so the profile function guards it; a method of a
    library's object that the program made (`patch.object(...).start` of a patcher it returned) runs under a
    snapshot. `roots`: the libraries' directories (`code_provenance.library_roots`); `made`:
    `library_objects_made()`."""
    return types.MethodType(_framed_callee, (_framing(), _framing_kinds(roots), made or _nothing_made,
                                             types.MethodType, types.MethodType.__dict__["__self__"].__get__, type))


def _framed_context(state, value):
    """`value` as the test's `with` enters it: where the program's code made it and its class is a library's (a
    `patch.object(np.testing, 'assert_array_equal', slice)` it returned), a context manager whose `__enter__` and
    `__exit__` are the object's own under a snapshot put back when each returns (`call_guard.restoring`)."""
    made, type_, context_type, get_attribute = state
    if made(("made", value)) is not True:
        return value
    kind = type_(value)
    enter, exit_ = get_attribute(kind, "__enter__", None), get_attribute(kind, "__exit__", None)
    if enter is None or exit_ is None:  # no context manager: `with` says so, as it would
        return value
    return context_type(made(("restoring", enter.__get__(value, kind))),
                        made(("restoring", exit_.__get__(value, kind))))


class _RestoringContext:
    """What `_framed_context` hands the test's `with`: the object's own methods, each under a snapshot."""

    __slots__ = ("enter", "exit")

    def __init__(self, enter, exit_):
        self.enter, self.exit = enter, exit_

    def __enter__(self):
        return self.enter()

    def __exit__(self, *details):
        return self.exit(*details)


def context_framer(made=None):
    """`frame(value)`, made before the program runs, which the test's code calls on what it enters with `with`
    (`instrumentation`, `_framed_context`)."""
    return types.MethodType(_framed_context, (made or _nothing_made, type, _RestoringContext, getattr))


def _nothing_made(message):
    return None


def _made_keeper(weak, get, id_, type_, tuple_, len_, errors):
    """Sent `(operation, value)`: "keep" (the objects of libraries' classes among those the program's code just
    made, `_keep_library_objects`), "made" (whether `value` is one of them), "guard" (`call_guard.restoring`
    bound to the call guard's context, once: the harness sends it before the program runs) and "restoring"
    (`value` under it). An object is held weakly where it can be, so that it lives as long as it would have."""
    kept, restoring = {}, None
    message = yield
    while True:
        answer = None
        operation, value = message if type_(message) is tuple_ and len_(message) == 2 else (None, None)
        if operation == "keep":
            for item in value:
                try:
                    kept[id_(item)] = weak(item)
                except errors:
                    kept[id_(item)] = (item,)
        elif operation == "made":
            entry = get(kept, id_(value))
            answer = entry is not None and (entry[0] if type_(entry) is tuple_ else entry()) is value
        elif operation == "guard" and restoring is None:
            restoring = value
        elif operation == "restoring":
            answer = value if restoring is None else restoring(value)
        message = yield answer


def library_objects_made():
    """`send` of the generator that keeps the objects of libraries' classes the program's code made
    (`_made_keeper`), made before the program runs."""
    keeper = _made_keeper(weakref.ref, dict.get, id, type, tuple, len, TypeError)
    keeper.send(None)
    return keeper.send


def _framed_argument(state, value):
    framed, kinds, calls_frameless, pure, b, harness_does = state
    if calls_frameless(value, kinds) and not harness_does(pure, value, b):
        return framed(value)
    return value


def argument_framer(roots, harness_does):
    """`frame(value)`, made before the program runs, which the test's code calls on what it passes to a call
    (`instrumentation`): a callable that would run something impure without a frame (`_calls_frameless`, not
    `lasting_code.pure`: a `partial` of `setattr` a call into the program returned), which a library may call for
    the test (`sorted(data, key=...)`, `map(...)`), is framed; anything else passes as it is (a `partial` of
    `operator.mul` stays a `partial`)."""
    kinds, b = _purity(roots)
    return types.MethodType(_framed_argument, (_framing(), kinds, _calls_frameless, lasting_code.pure, b, harness_does))


def _framed_attribute(state, value, *, calls_frameless=_calls_frameless, any_=any):
    """A class attribute with every callable in it that runs code without a frame (`_calls_frameless`) framed,
    called as before (a static, class or property part framed as that part), or None if it has none."""
    framed, kinds = state
    _, _, _, _, static, static_func, class_method, class_func, prop, _, _, _, type_, _ = kinds
    if type_(value) is static or type_(value) is class_method:
        inner = static_func(value) if type_(value) is static else class_func(value)
        return type_(value)(framed(inner)) if calls_frameless(inner, kinds) else None
    if type_(value) is prop:
        parts = [value.fget, value.fset, value.fdel]
        if not any_(calls_frameless(part, kinds) for part in parts):
            return None
        return prop(*[framed(part) if calls_frameless(part, kinds) else part for part in parts], value.__doc__)
    return static(framed(value)) if calls_frameless(value, kinds) else None


def _frame_finalizers(state, since):
    """Frames the callbacks of `weakref.finalize` registered after the `since`-th (all made while the program's
    code ran, or by its code run outside its calls) that are not the program's functions: the finalizer binds
    their arguments (a library's function would run unguarded). Returns the latest's number. Entries are read
    through `_Info`'s own slots (an entry of another type, which only the program could have put there, is left
    alone: `finalize` would fail on it)."""
    registry, framed, kinds, list_, values, max_, info_type, index_of, func_of, set_func = state
    _, _, method_type, method_func, _, _, _, _, _, _, function_type, is_subclass, type_, is_library = kinds
    latest = since
    for info in list_(values(registry)):
        if type_(info) is not info_type:
            continue
        index, func = index_of(info), func_of(info)
        latest = max_(latest, index)
        function = method_func(func) if type_(func) is method_type else func
        program = type_(function) is function_type and not is_library(function)
        if index > since and not program and not is_subclass(type_(func), type_):
            set_func(info, framed(func))
    return latest


def _keeper(before, trap, roots, bound, helpers, *, heap=_HEAP_TYPE):
    """Sent "enter" when a call into the program starts and "leave" when it ends (the first "leave": the program's
    top-level code ended); between the outermost ones the program's classes have their own answering methods, and
    what the program left to run later without a frame of its own is framed (`_framed_attribute`,
    `_frame_finalizers`) or, where it cannot be, fails the test (`lasting_code`). The program's classes are those
    among the objects made while its code ran (`_new_objects`: the collector's generations are frozen when it
    starts), kept from one call to the next. `before`: the finalizer count before the program ran, and
    `lasting_code`'s `(bound, spring, harness_does)`; `helpers`: this module's functions it calls."""
    (answering, flags, class_dict, set_attribute, function_type, starts, errors, list_, append, items, is_library,
     framed_attribute, frame_finalizers, is_subclass, type_, keep_library_objects, (overrides, trapped),
     plain_class) = bound
    (finalizers, lasting), depth, saved = before, 1, []
    start_watching_new_objects, new_objects, left_frameless = helpers
    left, spring, harness_does = lasting
    programs, kept, canary = [], [], start_watching_new_objects(left)
    command = yield
    while True:
        if command == "enter" and depth == 0:
            canary = start_watching_new_objects(left)
            for cls, name, original in saved:
                try:
                    set_attribute(cls, name, original)
                except errors:
                    pass
            saved = []
        if command == "enter":
            depth += 1
        elif command == "leave" and depth > 0:
            depth -= 1
            if depth == 0:
                made, odd = new_objects(left, harness_does), False
                for value in made or ():
                    if is_subclass(type_(value), type_) and flags(value) & heap:
                        if plain_class(value, is_library):
                            append(programs, value)
                        else:  # reading it would run the program's code here: the test fails, now
                            odd = True
                            spring(True)
                approximated = harness_does(keep_library_objects, made or ())
                for cls in programs:
                    overridden = overrides(cls)  # of a library of arrays' base (`dispatch_hooks`)
                    for name, value in list_(items(class_dict(cls))):
                        if name in answering and not is_library(value):
                            replacement = trap
                        else:
                            replacement = (trapped(value, trap) if name in overridden and not is_library(value)
                                           else framed_attribute(value))
                            if replacement is None:
                                continue
                        append(saved, (cls, name, value))
                        try:
                            set_attribute(cls, name, replacement)
                        except errors:
                            pass
                finalizers = frame_finalizers(finalizers)
                if made is None or approximated or odd or left_frameless(left, made, canary, kept, harness_does):
                    spring(True)
        command = yield


# What a metaclass may not define: the harness hashes and checks the classes made with it, and would run these.
_CLASS_ANSWERS = frozenset({"__hash__", "__eq__", "__ne__", "__instancecheck__", "__subclasscheck__",
                            "__getattribute__", "__getattr__"})


def _plain_class(state, cls, is_library, *, str_=str):
    """Whether the harness can read `cls` without running the program's code: every name in its dict is a plain
    `str` (`type(name, bases, namespace)` keeps a key of a `str` subclass, whose `__hash__` the harness would run
    wherever it looks the name up), and, where it is a metaclass, it defines none of `_CLASS_ANSWERS` but as its
    library's own (a set of the classes made with it would run its `__hash__`). Read without hashing any name."""
    class_dict, items, type_, is_subclass, answers = state
    metaclass = is_subclass(cls, type_)
    for name, value in items(class_dict(cls)):
        if type_(name) is not str_ or metaclass and name in answers and not is_library(value):
            return False
    return True


def _keep_library_objects(state, made, *, str_=str):
    """What of `made` is a library's, built by the program's code with arguments it chose, whose code the test
    may run later. A generator, coroutine or async generator whose code is a library's has its frame marked: the
    profile function guards its code as the program's when the test resumes it (`_watch`); a library's generator
    that sets an attribute (`test.support.swap_attr`), resumed by the test's `next()`, would otherwise run
    unguarded. The mark is the frame's `f_trace`, which nothing calls (tracing is refused) and the program cannot
    reach (frames are refused). Any other object of a class that is neither built in nor defined by the program's
    own code (a `unittest.mock` patcher, even where the program's code first loaded `unittest.mock`) is kept
    (`_made_keeper`): the test's calls of its methods and its `with` run them under a snapshot (`_framed_callee`,
    `_framed_context`). A class's module is read from its dict, which the call guard has put back by now. A
    `functools.partial` is framed in place where it would run something impure (`_frame_partial`). Returns whether
    one of `made` is an approximation of pytest's (`own_anything.is_approximation`), which fails the test."""
    (frame_of, mark, roots, harness, starts, type_, get, flags, heap, list_, append, keep, class_dict, proxy_get,
     is_subclass, partial_type, frame_partial, is_approximation) = state
    objects, approximated = list_(), False
    for value in made:
        kind = type_(value)
        read_frame = get(frame_of, kind)
        if read_frame is None:
            if is_subclass(kind, partial_type):
                frame_partial(value)
            elif flags(kind) & heap and is_approximation(kind):
                approximated = True
            elif flags(kind) & heap:
                module = proxy_get(class_dict(kind), "__module__")  # the program's, "solution": as a plain `str`
                if not (type_(module) is str_ and module == "solution"):
                    append(objects, value)
            continue
        frame = read_frame(value)
        filename = frame.f_code.co_filename if frame is not None else harness
        if starts(filename, roots) and not starts(filename, harness):  # not the harness's own (its call guard's)
            frame.f_trace = mark
    keep(("keep", objects))
    return approximated


def _frame_partial(state, value):
    """Frames a `functools.partial` the program's code made, in place, where calling it would run something impure
    without a frame (`_calls_frameless`, `lasting_code.pure`: a `partial` of `setattr`, of a library's function):
    its function becomes `framed(function)`, so it does what it did, guarded, wherever it goes (a list, an
    attribute the test sets, a library that calls it). Read and set through `partial`'s own descriptors: a
    subclass of the program's runs none of its code here."""
    calls_frameless, kinds, pure, b, framed, parts, set_state, instance_dict = state
    if calls_frameless(value, kinds) and not pure(value, b):
        func, args, keywords = (part(value) for part in parts)
        set_state(value, (framed(func), args, keywords or None, instance_dict(value) or None))


def _resumed_later(frame, event, arg):
    """The mark of a library's generator that the program's code made (`_keep_library_objects`): never called."""


def _start_watching_new_objects(b):
    """Every object the collector tracks now moves to its permanent generation: those it tracks afterwards are new.
    Returns a new list, which the collector tracks until something freezes the generations again."""
    b.freeze()
    return b.new_list()


def _new_objects(b, harness_does, *, base_exception=BaseException):
    """The objects made since the generations were last frozen, or None where they cannot be read."""
    try:
        return harness_does(b.objects)
    except base_exception:  # noqa: BLE001 - the test fails
        return None


def _left_frameless(b, objects, canary, keep, harness_does, *, left=lasting_code.frameless_left, error=BaseException):
    """Whether the program's code just left among `objects` one that the interpreter would call something impure
    through on its own (`lasting_code.frameless_left`), or froze the collector's generations to hide what it made."""
    try:
        return harness_does(left, objects, keep, canary, b) is not None
    except error:  # noqa: BLE001 - whatever the program made that the reading could not handle fails it
        return True


def answer_traps(error_type, roots, harness_does=None, made=None):
    """`(enter, leave, sprung, fail)`, to be made before the program runs: `enter()`/`leave()` around each call
    into the program (and `leave()` once after its top-level code), `sprung()` whether a trapped method was called
    or a check of the test's failed, `fail(reason)` for a failed check (final: it springs the flag). `made`:
    `library_objects_made()`, told the libraries' objects the program's code makes."""
    flag = _sprung_flag()
    flag.send(None)
    trap = types.MethodType(_spring, (flag.send, error_type))
    framing = _framing()
    registry = weakref.finalize._registry  # noqa: SLF001  (bound now: the program may replace the attribute)
    info_type = weakref.finalize._Info  # noqa: SLF001
    kinds, left = _purity(roots)
    frame_of = {kind: kind.__dict__[name].__get__ for kind, name in (
        (types.GeneratorType, "gi_frame"), (types.CoroutineType, "cr_frame"), (types.AsyncGeneratorType, "ag_frame"))}
    bound = (ANSWERING | REDUCERS, type.__dict__["__flags__"].__get__, type.__dict__["__dict__"].__get__,
             type.__setattr__, types.FunctionType, str.startswith, (AttributeError, TypeError), list, list.append,
             types.MappingProxyType.items, types.MethodType(_answers_as_its_library, (
                 roots, types.FunctionType, str.startswith, types.FunctionType.__dict__["__globals__"].__get__,
                 frozenset(id(vars(module)) for module in list(sys.modules.values()) if hasattr(module, "__dict__")),
                 id, type, types.FunctionType.__dict__["__code__"].__get__, str.endswith, _EQUAL_TO_ANYTHING, getattr)),
             types.MethodType(_framed_attribute, (framing, kinds)),
             types.MethodType(_frame_finalizers, (registry, framing, kinds, list, dict.values, max, info_type,
                                                  info_type.__dict__["index"].__get__, info_type.__dict__["func"].__get__,
                                                  info_type.__dict__["func"].__set__)),
             issubclass, type, types.MethodType(_keep_library_objects, (
                 frame_of, _resumed_later, roots, os.path.dirname(os.path.abspath(__file__)) + "/", str.startswith,
                 type, dict.get, type.__dict__["__flags__"].__get__, _HEAP_TYPE, list, list.append,
                 made or _nothing_made, type.__dict__["__dict__"].__get__, types.MappingProxyType.get, issubclass,
                 functools.partial, types.MethodType(_frame_partial, (
                     _calls_frameless, kinds, lasting_code.pure, left, framing, left.partial_parts,
                     functools.partial.__setstate__, functools.partial.__dict__["__dict__"].__get__)),
                 own_anything.approximation_check())),
             dispatch_hooks.override_traps(), types.MethodType(_plain_class, (
                 type.__dict__["__dict__"].__get__, types.MappingProxyType.items, type, issubclass,
                 _CLASS_ANSWERS)))
    finalizers = max([info.index for info in registry.values()], default=-1)
    harness_does = harness_does or (lambda function, *args: function(*args))
    keeper = _keeper((finalizers, (left, flag.send, harness_does)), trap, roots, bound,
                     (_start_watching_new_objects, _new_objects, _left_frameless))
    keeper.send(None)
    send = keeper.send
    fail = types.MethodType(_fail, (flag.send, AssertionError))
    return (lambda: send("enter")), (lambda: send("leave")), (lambda: flag.send(None)), fail


def _watch(state, frame, event, arg):
    """The profile function while the test runs (outside calls into the program, which pause it): tells the
    guard keeper when code that is not the test's or a library's starts or ends, or the code of a library's
    generator that the program's code made (`_keep_library_objects`) is resumed or suspended."""
    if event == "call" or event == "return":
        code = frame.f_code
        filename = code.co_filename
        if frame.f_globals is state[0] or not (filename == "<test>" or state[3](filename, state[1])):
            state[2]((frame, event, arg))
        elif code.co_flags & state[4] and frame.f_trace is state[5]:
            state[2]((frame, event, arg))


def _guard_keeper(answers, snapshot, bound, frame_type, type_, tuple_, len_):
    """Sent `(frame, event, arg)` by `_watch`: the program's code that the test or a library runs outside a call
    into the program (a method or special method of its objects, a finalizer, a generator it returned) runs as a
    call does: its classes answer as written, and what it changes in modules, classes and the test's names is put
    back when it returns; what it returns is checked (`returned_checker`). Anything else sent (the program may
    reach `_watch`) changes nothing."""
    enter, leave, check_returned = answers
    guard, restore = None, None
    message = yield
    while True:
        if type_(message) is tuple_ and len_(message) == 3 and type_(message[0]) is frame_type:
            frame, event, value = message
            if guard is None and event == "call":
                guard = frame
                enter()
                restore = snapshot(bound)
            elif frame is guard and event == "return":
                guard = None
                restore()
                leave()
                check_returned(value)
        message = yield


def _check_returned(state, value):
    calls_frameless, kinds, pure, b, fail, harness_does = state
    if harness_does(calls_frameless, value, kinds) and not harness_does(pure, value, b):
        fail("the program's code run outside its calls handed back a callable that would run a built-in or a "
             "library's function without a frame")


def returned_checker(roots, fail, harness_does):
    """`check(value)`, made before the program runs, for what the program's code run outside its calls returns to
    the test or a library (a `__getattr__` that makes up a `partial` of `setattr`, which `dict(obj)` would call
    as `obj.keys()`): a callable that would run something impure without a frame (`_calls_frameless`,
    `lasting_code.pure`) fails the test through `fail`."""
    kinds, b = _purity(roots)
    return types.MethodType(_check_returned, (_calls_frameless, kinds, lasting_code.pure, b, fail, harness_does))


def watcher(namespace, answers, snapshot, bound, roots):
    """The profile function that guards the program's code run outside calls into it (`_guard_keeper`):
    `namespace` is the program's, `answers` `(enter, leave, check_returned)`, `snapshot` and `bound` the call
    guard's."""
    keeper = _guard_keeper(answers, snapshot, bound, types.FrameType, type, tuple, len)
    keeper.send(None)
    not_the_program = roots + ("<frozen ",)
    return types.MethodType(_watch, (namespace, not_the_program, keeper.send, str.startswith, _RESUMABLE,
                                    _resumed_later))


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (_spring, _fail, _keeper, _sprung_flag, _is_library_function, _is_library_function_of,
                       _answers_as_its_library, _watch, _guard_keeper, _framed_attribute, _frame_finalizers,
                       _calls_frameless, _framed_callee, _start_watching_new_objects, _new_objects, _left_frameless,
                       _keep_library_objects, _resumed_later, _check_returned, _framed_argument,
                       _framed_context, _made_keeper, _nothing_made, _frame_partial, _plain_class,
                       _RestoringContext.__init__, _RestoringContext.__enter__, _RestoringContext.__exit__,
                       *lasting_code.PROTECTED_FUNCTIONS, *dispatch_hooks.PROTECTED_FUNCTIONS)
