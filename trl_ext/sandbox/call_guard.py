"""Calls from a test into the program, when both share a process (inside the sandbox; standard library only).

A test that must run in the program's own process (`harness`: it patches the program's modules, captures its
output, imports installed packages) calls the program's functions. While a call runs, the program may rewrite
anything the interpreter holds: a library's class (`contextlib.ExitStack.__exit__` returning True would swallow
the test's next failed assertion), a module's function (`pandas.testing.assert_frame_equal`), or the test's own
names (reached through `__globals__` of a test function). `guarded(function, context)` returns what the test
calls instead: it takes a snapshot of every loaded module's namespace, every class those modules define, the
test's namespace and classes, and the registries whose entries run code later (import finders and hooks,
`gc.callbacks`), calls the program, and puts all of it back when the call returns or raises; a library's
memoized function whose memo changed meanwhile (`functools.lru_cache`: a result it computed may have read the
program's changes) is emptied, and context variables are put back (`context_state`). So a program's changes
never outlive its call; the test's own changes (a `patch` it entered) are kept.

Nothing here can be rewired or read by the program: the guard is a bound method whose state is a tuple
(`MethodType`: neither can be changed) holding only the `send` of a generator; the function it calls and the
snapshot's context, with the test's namespace, live in generators' frames, which the audit hook refuses to hand
out. Its functions look up no global or builtin name (the program may replace any), and the audit hook
(`test_process`) refuses assignments to their `__code__`.
"""

import functools
import gc
import itertools
import operator
import sys
import types

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a `class` statement


def context(modules, test_namespace, answers, versions=None, harness_does=None, context_variables=None, copies=None):
    """What a snapshot reads, bound now (before the program runs): every built-in it calls is in the tuple.
    `answers`: `(enter, leave)` of `answer_traps`, told when a call into the program starts and ends,
    `(pause_watch, resume_watch)`, which stop its profile function for the call and start it again after,
    and `hand(args, kwargs)`, told what the test hands to the call (`test_namespace`). `versions`: `(watch, read,
    gatherer)` of dicts' version tags (`dict_versions`), or None where this interpreter keeps none; `harness_does`
    runs what the audit hook refuses the program (`watch`, a gatherer); `context_variables`:
    `context_state.switcher()`'s `(enter, leave)`, or None to leave context variables as the program's code sets
    them. `copies`: `warm_copies()` made before this process was forked, used again for every dict whose version
    tag has not changed since, or None to copy every dict at the first snapshot."""
    registries = (sys.meta_path, sys.path_hooks, gc.callbacks)  # their entries run code later: contents too
    object_ = object  # what the fallbacks below call while the program's call runs: bound now
    if versions is None:  # every namespace copied and put back each time
        versions = (lambda dictionary: None, lambda view: object_(), lambda dicts: object_)
    if context_variables is None:
        context_variables = (lambda: None, lambda entered: None)
    harness_does = harness_does or (lambda function, *args: function(*args))
    tags = ({} if copies is None else dict(copies), versions[0], versions[1], harness_does, gc.get_referents,
            context_variables, memo_finder(versions[0], harness_does), EMPTY_MEMO, (versions[2], operator.is_, len, tuple))
    return (modules, test_namespace, registries, gc.disable, _HEAP_TYPE, dict, list, dict.items, dict.values,
            dict.clear, dict.update, dict.get, type.__dict__["__flags__"].__get__,
            type.__dict__["__dict__"].__get__, type.__setattr__, type.__delattr__, issubclass, type, getattr,
            str.rpartition, type(type.__dict__).get, (AttributeError, TypeError), sys.path_importer_cache, id, map,
            tags, answers)


def _memos_in(state, copy):
    """`(memos, dicts)` of the dict `copy`: `(function, view)` for each memoized function it holds
    (`functools.lru_cache`, `functools.cache`, also as a static or class method), with a view of its memo's version
    tag (the dict inside the wrapper, read for the harness; None where it has no one dict besides its `__dict__`:
    emptied after every call then), and the plain dicts it holds; both picked out in C (`itertools.compress`)."""
    (wrapper_type, method_types, static_function, class_function, type_, dict_, values, list_, known, id_, get, watch,
     harness_does, referents, get_attribute, len_, map_, compress, is_, repeat, or_) = state
    kinds = list_(map_(type_, values(copy)))  # compared by identity: no class of the program's is hashed
    dicts = list_(compress(values(copy), map_(is_, kinds, repeat(dict_))))
    wrapped = map_(or_, map_(is_, kinds, repeat(method_types[0])), map_(is_, kinds, repeat(method_types[1])))
    memos = []
    for value in list_(compress(values(copy), map_(or_, wrapped, map_(is_, kinds, repeat(wrapper_type))))):
        if type_(value) is method_types[0]:
            value = static_function(value)
        elif type_(value) is method_types[1]:
            value = class_function(value)
        if type_(value) is not wrapper_type:
            continue
        memo = get(known, id_(value))
        if memo is None or memo[0] is not value:
            own = get_attribute(value, "__dict__")
            found = [item for item in harness_does(referents, value) if type_(item) is dict_ and item is not own]
            memo = known[id_(value)] = (value, harness_does(watch, found[0]) if len_(found) == 1 else None)
        memos.append(memo)
    return memos, dicts


def memo_finder(watch, harness_does=None):
    """`memos_in(dict)` (`_memos_in`), made before the program runs; `watch`: of dicts' version tags."""
    return types.MethodType(_memos_in, (
        functools._lru_cache_wrapper, (staticmethod, classmethod), staticmethod.__dict__["__func__"].__get__,
        classmethod.__dict__["__func__"].__get__, type, dict, dict.values, list, {}, id, dict.get, watch,
        harness_does or (lambda function, *args: function(*args)), gc.get_referents, object.__getattribute__, len,
        map, itertools.compress, operator.is_, itertools.repeat, operator.or_))


EMPTY_MEMO = functools._lru_cache_wrapper.cache_clear


def _empty_changed(state):
    read, empty, memo_tags = state
    for function, view, tag in memo_tags:
        if view is None or read(view) != tag:
            empty(function)


def memo_emptier(holders, versions):
    """`empty_changed()`, made before the program runs: empties each memoized function that the dicts `holders`
    hold whose memo changed since (`_memos_in`); `versions`: `(watch, read)` of dicts' version tags, or None."""
    object_ = object
    watch, read = versions[:2] if versions else (lambda dictionary: None, lambda view: object_())
    memos_in = memo_finder(watch)
    memo_tags = [(function, view, None if view is None else read(view))
                 for holder in holders for function, view in memos_in(holder)[0]]
    return types.MethodType(_empty_changed, (read, EMPTY_MEMO, memo_tags))


def _copy(holder, is_class, tags, dict_, get, id_, class_dict, classes_in):
    """`(holder, view, tag, copy, classes, (memos, dicts), watched)`: a copy of a module's namespace (`holder`) or a
    class's dict as it is now, the dict's version tag, the classes a namespace holds (`classes_in(copy)`), the
    memoized functions and plain dicts it holds (`_memos_in`), and the dict whose tag is read. The copy made last
    time is used again while the tag shows no change since."""
    cache, watch, read, harness_does, referents = tags[:5]
    cached = get(cache, id_(holder))
    if cached is not None and cached[0] is holder and read(cached[1]) == cached[2]:
        return cached
    if cached is not None and cached[0] is holder:
        view, watched = cached[1], cached[6]
    else:  # the dict behind a class's mapping proxy: read through the type itself, which no class overrides
        watched = harness_does(referents, class_dict(holder))[0] if is_class else holder
        view = harness_does(watch, watched)
    tag = read(view)
    copy = dict_(class_dict(holder) if is_class else holder)
    copied = (holder, view, tag, copy, () if is_class else classes_in(copy), tags[6](copy), watched)
    cache[id_(holder)] = copied
    return copied


def _classes_of(namespace, values, is_subclass, type_, flags, heap):
    """The classes `namespace` holds. `issubclass` on `type(value)`, never `isinstance`, which reads a `__class__`
    that the program may have made a property: its code would run here, unguarded."""
    return [value for value in values(namespace) if is_subclass(type_(value), type_) and flags(value) & heap]


def _copies(bound, *, copy_one=_copy, classes_of=_classes_of):
    """`(namespaces, classes, packages, gather, versions, memos)`: a copy of every loaded module's namespace and of
    every class they hold (`_copy`), the namespaces by module name, a function reading the dicts' version tags at
    once and what it returns now (`dict_versions.gatherer`), and their memoized functions. Among the
    namespaces, the plain dicts those namespaces and classes hold (a library's registry or cache, such as
    `copyreg.dispatch_table`, whose reducers `copy` calls, or `re`'s compiled patterns), and the plain dicts those
    hold (pandas' options), put back the same way;
    not `sys.modules` and the importers' cache, which `take_snapshot` keeps as the call left them, nor the
    program's own (a registry it fills across calls)."""
    (modules, _, _, _, heap, dict_, list_, items, values, _, _, get, flags, class_dict, _, _, is_subclass, type_,
     getattr_, _, _, _, importer_cache, id_, map_, tags, _) = bound

    def classes_in(namespace):
        return classes_of(namespace, values, is_subclass, type_, flags, heap)

    def no_classes(namespace):
        return ()

    namespaces, classes, packages, seen = [], [], {}, {id_(modules): modules, id_(importer_cache): importer_cache}
    for name, module in list_(items(modules)):
        namespace = getattr_(module, "__dict__", None)
        if type_(namespace) is dict_ and get(seen, id_(namespace)) is None:
            seen[id_(namespace)] = namespace
            namespaces.append(copy_one(namespace, False, tags, dict_, get, id_, class_dict, classes_in))
            packages[name] = namespace
    program, programs = get(packages, "solution"), {}  # the program's own dicts keep what its calls put in them
    for namespace_copy in list_(namespaces):
        for cls in namespace_copy[4]:
            if get(seen, id_(cls)) is None:
                seen[id_(cls)] = cls
                classes.append(copy_one(cls, True, tags, dict_, get, id_, class_dict, classes_in))
                if namespace_copy[0] is program:
                    programs[id_(cls)] = cls
    level = namespaces + classes
    for _ in (1, 2):  # two levels down: a library's registry or options, and the dicts they hold (pandas' options)
        found = []
        for holder_copy in level:
            if holder_copy[0] is program or get(programs, id_(holder_copy[0])) is not None:
                continue
            for value in holder_copy[5][1]:  # the plain dicts it held when copied
                if get(seen, id_(value)) is None:
                    seen[id_(value)] = value
                    found.append(copy_one(value, False, tags, dict_, get, id_, class_dict, no_classes))
        namespaces.extend(found)
        level = found
    copies = namespaces + classes
    memos = [memo for copy in copies for memo in copy[5][0]]
    watched = [memo for memo in memos if memo[1] is not None]
    memos = ([memo[0] for memo in watched], [memo[1] for memo in watched],
             [memo[0] for memo in memos if memo[1] is None])  # the functions, their memos' views, the unwatched
    (cache, harness_does), (gatherer, is_, len_, tuple_) = tags[0:4:3], tags[8]
    tagged = [copy[6] for copy in copies]  # the dicts whose tags are read
    last_tagged, gather = get(cache, "gather", ((), None))  # the same dicts as last time: read the same way
    if len_(last_tagged) != len_(tagged) or False in list_(map_(is_, last_tagged, tagged)):
        gather = harness_does(gatherer, tagged)  # a ctypes call: the harness's
        cache["gather"] = (tagged, gather)
    return namespaces, classes, packages, gather, tuple_(copy[2] for copy in copies), memos


def warm_copies(modules, versions):
    """The copies a snapshot makes (`_copies`: every loaded module's namespace, the classes it holds, the plain dicts
    they hold), made now, where no program has run: a test process forked after this and given them
    (`context(copies=...)`) copies again only the dicts whose version tag changed since. Copying a dict writes the
    reference count of every value it holds, and in a forked process each such write copies a page: with NumPy and
    pandas loaded, the first snapshot of a test process took about 90 ms copying, against about 30 ms given these.
    `versions`: `dict_versions.VERSIONS`; without them, nothing can tell an unchanged dict, and this returns None."""
    if versions is None:
        return None
    bound = context(modules, {}, (None,) * 6, versions)
    _copies(bound)
    return bound[25][0]


def held_dicts(holders, seen):
    """`(dict, copy)` for each plain dict the dicts `holders` hold, and each of those holds in turn (a library's
    registry, cache or options: `re`'s compiled patterns, pandas' options), once each, none whose id is in `seen`:
    what `_copies` puts back after each call, for the snapshot taken before the program's top-level code runs."""
    found, level = [], holders
    for _ in range(2):
        level = [value for holder in level for value in list(holder.values())
                 if type(value) is dict and id(value) not in seen and not seen.add(id(value))]
        found += level
    return [(held, dict(held)) for held in found]


def take_snapshot(bound, *, copies_of=_copies):
    """A function that puts back the namespaces, classes, registries (import finders and hooks, collector
    callbacks) and context variables as they are now. Modules the call loads stay loaded (and attributes of their
    packages, as importing them made them). Only the dicts whose version tag changed are put back, and only those
    that changed since the last snapshot are copied again."""
    (modules, test_namespace, registries, _, _, dict_, list_, items, _, clear, update, get, _, class_dict,
     set_attribute, delete_attribute, _, _, _, split_last, proxy_get, errors, importer_cache, _, map_, tags,
     _) = bound
    cache, watch, read, harness_does, _, (enter_context, leave_context), _, empty_memo = tags[:8]
    saved_modules, saved_test = dict_(modules), dict_(test_namespace)
    last = get(cache, "last")  # the last snapshot's copies: all of them still current when no tag changed
    modules_view = last[0] if last is not None else harness_does(watch, modules)
    modules_version = read(modules_view)
    if last is not None and modules_version == last[1] and last[5]() == last[6]:
        namespaces, classes, packages, gather, versions, memos = last[2:]
    else:
        namespaces, classes, packages, gather, versions, memos = copies_of(bound)
        cache["last"] = (modules_view, modules_version, namespaces, classes, packages, gather, versions, memos)
    memo_functions, memo_views, unwatched_memos = memos
    memo_versions = list_(map_(read, memo_views))
    saved_registries = [(registry, list_(registry)) for registry in registries]
    saved_importer_cache = dict_(importer_cache)
    entered_context = enter_context()  # after the copies: the program's own state set again (`context_state`)

    def restore():
        if read(modules_view) != modules_version:
            update(modules, saved_modules)
        clear(test_namespace)
        update(test_namespace, saved_test)
        unchanged = gather() == versions  # tuples of ints (`dict_versions`): no code of the program runs
        for namespace, view, tag, snapshot, _, _, _ in () if unchanged else namespaces:
            if read(view) != tag:
                clear(namespace)
                update(namespace, snapshot)
        for name in list_(modules):
            if get(saved_modules, name) is None:
                parent, dot, child = split_last(name, ".")
                namespace = get(packages, parent) if dot else None
                if namespace is not None and get(namespace, child) is None:
                    namespace[child] = modules[name]
        for cls, view, tag, snapshot, _, _, _ in () if unchanged else classes:
            if read(view) == tag:
                continue
            current = class_dict(cls)
            for name in list_(current):
                if get(snapshot, name, restore) is restore:
                    try:
                        delete_attribute(cls, name)
                    except errors:
                        pass
            for name, value in items(snapshot):
                if proxy_get(current, name, restore) is not value:
                    try:
                        set_attribute(cls, name, value)
                    except errors:
                        pass
        for registry, entries in saved_registries:
            registry[:] = entries
        clear(importer_cache)
        update(importer_cache, saved_importer_cache)
        if list_(map_(read, memo_views)) != memo_versions:  # a result memoized meanwhile may have read its changes
            index = 0
            for view in memo_views:
                if read(view) != memo_versions[index]:
                    empty_memo(memo_functions[index])
                index += 1
        for function in unwatched_memos:
            empty_memo(function)
        leave_context(entered_context)

    return restore


def _guarded_run(function, snapshot, bound, caught):
    """One call of the program's `function` under a snapshot, as a generator: sent `(args, kwargs)`, it returns
    `(result, None)` or `(None, exception)`. What it holds (the function, the snapshot's context with the test's
    namespace) stays in its frame, which the audit hook keeps from the program."""
    args, kwargs = yield
    enter, leave, pause_watch, resume_watch, hand = bound[-1]
    args, kwargs = hand(args, kwargs)  # the test's functions among them may run inside the call, `hidden`
    watching = pause_watch()  # the call is guarded as a whole
    enter()  # the program's classes answer with their own methods while it runs
    restore = snapshot(bound)
    try:
        return function(*args, **kwargs), None
    except caught as error:  # handed back as a value: a StopIteration of the program's stays one
        return None, error
    finally:
        restore()
        leave()
        resume_watch(watching)
        bound[3]()  # gc.disable: no collection runs a finalizer of the program inside the test's code


def _restoring_run(function, snapshot, bound, caught):
    """One call of a library's `function` on an object the program's code made (a patcher it returned, which the
    test enters), as `_guarded_run` without lifting the answer traps: what the call changes in modules, classes
    and the test's names is put back when it returns, as the program's own code's changes are; the program's
    values stay trapped (its comparisons are the library's)."""
    args, kwargs = yield
    restore = snapshot(bound)
    try:
        return function(*args, **kwargs), None
    except caught as error:
        return None, error
    finally:
        restore()


def _runs(function, snapshot, bound, run, caught):
    """The `_guarded_run`s of `function`, a fresh one each time (a call may lead to another one)."""
    while True:
        yield run(function, snapshot, bound, caught)


def _guarded_call(state, *args, **kwargs):
    next_run, done = state
    call = next_run(None)
    call.send(None)
    try:
        call.send((args, kwargs))
    except done as stop:
        result, error = stop.value
    if error is not None:
        raise error  # outside the handler: the program's exception is not chained to the StopIteration
    return result


def _hidden_run(function, snapshot, bound, caught):
    """One call of the test's `function` for the program (as `_guarded_run`, with nothing to guard)."""
    args, kwargs = yield
    try:
        return function(*args, **kwargs), None
    except caught as error:
        return None, error


def _hiding(state, call):
    """A function of the harness's that calls `call(state, *args, **kwargs)`: what it closes over is only those."""

    def hidden(*args, **kwargs):
        return call(state, *args, **kwargs)

    return hidden


def _hidden_function(state, function):
    """The wrapper of `function`: the same one each time for the same function, or the same method of the same
    object (`self.report` read twice is one callback, which a registry the program fills may be asked for)."""
    runs_of, run, hiding, call, stop, caught, made, type_, method_type, method_parts, id_, get = state
    key = (id_(method_parts[0](function)), id_(method_parts[1](function))) if type_(function) is method_type \
        else id_(function)
    known = get(made, key)
    if known is not None:
        return known[0]
    runs = runs_of(function, None, None, run, caught)
    runs.send(None)
    wrapper = hiding((runs.send, stop), call)
    wrapper.__name__, wrapper.__qualname__ = function.__name__, function.__qualname__
    made[key] = (wrapper, function)  # the function kept: no id of its parts is reused meanwhile
    return wrapper


def hider():
    """`hidden(function)`, made before the program runs: the test's `function` (a callback, a mock's side effect, a
    bound method of the test case) as the program is handed it. It runs as itself, under its own name, but what
    it holds (`__closure__`, `__self__`: the test's values, the case with what `setUp` stored) cannot be read
    from it: it closes over only the `send` of a generator, whose frame holds the function."""
    method_parts = (types.MethodType.__dict__["__func__"].__get__, types.MethodType.__dict__["__self__"].__get__)
    return types.MethodType(_hidden_function, (_runs, _hidden_run, _hiding, _guarded_call, StopIteration,
                                               BaseException, {}, type, types.MethodType, method_parts, id, dict.get))


def guarded(function, bound):
    """`function` (the program's) as the test calls it: every call under a snapshot put back when it ends. Its
    state is a tuple holding only the `send` of a generator, so the test's namespace is not reachable from it."""
    runs = _runs(function, take_snapshot, bound, _guarded_run, BaseException)
    runs.send(None)
    return types.MethodType(_guarded_call, (runs.send, StopIteration))


def restoring(bound, function, *, runs_of=_runs, snapshot=take_snapshot, run=_restoring_run, call=_guarded_call,
              caught=BaseException, stop=StopIteration, method_type=types.MethodType):
    """`function` (a library's, bound to an object the program's code made) as the test calls it: every call under
    a snapshot put back when it ends (`_restoring_run`); state held as `guarded`'s. `bound` first, so that the
    harness binds it with `types.MethodType` (a `partial` made then would be framed as the program's,
    `answer_traps._frame_partial`). It is made when the test first calls such a method, which may be inside a
    call into the program: what it calls is bound when defined."""
    runs = runs_of(function, snapshot, bound, run, caught)
    runs.send(None)
    return method_type(call, (runs.send, stop))


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (take_snapshot, _memos_in, _empty_changed, _copy, _copies, _classes_of, _guarded_call,
                       _guarded_run, _restoring_run, _runs, _hidden_run, _hiding, _hidden_function)
