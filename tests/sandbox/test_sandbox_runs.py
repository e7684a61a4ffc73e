"""Sandbox runs: limits, isolation, cleanup, under every backend this machine offers. Programs here really
run; nothing is mocked.

Destructive programs (fork bombs, `kill(-1)`) only run under namespaces: without them a root test process
would share its PID space with the program.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sandbox_helpers import ISOLATING_BACKENDS, MARGIN, backend_id, leftover_processes, run_cgroups

from trl_ext.sandbox import Backend, Sandbox, SandboxLimits

BWRAP = [pytest.param(backend, id=backend_id(backend)) for backend in ISOLATING_BACKENDS]
# The explicit opt-in `unshare` isolates processes and network (not files): the process tests run under it too.
NAMESPACED = [*BWRAP, pytest.param("unshare", id="unshare")]


@pytest.fixture(scope="module", params=BWRAP)
def bwrap_sandbox(request) -> Sandbox:
    sandbox = Sandbox(SandboxLimits(wall_time=10), isolation=request.param)
    assert sandbox.isolation == "bwrap" and sandbox.backend == request.param
    return sandbox


def sandbox_for(isolation: str | Backend, **limits) -> Sandbox:
    return Sandbox(SandboxLimits(**{"wall_time": 10, **limits}), isolation=isolation)


# ---------------------------------------------------------------------------------------------- basic runs


def test_python_program_gets_files_args_stdin_in_a_fresh_directory(bwrap_sandbox):
    program = (
        "import os, sys\n"
        "print(os.getcwd(), sorted(os.listdir('.')), sys.argv[1:], os.getuid())\n"
        "print(open('data.txt').read().strip(), input())\n"
        "open('written.txt', 'w').write('x')\n"
    )
    result = bwrap_sandbox.run_python(
        "main.py", files={"main.py": program, "data.txt": "from a file\n"}, args=["--flag", "7"], stdin="from stdin\n"
    )
    assert result.ok, result.stderr
    first, second = result.stdout.decode().splitlines()
    uid = 65534 if bwrap_sandbox.backend.user_namespace else 0  # privileged mode: uid 0, no capabilities
    assert first == f"/sandbox ['data.txt', 'main.py'] ['--flag', '7'] {uid}"
    assert second == "from a file from stdin"
    # The next run starts from an empty directory again.
    again = bwrap_sandbox.run(["ls", "-A"])
    assert again.ok and again.stdout == b""
    assert leftover_processes(result.run_id) == []


def test_the_program_has_no_capabilities(bwrap_sandbox):
    program = (
        "for line in open('/proc/self/status'):\n"
        "    if line.split(':')[0] in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb'):\n"
        "        print(line.split()[1])\n"
    )
    result = bwrap_sandbox.run_python("main.py", files={"main.py": program})
    assert result.ok, result.stderr
    assert result.stdout.decode().split() == ["0000000000000000"] * 4


def test_run_executes_a_command_and_reports_its_status(bwrap_sandbox):
    result = bwrap_sandbox.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert not result.ok and not result.timed_out


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_parallel_runs_from_threads(isolation):
    sandbox = sandbox_for(isolation)
    with ThreadPoolExecutor(4) as executor:
        results = list(executor.map(lambda i: sandbox.run(["sh", "-c", f"echo {i}"]), range(8)))
    assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(8)]
    assert len({r.run_id for r in results}) == 8


def test_sandbox_pickles(bwrap_sandbox):
    copy = pickle.loads(pickle.dumps(bwrap_sandbox))
    assert copy.backend == bwrap_sandbox.backend and copy.limits == bwrap_sandbox.limits
    assert copy.run(["echo", "ok"]).stdout == b"ok\n"


def test_limits_are_validated():
    with pytest.raises(ValueError, match="wall_time"):
        SandboxLimits(wall_time=0)
    with pytest.raises(ValueError, match="max_open_files"):
        SandboxLimits(max_open_files=3)
    with pytest.raises(ValueError, match="isolation"):
        Sandbox(isolation="docker")


# -------------------------------------------------------------------------------------------------- limits


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_wall_clock_limit_kills_the_whole_run(isolation):
    sandbox = sandbox_for(isolation, wall_time=1.0)
    program = (
        "import subprocess, time\nsubprocess.Popen(['sleep', '300'])\nprint('started', flush=True)\ntime.sleep(300)\n"
    )
    started = time.monotonic()
    result = sandbox.run_python("main.py", files={"main.py": program})
    assert result.timed_out and not result.ok
    assert result.stdout == b"started\n"
    assert time.monotonic() - started < 1.0 + MARGIN
    assert leftover_processes(result.run_id) == []


def test_cpu_time_limit(bwrap_sandbox):
    # One CPU second, 30 s of wall clock: the CPU limit ends it (on a loaded machine a CPU second takes longer).
    limits = SandboxLimits(wall_time=30, cpu_time=1)
    result = bwrap_sandbox.run_python("main.py", files={"main.py": "while True:\n    pass\n"}, limits=limits)
    assert not result.timed_out and result.wall_time < 15
    assert result.returncode in (-signal.SIGXCPU, -signal.SIGKILL)


def test_memory_limit(bwrap_sandbox):
    limits = SandboxLimits(memory=256 << 20)
    result = bwrap_sandbox.run_python("main.py", files={"main.py": "x = bytearray(1 << 30)\n"}, limits=limits)
    assert result.returncode == 1 and b"MemoryError" in result.stderr


def test_file_size_limit(bwrap_sandbox):
    program = (
        "import os\n"
        "try:\n"
        "    with open('big', 'wb') as f:\n"
        "        f.write(b'x' * (2 << 20))\n"
        "except OSError as error:\n"
        "    print(error.errno)\n"
        "print(os.path.getsize('big'))\n"
    )
    limits = SandboxLimits(max_file_size=1 << 20)
    result = bwrap_sandbox.run_python("main.py", files={"main.py": program}, limits=limits)
    errno_line, size_line = result.stdout.decode().split()
    assert int(errno_line) == 27  # EFBIG: Python ignores SIGXFSZ, so the write fails instead
    assert int(size_line) <= 1 << 20


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_output_is_capped_and_the_run_stopped(isolation):
    sandbox = sandbox_for(isolation, max_output=1000, wall_time=20)
    started = time.monotonic()
    result = sandbox.run_python("main.py", files={"main.py": "while True:\n    print('y' * 10000)\n"})
    assert result.output_limit_exceeded and not result.timed_out
    assert len(result.stdout) == 1000
    assert time.monotonic() - started < MARGIN
    assert leftover_processes(result.run_id) == []


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_process_count_is_capped(isolation):
    # Each child sleeps, so they all exist at once; forking stops at the cgroup's pids.max (or RLIMIT_NPROC).
    program = (
        "import os, time\n"
        "count = 0\n"
        "try:\n"
        "    for _ in range(500):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(300)\n"
        "            os._exit(0)\n"
        "        count += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print(count)\n"
    )
    sandbox = sandbox_for(isolation, max_processes=20)
    result = sandbox.run_python("main.py", files={"main.py": program})
    assert result.ok, result.stderr
    assert 0 < int(result.stdout) < 20  # the program itself is one of the 20
    assert leftover_processes(result.run_id) == []  # the sleeping children died with the run


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_fork_bomb_is_contained_and_cleaned_up(isolation):
    program = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    sandbox = sandbox_for(isolation, wall_time=2.0, max_processes=32)
    started = time.monotonic()
    result = sandbox.run_python("main.py", files={"main.py": program})
    assert result.timed_out
    assert time.monotonic() - started < 2.0 + MARGIN
    assert leftover_processes(result.run_id) == []
    assert result.run_id not in run_cgroups()  # its cgroup is gone (other processes may have theirs)
    # The host can still start processes.
    assert sandbox.run(["true"]).ok


# --------------------------------------------------------------------------------------------- isolation


CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).close()\n"
    "    print('connected')\n"
    "except OSError as error:\n"
    "    print('refused', type(error).__name__)\n"
)


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_no_network(isolation, listener):
    result = sandbox_for(isolation).run_python("main.py", files={"main.py": CONNECT}, args=[str(listener)])
    assert result.stdout.decode().startswith("refused"), result.stdout


def test_the_network_test_can_fail_without_namespaces(listener):
    # Same program, no namespaces: it reaches the listener, so the refusals above are the sandbox's doing.
    result = sandbox_for("none").run_python("main.py", files={"main.py": CONNECT}, args=[str(listener)])
    assert result.stdout == b"connected\n"


def test_file_system_is_read_only_outside_the_sandbox(bwrap_sandbox, tmp_path):
    token = os.urandom(4).hex()
    home = os.path.expanduser("~")
    targets = [
        os.path.join(home, f"sandbox-escape-{token}"),
        os.path.join(os.getcwd(), f"sandbox-escape-{token}"),
        str(tmp_path / f"sandbox-escape-{token}"),
        f"/etc/sandbox-escape-{token}",
        f"/usr/sandbox-escape-{token}",
        f"/sandbox-escape-{token}",
    ]
    program = (
        "import os, sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'w').write('escaped')\n"
        "        print('wrote', path)\n"
        "    except OSError as error:\n"
        "        print('refused', path, type(error).__name__)\n"
        "for path in ('/etc/shadow', sys.argv[-1], '/root/.bash_history', '/proc/1/environ'):\n"
        "    print('visible' if os.path.exists(path) else 'absent', path)\n"
        "print(sorted(os.listdir('/home')) if os.path.isdir('/home') else None)\n"
    )
    project_file = os.path.abspath(__file__)  # the project's own files are not in the sandbox
    result = bwrap_sandbox.run_python("main.py", files={"main.py": program}, args=[*targets, project_file])
    lines = result.stdout.decode().splitlines()
    # Writing into the home directory succeeds, into a tmpfs that disappears with the run; the rest is refused.
    assert lines[0] == f"wrote {targets[0]}"
    assert all(line.startswith("refused") for line in lines[1 : len(targets) + 1]), lines
    assert {line.split()[1]: line.split()[0] for line in lines[len(targets) + 1 : -1]} == {
        "/etc/shadow": "absent", project_file: "absent", "/root/.bash_history": "absent",
        "/proc/1/environ": "visible",  # the sandbox's own PID 1 (bubblewrap), not the host's
    }
    # Other users' homes are not there; the trainer's own is an empty tmpfs (under /home for most users).
    expected_homes = [os.path.basename(home)] if os.path.dirname(home) == "/home" else None
    assert lines[-1] == repr(expected_homes)
    for target in targets:
        assert not os.path.exists(target), target


@pytest.mark.parametrize("isolation", NAMESPACED)
def test_environment_secrets_are_not_visible(isolation, monkeypatch):
    secret = f"hunter2-{os.urandom(6).hex()}"
    monkeypatch.setenv("TRL_EXT_FAKE_API_KEY", secret)
    program = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n"
        "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = sandbox_for(isolation).run_python("main.py", files={"main.py": program})
    assert result.ok and result.stdout
    assert secret.encode() not in result.stdout and b"TRL_EXT_FAKE_API_KEY" not in result.stdout


@pytest.mark.parametrize("isolation", NAMESPACED)
@pytest.mark.parametrize(
    "attack",
    ["os.kill(os.getppid(), signal.SIGKILL)", "os.killpg(0, signal.SIGKILL)", "os.kill(-1, signal.SIGKILL)"],
)
def test_killing_the_parent_only_ends_the_run(isolation, attack):
    program = f"import os, signal, time\n{attack}\ntime.sleep(1)\nprint('survived')\n"
    started = time.monotonic()
    result = sandbox_for(isolation).run_python("main.py", files={"main.py": program})
    assert time.monotonic() - started < MARGIN
    assert leftover_processes(result.run_id) == []
    # This test process is alive, and the sandbox still works.
    assert sandbox_for(isolation).run(["echo", "ok"]).stdout == b"ok\n"


# --------------------------------------------------------------------------------------- explicit opt-ins


def test_limits_only_mode_logs_a_warning_and_still_limits(caplog):
    with caplog.at_level(logging.WARNING, logger="trl_ext.sandbox.core"):
        sandbox = Sandbox(SandboxLimits(wall_time=1.0, max_output=100), isolation="none")
    assert sandbox.isolation == "none" and not sandbox.backend.file_system_isolated
    assert any("without Linux namespaces" in record.getMessage() for record in caplog.records)
    started = time.monotonic()
    slow = sandbox.run(["sleep", "30"])
    assert slow.timed_out and time.monotonic() - started < 1.0 + MARGIN
    assert leftover_processes(slow.run_id) == []
    loud = sandbox.run_python("main.py", files={"main.py": "print('z' * 1000)"})
    assert loud.output_limit_exceeded and len(loud.stdout) == 100


def test_unshare_opt_in_warns_that_files_are_writable(caplog):
    with caplog.at_level(logging.WARNING, logger="trl_ext.sandbox.core"):
        sandbox = sandbox_for("unshare")
    assert sandbox.isolation == "unshare" and not sandbox.backend.file_system_isolated
    assert any("file system is not" in record.getMessage() for record in caplog.records)
    assert sandbox.run_python("main.py", files={"main.py": "print(6 * 7)"}).stdout == b"42\n"


def test_limits_only_mode_drops_root_for_nobody_when_it_can(tmp_path):
    # A root trainer's program runs as uid 65534 when that user can start the interpreter (the system one,
    # readable by everyone); an ordinary user's runs as that user. Neither may write into /root.
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    sandbox = Sandbox(SandboxLimits(wall_time=10), isolation="none", python=python)
    program = (
        "import os\ntry:\n    open('/root/escape', 'w')\nexcept OSError as error:\n"
        "    print(type(error).__name__)\nprint(os.getuid())\n"
    )
    result = sandbox.run_python("main.py", files={"main.py": program})
    expected_uid = 65534 if os.geteuid() == 0 and python == "/usr/bin/python3" else os.geteuid()
    if expected_uid == 0:  # the documented weak case: root without capabilities still owns /root
        assert result.stdout.decode().split() == ["0"]
        os.unlink("/root/escape")
    else:
        assert result.stdout.decode().split() == ["PermissionError", str(expected_uid)]
        assert not os.path.exists("/root/escape")


def test_interpreter_of_a_virtual_environment_under_tmp_is_visible(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sandbox = Sandbox(isolation="bwrap", python=str(venv / "bin" / "python"))
    # Under the sandbox's own tmpfs /tmp: started at all only if its bind mount comes after that tmpfs.
    result = sandbox.run_python("main.py", files={"main.py": "import sys\nprint(sys.executable)"})
    assert result.ok, result.stderr
    assert result.stdout.decode().strip() == str(venv / "bin" / "python")


def test_a_zombie_counts_as_gone_for_the_namespace_sweep():
    # An orphan that exited waits for a reaper that may be slow (a container's init): it runs nothing, so the sweep
    # after a run (`_kill_pid_namespace`) must not wait for it (a fresh sandbox as an ordinary user took 2 s).
    from trl_ext.sandbox.processes import _is_zombie

    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 5
        while not _is_zombie(str(child)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _is_zombie(str(child))
        assert not _is_zombie(str(os.getpid()))
    finally:
        os.waitpid(child, 0)

