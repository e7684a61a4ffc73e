"""Test harness of `run_code_tests`: the judge inside the sandbox (standard library only).

    python harness.py plan.json solution.py             (started by `Sandbox.run_python`)
    python harness.py plan.json solution.cpp            (C++: compiled here first)
    python harness.py --serve                           (a reused sandbox: one request per line on stdin)

The harness never runs a program itself. For each test it forks a process that, under bubblewrap, enters
namespaces of its own (`program_isolation`: its own PIDs, mounts, IPC, no `/proc`, fresh writable places, no
capabilities), so the program can neither see, signal, limit nor read the harness, its pipes or another
program, and leaves nothing behind. The harness reads what the test reports from a pipe of that test's own and
writes one JSON line per test on its stdout, which no program can reach.

What decides a test, by kind (the trainer builds the plan, see `trl_ext.sandbox.testing`):

- "value": the test process reports the value of the non-literal side of `assert <expr> <op> <literal>` as plain
  data (`plain_data`); the trainer compares it with the literal, which never enters the sandbox.
- "stdio": the program runs as `__main__` with the test's input on stdin; the trainer compares its stdout with
  the expected output (never in the sandbox either).
- "statement" (a HumanEval `check(...)` call, a pytest-style test function, a unittest method): passes only if
  it returned without raising *and ran at least one check*; its `assert`s were rewritten by the trainer
  (`instrument_checks`) to count checks and compute with plain copies (`plain_data.make_comparisons`). Most run
  in a process of the judge's that calls the program over a socket (`judge_side`): the counter, comparisons and
  record are out of the program's reach. A test that needs the program's own process (it patches modules,
  captures output, shares files, imports installed packages) runs there instead, guarded by an audit hook and
  by the absence of `/proc`, with no second thread (`one_thread`), the harness's functions bound as constants of
  the test's code, and every call into the program under `call_guard`; its pass record carries a nonce read
  before the program ran (`test_process`). Whether a test can check anything at all is decided by the trainer
  from the test's source (`check_sites`), never from what a program made it do.

Before a test runs, the test process puts every loaded module, and every class defined in one, back as it was
before the program ran, and gives the test the genuine builtins and modules for the names it uses (a program that
replaced `math.isclose` or `builtins.abs` does not change what the test computes). Modules the program imported
stay loaded, so a test's `unittest.mock.patch("random.randint")` patches the module the program uses. The
program is importable as the module `solution` (`from solution import f`).

C++: the compiler runs once, in namespaces of its own as a program (its output stays in the working directory),
with wall-clock, CPU-time and address-space limits; a `{"compile": ...}` line reports it. Each stdin/stdout test
then execs the binary, from an open descriptor, with the test's input and the per-test memory limit.

Every test process gets its own process group and CPU-time limit and is killed after the per-test timeout; its
PID namespace ends with it, so nothing a test started survives into the next one.
"""

import json
import os
import resource
import select
import signal
import sys
import time
import warnings

if __package__:  # imported by the trainer (`trl_ext.sandbox.harness`)
    from . import one_thread, program_isolation, test_ends
    from .plain_data import _write_all, decode_value, encode_value, value_types  # noqa: F401 - decode_value: API
    from .test_process import _child, _exec_child, _genuine_names, _judged_apart, _module_snapshot, _names_in
    from .test_records import _exec_record, _record, _value_records
else:  # the script inside the sandbox, beside copies of its modules (`HARNESS_MODULES`)
    # Numerical libraries start no thread pool of their own: a test process running the program allows one thread.
    for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                     "VECLIB_MAXIMUM_THREADS"):
        os.environ[_threads] = "1"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import one_thread
    import program_isolation
    import test_ends
    from plain_data import _write_all, decode_value, encode_value, value_types  # noqa: F401
    from test_process import _child, _exec_child, _genuine_names, _judged_apart, _module_snapshot, _names_in
    from test_records import _exec_record, _record, _value_records

# The files `run_code_tests` copies into the sandbox: this script, then the modules it imports.
HARNESS_MODULES = ("harness.py", "plain_data.py", "test_process.py", "program_isolation.py", "test_ends.py",
                   "judge_side.py", "one_thread.py", "call_guard.py", "answer_traps.py", "lasting_code.py",
                   "test_namespace.py", "audit_hook.py", "test_records.py", "code_provenance.py", "own_anything.py",
                   "masked_positions.py", "library_closures.py", "dispatch_hooks.py", "context_state.py",
                   "dict_versions.py")

# Standard-library modules a test may name, minus those with side effects on import.
_IMPORTABLE_STDLIB = frozenset(name for name in sys.stdlib_module_names if not name.startswith("_") and name not in {
    "this", "antigravity", "turtle", "turtledemo", "idlelib", "tkinter"})


def _compile(spec, private_pids, isolation=None):
    """Run the compiler once: `{"status": "ok" | "compile_error" | "compile_timeout" | "isolation_unavailable",
    "seconds", "diagnostics"}`. With `isolation`, in namespaces of its own as a program (the source is untrusted:
    `#include "/proc/1/fd/0"` must find nothing), except that it writes its output in the working directory."""
    output_read, output_write = os.pipe()
    failure_read, failure_write = os.pipe()
    test_ends.settle()
    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError as error:  # the kernel refused the judge a process: the judge's fault, never a compile error
        for descriptor in (output_read, output_write, failure_read, failure_write):
            os.close(descriptor)
        return {"status": "judge_fault", "seconds": 0.0, "diagnostics": f"cannot fork the compiler: {error}"}
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.close(failure_read)

            def compiler():
                devnull = os.open(os.devnull, os.O_RDONLY)  # `#include </dev/stdin>` reads nothing
                os.dup2(devnull, 0)
                os.dup2(output_write, 1)
                os.dup2(output_write, 2)
                os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
                cpu = int(-(-spec["timeout"] // 1))
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
                resource.setrlimit(resource.RLIMIT_AS, (spec["memory"], spec["memory"]))
                try:
                    os.execvp(spec["argv"][0], spec["argv"])
                except OSError as error:
                    os.write(1, f"cannot start the compiler: {error}".encode())

            if isolation:
                program_isolation.run_isolated(compiler, failure_write, isolation["writable"], isolation["size"],
                                               keep_working_directory=True)
            compiler()
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
    status = None if timed_out else test_ends.wait_until(pid, deadline)
    timed_out = timed_out or status is None
    status = test_ends.end(pid, {"private_pids": private_pids}, status, all_answered=False)  # cc1plus and friends too
    os.close(output_read)
    ok = not timed_out and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    failure = test_ends.reported_failure(failure_read, failure_write)
    return {  # a failure the isolating process reported is the judge's (rerun) or the isolation's, never the program's
        "status": failure[0] if failure is not None else "ok" if ok else "compile_timeout" if timed_out
        else "compile_error",
        "seconds": round(time.monotonic() - started, 3),
        "diagnostics": diagnostics.decode(errors="replace")[-2000:],
    }


def _run_test(kind, solution_code, test_code, stdin_text, plan, restore_modules, known_types=(), binary=None,
              plan_index=0):
    """Fork one test child, wait for it up to the timeout, return the record for the trainer.

    With `binary` (C++: an open descriptor of the compiled program), a stdio test execs it instead of running
    Python code. With `plan["isolation"]`, the test runs in namespaces of its own (`program_isolation`). Kind
    "values" (`test_code` a list): consecutive value tests in one process, as the datasets' own harnesses run a
    program's asserts, each with its own timeout; returns a list of records (None: not reached)."""
    test_ends.settle()
    timeout, max_output = plan["timeout"], plan["max_output"]
    count = len(test_code) if kind == "values" else 1
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
    failure_read, failure_write = os.pipe()  # held by the isolating process alone (`program_isolation`)
    apart = kind == "statement" and plan["tests"][plan_index].get("apart")
    pid = os.fork()
    if pid == 0:
        try:
            # The program reaches this module's globals: only `restore_modules` may hold the saved namespaces now.
            _SNAPSHOT[:] = [None, None]
            os.close(failure_read)
            test = _TestBody(kind, solution_code, test_code, plan, restore_modules, known_types, binary, child_fds,
                             int(-(-timeout // 1)) * count, failure_write, apart)
            os.setpgid(0, 0)
            isolation = plan.get("isolation")
            if apart:
                test.run()  # the judge's process: it isolates the program itself
            if isolation:
                program_isolation.run_isolated(test.run, failure_write, isolation["writable"], isolation["size"],
                                               stdin_fd=stdin_fd if kind == "stdio" else None,
                                               refuse_threads=one_thread.refuse_threads if test.one_thread else None)
            test.refuse_threads_unisolated()
            test.run()
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
    buffers = {result_read: (result, (plan["max_value"] + 512) * count, "value_too_large")}
    if stdout_read is not None:
        buffers[stdout_read] = (output, max_output, "output_limit")
    frames = result if kind == "values" else None
    status, reason = test_ends.collect(pid, buffers, timeout, frames, count)
    status = test_ends.end(pid, plan, status, all_answered=frames is not None and test_ends.answered(frames) >= count)
    for fd in buffers:
        os.close(fd)
    failure = test_ends.reported_failure(failure_read, failure_write)
    if failure is not None:
        reason, error = failure
        record = {"loaded": False, "status": "failed", "reason": reason, "error": error}
        return [record] * count if kind == "values" else record
    if binary is not None:
        return _exec_record(bytes(output), status, reason)
    if kind == "values":
        return _value_records(bytes(result), status, reason, count)
    return _record(kind, bytes(result), bytes(output), status, reason, nonce)


class _TestBody:
    """What a test process runs, once it has its namespaces: a C++ binary, a statement test judged apart (this
    process is then the judge's), or the program with its test in one process (`test_process._child`), where a
    statement test allows no second thread (`one_thread`)."""

    def __init__(self, kind, solution_code, test_code, plan, restore_modules, known_types, binary, fds,
                 cpu_seconds, failure_fd, apart):
        self.kind, self.solution_code, self.test_code, self.plan = kind, solution_code, test_code, plan
        self.restore_modules, self.known_types, self.binary, self.fds = restore_modules, known_types, binary, fds
        self.cpu_seconds, self.failure_fd, self.apart = cpu_seconds, failure_fd, apart
        self.one_thread = kind == "statement" and not apart and binary is None

    def refuse_threads_unisolated(self):
        """Without namespaces (the trusted-code backends), refuse threads here; a kernel that cannot is reported as
        a failure of the isolation (the failure pipe closes with the program's other descriptors, `_child`)."""
        if not self.one_thread:
            return
        try:
            one_thread.refuse_threads()
        except OSError as error:
            os.write(self.failure_fd, program_isolation.ISOLATION_FAILED + str(error).encode(errors="replace")[:200])
            os._exit(71)

    def run(self):
        kind, test_code, plan = self.kind, self.test_code, self.plan
        if self.apart:
            _judged_apart(self.solution_code, test_code, _genuine_names(test_code), self.known_types, self.fds,
                          self.cpu_seconds, plan, self.failure_fd)
        if self.binary is not None:
            _exec_child(self.binary, self.fds, self.cpu_seconds, plan.get("memory"))
        genuine = {}
        for code in test_code if kind == "values" else [test_code] if test_code is not None else []:
            genuine.update(_genuine_names(code))
        if plan.get("memory"):  # as the sandbox's limit; a reused sandbox allows its compiler more
            resource.setrlimit(resource.RLIMIT_AS, (plan["memory"], plan["memory"]))
        _child(kind, self.solution_code, test_code, genuine, self.restore_modules, self.known_types, self.fds,
               self.cpu_seconds, plan["max_value"])


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
    program_isolation.remember_mount_points()
    program_isolation.become_subreaper()
    if argv[1:] == ["--serve"]:
        return _serve(argv[0])
    plan_path, solution_path = argv[1], argv[2]
    _remove_own_files(argv[0])
    with open(plan_path, encoding="utf-8") as file:
        plan = json.load(file)
    with open(solution_path, encoding="utf-8", errors="replace") as file:
        source = file.read()
    _judge_program(plan, source, sys.stdout.buffer, remove=(plan_path, solution_path))
    sys.stdout.buffer.write(b'{"done": true}\n')  # the trainer knows the harness finished (a fault otherwise)
    sys.stdout.buffer.flush()
    test_ends.settle()


def _serve(script):
    """Judge one program per request line on stdin (`{"plan", "source"}`), each answered by its records and a
    `{"done": true}` line, until stdin closes. Between requests every process but this one is killed and the
    sandbox's scratch directories and System V IPC objects are emptied, so each program starts where a fresh
    sandbox would (see `trl_ext.sandbox.core.SandboxServer`). This process never runs a program itself."""
    _remove_own_files(script)
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
            # The answer first: the sandbox is emptied while the trainer reads it, and the next request is read
            # only once it is empty.
            report.write(b'{"done": true}\n')
            report.flush()
            program_isolation.clean_up_between_programs(  # what it kills is waited for before the next fork
                plan, test_ends.private_pid_namespace(plan["private_pids"]), test_ends.reap_later)


def _remove_own_files(script):
    directory = os.path.dirname(os.path.abspath(script))
    for name in HARNESS_MODULES:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def _judge_program(plan, source, report, remove=()):
    def emit(index, record, flush=True):
        record["test"] = index
        report.write(json.dumps(record).encode() + b"\n")
        if flush:
            report.flush()

    if plan.get("isolation"):  # once: the programs' processes inherit the one, and bind their /dev from the other
        program_isolation.empty_bounding_set()
        program_isolation.make_dev_template()
    tests = plan["tests"]
    binary = None
    if plan.get("language") == "cpp":
        outcome = _compile(plan["compile"], plan["private_pids"], plan.get("isolation"))
        report.write(json.dumps({"compile": outcome}).encode() + b"\n")
        report.flush()
        if outcome["status"] != "ok":
            for index in range(len(tests)):
                emit(index, {"status": "failed", "reason": outcome["status"], "error": outcome["diagnostics"][-300:]})
            return
        binary = os.open(plan["compile"]["output"], os.O_RDONLY | os.O_CLOEXEC)
    # The solution gets no copy of the plan, of itself on disk, or of this harness to read.
    for path in remove:
        try:
            os.unlink(path)
        except OSError:
            pass
    program_isolation.make_undumpable()
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
        os.close(binary)
        return
    # The harness's functions are string constants in the tests' code until bound: a string called is expected.
    warnings.filterwarnings("ignore", category=SyntaxWarning)
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
    if "numpy.testing" in sys.modules:  # the masks its checks compare are NumPy's own (`masked_positions`): loaded
        __import__("numpy.ma")  # before any program runs; failing, the harness fails (the judge's fault: judged again)
    _refuse_signal_handlers()
    in_process = any(test["kind"] == "statement" and not test.get("apart") for test in tests)
    restore_modules = _snapshot(not_loaded, in_process)  # with closures where a test shares the program's process
    known_types = _known_types()
    skip_reason, batched = None, _batch_values(tests, solution_code, plan, restore_modules, known_types)
    for index, test in enumerate(tests):
        kind = test["kind"]
        if skip_reason is not None:
            emit(index, {"status": "failed", "reason": "not_run", "error": skip_reason})
            continue
        if batched.get(index) is not None:
            record = batched[index]
        elif kind == "value":
            test_code = compile(test["source"], "<test>", "eval", dont_inherit=True)
        elif kind == "statement":
            test_code = compile(test["source"], "<test>", "exec", dont_inherit=True)
        else:
            test_code = None
        if batched.get(index) is None:
            record = _run_test(kind, solution_code, test_code, test.get("stdin", ""), plan, restore_modules,
                               known_types, plan_index=index)
        emit(index, record, flush=batched.get(index + 1) is None)  # a batch's records go back in one write
        if kind != "stdio" and not record["loaded"]:
            # The solution's top-level code failed or hung; it would do the same before every assert test.
            skip_reason = "the solution's top-level code failed: " + record.get("error", record.get("reason", ""))
        elif plan["stop_on_failure"] and record["status"] == "failed":
            skip_reason = "an earlier test failed (all-or-nothing scoring)"


def _batch_values(tests, solution_code, plan, restore_modules, known_types):
    """Records of the program's value tests, run together in one process (`_run_test` kind "values"), by index."""
    indices = [index for index, test in enumerate(tests) if test["kind"] == "value"]
    if len(indices) < 2:
        return {}
    codes = [compile(tests[index]["source"], "<test>", "eval", dont_inherit=True) for index in indices]
    return dict(zip(indices, _run_test("values", solution_code, codes, "", plan, restore_modules, known_types)))


_SNAPSHOT = [None, None]  # ((the modules loaded then, those to drop, whether cells were read), the restore function)


def _snapshot(not_loaded, closures):
    """`_module_snapshot(not_loaded, closures)`, taken again only when this process (no program runs in it) loaded
    other modules since, or the cells are asked for and were not read: one that read them serves every test. A test
    process drops it from `_SNAPSHOT` before the program runs (`_run_test`)."""
    key = (frozenset(sys.modules), tuple(sorted(not_loaded)))
    if _SNAPSHOT[0] is None or _SNAPSHOT[0][:2] != key or closures and not _SNAPSHOT[0][2]:
        _SNAPSHOT[:] = [(*key, closures), _module_snapshot(not_loaded, closures)]
    return _SNAPSHOT[1]


_KNOWN_TYPES = [frozenset(), frozenset()]  # (the modules loaded then, the classes found): this process runs no program


def _known_types():
    """Classes that exist before any program runs: those written in Python that loaded modules hold (and their
    bases), and the `datetime` module's. A value of one of them may take part in a test's comparison as it is
    (see `plain_data.make_comparisons`); a value of a class the program wrote may not."""
    loaded = frozenset(sys.modules)
    if loaded == _KNOWN_TYPES[0]:
        return _KNOWN_TYPES[1]
    heap = 1 << 9
    flags = type.__dict__["__flags__"].__get__
    known = value_types()
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is not dict:
            continue
        for value in list(namespace.values()):
            if isinstance(value, type) and flags(value) & heap:
                known.update(cls for cls in value.__mro__ if flags(cls) & heap)
    _KNOWN_TYPES[:] = [loaded, frozenset(known)]
    return _KNOWN_TYPES[1]


if __name__ == "__main__":
    main(sys.argv)
