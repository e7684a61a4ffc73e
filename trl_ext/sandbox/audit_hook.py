"""The audit hook of a test process that runs a program (inside the sandbox; standard library only).

Installed before the program runs (`test_process._child`), it refuses what would reach the harness's frames or
the process's memory, the test's code objects, and code forged under a library's file name.
"""

import os
import sys
import types

if __package__:
    from . import (answer_traps, call_guard, code_provenance, context_state, library_closures, masked_positions,
                   own_anything, test_namespace)
else:  # inside the sandbox, beside copies of its modules
    import answer_traps
    import call_guard
    import code_provenance
    import context_state
    import library_closures
    import masked_positions
    import own_anything
    import test_namespace

_BLOCKED_AUDIT_EVENTS = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",  # Python 3.12+
        "sys._current_frames",
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_exceptions",
    }
)
# Attributes that hand out a frame, whose `f_back` chain leads to the harness's locals (nonce, check counter).
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# Attributes that hand out a code object: refused for the test's functions, whose constants are those functions.
_CODE_ATTRIBUTES = frozenset({"__code__", "gi_code", "cr_code", "ag_code"})
_REWIRING_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def install(roots, provenance):
    """Refuse what reaches the harness's frames or the process's memory (tracing, frames, `gc` enumeration,
    `ctypes`, `/proc/<pid>/mem`), the code objects of the test's functions (their constants are the harness's
    functions) and rewiring them or the call guard's, and with `provenance` code forged under a library's file
    name, a function made of a library's code or a library's function rewired while the program runs (under
    `roots`: `code_provenance.forged_library_code`), from here on. Everything the hook calls is bound now: the
    program may replace any module attribute or builtin later. Returns `harness_does(function, *args)`,
    which calls a refused function for the harness (its own code objects, its profile function)."""
    blocked, frame_attributes, refusal, bad_value = _BLOCKED_AUDIT_EVENTS, _FRAME_ATTRIBUTES, RuntimeError, ValueError
    starts, ends, is_instance, text_types, close = str.startswith, str.endswith, isinstance, (str, bytes), os.close
    open_path, read_link, path_flag, fd_path, busy, own = os.open, os.readlink, os.O_PATH, "/proc/self/fd/", [], []
    code_attributes, rewiring, get_attribute, get_frame = _CODE_ATTRIBUTES, _REWIRING_ATTRIBUTES, getattr, sys._getframe
    protected = frozenset(id(function) for function in call_guard.PROTECTED_FUNCTIONS
                          + answer_traps.PROTECTED_FUNCTIONS + test_namespace.PROTECTED_FUNCTIONS
                          + own_anything.PROTECTED_FUNCTIONS + masked_positions.PROTECTED_FUNCTIONS
                          + library_closures.PROTECTED_FUNCTIONS + context_state.PROTECTED_FUNCTIONS)
    type_of, function_type, id_, str_, os_error = type, types.FunctionType, id, str, OSError
    code_holders = (types.FunctionType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
    readable = code_attributes | {"__defaults__", "__kwdefaults__"}  # a harness function's state may be a default
    provenance_events = frozenset({"compile", "code.__new__", "marshal.loads", "function.__new__"}
                                  if provenance else ())

    base = get_frame(1)  # the harness's frames, below the test and the program
    forged = _provenance_check(roots, own, get_frame, base)
    program_on_stack, not_the_program = _program_on_stack, roots + ("<frozen ",)

    def harness_does(function, *args, **kwargs):
        busy.append(1)
        try:
            return function(*args, **kwargs)
        finally:
            busy.pop()

    harness_code = harness_does.__code__

    def judges(target, attribute, reading):
        # Whether `target` is the call guard's, or the test's (compiled as "<test>") and, for a read, the program
        # asks (a frame of its code is on the stack; `unittest.mock` reads a test's code too).
        if id_(target) in protected:
            return True
        own.append(1)
        try:
            code = get_attribute(target, "__code__" if attribute in rewiring else attribute, None)
            filename = get_attribute(code, "co_filename", None)
            if type_of(filename) is not str_ or filename != "<test>":
                return False
            return not reading or program_on_stack(get_frame(1), base, not_the_program)
        finally:
            own.pop()

    def real_path(path):
        # Where `path` leads, as the kernel resolves it (an O_PATH descriptor reads nothing).
        own.append(1)
        try:
            fd = open_path(path, path_flag)
        except os_error:
            return ""
        finally:
            own.pop()
        try:
            return read_link(fd_path + str_(fd))
        except os_error:  # no /proc: a program in namespaces of its own sees none (`program_isolation`)
            return ""
        finally:
            close(fd)

    def audit(event, args):
        if own:  # the hook's own work (no code of the program runs meanwhile: it has one thread)
            return
        if busy:  # the harness's work (`harness_does`) goes unchecked, but not code of the program's that it runs
            own.append(1)  # meanwhile (a metaclass's `__hash__`): that may do only what the program may
            try:
                program = program_on_stack(get_frame(1), harness_code, not_the_program)
            finally:
                own.pop()
            if not program:
                return
        if event in blocked or starts(event, "ctypes."):
            raise refusal(f"{event} is not allowed in the code sandbox")
        if event == "sys._getframe":
            raise bad_value("call stack is not available in the code sandbox")
        if event == "object.__getattr__" and args[1] in frame_attributes:
            raise refusal(f"{args[1]} is not available in the code sandbox")
        if type_of(args[0] if args else None) not in code_holders:
            pass
        elif ((event == "object.__getattr__" and args[1] in readable and judges(args[0], args[1], True))
              or (event == "object.__setattr__" and args[1] in rewiring and judges(args[0], args[1], False))):
            raise refusal(f"{args[1]} of the test's functions is not available in the code sandbox")
        if event == "open" and is_instance(args[0], text_types):
            path = real_path(args[0])
            if starts(path, "/proc/") and (ends(path, "/mem") or ends(path, "/pagemap")):
                raise refusal("reading process memory is not allowed in the code sandbox")
        if event in provenance_events or (event == "object.__setattr__" and args[1] in rewiring
                                          and type_of(args[0]) is function_type and provenance):
            reason = forged(event, args)
            if reason is not None:
                raise refusal(f"{reason} is not allowed in the code sandbox")

    sys.addaudithook(audit)
    return harness_does


def _program_on_stack(frame, base, not_the_program, starts=str.startswith, equal=str.__eq__, type_=type, str_=str):
    """Whether a frame of the program's code is on the stack from `frame` down to `base`: the frame that installed
    the hook (the harness's, below it), or the code of `harness_does` (the harness's work that runs it). The
    program's code is code that is neither the test's ("<test>"), a library's or the harness's (under the roots)
    nor the import system's ("<frozen "), whatever file name the program gave it: it can claim none of those
    (`code_provenance`). A name that is not a plain `str` is the program's too, and compared with `str`'s own
    methods: no `__eq__` of the program's runs here."""
    while frame is not None and frame is not base and frame.f_code is not base:
        filename = frame.f_code.co_filename
        if type_(filename) is not str_ or not (equal(filename, "<test>") or starts(filename, not_the_program)):
            return True
        frame = frame.f_back
    return False


def _provenance_check(roots, own, get_frame, base):
    """`forged(event, args)`: why an audit event would make code that claims a library's file
    (`code_provenance.forged_library_code`), or None. Everything it calls is bound now."""
    forged_code, open_path, read_only = code_provenance.forged_library_code, os.open, os.O_RDONLY
    read, close, program_on_stack, not_the_program = os.read, os.close, _program_on_stack, roots + ("<frozen ",)
    os_error = OSError

    def read_file(path):  # called with `own` set
        try:
            fd = open_path(path, read_only)
        except os_error:
            return None
        try:
            chunks = []
            while chunk := read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            close(fd)

    def forged(event, args):
        own.append(1)
        try:
            caller = get_frame(2)  # this function's caller is the hook; the hook's, the code that raised the event

            def program_running():
                return program_on_stack(caller, base, not_the_program)

            return forged_code(event, args, caller, program_running, roots, read_file)
        finally:
            own.pop()

    return forged
