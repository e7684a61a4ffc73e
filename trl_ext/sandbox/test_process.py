"""What runs in a test's own process, before and after the program's code (inside the sandbox; standard library
only). See `harness` for the whole; this module holds the test process's side: the module snapshot that puts the
standard library back after the program ran, the genuine names a test uses, and the two bodies of
a test process (a Python test, or a C++ binary with the test's input).
"""

import builtins
import fcntl
import gc
import json
import os
import resource
import signal
import socket
import sys
import types

if __package__:
    from . import (answer_traps, audit_hook, call_guard, code_provenance, context_state, dict_versions, judge_side,
                   library_closures, masked_positions, own_anything, program_isolation, test_namespace)
    from .plain_data import _HEAP_TYPE, NotPlainData, _Unencodable, _write_all, encode_value, make_comparisons
    from .test_records import PASS_RECORD_END, _flusher, _report_error
else:  # inside the sandbox, beside copies of its modules
    import answer_traps
    import audit_hook
    import call_guard
    import code_provenance
    import context_state
    import dict_versions
    import judge_side
    import library_closures
    import masked_positions
    import own_anything
    import program_isolation
    import test_namespace
    from plain_data import _HEAP_TYPE, NotPlainData, _Unencodable, _write_all, encode_value, make_comparisons
    from test_records import PASS_RECORD_END, _flusher, _report_error

# File descriptors of a test child: 3 = its result pipe (written), 4 = its nonce pipe (read after the test).
_RESULT_FD = 3
_NONCE_FD = 4
# The harness's functions in instrumented test code (`trl_ext.sandbox.instrumentation.JUDGE_NAMES`): string
# constants `JUDGE_CONSTANT + name`, replaced in the compiled code by the functions (`_bind_judge_functions`).
JUDGE_CONSTANT = "\x00trl-ext judge:"
# Where libraries are loaded from (`code_provenance.library_roots`), read once by the harness: its test processes
# inherit it (about 1 ms each otherwise).
_LIBRARY_ROOTS = code_provenance.library_roots()


_VERSIONS = dict_versions.VERSIONS  # `(watch, read, gatherer)` of dicts' version tags, or None


def _module_snapshot(drop_if_new=(), closures=True):
    """Copy the namespaces of every loaded module and of the classes they define (and `sys.modules`) and the plain
    dicts they hold two levels down (`call_guard.held_dicts`), watch their memoized functions, and with `closures`
    read the cells of the functions they hold (`library_closures`); return a function that puts them back, empties
    the memos that changed, and returns `(dict, the program's items, the test's contents)` for each plain dict it
    put back. Its `closures()` puts back the cells alone (after each call into the program). Modules loaded later (by
    the solution) stay loaded, and attributes of their packages, but those named in `drop_if_new` (modules the test
    imports that could not be loaded beforehand: a solution must not plant a fake one for the test). With
    `closures` (a test in the program's process), `decimal`'s context is set first (`context_state`)."""
    if closures:
        __import__("decimal").getcontext()
    modules = sys.modules
    saved_modules = dict(modules)
    saved, classes, packages = [], [], {}
    for loaded_as, module in list(modules.items()):
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is dict:
            saved.append((namespace, dict(namespace)))
            packages[loaded_as] = namespace
            module_name = namespace.get("__name__")
            for value in list(namespace.values()):
                if isinstance(value, type) and type.__dict__["__flags__"].__get__(value) & _HEAP_TYPE:
                    if getattr(value, "__module__", None) == module_name:
                        classes.append((value, dict(vars(value))))
    seen = {id(modules), id(sys.path_importer_cache), *(id(namespace) for namespace, _ in saved)}
    held = call_guard.held_dicts([copy for _, copy in saved + classes], seen)
    saved += held
    held_ids, id_, append, items = frozenset(id(held_dict) for held_dict, _ in held), id, list.append, dict.items
    empty_changed_memos = call_guard.memo_emptier([copy for _, copy in saved + classes], _VERSIONS)
    clear, update, pop, proxy_get = dict.clear, dict.update, dict.pop, type(type.__dict__).get
    class_dict, set_attribute, delete_attribute = type.__dict__["__dict__"].__get__, type.__setattr__, type.__delattr__
    list_, len_, prefixes = list, len, tuple(name + "." for name in drop_if_new)
    starts, dropped = str.startswith, frozenset(drop_if_new)
    split_last, get, set_item, refused = str.rpartition, dict.get, dict.__setitem__, (AttributeError, TypeError)
    # Registries whose entries run code later (import finders and hooks, collector callbacks): their contents too.
    registries = [(registry, list(registry)) for registry in (sys.meta_path, sys.path_hooks, gc.callbacks)]
    saved.append((sys.path_importer_cache, dict(sys.path_importer_cache)))  # put back as a namespace is
    changed = dict_versions.changed_since(saved, classes)
    put_back_closures = library_closures.cells_keeper(library_closures.closure_cells(modules) if closures
                                                      else ((), ()))

    def restore():  # no name lookups: the solution may have replaced any builtin
        for registry, entries in registries:
            registry[:] = entries
        for name in list_(modules) if dropped else ():
            if name not in saved_modules and (name in dropped or starts(name, prefixes)):
                pop(modules, name, None)
        update(modules, saved_modules)
        changed_namespaces, changed_classes = changed()
        program_dicts = []  # a library's dicts as the program's code left them, for its later code (`context_state`)
        for namespace, snapshot in changed_namespaces:
            if id_(namespace) in held_ids:
                append(program_dicts, (namespace, list_(items(namespace)), snapshot))  # no key hashed
            clear(namespace)
            update(namespace, snapshot)
        # A submodule the solution loaded (`matplotlib.pyplot` loads `matplotlib.backend_bases`) stays loaded, so
        # it stays an attribute of its package, as importing it made it: the test sees what `sys.modules` holds.
        # (`modules` holds all of `saved_modules` now: with no name but `solution` added, there is none to walk.)
        added = len_(modules) - len_(saved_modules)
        if "solution" in modules and "solution" not in saved_modules:
            added -= 1
        for name in list_(modules) if added > 0 else ():
            if name in saved_modules:
                continue
            parent, dot, child = split_last(name, ".")
            namespace = get(packages, parent) if dot else None
            if namespace is not None and child not in namespace:
                set_item(namespace, child, modules[name])
        for cls, snapshot in changed_classes:
            current = class_dict(cls)
            for name in list_(current):
                if name not in snapshot:
                    try:
                        delete_attribute(cls, name)
                    except refused:
                        pass
            for name, value in snapshot.items():
                if proxy_get(current, name, snapshot) is not value:
                    try:
                        set_attribute(cls, name, value)
                    except refused:
                        pass
        put_back_closures()
        empty_changed_memos()  # a result memoized meanwhile may have read the program's changes
        return program_dicts

    restore.closures = put_back_closures
    # The call guard's first copies, made here, before the fork: a test process copies again only what changed.
    restore.guard_copies = call_guard.warm_copies(modules, _VERSIONS) if closures else None
    return restore


def _names_in(code):
    """Global and attribute names a code object (and the functions or comprehensions inside it) uses."""
    names, stack = set(), [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(const for const in current.co_consts if isinstance(const, type(code)))
    return names


def _genuine_names(test_code):
    """The builtins and loaded modules a test names, as they are before any solution runs.

    A test's `abs`, `sorted`, `set` or `math` then mean the real ones even when the solution rebinds those
    names in its own namespace (`abs = lambda x: 0`; `math = FakeMath()`).
    """
    genuine = {}
    for name in _names_in(test_code):
        if name in builtins.__dict__:
            genuine[name] = builtins.__dict__[name]
        elif name in sys.modules and "." not in name:
            genuine[name] = sys.modules[name]
    genuine["__builtins__"] = dict(builtins.__dict__)
    return genuine


# A failed check where the program cannot reach the test (judged apart): raised, with no flag to spring.
_fail_now = types.MethodType(answer_traps._fail, (lambda sprung: None, AssertionError))


def _bind_judge_functions(code, check, compare, truth, value, trust, fail=_fail_now, enter=lambda: None,
                          case_class=type, call=lambda callee: callee, hide=lambda function: function,
                          argument=lambda value: value, context=lambda value: value, own_any=lambda value: value):
    """`code` (and the code objects inside it) with each judge constant replaced by the harness's function."""
    functions = {JUDGE_CONSTANT + "__trl_ext_check__": check, JUDGE_CONSTANT + "__trl_ext_compare__": compare,
                 JUDGE_CONSTANT + "__trl_ext_truth__": truth, JUDGE_CONSTANT + "__trl_ext_value__": value,
                 JUDGE_CONSTANT + "__trl_ext_trust_comparison__": trust, JUDGE_CONSTANT + "__trl_ext_fail__": fail,
                 JUDGE_CONSTANT + "__trl_ext_enter__": enter, JUDGE_CONSTANT + "__trl_ext_case_class__": case_class,
                 JUDGE_CONSTANT + "__trl_ext_call__": call, JUDGE_CONSTANT + "__trl_ext_hide__": hide,
                 JUDGE_CONSTANT + "__trl_ext_argument__": argument, JUDGE_CONSTANT + "__trl_ext_context__": context,
                 JUDGE_CONSTANT + "__trl_ext_own_any__": own_any}

    def bind(current):
        return current.replace(co_consts=tuple(
            functions.get(constant, constant) if type(constant) is str
            else bind(constant) if type(constant) is types.CodeType else constant
            for constant in current.co_consts
        ))

    if isinstance(code, list):
        return [bind(item) for item in code]
    return None if code is None else bind(code)


def _guarded_namespace(namespace, genuine, modules, module_type, answers, harness_does, roots, keeper,
                       put_back_closures, guard_copies=None):
    """The test's namespace (`test_namespace`), the `solution` module it imports from, in which every function of
    the program is called under `call_guard` (what a call changes in modules, classes and the test's names does
    not outlive it), and the profile function that guards the program's other code the test runs
    (`answer_traps.watcher`). `answers`: `answer_traps`' `(enter, leave)` and `returned_checker`; `keeper`:
    `test_namespace.namespace_keeper`'s `(namespace, hand, restore_mocks)`, `call_argument_hider`,
    `answer_traps.library_objects_made` and `namespace_keeper`'s `(save_cases, restore_cases)`: what the program's
    code sets on the test's mocks and cases goes when it returns, and so does what it set in the closures of the
    libraries' functions (`put_back_closures`, `library_closures`). The program's own namespace stays as it is: its
    functions call each other unguarded. `guard_copies`: the guard's first copies, made before the fork
    (`call_guard.warm_copies`)."""
    make_namespace, hand, restore_mocks, hand_over, made, (save_cases, restore_cases), context_variables = keeper
    get_profile, set_profile, get_frame = sys.getprofile, sys.setprofile, sys._getframe
    # What runs at each call into the program (`hide_all`, `hand_to_program`) is bound now: a call from the
    # program's own code (a test's callback it calls, calling it again) finds the names it rebound meanwhile.
    tuple_, is_program = tuple, test_namespace.nearest_code_is_program

    def hide_all(args, kwargs):  # the test's functions and its case, handed over as arguments, hidden
        return tuple_(hand_over(arg) for arg in args), {key: hand_over(value) for key, value in kwargs.items()}
    test_globals = harness_does(make_namespace, {**namespace, **genuine, "__name__": "__test__"})
    enter, leave, check_returned = answers
    case_saves = []

    def enter_saving_cases():
        case_saves.append(save_cases())
        enter()

    def leave_and_restore_mocks():  # what the program's code set on the test's mocks, cases, closures goes with it
        restore_mocks()
        restore_cases(case_saves.pop() if case_saves else None)
        put_back_closures()
        leave()

    def pause_watch():  # a call into the program is guarded as a whole: its own calls are not watched
        watching = get_profile()
        harness_does(set_profile, None)
        return watching

    def resume_watch(watching):
        harness_does(set_profile, watching)

    def hand_to_program(args, kwargs):  # the call's arguments, and what the test holds where it calls
        frame = harness_does(get_frame, 1)
        while frame is not None and frame.f_code.co_filename != "<test>":
            frame = None if is_program(frame, roots) else frame.f_back
        harness_does(hand, (*args, *kwargs.values(), *(frame.f_locals.values() if frame is not None else ())))
        return harness_does(hide_all, args, kwargs)

    answers = (enter_saving_cases, leave_and_restore_mocks)
    bound = call_guard.context(modules, test_globals, answers + (pause_watch, resume_watch, hand_to_program), _VERSIONS,
                               harness_does, context_variables, guard_copies)
    made(("guard", types.MethodType(call_guard.restoring, bound)))  # for the libraries' objects the program made
    view = module_type("solution")
    for name, item in namespace.items():
        # `type()`, not `isinstance`, which would run a `__class__` property of the program's here, unguarded
        if type(item) in (types.FunctionType, types.MethodType) and not name.startswith("__"):
            view.__dict__[name] = call_guard.guarded(item, bound)
            if name not in genuine:
                dict.__setitem__(test_globals, name, view.__dict__[name])
        else:
            view.__dict__[name] = item
    return test_globals, view, answer_traps.watcher(namespace, answers + (check_returned,), call_guard.take_snapshot,
                                                    bound, roots)


def _default_signals_and_cpu_limit(cpu_seconds):
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def _take_descriptors(fds):
    """Give a test process its descriptors (0 stdin, 1 stdout, 2 /dev/null, 3 result, 4 nonce) and close every
    other (the harness's report pipe); return the nonce, read and its pipe closed before the program runs."""
    os.setpgid(0, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    # Move every fd above the ones we assign, then assign 0-4, then close the rest.
    result, nonce, stdin, stdout = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (*fds[:3], fds[3] or devnull))
    for source, target in ((stdin, 0), (stdout, 1), (devnull, 2), (result, _RESULT_FD), (nonce, _NONCE_FD)):
        os.dup2(source, target)
    os.closerange(_NONCE_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    secret = os.read(_NONCE_FD, 64)
    os.close(_NONCE_FD)
    return secret


def _value_frame_writer(max_value_bytes):
    """`value_frame(code, test_globals)`: one length-prefixed frame of a batch of value tests (what it calls is
    bound now, before the program runs)."""
    eval_, dumps, encode, unencodable, type_ = builtins.eval, json.dumps, encode_value, _Unencodable, type
    len_, base_exception = len, BaseException

    def value_frame(code, test_globals):
        try:
            payload = b"V" + dumps(encode(eval_(code, test_globals))).encode()
            if len_(payload) > max_value_bytes:
                payload = f"Uvalue larger than {max_value_bytes} bytes".encode()
        except unencodable as error:
            payload = f"U{error}".encode(errors="replace")[:300]
        except base_exception as error:  # noqa: BLE001 - this test failed; the next one still runs
            try:
                payload = f"Etest:{type_(error).__name__}: {error}".encode(errors="replace")[:300]
            except base_exception:  # noqa: BLE001 - an exception whose str() raises
                payload = f"Etest:{type_(error).__name__}".encode()
        return len_(payload).to_bytes(4, "big") + payload

    return value_frame


def _in_process_keepers(roots, harness_does):
    """What keeps a test in the program's process out of its reach, made before the program runs: `answer_traps`'
    `(enter, leave, sprung, fail)` and its `returned_checker`, `test_namespace`'s `(namespace, hand,
    restore_mocks, cases_kept)`, `call_argument_hider` and `answer_traps.library_objects_made`, the judge functions
    the test's code calls (`fail`, final; `enter`, first in each method of a test class; `call`, on everything it
    calls: `answer_traps.callee_framer`; `argument`, on what it passes; `hide`, on each function of its own it
    hands on; `context`, on what it enters with `with`; `own_any`, on each `ANY` it reads: `own_anything`),
    `own_anything`'s `(own, trap)`, and `context_state.switcher`'s `(enter, leave)` in `keeper`."""
    get_frame, is_program = sys._getframe, test_namespace.nearest_code_is_program  # bound: see `_guarded_namespace`
    made = answer_traps.library_objects_made()
    answers = answer_traps.answer_traps(NotPlainData, roots, harness_does, made)
    fail = answers[3]
    answers += (answer_traps.returned_checker(roots, fail, harness_does),)

    def program_calling():
        return is_program(harness_does(get_frame, 1), roots)

    def method_frame():  # harness_does <- method_frame <- enter <- enter_method <- the test's method
        return harness_does(get_frame, 4)

    hidden = call_guard.hider()
    hide = test_namespace.test_function_hider(hidden, harness_does)
    make_namespace, hand, restore_mocks, enter, class_data, cases_kept = test_namespace.namespace_keeper(
        roots, program_calling, sys.modules.get("unittest.mock"), method_frame, hide)

    def enter_method():
        enter(fail)

    judges = {"fail": fail, "enter": enter_method, "case_class": test_namespace.KeptClass,
              "call": answer_traps.callee_framer(roots, made), "hide": hide,
              "argument": answer_traps.argument_framer(roots, harness_does),
              "context": answer_traps.context_framer(made)}
    hand_over = test_namespace.call_argument_hider(hidden, hide, class_data)
    own_any, judges["own_any"], trap_any = harness_does(own_anything.test_anything, sys.modules.get("unittest.mock"),
                                                        fail)
    context_variables = context_state.switcher(sys.modules.get("decimal"))
    keeper = (make_namespace, hand, restore_mocks, hand_over, made, cases_kept, context_variables)
    return answers, keeper, judges, (own_any, trap_any)


def _child(kind, solution_code, test_code, genuine, restore_modules, known_types, fds, cpu_seconds,
           max_value_bytes):
    """Body of a test child: never returns. Everything it calls after the solution starts is bound here first.

    `genuine`: the real objects for the test's builtin and module names (`_genuine_names`); `known_types`: the
    classes that existed before the solution ran (`plain_data.make_comparisons`); `restore_modules` puts every
    module back as it was then. `fds`: (result, nonce, stdin, stdout); stdout None for assert tests (/dev/null).
    """
    write, exit_, to_text, copy_dict = os.write, os._exit, str, dict
    # Only the streams as they are now: a program may replace sys.stdout with an object whose flush() is its own.
    flush_targets = tuple(stream.flush for stream in (sys.stdout, sys.stderr))
    exec_, eval_, dumps, encode, write_all = builtins.exec, builtins.eval, json.dumps, encode_value, _write_all
    result_fd, unencodable, modules, module_type = _RESULT_FD, _Unencodable, sys.modules, type(sys)
    refused = NotPlainData
    secret = _take_descriptors(fds)
    _default_signals_and_cpu_limit(cpu_seconds)
    roots, set_profile, get_profile = _LIBRARY_ROOTS, sys.setprofile, sys.getprofile
    harness_does = audit_hook.install(roots, kind == "statement")
    checks = [0]

    def count_check():
        checks[0] += 1

    flush, report_error = _flusher(flush_targets), _report_error
    value_frame = _value_frame_writer(max_value_bytes)
    # In the program's process, the test's own objects and verdict are kept from the program: its classes answer
    # only inside its calls (`answer_traps`), the test keeps its names and methods (`test_namespace`) and its own
    # `unittest.mock.ANY` (`own_anything`), the one object equal to anything its comparisons take.
    answers, keeper, judges, (own_any, trap_any) = (
        _in_process_keepers(roots, harness_does) if kind == "statement" else (None, None, {}, (None, None)))
    compare, truth, value, trust = make_comparisons(known_types, own_anything=own_any)
    test_code = harness_does(_bind_judge_functions, test_code, count_check, compare, truth, value, trust, **judges)
    guarded_namespace, disable_collection = _guarded_namespace, gc.disable
    solution_module = module_type("solution")
    namespace = solution_module.__dict__
    namespace.update({"__name__": "__main__" if kind == "stdio" else "solution", "__builtins__": builtins})
    if kind != "stdio":
        modules["solution"] = solution_module  # a test may `from solution import f`; so may the solution itself
    stage = "load"
    try:
        try:
            entered = keeper[6][0]() if kind == "statement" else None  # context variables (`context_state`)
            exec_(solution_code, namespace)
            if kind != "stdio":
                write(result_fd, b"L")
                stage = "test"
                # The test sees the standard library as it was before the solution ran (a solution that
                # replaced `math.isclose` or `builtins.abs` at import cannot make an assert pass), and the
                # solution's names except where they rebind a builtin or module the test uses.
                program_dicts = restore_modules()
                if kind == "statement":  # the program's context variables and library dicts: its own from here on
                    keeper[6][1](entered, program_dicts)
                modules["solution"] = solution_module
                test_globals = copy_dict(namespace)
                test_globals.update(genuine)
                test_globals["__name__"] = "__test__"
            if kind == "statement":  # the test calls the program under `call_guard`; no collection runs
                trap_any()  # the class of `ANY` was put back with the modules
                harness_does(masked_positions.compare_masks, modules)
                test_globals, modules["solution"], watch = guarded_namespace(
                    namespace, genuine, modules, module_type, answers[:2] + answers[4:], harness_does, roots, keeper,
                    restore_modules.closures, restore_modules.guard_copies)
                disable_collection()
                answers[1]()  # the program's top-level code has ended: its classes' answering methods are trapped
                harness_does(set_profile, watch)
            if kind == "value":
                payload = dumps(encode(eval_(test_code, test_globals))).encode()
                if len(payload) > max_value_bytes:
                    raise unencodable(f"value larger than {max_value_bytes} bytes")
                write_all(write, result_fd, b"V" + payload)
            elif kind == "values":  # one length-prefixed frame per test, in order
                for code in test_code:
                    write_all(write, result_fd, value_frame(code, test_globals))
            elif kind == "statement":
                exec_(test_code, test_globals)
                watched = get_profile() is watch
                harness_does(set_profile, None)
                if answers[2]() or not watched:  # a trap sprang, even if the test caught what it raised
                    raise refused("a check of the test failed (where it was caught too), or a value of a class the "
                                  "program wrote answered a comparison itself")
                flush()  # before the record: nothing may follow it
                write_all(write, result_fd, b"P" + secret + b":" + to_text(checks[0]).encode() + PASS_RECORD_END)
                exit_(0)
        except SystemExit as stop:
            # A stdio program may end with sys.exit() / sys.exit(0); any exit before an assert test is a failure.
            if kind != "stdio" or stop.code not in (None, 0):
                write_all(write, result_fd, f"E{stage}:SystemExit({stop.code!r})".encode(errors="replace")[:300])
        except unencodable as error:
            write_all(write, result_fd, f"U{error}".encode(errors="replace")[:300])
        flush()
        if kind == "stdio":
            write_all(write, result_fd, b"D")
    except BaseException as error:  # noqa: BLE001 - anything the solution raises is a failed test
        report_error(write_all, write, result_fd, stage, error)
    exit_(0)



def _exec_child(binary_fd, fds, cpu_seconds, memory):
    """Body of a C++ test child: the binary (an open descriptor: the program's own namespaces may not show the
    file) with the test's stdin, stdout to the harness, stderr discarded."""
    try:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        stdin, stdout, binary = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (fds[2], fds[3], binary_fd))
        for source, target in ((stdin, 0), (stdout, 1), (devnull, 2), (binary, 3)):
            os.dup2(source, target)
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # its result pipe closes: EOF at once
        os.set_inheritable(3, False)  # closed when the binary starts
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.execve(3, ["solution"], os.environ)
    finally:
        os._exit(127)


def _judged_apart(solution_code, test_code, genuine, known_types, fds, cpu_seconds, plan, failure_fd):
    """Body of a statement test judged outside the program's process (`judge_side`): never returns.

    This process (the judge) runs the test and writes the record; the program runs in a child of its own, in
    namespaces of its own under bubblewrap, holding only its end of a socket and /dev/null. `fds` as `_child`'s;
    `failure_fd` is where the isolating process reports namespaces it could not make (`run_isolated`)."""
    os.setpgid(0, 0)
    # The harness's own stdin and stdout are its channel to the trainer: nothing the test prints or reads (nor what
    # the program prints, which its streams receive, `judge_side`) may reach them.
    devnull = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(devnull, target)
    os.close(devnull)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - not the harness's reader, which may hold what it read ahead
    result_fd, limit = fds[0], plan["max_value"] + (1 << 16)
    secret = os.read(fds[1], 64)
    os.close(fds[1])
    judge_end, program_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    program = program_isolation.fork_for_judge(failure_fd)
    if program == 0:
        try:
            judge_end.close()
            os.close(result_fd)
            _run_program_for_judge(solution_code, program_end, plan, cpu_seconds, limit, failure_fd)
        finally:
            os._exit(70)
    program_end.close()
    os.close(failure_fd)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))

    def write(data):
        _write_all(os.write, result_fd, data)

    try:
        started = judge_side._receive(judge_end, limit)
        if "load_error" in started:
            write(f"Eload:{started['load_error']}"[:300].encode(errors="replace"))
            os._exit(0)
        write(b"L")
        checks = [0]

        def count_check():
            checks[0] += 1

        compare, truth, value, trust = make_comparisons(known_types, judge_side.OPAQUE_TYPES)
        test_globals = dict(genuine)
        test_globals.update({"__name__": "__test__", "__builtins__": dict(builtins.__dict__)})
        test_code = _bind_judge_functions(test_code, count_check, compare, truth, value, trust)
        judge_side.judge_test(judge_end, test_code, test_globals, limit, plan["max_output"])
        write(b"P" + secret + b":" + str(checks[0]).encode() + PASS_RECORD_END)
    except BaseException as error:  # noqa: BLE001 - what the test raised, or the program broke the protocol
        write(f"Etest:{type(error).__name__}: {str(error)[:200]}".encode(errors="replace")[:300])
    os._exit(0)


def _run_program_for_judge(solution_code, connection, plan, cpu_seconds, limit, failure_fd):
    """The program's side of a statement test judged apart: load the program, answer the judge's requests."""
    isolation = plan.get("isolation")

    def program():
        devnull = os.open(os.devnull, os.O_RDWR)
        socket_fd = fcntl.fcntl(connection.fileno(), fcntl.F_DUPFD, 10)
        for source, target in ((devnull, 0), (devnull, 1), (devnull, 2), (socket_fd, _RESULT_FD)):
            os.dup2(source, target)
        os.closerange(_RESULT_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        if plan.get("memory"):
            resource.setrlimit(resource.RLIMIT_AS, (plan["memory"], plan["memory"]))
        channel = socket.socket(fileno=_RESULT_FD)
        module = type(sys)("solution")
        namespace = module.__dict__
        namespace.update({"__name__": "solution", "__builtins__": builtins})
        sys.modules["solution"] = module
        try:
            exec(solution_code, namespace)  # noqa: S102 - the program, in its own process
        except BaseException as error:  # noqa: BLE001 - the program's top-level code failed
            judge_side._send(channel, {"load_error": f"{type(error).__name__}: {str(error)[:200]}"})
            os._exit(0)
        judge_side._send(channel, {"ready": True})
        judge_side.serve_program(channel, namespace, limit, 200_000)
        os._exit(0)

    if isolation:
        program_isolation.run_isolated(program, failure_fd, isolation["writable"], isolation["size"])
    os.close(failure_fd)
    program()
