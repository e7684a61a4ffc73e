"""Faults of the judge, injected from outside as an operator or the kernel would: a fault of the judge never becomes
a verdict. Right programs are judged while the sandbox's bubblewrap, its harness or a test process is killed, the
harness is stopped (a hung server), or the trainer cannot write the sandbox's files (a full scratch space): no right
program scores 0, and no verdict is lost (the program is judged again on a fresh sandbox; only a judge that fails
twice gives None, with a warning naming the cause). Everything runs for real; the faults are real signals.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time

import pytest
from sandbox_helpers import ISOLATING_BACKENDS, backend_id

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox.testing import close_servers

# A right program that takes a moment, so that the fault lands while it is being judged.
SLOW_SQUARE = "import time\ndef square(x):\n    time.sleep(0.6)\n    return x * x\n"
TESTS = ["assert square(3) == 9", "assert square(-2) == 4"]
BACKENDS = [pytest.param(backend, id=backend_id(backend)) for backend in ISOLATING_BACKENDS]


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def descendants() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process below this one."""
    processes = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                processes[int(entry)] = (parent, cmdline.read().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue
    below, frontier = {}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, command) in processes.items():
            if ppid == parent and pid not in below:
                below[pid] = (ppid, command)
                frontier.append(pid)
    return below


def harness_processes() -> dict[str, list[int]]:
    """The sandbox's processes below this one, by role: bubblewrap, the harness, and the processes it forked
    (which keep the harness's command line)."""
    processes = descendants()
    runs_harness = {pid for pid, (_, command) in processes.items()
                    if "harness.py" in command and "bwrap" not in command.split(" ", 1)[0]}
    roles = {"bwrap": [], "harness": [], "test": []}
    for pid, (parent, command) in processes.items():
        if "bwrap" in command.split(" ", 1)[0]:
            roles["bwrap"].append(pid)
        elif pid in runs_harness and parent not in runs_harness:
            roles["harness"].append(pid)
    roles["test"] = [pid for pid, (parent, _) in processes.items() if parent in roles["harness"]]
    return roles


def inject(role: str, sig: int, after: float, stop: threading.Event, count: list) -> None:
    """Send `sig` to the first process of `role` seen after `after` seconds, once per program, until `stop`."""
    time.sleep(after)
    while not stop.is_set():
        targets = harness_processes()[role]
        if targets:
            try:
                os.kill(targets[0], sig)
                count.append(targets[0])
            except ProcessLookupError:
                pass
            return
        time.sleep(0.01)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
@pytest.mark.parametrize(
    ("role", "sig"),
    [("bwrap", signal.SIGKILL), ("harness", signal.SIGKILL), ("test", signal.SIGKILL)],
    ids=["kill bubblewrap", "kill the harness", "kill a test process"],
)
def test_a_killed_judge_never_scores_a_right_program(backend, reuse, role, sig):
    reward = CodeReward(timeout=3.0, memory_mb=256, isolation=backend, reuse_sandbox=reuse, num_workers=2)
    try:
        assert reward(completions=[fenced(SLOW_SQUARE)], tests=[TESTS]) == [1.0]  # servers started, warm
        stop, hits = threading.Event(), []
        killer = threading.Thread(target=inject, args=(role, sig, 0.3, stop, hits))
        killer.start()
        # Four distinct programs (the same program on the same tests would be judged once).
        programs = [fenced(SLOW_SQUARE + f"# program {index}\n") for index in range(4)]
        scores = reward(completions=programs, tests=[TESTS] * 4)
        stop.set()
        killer.join()
    finally:
        close_servers(reward.sandbox)
    assert hits, f"no {role} process was found to kill"
    assert scores == [1.0] * 4, f"after killing the {role} ({hits}): {scores}"


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_a_hung_harness_is_replaced(backend, reuse):
    # SIGSTOP: the harness neither answers nor dies; past the run's deadline the program is judged elsewhere.
    reward = CodeReward(timeout=1.0, memory_mb=256, isolation=backend, reuse_sandbox=reuse, num_workers=1)
    try:
        stop, hits = threading.Event(), []
        stopper = threading.Thread(target=inject, args=("harness", signal.SIGSTOP, 0.2, stop, hits))
        stopper.start()
        scores = reward(completions=[fenced(SLOW_SQUARE)], tests=[TESTS])
        stop.set()
        stopper.join()
    finally:
        for pid in hits:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        close_servers(reward.sandbox)
    assert hits and scores == [1.0]


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_a_judge_that_cannot_write_its_files_gives_none_with_the_cause(backend, reuse, caplog):
    # The trainer cannot write the sandbox's files (as on a full disk: writes fail): never 0, never a crash.
    import trl_ext.rewards.code as code_module
    import trl_ext.sandbox.code_tests as code_tests

    code_module._warned.clear()
    code_tests._warned.clear()
    reward = CodeReward(timeout=1.0, memory_mb=256, isolation=backend, reuse_sandbox=reuse, num_workers=1)
    close_servers(reward.sandbox)
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, previous_limit[1]))
        with caplog.at_level("WARNING"):
            scores = reward(completions=[fenced("def square(x):\n    return x * x\n")], tests=[TESTS])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous_limit)
        signal.signal(signal.SIGXFSZ, previous_handler)
        close_servers(reward.sandbox)
    assert scores == [None]
    assert "the judge failed, not the program" in caplog.text and "could not start" in caplog.text


# A checker that takes a moment (a sleep before its verdict), so that its sandbox run can be killed meanwhile.
SLOW_CHECKER = (
    "import sys, time\ntime.sleep(0.5)\nn = int(open(sys.argv[1]).read())\n"
    "got = open(sys.argv[3]).read().split()\nsys.exit(0 if len(got) == 2 and sum(map(int, got)) == n else 1)\n"
)


def test_a_killed_checker_run_never_scores_a_right_program(backend):
    # The checker's own sandbox run (a fresh one, `runner.py`) dies: it is run again, never scored as a rejection.
    reward = CodeReward(timeout=3.0, memory_mb=256, isolation=backend, checker_column="checker", num_workers=1)
    tests = [{"input": "5", "output": "1 4"}]
    stop, hits = threading.Event(), []

    def kill_runner():
        while not stop.is_set() and not hits:
            for pid, (_, command) in descendants().items():
                if "runner.py" in command and "bwrap" not in command.split(" ", 1)[0]:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        hits.append(pid)
                    except ProcessLookupError:
                        pass
                    break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_runner)
    killer.start()
    try:
        scores = reward(completions=[fenced("n = int(input())\nprint(2, n - 2)\n")], tests=[tests],
                        checker=[SLOW_CHECKER])
    finally:
        stop.set()
        killer.join()
        close_servers(reward.sandbox)
    assert hits and scores == [1.0]


def without_processes(body) -> tuple[int, bytes]:
    """Run `body(write_fd)` in a child that may start no process (an ordinary user's `RLIMIT_NPROC` of 0): the
    child's exit status and what `body` wrote."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read_end)
            if os.getuid() == 0:
                os.setuid(65534)  # root is never refused for RLIMIT_NPROC
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
            body(write_end)
        finally:
            os._exit(0)  # reached only if no fork succeeded in `body` (or in both processes)
    os.close(write_end)
    _, status = os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as written:
        return status, written.read()


def test_a_fork_the_kernel_refuses_the_judge_is_a_fault_of_the_judge():
    # Before the program starts, a process of the judge that cannot be forked (no process left to this user)
    # is reported on the failure pipe as the judge's fault (the harness then has the program judged again),
    # never left to look like the program's exit.
    from trl_ext.sandbox import program_isolation

    status, reported = without_processes(program_isolation.fork_for_judge)
    assert os.WEXITSTATUS(status) == 72
    assert reported.startswith(program_isolation.JUDGE_FAULT) and b"cannot fork" in reported


def test_a_compiler_the_kernel_cannot_fork_is_a_fault_of_the_judge_not_a_compile_error():
    # The harness's fork of the C++ compiler refused (no process left to this user) is reported as the judge's
    # fault, so the program is judged again on a fresh sandbox; before, the exception ended the harness.
    import json

    from trl_ext.sandbox import harness

    spec = {"argv": ["g++", "-x", "c++", "-"], "timeout": 5, "memory": 1 << 30, "max_output": 4096}
    _, written = without_processes(
        lambda result: os.write(result, json.dumps(harness._compile(spec, private_pids=False)).encode())
    )
    outcome = json.loads(written)
    assert outcome["status"] == "judge_fault" and "cannot fork the compiler" in outcome["diagnostics"]
