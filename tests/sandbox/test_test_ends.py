"""How the harness ends its test processes (`trl_ext.sandbox.test_ends`): a batch of value tests whose every value
came is killed and its answer sent before the processes are waited for, and everything killed is waited for before
the next fork (`settle`). Each scenario runs in a fresh interpreter of its own: waiting for any child (`reap`) in
the test's process would collect the sandboxes other tests keep running."""

import subprocess
import sys
import textwrap

import pytest

SETUP = textwrap.dedent(
    """
    import os, signal, time
    from trl_ext.sandbox import test_ends

    PLAN = {"private_pids": False}

    def sleeper():  # a test process: a group of its own, as the harness makes it
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            time.sleep(30)
            os._exit(0)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        return pid

    def waited_for(pid):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return False
    """
)

SCENARIOS = {
    "all answered: killed now, waited for at the next fork": """
        pid = sleeper()
        started = time.monotonic()
        assert test_ends.end(pid, PLAN, None, all_answered=True) is None
        assert not waited_for(pid) and test_ends._KILLED == [(pid, PLAN)]
        test_ends.settle()
        assert waited_for(pid) and test_ends._KILLED == []
        assert time.monotonic() - started < 5  # killed, not left to sleep
    """,
    "not all answered: killed and waited for at once, with its status": """
        pid = sleeper()
        status = test_ends.end(pid, PLAN, None, all_answered=False)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        assert waited_for(pid) and test_ends._KILLED == []
    """,
    "the leftovers between programs are waited for at the next fork": """
        pids = [sleeper() for _ in range(3)]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        test_ends.reap_later()
        assert not any(waited_for(pid) for pid in pids[:1])
        test_ends.settle()
        assert all(waited_for(pid) for pid in pids) and test_ends._KILLED == []
    """,
    "a batch's frames count only after the load mark": """
        import struct
        frame = lambda payload: struct.pack(">I", len(payload)) + payload
        assert test_ends.answered(None) == 0
        assert test_ends.answered(bytearray(b"Eload:boom")) == 0
        assert test_ends.answered(bytearray(b"L" + frame(b'V{"int": "3"}'))) == 1
        assert test_ends.answered(bytearray(b"L" + frame(b'V1') + frame(b'V2') + b"\\0\\0")) == 2
    """,
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_ending_test_processes(name):
    script = SETUP + textwrap.dedent(SCENARIOS[name])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
