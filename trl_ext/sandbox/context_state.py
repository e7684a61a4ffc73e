"""Context variables as the program's code and the test's code each left them (inside the sandbox; standard
library only).

Libraries keep state that a test's own computations read in context variables (`contextvars`), not in a module's
namespace, which the call guard puts back: NumPy its print options and floating-point error state, `decimal` its
current context, whose precision, rounding, exponent limits and traps also change in place. A wrong program that
set `np.set_printoptions(precision=0)` or `decimal.getcontext().prec = 1` made the test's own `str(expected)` or
`Decimal(1) / Decimal(3)` as coarse as its wrong answer, and passed.

So each side keeps its own. Whenever the program's code returns (`call_guard.take_snapshot`), what it set in
context variables, and the settings of a `decimal` context it changed in place, are taken as the program's and
put back as they were when that code started; so are the settings of `decimal`'s templates (`DefaultContext`,
from which `decimal.Context()` takes what it is not given). Whenever the program's code starts again, the
program's are set again, so that options it set at import hold in its calls, as under the dataset's own harness;
but not over a value the test's code set since. The contents of a plain dict a variable holds are put back too,
as a module's plain dicts are. The same holds for the plain dicts of libraries that the program's top-level code
changed (pandas' options set at import), which the modules' snapshot puts back for the test: their contents are
the program's again whenever its code runs.

Nothing of the program's runs here: variables and values are compared by identity, a `decimal` context's settings
are read and written by `decimal.Context`'s own (C) methods on contexts of exactly that class, and every built-in
is bound before the program runs, in a tuple (`MethodType`: neither can be changed).
"""

import contextvars
import types

_SETTINGS = ("prec", "rounding", "Emin", "Emax", "capitals", "clamp", "traps")


def _settings(state, value):
    """`(arguments, settings)` where `value` is a `decimal` context of exactly that class: what rebuilds it
    (`decimal.Context.__reduce__`, read in C) and its settings alone (its flags left out: arithmetic sets them);
    else None."""
    type_, context_type, reduce, tuple_ = state[:4]
    if context_type is None or type_(value) is not context_type:
        return None
    arguments = reduce(value)[1]
    return arguments, (arguments[:6], tuple_(arguments[7]))


def _apply(state, value, settings):
    """Set the settings of `value`, a `decimal` context of exactly that class, in place to `settings`
    (`_settings`' arguments), through a context built from them."""
    type_, context_type, _, _, get, put, names = state
    if type_(value) is context_type:
        source = context_type(*settings[:6], [], settings[7])
        for name in names:
            put(value, name, get(source, name))


def _enter(state):
    """Where the program's code starts: what the context holds now (the test's code's), then the program's values
    and `decimal` settings set again where the test's code left each as it was when the program's code set it."""
    settings_of, apply, type_, dict_, copy_context, context_items, dict_items, list_, _, programs, missing = state[:11]
    saved = copy_context()
    held = [(None, template, None, settings_of(template)) for template in state[12]]
    for template, (test_settings, program_settings) in list_(dict_items(state[13])):
        if settings_of(template)[1] == test_settings:  # else the test's code set its own since
            apply(template, program_settings[0])
    for variable, value in list_(context_items(saved)):
        contents = list_(dict_items(value)) if type_(value) is dict_ else None  # its items: no key hashed
        held.append((variable, value, contents, None if contents is not None else settings_of(value)))
    for variable, (test_value, test_settings, program_value, program_settings) in list_(dict_items(programs)):
        now = variable.get(missing)
        now_settings = settings_of(now)
        changed_in_place = test_settings is not None and (now_settings is None or now_settings[1] != test_settings)
        if now is not test_value or changed_in_place:
            continue  # the test's code set its own since
        if program_value is not now:
            variable.set(program_value)
        if program_settings is not None:
            apply(program_value, program_settings[0])
    applied = []
    for library_dict, program_contents, test_contents in list_(state[14]):
        if state[15](library_dict, test_contents):  # else the test's code changed it since
            library_dict.clear()
            library_dict.update(program_contents)
            applied.append((library_dict, test_contents))
    return saved, held, applied


def _same_contents(state, first, second):
    """Whether `first` and `second` (plain dicts, or lists of a dict's items) hold the same entries in the same
    order, compared by identity: no key is hashed or compared, so no code of the program's runs (a key of its class
    whose hash collides with a library's would have its `__eq__` run by a lookup)."""
    dict_items, list_, len_, zip_, type_ = state
    first = first if type_(first) is list_ else list_(dict_items(first))
    second = second if type_(second) is list_ else list_(dict_items(second))
    if len_(first) != len_(second):
        return False
    for (key, item), (other_key, other_item) in zip_(first, second):
        if key is not other_key or item is not other_item:
            return False
    return True


def _text_keys(state, items):
    """Whether every key among `items` (a dict's) is exactly a `str`: setting them again hashes none of the
    program's."""
    type_, str_ = state
    for key, _ in items:
        if type_(key) is not str_:
            return False
    return True


def _leave(state, entered, program_dicts=None):
    """Where the program's code returns: what it changed is kept as the program's (`_enter`), and put back as it
    was when that code started. A variable the program's code set first goes back to its default; one with no
    default keeps the program's value (no library keeps state the test reads in one: the harness sets `decimal`'s
    before any program runs). `program_dicts`, after the program's top-level code: `(dict, the program's items, the
    test's contents)` for each library dict it changed, which the modules' snapshot put back; the program's items
    are set again whenever its code starts (`_enter`) while the test's code leaves the dict as it was, where every
    key is a `str` (pandas' options; not a cache keyed by the program's objects)."""
    settings_of, apply, type_, _, copy_context, context_items, dict_items, list_, len_, programs, missing, default_of \
        = state[:12]
    saved, held, applied = entered
    for library_dict, test_contents in applied:  # where the call guard did not put it back itself
        if not state[15](library_dict, test_contents):
            library_dict.clear()
            library_dict.update(test_contents)
    if program_dicts is not None:  # those whose contents it changed (a dict may change and change back), by text
        state[14][:] = [entry for entry in program_dicts if state[16](entry[1]) and not state[15](entry[1], entry[2])]
    for variable, value, contents, settings in held:
        if contents is not None:  # a plain dict a variable holds
            if not state[15](value, contents):
                value.clear()
                value.update(contents)
        elif settings is not None:
            now = settings_of(value)
            if now[1] != settings[1]:  # changed in place
                if variable is None:  # a template
                    state[13][value] = (settings[1], now)
                elif variable.get(missing) is value:
                    programs[variable] = (value, settings[1], value, now)
                apply(value, settings[0])
    current = copy_context()
    for variable, value in list_(context_items(current)):
        before = saved.get(variable, missing)
        if value is before:
            continue
        if before is missing:
            before = saved.run(default_of, variable)
        if before is not missing:
            variable.set(before)
        before_settings = settings_of(before)
        programs[variable] = (before, None if before_settings is None else before_settings[1], value,
                              settings_of(value))
    for variable, before in list_(context_items(saved)):
        if current.get(variable, missing) is missing:
            variable.set(before)


def _default_of(state, variable):
    """`variable`'s default, or `missing` where it has none (run in a context where it holds no value)."""
    lookup_error, missing = state
    try:
        return variable.get()
    except lookup_error:
        return missing


def switcher(decimal=None):
    """`(enter, leave)`, made before the program runs: `leave(enter())` around each run of the program's code, and
    `leave(entered, program_dicts)` after its top-level code (`_leave`). `decimal`: the `decimal` module where it is
    loaded; the test's context is set now, before any program runs."""
    if decimal is None:
        settings_state, templates = (type, None, None, tuple, getattr, None, ()), ()
    else:
        decimal.getcontext()
        context = decimal.Context
        settings_state = (type, context, context.__reduce__, tuple, getattr, context.__setattr__, _SETTINGS)
        # `decimal.Context()` takes what it is not given from `DefaultContext`: the templates are put back too.
        templates = tuple(template for template in (decimal.DefaultContext, decimal.BasicContext,
                                                    decimal.ExtendedContext) if type(template) is context)
    missing = object()
    same_contents = types.MethodType(_same_contents, (dict.items, list, len, zip, type))
    state = (types.MethodType(_settings, settings_state), types.MethodType(_apply, settings_state), type, dict,
             contextvars.copy_context, contextvars.Context.items, dict.items, list, len, {}, missing,
             types.MethodType(_default_of, (LookupError, missing)), templates, {}, [], same_contents,
             types.MethodType(_text_keys, (type, str)))
    return types.MethodType(_enter, state), types.MethodType(_leave, state)


# What the audit hook refuses to rewire (`__code__`).
PROTECTED_FUNCTIONS = (_settings, _apply, _enter, _leave, _default_of, _same_contents, _text_keys)
