"""What a test process reports, read into the records the trainer judges (inside the sandbox; standard library only).

A test process writes on its result pipe: `L` once the program loaded, then `V<value>` (a value test), length-
prefixed frames of `V`/`U`/`E` (a batch of value tests), `P<nonce>:<checks>.` (a statement test passed), `D` (a
stdin/stdout program ended), `E<stage>:<error>` or `U<why>` (failed). Anything else, or a pass record without the
nonce the test process read before the program ran, fails the test.

The test process's side is in `test_process`; the helpers below it binds before the program runs.
"""

import os

# Ends a statement test's pass record: bytes the program writes on the pipe after it make the record invalid.
PASS_RECORD_END = b"."


def _frames(data):
    """The complete length-prefixed frames at the start of `data`, and what follows them."""
    frames = []
    while len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "big"):
        size = int.from_bytes(data[:4], "big")
        frames.append(bytes(data[4:4 + size]))
        data = data[4 + size:]
    return frames, data


def _value_records(result, status, reason, count):
    """One record per value test of a batch: each answered test's, the one that was running when the process
    ended (timeout, killed...), and None for those after it (the harness runs them again, each alone)."""
    if not result.startswith(b"L"):
        return [_record("value", result, b"", status, reason, b"")] + [None] * (count - 1)
    frames, rest = _frames(result[1:])
    records = [_record("value", b"L" + frame, b"", 0, None, b"") for frame in frames[:count]]
    if len(records) < count:
        # Killed by a signal: said so (SIGKILL from outside is the judge's fault, see `testing._judged_run`).
        killed = status is not None and os.WIFSIGNALED(status)
        records.append(_record("value", b"L" + rest, b"", status, reason or (None if killed else "exited_early"), b""))
    return records + [None] * (count - len(records))


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
        count, end = count[:-len(PASS_RECORD_END)], count[-len(PASS_RECORD_END):]
        if secret != nonce or not count.isdigit() or end != PASS_RECORD_END:
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


def _flusher(streams_flush):
    """`flush()`: flush the streams' `flush` methods given (bound before the program runs), ignoring closed ones."""

    def flush():
        for stream_flush in streams_flush:
            try:
                stream_flush()
            except BaseException:  # noqa: BLE001 - a closed stream: nothing to flush
                pass

    return flush


def _report_error(write_all, write, result_fd, stage, error):
    """Write `E<stage>:<error>` on the result pipe: the test failed at `stage` ("load" or "test")."""
    try:
        message = f"E{stage}:{type(error).__name__}: {error}"
    except BaseException:  # noqa: BLE001 - an exception whose str() raises
        message = f"E{stage}:{type(error).__name__}"
    try:
        write_all(write, result_fd, message.encode(errors="replace")[:300])
    except BaseException:  # noqa: BLE001 - the result pipe is gone: the harness reports no result
        pass
