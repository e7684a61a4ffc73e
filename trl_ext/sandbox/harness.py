"""Test harness of `run_code_tests`. It runs *inside* the sandbox and uses the standard library only.

    python harness.py plan.json solution.py             (started by `Sandbox.run_python`)
    python harness.py plan.json solution.cpp            (C++: compiled here first, see below)

The harness process never runs the solution. For each test it forks a child that runs the solution's
top-level code and then the test, and reads what the child reports from a pipe of that child's own. It writes
one JSON line per test to its stdout, which no child holds (children get other file descriptors, and the
harness makes itself non-dumpable, which closes `/proc/<harness>/fd` to them).

What decides a test, by kind (the trainer builds the plan, see `trl_ext.sandbox.testing`):

- "value": the child reports the value of an expression, the non-literal side of `assert <expr> <op>
  <literal>`, encoded as plain data. The trainer applies the comparison with the literal, which never enters
  the sandbox: a program cannot fake a pass without computing the right value.
- "stdio": the child runs the solution as `__main__` with the test's input on stdin; the harness reports its
  stdout, which the trainer compares with the expected output (also never in the sandbox).
- "statement": any other test statement (a HumanEval `check(...)` call, a pytest-style test function, a
  unittest method). It passes only if it returned without raising *and ran at least one check*. The trainer
  rewrote the statement's `assert`s (`trl_ext.sandbox.testing.instrument_checks`) so that each one that runs
  and holds counts a check, and compares plain data with plain data (an object whose own `__eq__` says True
  cannot satisfy `assert f(x) == 3`); unittest and pytest runners count their assertion calls. The child
  reads a nonce from its nonce pipe and closes the pipe *before* the solution runs, and after the statement
  writes the nonce and the number of checks on its result pipe: a statement that ran no check is reported as
  such and the trainer scores the row "cannot judge" (never a pass). Exiting early (`sys.exit(0)`,
  `os._exit(0)`), killing the harness, writing a fake record on the result pipe, or replacing harness
  functions (`import __main__`; `__main__.exec = ...`) yields no valid record. The nonce and the check
  counter live only in this harness's frames, so the child's audit hook refuses what reaches frames or raw
  memory: `sys._getframe` (ValueError, which the standard library's callers handle), a traceback's,
  generator's or coroutine's frame, `sys.settrace`/`sys.setprofile`, `sys._current_frames`, object-graph
  enumeration (`gc`), new audit hooks, every `ctypes` operation, and opening `/proc/*/mem`; Python signal
  handlers (whose second argument is a frame) cannot be installed.

Before a test runs, the child puts every loaded module, and every class defined in one, back as it was before
the solution ran, and gives the test the genuine builtins and modules for the names it uses: a solution that
replaced `math.isclose`, `builtins.abs`, `unittest.TestCase.run`, rebound `sorted` in its own namespace, or
planted a fake module under a name the test imports does not change what the test computes. (A task whose
function is named like a builtin, `def sum(...)`, is therefore tested against the builtin.) Modules the
solution imported itself stay loaded, so a test's `unittest.mock.patch("random.randint")` patches the module
the solution uses. The solution is importable as the module `solution` (`from solution import f`).

What this cannot stop, and the sandbox then contains: code that breaks the interpreter itself (a bug in a C
extension) to read the harness's memory.

C++ (`"language": "cpp"` in the plan): the harness first runs the compiler command of the plan once, in a
child process group with its own wall-clock, CPU-time and address-space limits and stdin from /dev/null, and
reports how that went on a `{"compile": ...}` line. Each stdin/stdout test then execs the binary in a child
with the test's input, the per-test memory limit, and reports its stdout when it exits with status 0.

Every child gets a fresh process group, its own CPU-time limit, and is killed with its group after the
per-test timeout; in a private PID namespace every other process is killed too (`kill(-1)`) before the next
test, so nothing a test started survives into the next one.
"""

import builtins
import fcntl
import json
import os
import resource
import select
import signal
import sys
import time

# File descriptors of a test child: 3 = its result pipe (written), 4 = its nonce pipe (read after the test).
_RESULT_FD = 3
_NONCE_FD = 4
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
# Names the instrumented test code calls (see `trl_ext.sandbox.testing.instrument_checks`).
_CHECK_NAME = "__trl_ext_check__"
_COMPARE_NAME = "__trl_ext_compare__"
_TRUTH_NAME = "__trl_ext_truth__"
_TRUST_NAME = "__trl_ext_trust_comparison__"
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a `class` statement, not a built-in type
_COMPARISON_METHODS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__bool__",
                       "__len__", "__hash__")


# Standard-library modules a test may name, minus those with side effects on import.
_IMPORTABLE_STDLIB = frozenset(
    name
    for name in sys.stdlib_module_names
    if not name.startswith("_") and name not in {"this", "antigravity", "turtle", "turtledemo", "idlelib", "tkinter"}
)


class _Unencodable(Exception):
    pass


def encode_value(value, max_items=1_000_000, max_depth=100):
    """A JSON-able encoding of plain data that keeps Python's types apart (tuple vs list, int vs float).

    Instances of subclasses of the built-in types (namedtuple, OrderedDict, an `int` subclass with its own
    `__eq__`) are encoded as the base type's value, read with the base type's own methods, so no method of the
    solution runs and a custom `__eq__` cannot make a wrong value compare equal. NumPy values go through
    `tolist()`. Anything else (a class of the solution) raises `_Unencodable`.
    """
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


def decode_value(node):
    """Inverse of `encode_value`, building only plain data (it never calls code a value names). The trainer decodes
    what comes back from the sandbox with it, so anything that is not an encoded value is a ValueError."""
    if isinstance(node, list):
        return [decode_value(item) for item in node]
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
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode_value(item) for item in payload)
        if tag == "dict":
            return {decode_value(key): decode_value(value) for key, value in payload}
        if tag == "fraction":
            import fractions

            return fractions.Fraction(int(payload[0]), int(payload[1]))
        if tag == "decimal":
            import decimal

            return decimal.Decimal(payload)
    raise ValueError(f"not an encoded value: {str(node)[:80]}")


_NOT_PLAIN = object()


def _make_comparisons(trusted_types):
    """`compare(left, op, right)`, `truth(value)` and `trust(cls)` for instrumented asserts.

    Plain data (see `encode_value`) is compared as fresh copies, so a subclass's `__eq__` never runs. A value
    that is not plain data compared with plain data is refused when its class defines comparison methods in
    Python (an "equal to anything" object), unless the test itself trusted that class (`pytest.approx`).
    """
    encode, decode, unencodable, not_plain = encode_value, decode_value, _Unencodable, _NOT_PLAIN
    heap, methods, type_flags = _HEAP_TYPE, _COMPARISON_METHODS, type.__dict__["__flags__"].__get__
    mro_of, vars_of = type.__dict__["__mro__"].__get__, type.__dict__["__dict__"].__get__
    operators = {
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "in": lambda a, b: a in b,
        "not in": lambda a, b: a not in b,
    }

    def plain(value):
        try:
            return decode(encode(value, max_items=200_000))
        except (unencodable, RecursionError, ValueError, TypeError):
            return not_plain

    def defines_comparison_in_python(value):
        for cls in mro_of(type(value)):
            if type_flags(cls) & heap and cls not in trusted_types:
                namespace = vars_of(cls)
                if any(name in namespace for name in methods):
                    return True
        return False

    def compare(left, op, right):
        plain_left, plain_right = plain(left), plain(right)
        if plain_left is not not_plain and plain_right is not not_plain:
            return operators[op](plain_left, plain_right)
        if (plain_left is not_plain) != (plain_right is not_plain):
            other = left if plain_left is not_plain else right
            if defines_comparison_in_python(other):
                return False
        return operators[op](left, right)

    def truth(value):
        plain_value = plain(value)
        if plain_value is not not_plain:
            return bool(plain_value)
        if defines_comparison_in_python(value):
            return False
        return bool(value)

    def trust(cls):
        trusted_types.add(cls)
        return cls

    return compare, truth, trust


def _module_snapshot(drop_if_new=()):
    """Copy the namespaces of every loaded module and of the classes they define (and `sys.modules`); return a
    function that puts them back.

    Modules loaded later (by the solution) stay loaded, and attributes of their packages, except those named in
    `drop_if_new` (modules the test imports that could not be loaded beforehand: a solution must not plant a fake
    one for the test).
    """
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
    clear, update, pop, proxy_get = dict.clear, dict.update, dict.pop, type(type.__dict__).get
    class_dict, set_attribute, delete_attribute = type.__dict__["__dict__"].__get__, type.__setattr__, type.__delattr__
    list_, prefixes = list, tuple(name + "." for name in drop_if_new)
    starts, dropped = str.startswith, frozenset(drop_if_new)
    split_last, get, set_item = str.rpartition, dict.get, dict.__setitem__

    def restore():  # no name lookups: the solution may have replaced any builtin
        for name in list_(modules):
            if name not in saved_modules and (name in dropped or starts(name, prefixes)):
                pop(modules, name, None)
        update(modules, saved_modules)
        for namespace, snapshot in saved:
            clear(namespace)
            update(namespace, snapshot)
        # A submodule the solution loaded (`matplotlib.pyplot` loads `matplotlib.backend_bases`) stays loaded, so
        # it stays an attribute of its package, as importing it made it: the test sees what `sys.modules` holds.
        for name in list_(modules):
            if name in saved_modules:
                continue
            parent, dot, child = split_last(name, ".")
            namespace = get(packages, parent) if dot else None
            if namespace is not None and child not in namespace:
                set_item(namespace, child, modules[name])
        for cls, snapshot in classes:
            current = class_dict(cls)
            for name in list_(current):
                if name not in snapshot:
                    try:
                        delete_attribute(cls, name)
                    except (AttributeError, TypeError):
                        pass
            for name, value in snapshot.items():
                if proxy_get(current, name, snapshot) is not value:
                    try:
                        set_attribute(cls, name, value)
                    except (AttributeError, TypeError):
                        pass

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


def _child(kind, solution_code, test_code, genuine, restore_modules, fds, cpu_seconds, max_value_bytes):
    """Body of a test child: never returns. Everything it calls after the solution starts is bound here first.

    `genuine` holds the real objects for the test's builtin and module names (see `_genuine_names`);
    `restore_modules` puts every module back as it was before the solution ran. `fds` are the child's ends of
    its pipes: (result, nonce, stdin, stdout); stdout is None for assert tests, whose prints go to /dev/null.
    """
    write, exit_, read, close, flush_targets = os.write, os._exit, os.read, os.close, (sys.stdout, sys.stderr)
    exec_, eval_, dumps, encode, write_all = builtins.exec, builtins.eval, json.dumps, encode_value, _write_all
    result_fd, nonce_fd, unencodable, copy_dict = _RESULT_FD, _NONCE_FD, _Unencodable, dict
    modules, module_type = sys.modules, type(sys)
    os.setpgid(0, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    # Move every fd above the ones we assign, then assign 0-4, then close the rest (the harness's report pipe).
    result, nonce, stdin, stdout = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (*fds[:3], fds[3] or devnull))
    for source, target in ((stdin, 0), (stdout, 1), (devnull, 2), (result, _RESULT_FD), (nonce, _NONCE_FD)):
        os.dup2(source, target)
    os.closerange(_NONCE_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    # The nonce is read before the solution runs and its pipe closed: the solution cannot read it there.
    secret = read(nonce_fd, 64)
    close(nonce_fd)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    blocked, frame_attributes, refusal, bad_value = _BLOCKED_AUDIT_EVENTS, _FRAME_ATTRIBUTES, RuntimeError, ValueError
    starts, ends, is_instance, text_types = str.startswith, str.endswith, isinstance, (str, bytes)
    open_path, read_link, path_flag, fd_path, busy = os.open, os.readlink, os.O_PATH, "/proc/self/fd/", []

    def real_path(path):
        # Where `path` leads, as the kernel resolves it (an O_PATH descriptor reads nothing).
        busy.append(1)
        try:
            fd = open_path(path, path_flag)
        except OSError:
            return ""
        finally:
            busy.clear()
        try:
            return read_link(fd_path + str(fd))
        finally:
            close(fd)

    def audit(event, args):
        if event in blocked or starts(event, "ctypes."):
            raise refusal(f"{event} is not allowed in the code sandbox")
        if event == "sys._getframe":
            raise bad_value("call stack is not available in the code sandbox")
        if event == "object.__getattr__" and args[1] in frame_attributes:
            raise refusal(f"{args[1]} is not available in the code sandbox")
        if event == "open" and not busy and is_instance(args[0], text_types):
            path = real_path(args[0])
            if starts(path, "/proc/") and (ends(path, "/mem") or ends(path, "/pagemap")):
                raise refusal("reading process memory is not allowed in the code sandbox")

    sys.addaudithook(audit)
    checks = [0]

    def count_check():
        checks[0] += 1

    compare, truth, trust = _make_comparisons(set())
    solution_module = module_type("solution")
    namespace = solution_module.__dict__
    namespace.update({"__name__": "__main__" if kind == "stdio" else "solution", "__builtins__": builtins})
    if kind != "stdio":
        modules["solution"] = solution_module  # a test may `from solution import f`; so may the solution itself
    stage = "load"
    try:
        try:
            exec_(solution_code, namespace)
            if kind != "stdio":
                write(result_fd, b"L")
                stage = "test"
                # The test sees the standard library as it was before the solution ran (a solution that
                # replaced `math.isclose` or `builtins.abs` at import cannot make an assert pass), and the
                # solution's names except where they rebind a builtin or module the test uses.
                restore_modules()
                modules["solution"] = solution_module
                test_globals = copy_dict(namespace)
                test_globals.update(genuine)
                test_globals.update({"__name__": "__test__", "__trl_ext_check__": count_check,
                                     "__trl_ext_compare__": compare, "__trl_ext_truth__": truth,
                                     "__trl_ext_trust_comparison__": trust})
            if kind == "value":
                payload = dumps(encode(eval_(test_code, test_globals))).encode()
                if len(payload) > max_value_bytes:
                    raise unencodable(f"value larger than {max_value_bytes} bytes")
                write_all(write, result_fd, b"V" + payload)
            elif kind == "statement":
                exec_(test_code, test_globals)
                write_all(write, result_fd, b"P" + secret + b":" + str(checks[0]).encode())
        except SystemExit as stop:
            # A stdio program may end with sys.exit() / sys.exit(0); any exit before an assert test is a failure.
            if kind != "stdio" or stop.code not in (None, 0):
                write_all(write, result_fd, f"E{stage}:SystemExit({stop.code!r})".encode(errors="replace")[:300])
        except unencodable as error:
            write_all(write, result_fd, f"U{error}".encode(errors="replace")[:300])
        for stream in flush_targets + (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        if kind == "stdio":
            write_all(write, result_fd, b"D")
    except BaseException as error:  # noqa: BLE001 - anything the solution raises is a failed test
        try:
            message = f"E{stage}:{type(error).__name__}: {error}"
        except BaseException:
            message = f"E{stage}:{type(error).__name__}"
        try:
            write_all(write, result_fd, message.encode(errors="replace")[:300])
        except BaseException:
            pass
    exit_(0)


def _exec_child(argv, fds, cpu_seconds, memory):
    """Body of a C++ test child: the binary with the test's stdin, stdout to the harness, stderr discarded."""
    try:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        stdin, stdout = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (fds[2], fds[3]))
        for source, target in ((stdin, 0), (stdout, 1), (devnull, 2)):
            os.dup2(source, target)
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # its result pipe closes: EOF at once
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.execv(argv[0], argv)
    finally:
        os._exit(127)


def _compile(spec, private_pids):
    """Run the compiler once: `{"status": "ok" | "compile_error" | "compile_timeout", "seconds", "diagnostics"}`."""
    output_read, output_write = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_RDONLY)  # `#include </dev/stdin>` reads nothing
            os.dup2(devnull, 0)
            os.dup2(output_write, 1)
            os.dup2(output_write, 2)
            os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            cpu = int(-(-spec["timeout"] // 1))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_AS, (spec["memory"], spec["memory"]))
            os.execvp(spec["argv"][0], spec["argv"])
        finally:
            os._exit(127)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    os.close(output_write)
    diagnostics, status, timed_out = bytearray(), None, False
    deadline = started + spec["timeout"]
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        ready, _, _ = select.select([output_read], [], [], min(deadline - now, 0.05))
        if ready:
            chunk = os.read(output_read, 1 << 16)
            if not chunk:
                break
            if len(diagnostics) < spec["max_output"]:
                diagnostics += chunk[: spec["max_output"] - len(diagnostics)]
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if _private_pid_namespace(private_pids):
        try:
            os.kill(-1, signal.SIGKILL)  # cc1plus and friends, whatever group they ended up in
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    _reap()
    os.close(output_read)
    ok = not timed_out and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return {
        "status": "ok" if ok else "compile_timeout" if timed_out else "compile_error",
        "seconds": round(time.monotonic() - started, 3),
        "diagnostics": diagnostics.decode(errors="replace")[-2000:],
    }


def _private_pid_namespace(claimed):
    # kill(-1) outside a PID namespace would signal every process of this user on the host: double-check.
    return claimed and os.getpid() in (1, 2)


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _run_test(kind, solution_code, test_code, stdin_text, plan, restore_modules, binary=None):
    """Fork one test child, wait for it up to the timeout, return the record for the trainer.

    With `binary` (C++), a stdio test execs it instead of running Python code."""
    timeout, max_output = plan["timeout"], plan["max_output"]
    result_read, result_write = os.pipe()
    nonce_read, nonce_write = os.pipe()
    stdout_read, stdout_write = os.pipe() if kind == "stdio" else (None, None)
    if kind == "stdio":
        stdin_fd = os.memfd_create("stdin")
        _write_all(os.write, stdin_fd, stdin_text.encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
    else:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
    nonce = os.urandom(16).hex().encode()
    os.write(nonce_write, nonce)  # 32 bytes fit in the pipe; the child reads them before the solution runs
    os.close(nonce_write)
    child_fds = (result_write, nonce_read, stdin_fd, stdout_write)
    pid = os.fork()
    if pid == 0 and binary is not None:
        _exec_child([binary], child_fds, int(-(-timeout // 1)), plan.get("memory"))
    if pid == 0:
        try:
            genuine = _genuine_names(test_code) if test_code is not None else {}
            cpu_seconds = int(-(-timeout // 1))
            if plan.get("memory"):  # as the sandbox's limit; a reused sandbox allows its compiler more
                resource.setrlimit(resource.RLIMIT_AS, (plan["memory"], plan["memory"]))
            _child(kind, solution_code, test_code, genuine, restore_modules, child_fds, cpu_seconds, plan["max_value"])
        finally:
            os._exit(70)
    try:
        os.setpgid(pid, pid)  # also here, so killpg below cannot miss a child that has not run yet
    except OSError:
        pass
    for fd in child_fds:
        if fd is not None:
            os.close(fd)
    result, output = bytearray(), bytearray()
    buffers = {result_read: (result, plan["max_value"] + 512, "value_too_large")}
    if stdout_read is not None:
        buffers[stdout_read] = (output, max_output, "output_limit")
    open_fds = set(buffers)
    deadline = time.monotonic() + timeout
    status = exited_at = reason = None
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            reason = "timeout"
            break
        if status is None:
            finished, wait_status = os.waitpid(pid, os.WNOHANG)
            if finished:
                status, exited_at = wait_status, now
        if exited_at is not None and now > exited_at + 0.2:
            break  # the child is gone; a process it left behind holds the pipes
        ready, _, _ = select.select(list(open_fds), [], [], min(deadline - now, 0.05))
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.discard(fd)
                continue
            buffer, limit, overflow_reason = buffers[fd]
            buffer += chunk
            if len(buffer) > limit:
                del buffer[limit:]
                reason = overflow_reason
        if reason:
            break
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if _private_pid_namespace(plan["private_pids"]):
        try:
            os.kill(-1, signal.SIGKILL)  # everything but the harness (and bubblewrap's init): no leftovers
        except ProcessLookupError:
            pass
    if status is None:
        _, status = os.waitpid(pid, 0)
    _reap()
    for fd in buffers:
        os.close(fd)
    if binary is not None:
        return _exec_record(bytes(output), status, reason)
    return _record(kind, bytes(result), bytes(output), status, reason, nonce)


def _exec_record(output, status, reason):
    if reason is not None:
        return {"loaded": True, "status": "failed", "reason": reason}
    if os.WIFSIGNALED(status):
        return {"loaded": True, "status": "failed", "reason": "killed", "signal": os.WTERMSIG(status)}
    if os.WEXITSTATUS(status) != 0:
        return {"loaded": True, "status": "failed", "reason": "error", "error": f"exit status {os.WEXITSTATUS(status)}"}
    return {"loaded": True, "status": "output", "stdout": output.decode(errors="replace")}


def _record(kind, result, output, status, reason, nonce):
    loaded = result.startswith(b"L")
    body = result[1:] if loaded else result
    record = {"loaded": loaded or kind == "stdio"}
    if reason is not None:
        record.update(status="failed", reason=reason)
    elif body.startswith(b"E"):
        stage, _, message = body[1:].decode(errors="replace").partition(":")
        record.update(status="failed", reason="error", error=message.strip())
        record["loaded"] = stage != "load"
    elif body.startswith(b"U"):
        record.update(status="failed", reason="unencodable", error=body[1:].decode(errors="replace"))
    elif kind == "value" and body.startswith(b"V"):
        record.update(status="value", value=body[1:].decode(errors="replace"))
    elif kind == "statement" and body.startswith(b"P"):
        secret, _, count = body[1:].partition(b":")
        if secret != nonce or not count.isdigit():
            record.update(status="failed", reason="bad_nonce")
        elif int(count) == 0:
            record.update(status="no_check")
        else:
            record.update(status="passed", checks=int(count))
    elif kind == "stdio" and body == b"D":
        record.update(status="output", stdout=output.decode(errors="replace"))
    elif os.WIFSIGNALED(status):
        record.update(status="failed", reason="killed", signal=os.WTERMSIG(status))
    else:
        record.update(status="failed", reason="exited", code=os.WEXITSTATUS(status))
    return record


def _make_undumpable():
    # PR_SET_DUMPABLE 0: /proc/<harness>/{fd,mem} become inaccessible to the (capability-less) children.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass


def _refuse_signal_handlers():
    """`signal.signal` accepts only SIG_DFL and SIG_IGN: a Python handler receives the interrupted frame."""
    import _signal

    if getattr(_signal.signal, "only_default_handlers", False):
        return
    original, allowed, as_int = _signal.signal, (signal.SIG_DFL, signal.SIG_IGN), int

    def only_default_handlers(number, handler):
        if handler not in allowed:
            raise RuntimeError("Python signal handlers are not allowed in the code sandbox")
        return original(as_int(number), as_int(handler))

    only_default_handlers.only_default_handlers = True
    _signal.signal = signal.signal = only_default_handlers


def main(argv):
    if argv[1:] == ["--serve"]:
        return _serve(argv[0])
    plan_path, solution_path = argv[1], argv[2]
    with open(plan_path, encoding="utf-8") as file:
        plan = json.load(file)
    with open(solution_path, encoding="utf-8", errors="replace") as file:
        source = file.read()
    _judge_program(plan, source, sys.stdout.buffer, remove=(plan_path, solution_path, argv[0]))


def _serve(script):
    """Judge one program per request line on stdin (`{"plan", "source"}`), each answered by its records and a
    `{"done": true}` line, until stdin closes. Between requests every process but this one is killed and the
    sandbox's scratch directories and System V IPC objects are emptied, so each program starts where a fresh
    sandbox would (see `trl_ext.sandbox.core.SandboxServer`). This process never runs a program itself."""
    try:
        os.unlink(script)
    except OSError:
        pass
    requests, report = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = requests.readline()
        if not line:
            return
        request = json.loads(line)
        plan = request["plan"]
        try:
            remove = ()
            if plan.get("language") == "cpp":
                with open("solution.cpp", "w", encoding="utf-8") as file:
                    file.write(request["source"])
                remove = ("solution.cpp",)
            _judge_program(plan, request["source"], report, remove=remove)
        except Exception:  # noqa: BLE001 - a harness bug: reported on stderr, the next request still runs
            import traceback

            traceback.print_exc()
        finally:
            _clean_up(plan)
            report.write(b'{"done": true}\n')
            report.flush()


def _clean_up(plan):
    if _private_pid_namespace(plan["private_pids"]):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap()
    for directory in plan.get("scratch", ()):
        _empty_directory(directory)
    if plan.get("private_ipc"):
        _remove_ipc_objects()


def _mount_points():
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as file:
            return {line.split()[4].replace("\\040", " ") for line in file if len(line.split()) > 4}
    except OSError:
        return set()


def _empty_directory(directory):
    """Remove what programs left in `directory`; mount points (the read-only Python installation under a
    tmpfs home) and the directories leading to them stay."""
    import shutil

    def writable_and_retry(function, path, _):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            function(path)
        except OSError:
            pass

    mounts = _mount_points()
    keep = {os.path.dirname(mount) for mount in mounts}
    for mount in list(keep):
        while mount not in ("/", ""):
            keep.add(mount)
            mount = os.path.dirname(mount)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(os.path.abspath(directory), name)
        if path in mounts:
            continue
        if path in keep:
            _empty_directory(path)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=writable_and_retry)
        else:
            try:
                os.unlink(path)
            except OSError:
                writable_and_retry(os.unlink, path, None)


def _remove_ipc_objects():
    """Remove the System V shared memory, semaphores and message queues a program left (private IPC namespace)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):
        return
    for kind, remove in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="utf-8") as file:
                lines = file.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1:
                identifier = int(fields[1])
                if kind == "sem":
                    remove(identifier, 0, 0)  # IPC_RMID = 0
                else:
                    remove(identifier, 0, None)


def _judge_program(plan, source, report, remove=()):
    def emit(index, record):
        record["test"] = index
        report.write(json.dumps(record).encode() + b"\n")
        report.flush()

    tests = plan["tests"]
    binary = None
    if plan.get("language") == "cpp":
        outcome = _compile(plan["compile"], plan["private_pids"])
        report.write(json.dumps({"compile": outcome}).encode() + b"\n")
        report.flush()
        if outcome["status"] != "ok":
            for index in range(len(tests)):
                emit(index, {"status": "failed", "reason": outcome["status"], "error": outcome["diagnostics"][-300:]})
            return
        binary = os.path.abspath(plan["compile"]["output"])
    # The solution gets no copy of the plan, of itself on disk, or of this harness to read.
    for path in remove:
        try:
            os.unlink(path)
        except OSError:
            pass
    _make_undumpable()
    if binary is not None:
        skip_reason = None
        for index, test in enumerate(tests):
            if skip_reason is not None:
                emit(index, {"status": "failed", "reason": "not_run", "error": skip_reason})
                continue
            record = _run_test("stdio", None, None, test.get("stdin", ""), plan, None, binary=binary)
            emit(index, record)
            if plan["stop_on_failure"] and record["status"] == "failed":
                skip_reason = "an earlier test failed (all-or-nothing scoring)"
        return
    try:
        solution_code = compile(source, "solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as error:
        for index in range(len(tests)):
            emit(index, {"status": "failed", "reason": "syntax_error", "error": f"{type(error).__name__}: {error}"})
        return
    # Standard modules the tests name (`math` in `math.isclose(...)`) and the modules they import are loaded
    # before any solution runs, so the tests get them as they were then (`_genuine_names`, `_module_snapshot`).
    named, imported = set(), set()
    for test in tests:
        if test["kind"] != "stdio":
            named.update(_names_in(compile(test["source"], "<test>", "eval" if test["kind"] == "value" else "exec")))
            imported.update(test.get("imports", ()))
    not_loaded = []
    # Never the program itself (`from solution import f`): it runs only in each test's own process.
    imported = {name for name in imported if name != "solution" and not name.startswith("solution.")}
    for name in sorted((named & _IMPORTABLE_STDLIB) | imported):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module that fails to import is simply not pre-loaded
            if name in imported:
                not_loaded.append(name)
    _refuse_signal_handlers()
    restore_modules = _module_snapshot(drop_if_new=not_loaded)
    skip_reason = None
    for index, test in enumerate(tests):
        kind = test["kind"]
        if skip_reason is not None:
            emit(index, {"status": "failed", "reason": "not_run", "error": skip_reason})
            continue
        if kind == "value":
            test_code = compile(test["source"], "<test>", "eval", dont_inherit=True)
        elif kind == "statement":
            test_code = compile(test["source"], "<test>", "exec", dont_inherit=True)
        else:
            test_code = None
        record = _run_test(kind, solution_code, test_code, test.get("stdin", ""), plan, restore_modules)
        emit(index, record)
        if kind != "stdio" and not record["loaded"]:
            # The solution's top-level code failed or hung; it would do the same before every assert test.
            skip_reason = "the solution's top-level code failed: " + record.get("error", record.get("reason", ""))
        elif plan["stop_on_failure"] and record["status"] == "failed":
            skip_reason = "an earlier test failed (all-or-nothing scoring)"


if __name__ == "__main__":
    main(sys.argv)
