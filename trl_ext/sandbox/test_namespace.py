"""What a test keeps, out of reach of the program it runs beside (inside the sandbox; standard library only).

A test that runs in the program's process is made of objects the program can find: every class is reachable
through `type.__subclasses__()`, so a program could read a test method's `__globals__` (the test module's names:
an `EXPECTED = 7` there), call the test's methods itself (with a spy for `self` that records what the test
asserts, or a helper that builds the expected value), and rewrite the mocks the test set up
(`mock.assert_called_once_with = lambda *a, **k: None`). `namespace_keeper` gives what keeps each out of reach:

- the test module's namespace (`KeptNamespace`): what the test binds to values of its own (data, its functions
  and classes) is kept apart and handed to the test's own code only (its global names resolve through
  `__getitem__`, which CPython uses for a dict subclass, and through the namespace's builtins in a class body);
  the program asking (`__globals__['EXPECTED']`) is refused. Modules and libraries' objects stay in the dict;
- `enter`, which every method of a test class calls first (`instrumentation`): inside a call into the program,
  only a method the test handed over runs (an argument of the call, a mock's side effect, a method of a test
  case the test's own code runs, such as `side_effect=self.fake_get`); any other fails the test;
- `hand` and `restore_mocks`: what the test hands to a call (its arguments, the mocks it holds), and the mocks'
  own methods put back after the program's code ran.

Whether code is the program's is told as `answer_traps` tells it: the first frame below that is neither a
library's (loaded from a file under `roots`) nor the harness's decides ("<test>": the test's own code).
All state lives in a generator's frame; what the program can reach of it is a `send` that refuses it.
"""

import types

TEST_FILE = "<test>"
_MOCK_CONFIGURATION = ("_mock_wraps", "_mock_return_value", "_mock_side_effect")


class KeptNamespace(dict):
    """The test module's namespace (its methods are set per test process by `namespace_keeper`)."""

    __slots__ = ()


def _is_data(name, value, kinds=(types.FunctionType, classmethod, staticmethod, property), *, is_instance=isinstance):
    return not (name.startswith("__") and name.endswith("__")) and not is_instance(value, kinds)


class KeptClass(type):
    """The metaclass of a test class (`instrumentation`): its data attributes, set in its body or on the class (as
    `setUpClass` does), are kept like the module's names, out of the class's dict; its instances and the test's
    code read them as usual. Its methods are given their state per test process (`namespace_keeper`): `(send,
    refused, object.__setattr__, _instance_attribute, _instance_set)`. They may run while a call into the program
    does (a test's callback sets a class attribute), so what they call is bound when defined or in that state."""

    def __new__(mcls, name, bases, namespace, _state=None, *, type_=type, id_=id, is_data=_is_data):
        kept = {key: value for key, value in namespace.items() if _state is not None and is_data(key, value)}
        cls = type_.__new__(mcls, name, bases, {key: value for key, value in namespace.items() if key not in kept})
        for key, value in kept.items():
            _state[0](("class_set", (id_(cls), key), value))
        if _state is not None and "__getattr__" not in namespace:
            type_.__setattr__(cls, "__getattr__", _state[3])
        if _state is not None and type_.__getattribute__(cls, "__setattr__") is _state[2]:
            type_.__setattr__(cls, "__setattr__", _state[4])  # not where a base class sets its own way
        return cls

    def __setattr__(cls, name, value, _state=None, *, type_=type, id_=id, is_data=_is_data,
                    attribute_error=AttributeError):
        if _state is not None and is_data(name, value):
            if _state[0](("class_set", (id_(cls), name), value)) is _state[1]:
                raise attribute_error(f"{name} of the test's class is not the program's to set")
            return
        type_.__setattr__(cls, name, value)

    def __getattr__(cls, name, _state=None, *, id_=id, attribute_error=AttributeError):
        for owner in cls.__mro__ if _state is not None else ():
            value = _state[0](("class_get", (id_(owner), name), None))
            if value is not _state[1]:
                return value
        raise attribute_error(name)


def _instance_attribute(self, name, _state=None, *, kept_class=KeptClass, type_=type):
    """`__getattr__` of a test class: its kept class attributes, to the test's own code."""
    return kept_class.__getattr__(type_(self), name)


def _instance_set(self, name, value, _state=None, *, set_attribute=object.__setattr__):
    """`__setattr__` of a test class: sets the attribute and tells the keeper, which notes what the test's own code
    sets while the program's code runs (a callback of the test's that records `self.sent = data`): that outlasts
    the case's restore when the program's code returns (`_journal`)."""
    if _state is None:
        return set_attribute(self, name, value)
    _state[2](self, name, value)
    _state[0](("case_write", self, (name, value)))
    return None


class KeptBuiltins(dict):
    """The test's builtins: a class body's names that are neither its own nor the module dict's end here."""

    __slots__ = ()


def nearest_code_is_program(frame, roots, starts=str.startswith, test_file=TEST_FILE):
    """Whether the first frame from `frame` down that is not a library's is the program's (not the test's)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == test_file:
            return False
        if not (starts(filename, roots) or starts(filename, "<frozen ")):
            return True
        frame = frame.f_back
    return False


def _shown(value, module_type=types.ModuleType, function_type=types.FunctionType, type_=type, is_instance=isinstance,
           get_attribute=getattr, is_callable=callable, test_file=TEST_FILE):
    """Whether a value the test binds at module level may stay in the namespace's dict: a module, or an object
    that is not the test's own (a library's function or class, the program's). Data and the test's functions
    and classes are kept apart."""
    if is_instance(value, module_type):
        return True
    if type_(value) is function_type:
        return value.__code__.co_filename != test_file
    if is_instance(value, type_):
        return get_attribute(value, "__module__", None) != "__test__"
    return is_callable(value) and get_attribute(value, "__module__", None) not in (None, "__test__")


def _keeper(shown_dict, program_calling, bound, operate, journal_of, *, exception=Exception, set_=set):
    """Sent `(operation, argument, value)`; answers `refused` to the program. Operations: "get", "set",
    "delete", "has" on the test's own names; "hand" (a code object the test handed over), "handed" (whether a
    code object was), "mock" (a mock the test holds), "mocks" (those seen), "case" and "is_case" (an instance
    the test's own code ran a method of: its bound methods, handed over in a mock the test set up, may run inside
    the program's call), "class_set" and "class_get" (a test class's data attributes), "class_data" (all of a
    test class's, by the class's id), "case_write" (an attribute the test's own code set on a case), "case_save"
    and "case_restore" (`_journal`). `operate`: `_operate`, and `journal_of`: `_journal`, passed when the keeper is
    made: this runs while the program's call does, which may rebind this module's names (they are reachable through
    any of its functions' `__globals__`), so nothing here looks a name up then."""
    refused = bound[2]
    kept, handed, mocks, mock_ids, cases, journal = {}, set_(), [], set_(), {}, ([], [])
    message = yield
    while True:
        try:
            answer = operate(message, program_calling, bound, kept, handed, mocks, mock_ids, cases, shown_dict,
                             journal, journal_of=journal_of)
        except exception:  # noqa: BLE001 - what a value did when it was asked: the operation is refused
            answer = refused
        message = yield answer


def _operate(message, program_calling, bound, kept, handed, mocks, mock_ids, cases, shown_dict, journal, *,
             journal_of, id_=id):
    (set_item, pop_item, refused, type_, tuple_, len_, shown, append) = bound[:8]
    answer = None
    operation, argument, value = message if type_(message) is tuple_ and len_(message) == 3 else (None,) * 3
    if operation == "case_save" or operation == "case_restore":  # the harness's, also mid-call
        answer = journal_of(operation, argument, bound, cases, journal)
    elif operation is not None and operation != "mocks" and program_calling():
        answer = refused  # the list of the test's mocks is handed to whoever restores them, even mid-call
    elif operation == "get":
        answer = kept.get(argument, refused)
    elif operation == "has":
        answer = argument in kept
    elif operation == "set":
        kept.pop(argument, None)
        if shown(value):
            set_item(shown_dict, argument, value)
        else:
            pop_item(shown_dict, argument, None)
            kept[argument] = value
    elif operation == "delete":
        answer = kept.pop(argument, refused)
    elif operation == "hand":
        handed.add(argument)
    elif operation == "handed":
        answer = argument in handed
    elif operation == "case":
        cases[id_(argument)] = argument
    elif operation == "is_case":
        answer = cases.get(id_(argument), refused) is argument
    elif operation == "case_write" and journal[0]:  # the test's own code sets it while the program's code runs
        append(journal[1], (argument, value))
    elif operation == "mock" and id_(argument) not in mock_ids:
        mock_ids.add(id_(argument))
        append(mocks, argument)
    elif operation == "mocks":
        answer = tuple_(mocks)
    elif operation == "class_set":
        kept[argument] = value
    elif operation == "class_get":
        answer = kept.get(argument, refused)
    elif operation == "class_data":
        answer = {key[1]: item for key, item in kept.items() if type_(key) is tuple_ and key[0] == argument}
    return answer


def _journal(operation, argument, bound, cases, journal, *, next_=next, enumerate_=enumerate, any_=any, list_=list):
    """"case_save": a copy of each case's attributes (and of which dict and class it has), under a token it
    answers; "case_restore" (that token): each case put back as the copy holds, then what the test's own code set
    on it since (`_instance_set`) set again. The harness saves when a call into the program starts and restores
    when it returns, so what the program's code set on a case it reached (`Holder(self)`, a pytest case's
    `vars(self)`) does not outlast it. The program may reach the keeper, but not the harness's token: its own
    saves are dropped by the harness's restore. Nothing of the program's runs here: a key that is not exactly a
    `str` makes the dict be rebuilt whole, without comparing."""
    saves, writes = journal
    type_, get_state, set_state, dict_, str_, new_token, len_ = bound[3], *bound[8:]
    if operation == "case_save":
        copies = []
        for case in cases.values():
            state = get_state(case, "__dict__")
            copies.append((case, type_(case), state, dict_(state)))
        token = new_token()
        saves.append((token, copies, len_(writes)))
        return token
    position = next_((index for index, save in enumerate_(saves) if save[0] is argument), None)
    if position is None:
        return None
    _, copies, start = saves[position]
    for case, cls, state, copy in copies:
        if type_(case) is not cls:
            set_state(case, "__class__", cls)
        if get_state(case, "__dict__") is not state:
            set_state(case, "__dict__", state)
        if len_(state) != len_(copy) or any_(type_(key) is not str_ or copy.get(key, copies) is not item
                                             for key, item in list_(state.items())):
            state.clear()
            state.update(copy)
    for case, (name, item) in writes[start:]:
        set_state(case, name, item)
    del saves[position:]
    if not saves:
        writes.clear()
    return None


def _get(state, name, *, key_error=KeyError):
    if state[5](state[3], name):  # the dict's own entry (a module, a library's object, a `global` assigned)
        return state[2](state[3], name)
    value = state[0](("get", name, None))
    if value is state[1]:
        raise key_error(name)
    return value


def _get_or(state, name, default=None, *, get=_get, key_error=KeyError):
    try:
        return get(state, name)
    except key_error:
        return default


def _set(state, name, value):
    state[0](("set", name, value))


def _delete(state, name):
    if state[0](("delete", name, None)) is state[1]:
        state[4](state[3], name)


def _has(state, name):
    return state[0](("has", name, None)) is True or state[5](state[3], name)


def _builtin(state, name, *, get=_get, key_error=KeyError):
    try:
        return state[6](state[7], name)
    except key_error:
        return get(state, name)


def _hide(state, value, test_file=TEST_FILE):
    """`value`, or, where it is the test's function (compiled from the test, or a bound method of one), that
    function `hidden` (`call_guard.hider`): what it closes over and the case it is bound to stay the test's. Its
    code is read for the harness (`harness_does`): the audit hook refuses it to the program, and this may run
    inside the program's call (a callback of the test's that reads `self.fake`)."""
    hidden, function_type, method_type, type_, method_func, code_of, harness_does = state
    function = method_func(value) if type_(value) is method_type else value
    if type_(function) is function_type and harness_does(code_of, function).co_filename == test_file:
        return hidden(value)
    return value


def test_function_hider(hidden, harness_does=None):
    """`hide(value)` (`_hide`), made before the program runs; `hidden`: `call_guard.hider()`; `harness_does`: the
    audit hook's (`audit_hook.install`), or None where none is installed."""
    return types.MethodType(_hide, (hidden, types.FunctionType, types.MethodType, type,
                                    types.MethodType.__dict__["__func__"].__get__,
                                    types.FunctionType.__dict__["__code__"].__get__,
                                    harness_does or (lambda function, *args: function(*args))))


# What unittest keeps on a case for its own running (the result it reports to, its cleanups): not the test's data.
_RUNNER_ATTRIBUTES = frozenset(("_testMethodName", "_testMethodDoc", "_outcome", "_cleanups", "_subtest",
                                "_type_equality_funcs"))


# The built-in containers `_own_copy` copies, and the keys and members it copies them with: hashing or comparing
# these runs no code of the program's or the test's.
_CONTAINERS = (list, dict, set, bytearray, tuple)
_PLAIN_KEYS = (str, int, float, bool, bytes, type(None))


def _own_copy(kinds, value, depth=4):
    """`value`, or, where it is a built-in list, dict, set or bytearray (or a tuple holding one), a copy of it made
    `depth` levels down: what the program changes in place in the test's data it is handed (`case.expected.clear()`)
    is then its own, as what it sets on the case is. A dict or set whose keys are other than plain values (a string,
    a number, bytes, None) is handed as it is: copying it would hash them, which may run code. Types are told apart
    by identity (`in` would run a metaclass's `__eq__`), and no builtin is looked up here: this may run inside a
    call into the program, which may have replaced them, and rebound this module's names. `kinds`: `(type,
    _CONTAINERS, _PLAIN_KEYS, _one_of, [this function bound])`, bound before the program runs."""
    type_, (list_, dict_, set_, bytearray_, tuple_), plain, one_of, itself = kinds
    own_copy, kind = itself[0], type_(value)
    if not depth or not one_of(kind, (list_, dict_, set_, bytearray_, tuple_)):
        return value
    if kind is list_:
        return [own_copy(item, depth - 1) for item in value]
    if kind is tuple_:
        return tuple_(own_copy(item, depth - 1) for item in value)
    if kind is bytearray_:
        return bytearray_(value)
    for key in value:
        if not one_of(type_(key), plain):
            return value
    if kind is set_:
        return set_(value)
    return {key: own_copy(item, depth - 1) for key, item in value.items()}


def _one_of(kind, kinds):
    """Whether `kind` is one of `kinds`, by identity."""
    for candidate in kinds:
        if kind is candidate:
            return True
    return False


def _case_view(state, case):
    """What the program is handed for the test's `case` (`task_func(self)`): a namespace holding the data the test
    stored on it (`setUp`'s values, the test's functions among them hidden, its built-in containers copied:
    `_own_copy`) and each of its methods hidden (`call_guard.hider`: they run as themselves, their checks the
    harness's), never the case itself. So the program reads what the test handed it, but cannot set or change in
    place what the case holds for its later checks, nor reach the test's class. Read through the types' own
    descriptors: nothing of the program's or the test's runs here."""
    (hidden, hide, method_type, function_type, type_, mro_of, class_dict, get_attribute, method_self, namespace,
     runner_attributes, class_data, id_, dict_, own_copy) = state
    attributes = {}
    for owner in mro_of(type_(case))[::-1]:
        for name, value in class_dict(owner).items():
            if type_(value) is function_type and not name.startswith("__"):
                attributes[name] = hidden(method_type(value, case))
        kept = class_data(id_(owner))  # the data the test's class keeps out of its dict (`KeptClass`)
        for name, value in kept.items() if type_(kept) is dict_ else ():
            attributes[name] = hide(own_copy(value))
    for name, value in get_attribute(case, "__dict__").items():
        if name not in runner_attributes:
            bound_here = type_(value) is method_type and method_self(value) is case
            attributes[name] = hidden(value) if bound_here else hide(own_copy(value))
    return namespace(**attributes)


def _handed_over(state, value, depth=3):
    """`value` as a call into the program is handed it: the test's case replaced by its view (`_case_view`), also
    inside the built-in lists, tuples and dicts and the `SimpleNamespace`s it is passed in (a copy made only where
    one holds a case or the test's function), the case's own dict (`vars(self)`) by a copy of the test's data in
    it (its built-in containers copied too: `_own_copy`), and the test's functions hidden (`_hide`)."""
    (view, hide, type_, kept_class, list_, tuple_, dict_, namespace_type, get_attribute, runner_attributes,
     own_copy, itself) = state
    handed_over = itself[0]
    if type_(type_(value)) is kept_class:
        return view(value)
    if depth and (type_(value) is list_ or type_(value) is tuple_):
        items, changed = [], False
        for item in value:
            items.append(handed_over(item, depth - 1))
            changed = changed or items[-1] is not item
        return type_(value)(items) if changed else value
    if depth and (type_(value) is dict_ or type_(value) is namespace_type):
        entries = value if type_(value) is dict_ else get_attribute(value, "__dict__")
        case_dict = type_(value) is dict_ and "_testMethodName" in entries  # unittest's: `vars(self)`
        items, changed = {}, case_dict
        for key, item in entries.items():
            if not (case_dict and key in runner_attributes):
                items[key] = handed_over(own_copy(item) if case_dict else item, depth - 1)
                changed = changed or items[key] is not item
        if not changed:
            return value
        return items if type_(value) is dict_ else namespace_type(**items)
    return hide(value)


def call_argument_hider(hidden, hide, class_data):
    """`hand_over(value)` (`_handed_over`), made before the program runs, for each argument of a call into the
    program; `hidden`: `call_guard.hider()`, `hide`: `test_function_hider`, `class_data`: `namespace_keeper`'s."""
    method_type = types.MethodType
    copier, hander = [], []  # each function's recursion goes through its own bound method, never a module name
    own_copy = types.MethodType(_own_copy, (type, _CONTAINERS, _PLAIN_KEYS, _one_of, copier))
    copier.append(own_copy)
    view = types.MethodType(_case_view, (
        hidden, hide, method_type, types.FunctionType, type, type.__dict__["__mro__"].__get__,
        type.__dict__["__dict__"].__get__, object.__getattribute__, method_type.__dict__["__self__"].__get__,
        types.SimpleNamespace, _RUNNER_ATTRIBUTES, class_data, id, dict, own_copy))
    hander.append(types.MethodType(_handed_over, (view, hide, type, KeptClass, list, tuple, dict,
                                                  types.SimpleNamespace, object.__getattribute__, _RUNNER_ATTRIBUTES,
                                                  own_copy, hander)))
    return hander[0]


def _walk(item, push, method_type, function_type, mock_type, type_, is_subclass, get_state, get, hide, *,
          configuration, kinds=(list, tuple, set, frozenset), dict_=dict):
    """One step of `hand`'s walk: a function's code is handed; a mock's configuration and children are walked, and
    the test's functions in its configuration (a side effect) are replaced by themselves `hide`n. Nothing of the
    program's runs here (the walk runs for the harness, unaudited): a value's type is read with `type()`, never
    `isinstance`, which reads a `__class__` the program may have made a property."""
    if type_(item) is method_type:
        item = item.__func__
    if type_(item) is function_type:
        return "hand", item.__code__
    if mock_type is not None and is_subclass(type_(item), mock_type):
        state = get_state(item, "__dict__")
        for name in configuration:
            configured = get(state, name)
            push(configured)
            if hide is not None and configured is not None:
                state[name] = hide(configured)
        for child in (get(state, "_mock_children") or {}).values():
            push(child)
        return "mock", item
    kind = type_(item)
    if kind is kinds[0] or kind is kinds[1] or kind is kinds[2] or kind is kinds[3]:  # by identity: no `__eq__` runs
        for element in item:
            push(element)
    elif kind is dict_:
        for element in item.values():
            push(element)
    return None, None


def namespace_keeper(roots, program_calling, mock_module, method_frame, hide=None):
    """`(namespace, hand, restore_mocks, enter, class_data, (save_cases, restore_cases))` for one test process, made
    before the program runs.

    `namespace(initial)`: the test module's namespace, holding `initial` (modules, the program's names) in its
    dict. `hand(values)`: what the test holds when it calls into the program (the call's arguments, its locals):
    functions are handed over, mocks watched. `restore_mocks()`: each watched mock's own methods put back (an
    assignment on the mock or on the class it alone has is removed). `enter()`: the check a test method runs
    first (it finds the method's frame with `method_frame()`); it raises `AssertionError` through `fail`.
    `class_data(class_id)`: the data attributes a test class keeps, by name (to the harness only).
    `save_cases()` when a call into the program starts, and `restore_cases(token)`, given what it answered, when
    that call returns: the cases the test runs are put back, but for what the test's own code set (`_journal`).
    `hide`: `test_function_hider`, for the test's functions a mock holds.
    """
    refused, made = object(), KeptNamespace()
    function_type, method_type = types.FunctionType, types.MethodType
    bound = (dict.__setitem__, dict.pop, refused, type, tuple, len, _shown, list.append,
             object.__getattribute__, object.__setattr__, dict, str, object, len)
    keeper = _keeper(made, program_calling, bound, _operate, _journal)
    keeper.send(None)
    send = keeper.send
    mock_type = getattr(mock_module, "NonCallableMock", None)
    method_names = _mock_method_names(mock_module)

    def namespace(initial):
        builtins_ = KeptBuiltins(initial.get("__builtins__", {}))
        dict.update(made, initial)
        dict.__setitem__(made, "__builtins__", builtins_)
        state = (send, refused, dict.__getitem__, made, dict.__delitem__, dict.__contains__, dict.__getitem__,
                 builtins_)
        for name, function in (("__getitem__", _get), ("__setitem__", _set), ("__delitem__", _delete),
                               ("__contains__", _has), ("get", _get_or)):
            setattr(KeptNamespace, name, method_type(function, state))
        KeptBuiltins.__getitem__ = method_type(_builtin, state)
        for function in (KeptClass.__new__, KeptClass.__setattr__, KeptClass.__getattr__, _instance_attribute,
                         _instance_set):
            function.__defaults__ = ((send, refused, object.__setattr__, _instance_attribute, _instance_set),)
        return made

    # What `hand` and `enter` call, bound now: they run while the program's call does, which may rebind this
    # module's names (reachable through any of its functions' `__globals__`) and the builtins.
    walk, list_, set_, len_, id_, type_ = _walk, list, set, len, id, type
    is_subclass, is_instance, get_state, get = issubclass, isinstance, object.__getattribute__, dict.get
    is_program, configuration = nearest_code_is_program, _MOCK_CONFIGURATION

    def hand(values):
        stack, seen = list_(values), set_()
        while stack and len_(seen) < 2000:
            item = stack.pop()
            if id_(item) in seen:
                continue
            seen.add(id_(item))
            operation, argument = walk(item, stack.append, method_type, function_type, mock_type, type_, is_subclass,
                                       get_state, get, hide, configuration=configuration)
            if operation is not None:
                send((operation, argument, None))

    tuple_, delete_attribute, cannot_delete = tuple, type.__delattr__, (AttributeError, TypeError)

    def restore_mocks():
        mocks = send(("mocks", None, None))
        for mock in mocks if type_(mocks) is tuple_ else ():
            state = get_state(mock, "__dict__")
            for name in method_names & state.keys():
                del state[name]
            cls = type_(mock)  # a mock's own class: a subclass of its kind, of the same name (`NonCallableMock.__new__`)
            if cls.__bases__ and cls.__bases__[0].__name__ == cls.__name__:
                for name in method_names & cls.__dict__.keys():
                    try:
                        delete_attribute(cls, name)
                    except cannot_delete:
                        pass

    def enter(fail):
        frame = method_frame()
        code = frame.f_code
        receiver = frame.f_locals.get(code.co_varnames[0]) if code.co_argcount else None
        receiver = None if is_instance(receiver, type_) else receiver  # a class method's class is not a test case
        if not is_program(frame.f_back, roots):
            if receiver is not None:
                send(("case", receiver, None))  # an instance the test's own code runs its methods on
        elif send(("handed", code, None)) is not True and (
                receiver is None or send(("is_case", receiver, None)) is not True):
            fail("the program called a method of the test")

    def class_data(class_id):
        return send(("class_data", class_id, None))

    def save_cases():
        return send(("case_save", None, None))

    def restore_cases(token):
        send(("case_restore", token, None))

    return namespace, hand, restore_mocks, enter, class_data, (save_cases, restore_cases)


def _mock_method_names(mock_module):
    """The names of the methods the mock classes define (`assert_called_once_with`, `reset_mock`, ...)."""
    names = set()
    for class_name in ("NonCallableMock", "CallableMixin", "NonCallableMagicMock", "MagicMixin", "Mock",
                       "MagicMock", "AsyncMockMixin", "AsyncMock"):
        cls = getattr(mock_module, class_name, None)
        for name, value in vars(cls).items() if cls is not None else ():
            kind_of_method = isinstance(value, (types.FunctionType, classmethod, staticmethod, property))
            if kind_of_method and not name.startswith("__"):
                names.add(name)
    return frozenset(names)


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (KeptClass.__new__, KeptClass.__setattr__, KeptClass.__getattr__, _instance_attribute,
                       _instance_set, _journal, _is_data,
                       nearest_code_is_program, _shown, _keeper, _operate, _get, _get_or, _set, _delete, _has, _builtin,
                       _walk, _hide, _case_view, _handed_over)
