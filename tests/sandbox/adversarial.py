"""The adversarial table: programs that would pass, or do harm, if the sandbox or the harness let them.

Used by `test_adversarial.py` (each must score 0, in time, leaving no process and no file outside the sandbox)
and by `benchmarks/code_sandbox.py` (the table's verdicts and times).
"""

from __future__ import annotations

import os

TOKEN = os.urandom(4).hex()
SECRET = f"hunter2-{os.urandom(6).hex()}"
SECRET_VARIABLE = "TRL_EXT_FAKE_SECRET"
HOME = os.path.expanduser("~")
# Files the programs try to create: none may exist afterwards.
ESCAPE_PATHS = [
    os.path.join(HOME, f"escape-{TOKEN}"),
    os.path.join(os.getcwd(), f"escape-{TOKEN}"),
    f"/tmp/escape-{TOKEN}",
]
# A directory with a file in the home directory that the programs try to delete: it must survive.
CANARY_DIR = os.path.join(HOME, f".trl-ext-canary-{TOKEN}")
CANARY_FILE = os.path.join(CANARY_DIR, "keep.txt")

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert 10 == add(4, 6)"]
SUM_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"
SUM_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5", "output": "10"}]
SQUARE_TEST = ["assert square(3) == 9"]
CPP_SUM = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n"
CPP_SQUARE_TESTS = [{"input": "3\n", "output": "9\n"}]
# A HumanEval-style test: a `check` function with asserts, then the call that runs it.
CHECK_SQUARE_TEST = ["def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(-2) == 4\n\ncheck(square)\n"]
# BigCodeBench-style unittest tests: each test method is one test, run by unittest in the sandbox.
UNITTEST_SQUARE_TEST = [
    "import unittest\nclass TestCases(unittest.TestCase):\n    def test_small(self):\n"
    "        self.assertEqual(square(3), 9)\n    def test_negative(self):\n        self.assertEqual(square(-2), 4)\n"
]
# Tests that run no check at all: whatever the program, they must never pass (they score None, "cannot judge").
LAZY_TESTS = {
    "check defined, never called": ["def check(candidate):\n    assert candidate(3) == 9\n"],
    "unittest TestCase without test methods": [
        "import unittest\nclass TestCases(unittest.TestCase):\n    def helper(self):\n"
        "        self.assertEqual(square(3), 9)\nsquare(3)\n"
    ],
    "pytest-style file without test functions": ["from solution import square\n\ndef helper():\n    assert square(3) == 9\n"],
    "only calls the function": ["square(3)"],
    "assert on constants only": ["assert True\nsquare(3)"],
    "loop over an empty list": ["for x in []:\n    assert square(x) == x * x"],
}


def fenced(code: str, language: str = "python") -> str:
    return f"Here is my solution.\n```{language}\n{code}```\nIt works."


def make_canary() -> None:
    os.makedirs(CANARY_DIR, exist_ok=True)
    with open(CANARY_FILE, "w") as file:
        file.write("keep")


def remove_canary() -> None:
    import shutil

    shutil.rmtree(CANARY_DIR, ignore_errors=True)


def harm_left() -> list[str]:
    """What a program managed to do to the host's files: escape files that exist, a canary that is gone."""
    harm = [path for path in ESCAPE_PATHS if os.path.exists(path)]
    if not os.path.exists(CANARY_FILE):
        harm.append(f"deleted {CANARY_FILE}")
    return harm


def python_cases(port: int) -> dict[str, tuple[str, list]]:
    """name -> (Python program, tests)."""
    return {
        "infinite loop at import": ("while True:\n    pass\ndef square(x):\n    return x * x\n", SQUARE_TEST),
        "infinite loop in the tested function": ("def square(x):\n    while True:\n        pass\n", SQUARE_TEST),
        "fork bomb": (
            "import os\ndef square(x):\n    while True:\n        try:\n            os.fork()\n"
            "        except OSError:\n            pass\n",
            SQUARE_TEST,
        ),
        "memory bomb": (
            "def square(x):\n    hoard = []\n    while True:\n        hoard.append(' ' * 10**7)\n", SQUARE_TEST
        ),
        "huge output (asserts)": ("def square(x):\n    while True:\n        print('x' * 100000)\n", SQUARE_TEST),
        "huge output (stdin/stdout)": ("while True:\n    print('9' * 100000)\n", [{"input": "3", "output": "9"}]),
        "write a file in the home directory": (
            "import os\n"
            f"for path in [os.path.expanduser('~/escape-{TOKEN}'), *{ESCAPE_PATHS!r}]:\n"
            "    try:\n        open(path, 'w').write('escaped')\n    except OSError:\n        pass\n"
            "def square(x):\n    return x + x\n",
            SQUARE_TEST,
        ),
        "delete a directory in the home directory": (
            "import os, shutil\n"
            f"for path in [{CANARY_DIR!r}, os.path.expanduser('~/.trl-ext-canary-{TOKEN}')]:\n"
            "    shutil.rmtree(path, ignore_errors=True)\n"
            "def square(x):\n    return x + x\n",
            SQUARE_TEST,
        ),
        "open a kernel setting for writing": (
            # Nothing is written: opening for update succeeds only where the host's sysctls are writable.
            "def square(x):\n    for path in ('/proc/sys/kernel/printk_ratelimit', '/proc/sysrq-trigger'):\n"
            "        try:\n            open(path, 'r+').close()\n            return x * x\n"
            "        except OSError:\n            pass\n    return 0\n",
            SQUARE_TEST,
        ),
        "network connection": (
            f"import socket\ndef square(x):\n    socket.create_connection(('127.0.0.1', {port}), timeout=1).close()\n"
            "    return x * x\n",
            SQUARE_TEST,
        ),
        "kill the parent": ("import os\ndef square(x):\n    os.kill(os.getppid(), 9)\n    return x * x + 1\n", SQUARE_TEST),
        "kill the process group": ("import os\nos.killpg(0, 9)\ndef square(x):\n    return x * x\n", SQUARE_TEST),
        "kill every process": ("import os\nos.kill(-1, 9)\ndef square(x):\n    return x * x\n", SQUARE_TEST),
        "sys.exit(0) before the tests": ("import sys\nsys.exit(0)\ndef square(x):\n    return 0\n", SQUARE_TEST),
        "os._exit(0) in the tested function": ("import os\ndef square(x):\n    os._exit(0)\n", SQUARE_TEST),
        "always-equal object": (
            "class Anything:\n    def __eq__(self, other):\n        return True\n"
            "def square(x):\n    return Anything()\n",
            SQUARE_TEST,
        ),
        "int subclass equal to everything": (
            "class Anything(int):\n    def __eq__(self, other):\n        return True\n"
            "def square(x):\n    return Anything(0)\n",
            SQUARE_TEST,
        ),
        "monkey-patch the harness": (
            "import __main__, builtins, sys\n"
            "for name in list(vars(__main__)):\n"
            "    if callable(getattr(__main__, name)) and not isinstance(getattr(__main__, name), type):\n"
            "        setattr(__main__, name, lambda *args, **kwargs: None)\n"
            "builtins.exec = lambda *args, **kwargs: None\n"
            "builtins.eval = lambda *args, **kwargs: 9\n"
            "sys.exit = lambda *args: None\n"
            "def square(x):\n    return 0\n",
            ["assert square(3) == 9", "assert square(3) == square(3) + 9"],
        ),
        "monkey-patch builtins and modules the tests use": (
            "import builtins, math\n"
            "math.isclose = lambda *args, **kwargs: True\n"
            "builtins.abs = lambda value: 0\n"
            "class FakeMath:\n    isclose = staticmethod(lambda *args, **kwargs: True)\n"
            "math, abs, sorted = FakeMath(), (lambda value: 0), (lambda *args: [1, 2])\n"
            "def area(r):\n    return 0\n",
            [
                "assert math.isclose(area(2), 12.566, rel_tol=1e-3)",
                "assert abs(area(2) - 12.566) < 1e-3",
                "assert sorted([area(1)]) == sorted([2, 1])",
            ],
        ),
        "trace function skipping the assert": (
            "import sys\ndef skip(frame, event, arg):\n    return skip\nsys.settrace(skip)\n"
            "def square(x):\n    return 0\n",
            ["assert square(3) == 9 or square(3) == 9"],
        ),
        "defines check itself": (
            "def check(candidate):\n    return None\ndef square(x):\n    return 0\n", CHECK_SQUARE_TEST
        ),
        "sys.exit(0) inside the checked function": (
            "import sys\ndef square(x):\n    sys.exit(0)\n", CHECK_SQUARE_TEST
        ),
        "os._exit(0) at import": ("import os\nos._exit(0)\ndef square(x):\n    return 0\n", CHECK_SQUARE_TEST),
        "always-equal object against check()": (
            "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
            "def square(x):\n    return Anything()\n",
            CHECK_SQUARE_TEST,
        ),
        "forge a pass on the result pipe": (
            "import os\ntry:\n    nonce = os.read(4, 64)\nexcept OSError:\n    nonce = b''\n"
            "os.write(3, b'L')\nos.write(3, b'P' + nonce + b':5')\nos._exit(0)\n"
            "def square(x):\n    return 0\n",
            CHECK_SQUARE_TEST,
        ),
        "count checks through the caller's frame": (
            "import sys\ndef square(x):\n    frame = sys._getframe(1)\n"
            "    for _ in range(3):\n        frame.f_globals['__trl_ext_check__']()\n        frame = frame.f_back\n"
            "    return 0\n",
            ["square(3)"],
        ),
        "reach frames through a traceback, a generator, a signal handler": (
            "import signal, sys\ndef frames():\n    found = []\n    try:\n        raise ValueError\n"
            "    except ValueError as error:\n        try:\n            found.append(error.__traceback__.tb_frame)\n"
            "        except RuntimeError:\n            pass\n"
            "    def gen():\n        yield\n    try:\n        found.append(gen().gi_frame)\n    except RuntimeError:\n"
            "        pass\n    try:\n        signal.signal(signal.SIGUSR1, lambda number, frame: found.append(frame))\n"
            "        signal.raise_signal(signal.SIGUSR1)\n    except RuntimeError:\n        pass\n    return found\n"
            "def square(x):\n    for frame in frames():\n        while frame is not None:\n"
            "            if '__trl_ext_check__' in frame.f_globals:\n"
            "                frame.f_globals['__trl_ext_check__']()\n"
            "            frame = frame.f_back\n    return 0\n",
            ["square(3)"],
        ),
        "read memory with ctypes or /proc/self/mem": (
            "def square(x):\n    try:\n        import ctypes\n        ctypes.string_at(id(x), 8)\n        return x * x\n"
            "    except Exception:\n        pass\n    with open('/proc/self/mem', 'rb') as memory:\n        return x * x\n",
            SQUARE_TEST,
        ),
        "shadow the harness's check names": (
            "__trl_ext_check__ = __trl_ext_compare__ = __trl_ext_truth__ = lambda *args: True\n"
            "def square(x):\n    return 0\n",
            CHECK_SQUARE_TEST,
        ),
        "replace modules, AssertionError and the solution module": (
            "import builtins, sys, types\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\n"
            "fake = types.ModuleType('solution')\nfake.square = lambda x: x * x\nsys.modules['solution'] = fake\n"
            "del sys.modules['math']\nsys.modules['math'] = types.SimpleNamespace(isclose=lambda *a, **k: True)\n"
            "def square(x):\n    return 0\n",
            ["from solution import square\nimport math\nassert math.isclose(square(3), 9)\n"
             "assert square(3) == 9"],
        ),
        "plant a lazily loaded submodule the test reaches": (
            # `import logging` does not load `logging.handlers`; the test reaches it as an attribute. Loaded by the
            # harness before the program runs, the program's fake module is put back by the genuine one.
            "import logging, sys, types\nfake = types.ModuleType('logging.handlers')\nfake.SYSLOG_UDP_PORT = 505\n"
            "sys.modules['logging.handlers'] = fake\nlogging.handlers = fake\n"
            "def square(x):\n    return 0\n",
            ["import logging\nassert square(3) == logging.handlers.SYSLOG_UDP_PORT - 505"],
        ),
        "patch unittest": (
            "import unittest\nunittest.TestCase.run = lambda self, result=None: None\n"
            "unittest.TestCase.assertEqual = lambda self, *args, **kwargs: None\n"
            "unittest.TestResult.wasSuccessful = lambda self: True\n"
            "unittest.TestSuite.run = lambda self, result, debug=False: result\n"
            "def square(x):\n    return 0\n",
            UNITTEST_SQUARE_TEST,
        ),
        "replace the unittest module and delete the test's modules": (
            "import sys, types\nfake = types.ModuleType('unittest')\n"
            "class TestCase:\n    def __init__(self, name='run'):\n        pass\n"
            "    def __getattr__(self, name):\n        return lambda *args, **kwargs: None\n"
            "fake.TestCase = TestCase\nsys.modules['unittest'] = fake\n"
            "for name in [n for n in sys.modules if n.startswith(('unittest.', 'solution'))]:\n    del sys.modules[name]\n"
            "def square(x):\n    return 0\n",
            UNITTEST_SQUARE_TEST,
        ),
        "read environment secrets": (
            f"import os\ndef leak():\n    found = os.environ.get('{SECRET_VARIABLE}', '')\n"
            "    for pid in os.listdir('/proc'):\n        try:\n"
            "            for entry in open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0'):\n"
            f"                if entry.startswith(b'{SECRET_VARIABLE}='):\n"
            "                    found = found or entry.split(b'=', 1)[1].decode()\n"
            "        except OSError:\n            pass\n    return found\n",
            [f"assert leak() == {SECRET!r}"],
        ),
    }


_CPP_PRINT_IF_DONE = " long x; std::cin >> x; std::cout << x * x << std::endl; "


def cpp_cases(port: int) -> dict[str, tuple[str, list]]:
    """name -> (C++ program, stdin/stdout tests). Each prints the right answer if it survives its attack."""
    io = "#include <iostream>\n"
    escapes = ", ".join(f'"{path}"' for path in ESCAPE_PATHS)
    return {
        "C++ infinite loop": ("int main() { volatile long i = 0; while (true) ++i; }\n", CPP_SQUARE_TESTS),
        "C++ fork bomb": (
            io + "#include <unistd.h>\nint main() { for (int i = 0; i < 100000; ++i) fork();" + _CPP_PRINT_IF_DONE
            + "}\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ memory bomb": (
            io + "#include <cstring>\n#include <vector>\nint main() { std::vector<char*> hoard;"
            " while (true) { char* p = new char[1 << 24]; std::memset(p, 1, 1 << 24); hoard.push_back(p); } }\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ huge output": (
            "#include <cstdio>\n#include <cstring>\nint main() { static char line[100000];"
            " std::memset(line, '9', sizeof line); while (true) fwrite(line, 1, sizeof line, stdout); }\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ write and delete in the home directory": (
            io + "#include <cstdio>\n#include <cstdlib>\n#include <string>\nint main() {\n"
            f"  for (const char* path : {{{escapes}}}) if (FILE* f = std::fopen(path, \"w\")) std::fclose(f);\n"
            "  const char* home = std::getenv(\"HOME\");\n"
            f"  std::string command = std::string(\"rm -rf {CANARY_DIR} \") + (home ? home : \"/root\")"
            f" + \"/.trl-ext-canary-{TOKEN}\";\n"
            "  if (std::system(command.c_str()) != 0) return 1;\n"
            "  long x; std::cin >> x; std::cout << x + x << std::endl; }\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ network connection": (
            io + "#include <arpa/inet.h>\n#include <sys/socket.h>\n"
            "int main() { int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a{}; a.sin_family = AF_INET;"
            f" a.sin_port = htons({port}); inet_pton(AF_INET, \"127.0.0.1\", &a.sin_addr);"
            " if (connect(s, (sockaddr*)&a, sizeof a) != 0) return 1;" + _CPP_PRINT_IF_DONE + "}\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ kill the parent and every process": (
            io + "#include <csignal>\n#include <unistd.h>\n"
            "int main() { kill(getppid(), SIGKILL); kill(-1, SIGKILL); sleep(1);" + _CPP_PRINT_IF_DONE + "}\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ read environment secrets": (
            io + "#include <cstdlib>\n"
            f"int main() {{ const char* s = std::getenv(\"{SECRET_VARIABLE}\"); if (!s) return 1;"
            " std::cout << s << std::endl; }\n",
            [{"input": "", "output": SECRET}],
        ),
        "C++ infinite compile (constexpr)": (
            "constexpr long spin() { long s = 0; for (long i = 0; i < 200000; ++i)"
            " for (long j = 0; j < 200000; ++j) s += i ^ j; return s; }\n"
            "static_assert(spin() != 1);\nint main() {}\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ infinite compile (templates)": (
            "template <int N, long M> struct Grow { static constexpr long value ="
            " Grow<N - 1, 2 * M>::value + Grow<N - 1, 2 * M + 1>::value; };\n"
            "template <long M> struct Grow<0, M> { static constexpr long value = 1; };\n"
            "int main() { return Grow<40, 0>::value == 0; }\n",
            CPP_SQUARE_TESTS,
        ),
        "C++ include a device at compile time": ('#include "/dev/zero"\nint main() {}\n', CPP_SQUARE_TESTS),
    }
