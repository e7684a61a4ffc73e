"""Statement tests judged outside the program's process (inside the sandbox; standard library only).

A statement test (a HumanEval `check(candidate)`, an MBPP assert on a non-literal, a pytest function) calls the
program's functions and checks what they return. Here the test runs in a process of the judge's (`judge_test`),
which never runs a line of the program; the program runs in its own process, in namespaces of its own
(`program_isolation`), and answers the test's calls over a socket (`serve_program`):

    harness ── fork ── judge: runs the test, counts checks, writes the record ── socket ── program (isolated)

What crosses the socket is plain data (`plain_data`: exact types, decoded without running code) or a reference
to an object that stays on its side: calling, iterating, indexing or reading an attribute of a reference is a
request to the other side, answered the same way. The program's exceptions come back as the built-in exception of
the same kind (`ValueError`...), or `ProgramError`. So the check counter, the comparisons (on plain values: a
reference never equals anything but itself) and the record are out of the program's reach: it can only answer the
calls it is asked, with data.

Lists, dicts, sets and bytearrays the test passes are written back after the call, so a program that changes its
argument in place is seen doing so. A callable the test passes (a `key=` function) is a reference the program may
call back. What the program prints goes to the test's streams with the reply (`_ProgramOutput`), so a test may
capture it. Tests that need the program's process itself (patching its modules, sharing files) are judged inside
it instead (`test_process`); `trl_ext.sandbox.instrumentation` decides which.
"""

import builtins
import io
import json
import struct
import sys

if __package__:
    from .plain_data import _Unencodable, decode_value, encode_value
else:  # inside the sandbox, beside copies of its modules
    from plain_data import _Unencodable, decode_value, encode_value

_HEADER = struct.Struct(">I")
_MUTABLE = (list, dict, set, bytearray)


class ProtocolError(BaseException):
    """The other side sent something that is not a message of this protocol, or closed the socket. Not an
    `Exception`: a test's `except Exception` cannot swallow it, and every later request fails the same way."""


class ProgramError(Exception):
    """An exception the program raised that is not one of Python's built-in exceptions."""


# --------------------------------------------------------------------------------------------- the wire


def _send(connection, message):
    data = json.dumps(message, separators=(",", ":")).encode()
    connection.sendall(_HEADER.pack(len(data)) + data)


def _receive(connection, limit):
    header = _read_exactly(connection, _HEADER.size)
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise ProtocolError(f"a message of {size} bytes, more than {limit}")
    try:
        message = json.loads(_read_exactly(connection, size))
    except ValueError as error:
        raise ProtocolError(f"not a message: {error}") from None
    if type(message) is not dict:
        raise ProtocolError("not a message")
    return message


def _read_exactly(connection, size):
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 1 << 20))
        if not chunk:
            raise ProtocolError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Side:
    """One end of the conversation: requests are strictly nested, so while waiting for the reply to its own
    request a side answers the requests the other side makes in the meantime (calls back). `outgoing` adds to
    every message this side sends (the program's side: what it printed since its last message)."""

    def __init__(self, connection, limit, handle, outgoing=None):
        self.connection, self.limit, self.handle = connection, limit, handle
        self.outgoing = outgoing or (lambda message: message)

    def ask(self, request):
        _send(self.connection, self.outgoing(request))
        while True:
            message = _receive(self.connection, self.limit)
            if "op" not in message:
                return message
            _send(self.connection, self.outgoing(self.handle(message)))

    def serve(self):
        while True:
            try:
                message = _receive(self.connection, self.limit)
            except ProtocolError:
                return
            if "op" not in message:
                return
            _send(self.connection, self.outgoing(self.handle(message)))


def _exception_reply(error):
    kind = next((cls.__name__ for cls in type(error).__mro__ if getattr(builtins, cls.__name__, None) is cls), "")
    try:
        text = str(error)[:300]
    except BaseException:  # noqa: BLE001 - the program's __str__
        text = ""
    return {"raise": [kind, text]}


# ------------------------------------------------------------------------------------- the program's side


class _ProgramOutput:
    """In the program's process: what the program writes on `sys.stdout` and `sys.stderr` once its top-level code
    has run, taken into each message it sends next (a reply, or a call back) for the judge to write on its own
    streams, in order with the test's own output: a test that captures its output (`capsys`, `redirect_stdout`,
    `sys.stdout = StringIO()`) reads it there, as under pytest. Text only, at most `cap` characters a message."""

    def __init__(self, cap):
        self.cap = cap
        self.streams = {"out": io.StringIO(), "err": io.StringIO()}
        sys.stdout, sys.stderr = self.streams["out"], self.streams["err"]

    def taken_into(self, message):
        for key, stream in self.streams.items():
            try:
                text = stream.getvalue()
                stream.seek(0)
                stream.truncate()
            except ValueError:  # the program closed it: what it prints now fails in its own code
                continue
            if text:
                message[key] = text[: self.cap]
        return message


def serve_program(connection, namespace, limit, max_items):
    """Answer the judge's requests on `namespace` (the program's globals, its top-level code run) until the
    judge closes the connection. Runs in the program's process: nothing here is trusted by the judge."""
    objects = {}

    def share(value):
        try:
            return {"v": encode_value(value, max_items=max_items)}
        except (_Unencodable, RecursionError, TypeError, ValueError, OverflowError):
            objects[len(objects) + 1] = value
            return {"ref": len(objects)}

    def local(node):
        if "ref" in node:
            return objects[node["ref"]]
        if "callback" in node:
            return _Callback(side, node["callback"], share, local)
        return decode_value(node["v"])

    def handle(message):
        try:
            op = message["op"]
            if op == "names":
                return {"names": {name: _describe(value, share) for name, value in list(namespace.items())
                                  if not name.startswith("__")}}
            target = objects[message["ref"]]
            if op == "call":
                args = [local(node) for node in message["args"]]
                kwargs = {key: local(node) for key, node in message["kwargs"].items()}
                reply = {"ok": share(target(*args, **kwargs)), "back": {}}
                for index, arg in enumerate(args):
                    if isinstance(arg, _MUTABLE):
                        shared = share(arg)
                        if "v" in shared:
                            reply["back"][str(index)] = shared["v"]
                return reply
            if op == "getattr":
                return {"ok": share(getattr(target, message["name"]))}
            if op == "iter":
                return {"ok": share(iter(target))}
            if op == "next":
                try:
                    return {"ok": share(next(target))}
                except StopIteration:
                    return {"stop": True}
            if op == "len":
                return {"ok": {"v": encode_value(int(len(target)))}}
            if op == "getitem":
                return {"ok": share(target[local(message["key"])])}
            if op == "contains":
                return {"ok": {"v": encode_value(bool(local(message["item"]) in target))}}
            if op == "bool":
                return {"ok": {"v": encode_value(bool(target))}}
            if op == "str":
                return {"ok": {"v": encode_value(str(target)[:1000])}}
            return {"raise": ["TypeError", f"unknown request {op!r}"]}
        except Exception as error:  # noqa: BLE001 - the program's exception, for the test to see
            return _exception_reply(error)

    side = _Side(connection, limit, handle, _ProgramOutput(limit // 8).taken_into)
    builtins.input = _Callback(side, "input", share, local)  # answered with the judge's `input`, mocked or not
    side.serve()


def _describe(value, share):
    if type(value) is type(sys):
        return {"module": value.__name__}
    return share(value)


class _Callback:
    """In the program's process: a callable the test passed (by its number), or `input` (the judge's own); calling
    it asks the judge to call it."""

    def __init__(self, side, number, share, local):
        self._side, self._number, self._share, self._local = side, number, share, local

    def __call__(self, *args, **kwargs):
        reply = self._side.ask({"op": "callback", "callback": self._number, "args": [self._share(a) for a in args],
                                "kwargs": {key: self._share(value) for key, value in kwargs.items()}})
        if "raise" in reply:
            raise _builtin_exception(*reply["raise"])
        return self._local(reply["ok"])


# Raised from a call, these would end the test's loop early instead (`all(map(candidate, cases))` is True when the
# program raises StopIteration at once): they come back as `ProgramError`.
_ENDING_ITERATION = frozenset({"StopIteration", "StopAsyncIteration"})


def _builtin_exception(kind, text):
    cls = getattr(builtins, kind, None) if kind and kind not in _ENDING_ITERATION else None
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(text)
    return ProgramError(f"{kind or 'exception'}: {text}")


# ---------------------------------------------------------------------------------------------- the judge


class Remote:
    """In the judge's process: an object that stays in the program's process. It never equals anything but
    itself; calling it, iterating, indexing or reading an attribute asks the program."""

    __slots__ = ("_program", "_ref")

    def __init__(self, program, ref):
        object.__setattr__(self, "_program", program)
        object.__setattr__(self, "_ref", ref)

    def __call__(self, *args, **kwargs):
        return self._program.call(self._ref, args, kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._program.request({"op": "getattr", "ref": self._ref, "name": name})

    def __iter__(self):
        return _RemoteIterator(self._program.request({"op": "iter", "ref": self._ref}))

    def __len__(self):
        return self._program.request({"op": "len", "ref": self._ref})

    def __getitem__(self, key):
        return self._program.request({"op": "getitem", "ref": self._ref, "key": self._program.share(key)})

    def __contains__(self, item):
        return self._program.request({"op": "contains", "ref": self._ref, "item": self._program.share(item)})

    def __bool__(self):
        return self._program.request({"op": "bool", "ref": self._ref})

    def __str__(self):
        return self._program.request({"op": "str", "ref": self._ref})

    def __repr__(self):
        return f"<object of the program: {self}>"


class _RemoteIterator:
    __slots__ = ("_remote",)

    def __init__(self, remote):
        self._remote = remote

    def __iter__(self):
        return self

    def __next__(self):
        if not isinstance(self._remote, Remote):
            raise TypeError("the program's iter() gave a value, not an iterator")
        return self._remote._program.request({"op": "next", "ref": self._remote._ref})


# References to the program's objects: a test may call or iterate them, never compare them (`make_comparisons`).
OPAQUE_TYPES = (Remote, _RemoteIterator)


class Program:
    """The judge's end of the conversation with one program."""

    def __init__(self, connection, limit, max_output):
        self.callbacks = {}
        self.side = _Side(connection, limit, self._handle)
        self.broken = None
        self.output_left = max_output  # characters the program may still print, as a stdin/stdout test's bytes

    def ask(self, message):
        if self.broken is not None:
            raise ProtocolError(self.broken)
        try:
            reply = self.side.ask(message)
        except ProtocolError as error:
            self.broken = str(error)
            raise
        except OSError as error:
            self.broken = f"the connection failed: {error}"
            raise ProtocolError(self.broken) from None
        self._write_output(reply)
        return reply

    def share(self, value):
        """A value of the test's, as it crosses: plain data, a reference back, or a callable to call back."""
        if isinstance(value, Remote):
            if value._program is not self:
                raise TypeError("an object of another program")
            return {"ref": value._ref}
        try:
            return {"v": encode_value(value)}
        except (_Unencodable, RecursionError, TypeError, ValueError, OverflowError):
            pass
        if callable(value):
            self.callbacks[len(self.callbacks) + 1] = value
            return {"callback": len(self.callbacks)}
        raise TypeError(f"a value of type {type(value).__name__} cannot be passed to the program (not plain data)")

    def local(self, node):
        if type(node) is not dict:
            raise ProtocolError("not a value")
        if "ref" in node and type(node["ref"]) is int:
            return Remote(self, node["ref"])
        if "v" in node:
            try:
                return decode_value(node["v"])
            except (ValueError, TypeError, KeyError) as error:
                raise ProtocolError(f"not plain data: {error}") from None
        raise ProtocolError("not a value")

    def request(self, message):
        reply = self.ask(message)
        if reply.get("stop") is True:
            raise StopIteration
        if "raise" in reply:
            kind, text = _pair(reply["raise"])
            raise _builtin_exception(kind, text)
        if "ok" not in reply:
            raise ProtocolError("not a reply")
        return self.local(reply["ok"])

    def call(self, ref, args, kwargs):
        args = list(args)
        reply = self.ask({"op": "call", "ref": ref, "args": [self.share(a) for a in args],
                               "kwargs": {str(key): self.share(value) for key, value in kwargs.items()}})
        if "raise" in reply:
            raise _builtin_exception(*_pair(reply["raise"]))
        result = self.local(reply.get("ok"))
        back = reply.get("back", {})
        if type(back) is not dict:
            raise ProtocolError("not a reply")
        for index, encoded in back.items():
            position = int(index) if str(index).isdigit() else -1
            if 0 <= position < len(args) and isinstance(args[position], _MUTABLE):
                _write_back(args[position], self.local({"v": encoded}))
        return result

    def names(self):
        reply = self.ask({"op": "names"})
        names = reply.get("names")
        if type(names) is not dict:
            raise ProtocolError("not a reply")
        found = {}
        for name, node in names.items():
            if type(node) is dict and type(node.get("module")) is str:
                module = sys.modules.get(node["module"])  # the judge's own copy, loaded before any program ran
                if module is not None:
                    found[name] = module
            else:
                found[name] = self.local(node)
        return found

    def _write_output(self, message):
        """What the program printed before sending `message`, written on the judge's streams as they are now: a
        test capturing its output has them redirected; otherwise they lead to /dev/null
        (`test_process._judged_apart`). Past `max_output` characters in all, the test fails, as a stdin/stdout
        test's program printing more is killed: the judge holds no more of it."""
        for key, stream in (("out", "stdout"), ("err", "stderr")):
            if key not in message:
                continue
            if type(message[key]) is not str:
                self.broken = "not output"
            else:
                self.output_left -= len(message[key])
                if self.output_left < 0:
                    self.broken = "the program printed more than the output limit"
            if self.broken is None:
                try:
                    getattr(sys, stream).write(message[key])
                except Exception as error:  # noqa: BLE001 - the test closed or replaced its stream
                    self.broken = f"the test's {stream} refused the program's output: {type(error).__name__}"
            if self.broken is not None:
                raise ProtocolError(self.broken)

    def _handle(self, message):
        self._write_output(message)
        number = message.get("callback")
        if message.get("op") != "callback" or (number not in self.callbacks and number != "input"):
            return {"raise": ["TypeError", "unknown request"]}
        # The program's `input()` calls the judge's `builtins.input` as it is now: the test's mock where it patched
        # it, else the real one, reading /dev/null (EOFError), as the program's own would in its process.
        function = builtins.input if number == "input" else self.callbacks[number]
        try:
            args = [self.local(node) for node in message.get("args", [])]
            kwargs = {str(key): self.local(node) for key, node in message.get("kwargs", {}).items()}
            return {"ok": self.share(function(*args, **kwargs))}
        except ProtocolError:
            raise
        except Exception as error:  # noqa: BLE001 - the test's callable raised: the program sees it
            return _exception_reply(error)


def _pair(value):
    if type(value) is not list or len(value) != 2 or not all(type(item) is str for item in value):
        raise ProtocolError("not an exception")
    return value


def _write_back(target, value):
    if type(value) is not type(target) and not (isinstance(target, bytearray) and type(value) is bytes):
        return
    if isinstance(target, (list, bytearray)):
        target[:] = value
    else:
        target.clear()
        target.update(value)


def judge_test(connection, test_code, test_globals, limit, max_output):
    """Run `test_code` in the judge's process against the program at the other end of `connection`: the
    program's global names become plain values or references in `test_globals` (after the names the test gets
    from the judge's own builtins and modules, which stay). Returns nothing; raises what the test raises."""
    program = Program(connection, limit, max_output)
    solution = type(sys)("solution")
    for name, value in program.names().items():
        setattr(solution, name, value)
        test_globals.setdefault(name, value)
    sys.modules["solution"] = solution
    exec(test_code, test_globals)  # noqa: S102 - the dataset's test, in the judge's process

