"""How the harness's test processes end (inside the sandbox; standard library only): reading a test process's pipes
until it is done, killing it and what it left, and waiting for them all before anything else is forked.

The harness never forks a program's processes while the last one's are still dying: the next program starts with
none of them counted against its limits (a fork bomb's dying processes would refuse its forks, a large program's
memory its allocations). But the wait is put off until then (`settle`): a batch of value tests whose every value
came, and the sandbox's leftovers between two programs, are killed at once, the answer goes back to the trainer,
and their teardown (the processes' memory, their namespaces' mounts) overlaps the trainer reading it and this
harness reading the next plan.
"""

import os
import select
import signal
import time

if __package__:
    from . import program_isolation
    from .test_records import _frames
else:  # beside the harness script in the sandbox
    import program_isolation
    from test_records import _frames

_REAP_SECONDS = 2.0
# What was killed and is not waited for yet: a test process's `(pid, plan)`, or None for every other process of a
# private PID namespace (between two programs). Emptied by `settle`.
_KILLED = []


def settle():
    """Wait for everything killed since the last call (`_KILLED`): before the harness forks a test process or a
    compiler, and before the one-shot harness exits."""
    while _KILLED:
        killed = _KILLED.pop(0)
        if killed is None:
            reap(until_none_left=True)
        else:
            bury(*killed)


def reap_later():
    """Every other process of the private PID namespace was just killed (`clean_up_between_programs`): wait for them
    in `settle`, before the next fork."""
    _KILLED.append(None)


def bury(pid, plan, status=None):
    """Wait for a killed test process (`end_test_process`) and, in a private PID namespace, every process it left;
    its wait status (None where `reap` collected it first)."""
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    reap(until_none_left=private_pid_namespace(plan["private_pids"]))
    return status


def end(pid, plan, status, all_answered):
    """Kill a test process whose report was read (`collect`) and what it left; its wait status. With
    `all_answered` (every value of a batch came, so the records are final), it is waited for later (`settle`)."""
    end_test_process(pid, plan)
    if all_answered:
        _KILLED.append((pid, plan))
        return status
    return bury(pid, plan, status)


def wait_until(pid, deadline):
    """The child's wait status once it exits (its pipes may close a moment before), or None at the deadline."""
    while True:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.0005)


def private_pid_namespace(claimed):
    # kill(-1) outside a PID namespace would signal every process of this user on the host: double-check.
    return claimed and os.getpid() in (1, 2)


def reap(until_none_left=False):
    """Collect ended children; the harness is the subreaper of its tests (`main`), so a test's orphans come here.
    `until_none_left` (every other process of a private PID namespace was killed): wait, for a while, until all are
    gone."""
    deadline = time.monotonic() + _REAP_SECONDS
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not until_none_left or time.monotonic() > deadline:
                return
            time.sleep(0.0005)


def answered(frames):
    """How many value tests of a batch answered: the frames after the load mark (`test_records._frames`)."""
    return len(_frames(frames[1:])[0]) if frames is not None and frames.startswith(b"L") else 0


def collect(pid, buffers, timeout, frames=None, count=1):
    """Read the test process's pipes (`buffers`: fd -> (buffer, limit, reason past the limit)) until they close,
    the deadline passes or a limit is exceeded; `(wait status or None, reason or None)`. With `frames` (the result
    buffer of a batch of value tests), each answered test starts the next one's timeout, and the last one ends it."""
    open_fds = set(buffers)
    deadline = time.monotonic() + timeout
    status = exited_at = reason = None
    reported = 0
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            return status, "timeout"
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
        so_far = answered(frames)
        if so_far >= count:  # every value came: the process is killed, not waited for
            return status, None
        if so_far > reported:  # a test answered: the next one's timeout starts now
            reported, deadline = so_far, time.monotonic() + timeout
        if reason:
            return status, reason
    if status is None:
        status = wait_until(pid, deadline)
        reason = None if status is not None else "timeout"
    return status, reason


def end_test_process(pid, plan):
    """Kill the test process's group, and under a private PID namespace every process but the harness."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if private_pid_namespace(plan["private_pids"]):
        try:
            os.kill(-1, signal.SIGKILL)  # everything but the harness (and bubblewrap's init): no leftovers
        except ProcessLookupError:
            pass


def reported_failure(failure_read, failure_write):
    """`("isolation_unavailable" | "judge_fault", why)` when the namespaces could not be made or a process of the
    judge could not start, or None; closes the failure pipe (see `program_isolation.run_isolated`)."""
    os.close(failure_write)
    os.set_blocking(failure_read, False)
    try:
        data = os.read(failure_read, 512)
    except BlockingIOError:
        data = b""
    finally:
        os.close(failure_read)
    kinds = {program_isolation.ISOLATION_FAILED: "isolation_unavailable", program_isolation.JUDGE_FAULT: "judge_fault"}
    if data[:1] not in kinds:
        return None
    return kinds[data[:1]], data[1:].decode(errors="replace")
