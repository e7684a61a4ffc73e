"""The rows of `code_formats.py`: for every public code-dataset format, rows written in that dataset's documented
schema (none copied from a dataset), each with a right program and wrong ones by kind.

Kept apart from the scoring so that `code_formats.py` stays readable; it re-exports every name here, which the tests
and the journeys read from it (`table.CASES`, `table.fenced`, `table.PROSE`).
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib

PROSE = "The function should loop over the input and keep the values that matter, then return the result."


def fenced(code: str, language: str = "python") -> str:
    return f"Here is my solution.\n```{language}\n{code}```\n"


def private_cases(cases: list[dict]) -> str:
    """LiveCodeBench's encoding of its private tests: base64 of zlib of a pickled JSON string."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


# ------------------------------------------------------------------------------------------------- the rows
# Each case: columns (the dataset's schema), the right program, wrong programs by kind, optional reward kwargs.

SUM_EVEN_SQUARES = "def sum_even_squares(values):\n    total = 0\n    for v in values:\n        if v % 2 == 0:\n            total += v * v\n    return total\n"

CASES = {
    "humaneval": [
        {
            "columns": {
                "task_id": "Own/0",
                "prompt": "def sum_even_squares(values):\n    \"\"\"Sum of the squares of the even numbers.\"\"\"\n",
                "entry_point": "sum_even_squares",
                "test": "METADATA = {'author': 'own', 'dataset': 'test'}\n\n\ndef check(candidate):\n"
                "    assert candidate([1, 2, 3, 4]) == 20\n    assert candidate([]) == 0\n"
                "    assert candidate([-2, 5]) == 4\n    assert True\n",
            },
            "canonical": SUM_EVEN_SQUARES,
            "wrong": {
                "changed constant": SUM_EVEN_SQUARES.replace("% 2 == 0", "% 2 == 1"),
                "dropped line": SUM_EVEN_SQUARES.replace("            total += v * v\n", "            pass\n"),
                "wrong return": SUM_EVEN_SQUARES.replace("return total", "return len(values)"),
                "pass body": "def sum_even_squares(values):\n    pass\n",
            },
        }
    ],
    "mbpp": [
        {
            "columns": {
                "task_id": 901,
                "text": "Write a function to find the largest gap between consecutive sorted values.",
                "code": "",
                "test_list": ["assert largest_gap([1, 10, 4]) == 6", "assert largest_gap([5]) == 0",
                              "assert largest_gap([3, 3, 8, 9]) == 5"],
                "test_setup_code": "",
                "challenge_test_list": [],
            },
            "canonical": "def largest_gap(values):\n    ordered = sorted(values)\n"
            "    return max((b - a for a, b in zip(ordered, ordered[1:])), default=0)\n",
            "wrong": {
                "changed constant": "def largest_gap(values):\n    ordered = sorted(values)\n"
                "    return max((b - a for a, b in zip(ordered, ordered[1:])), default=1)\n",
                "dropped line": "def largest_gap(values):\n    ordered = values\n"
                "    return max((b - a for a, b in zip(ordered, ordered[1:])), default=0)\n",
                "wrong return": "def largest_gap(values):\n    return max(values) - min(values)\n",
                "pass body": "def largest_gap(values):\n    pass\n",
            },
        },
        {
            "columns": {
                "task_id": 902,
                "prompt": "Write a function for the area of a circle.",
                "code": "",
                "test_imports": ["import math"],
                "test_list": ["assert math.isclose(circle_area(1), 3.14159, rel_tol=1e-4)",
                              "assert math.isclose(circle_area(2), 12.56637, rel_tol=1e-4)"],
            },
            "canonical": "import math\ndef circle_area(r):\n    return math.pi * r * r\n",
            "wrong": {
                "changed constant": "import math\ndef circle_area(r):\n    return 3 * r * r\n",
                "wrong return": "import math\ndef circle_area(r):\n    return 2 * math.pi * r\n",
                "pass body": "def circle_area(r):\n    pass\n",
            },
        },
    ],
    "mbppplus": [
        {
            "columns": {
                "task_id": "Own/903",
                "prompt": "Write a function that returns the mean of a list.",
                "code": "",
                "test_list": ["assert mean([1, 2, 3]) == 2"],
                "test_imports": [],
                "test": "import math\n\ndef assertion(out, exp, atol):\n    if isinstance(exp, float) or atol:\n"
                "        assert math.isclose(out, exp, rel_tol=1e-7, abs_tol=atol or 1e-6)\n    else:\n"
                "        assert out == exp\n\ninputs = [[[1, 2, 3]], [[2.5, 3.5]], [[-4, 4, 9]]]\nresults = [2, 3.0, 3]\n"
                "for i, (inp, exp) in enumerate(zip(inputs, results)):\n    assertion(mean(*inp), exp, 0)\n",
            },
            "canonical": "def mean(values):\n    return sum(values) / len(values)\n",
            "wrong": {
                "changed constant": "def mean(values):\n    return sum(values) / (len(values) + 1)\n",
                "wrong return": "def mean(values):\n    return max(values)\n",
                "pass body": "def mean(values):\n    pass\n",
            },
        },
        {
            # As MBPP+ ships it: the `test` program imports NumPy for its float comparison.
            "columns": {
                "task_id": "Own/904",
                "prompt": "Write a function that scales every value of a list by a factor.",
                "code": "",
                "test_list": ["assert scale([1, 2], 3) == [3, 6]"],
                "test_imports": [],
                "test": "import numpy as np\nfrom math import inf\n\ndef is_floats(x):\n"
                "    return isinstance(x, float) or (isinstance(x, list) and bool(x) and all(isinstance(v, float) for v in x))\n\n"
                "def assertion(out, exp, atol):\n    if atol == 0 and is_floats(exp):\n        atol = 1e-6\n"
                "    if atol:\n        assert np.allclose(out, exp, rtol=1e-07, atol=atol)\n    else:\n        assert out == exp\n\n"
                "inputs = [[[1, 2], 3], [[0.5, 1.5], 2.0], [[], 7]]\nresults = [[3, 6], [1.0, 3.0], []]\n"
                "for i, (inp, exp) in enumerate(zip(inputs, results)):\n    assertion(scale(*inp), exp, 0)\n",
            },
            "canonical": "def scale(values, factor):\n    return [v * factor for v in values]\n",
            "wrong": {
                "changed constant": "def scale(values, factor):\n    return [v * (factor + 1) for v in values]\n",
                "dropped line": "def scale(values, factor):\n    values = [v * factor for v in values]\n",
                "wrong return": "def scale(values, factor):\n    return values\n",
                "pass body": "def scale(values, factor):\n    pass\n",
            },
        },
    ],
    "apps (stdin)": [
        {
            "columns": {
                "problem_id": 1,
                "question": "Read n and n integers; print how many are positive.",
                "input_output": json.dumps({"inputs": ["3\n1 -2 5\n", "1\n0\n", "4\n7 7 -7 1\n"],
                                            "outputs": ["2\n", "0\n", "3\n"]}),
            },
            "canonical": "n = int(input())\nvalues = list(map(int, input().split()))\nprint(sum(1 for v in values if v > 0))\n",
            "wrong": {
                "changed constant": "n = int(input())\nvalues = list(map(int, input().split()))\n"
                "print(sum(1 for v in values if v >= 0))\n",
                "dropped line": "n = int(input())\nprint(n)\n",
                "pass body": "pass\n",
            },
        }
    ],
    "apps (call-based)": [
        {
            "columns": {
                "problem_id": 2,
                "question": "Return the two largest values, largest first.",
                "input_output": json.dumps({"fn_name": "two_largest", "inputs": [[[4, 1, 9, 7]], [[2, 2]], [[5, -1, 3]]],
                                            "outputs": [[[9, 7]], [[2, 2]], [[5, 3]]]}),
            },
            "canonical": "def two_largest(values):\n    ordered = sorted(values, reverse=True)\n    return ordered[0], ordered[1]\n",
            "wrong": {
                "changed constant": "def two_largest(values):\n    ordered = sorted(values, reverse=True)\n"
                "    return ordered[0], ordered[2 % len(ordered)]\n",
                "wrong return": "def two_largest(values):\n    return sorted(values)[:2]\n",
                "pass body": "def two_largest(values):\n    pass\n",
            },
        }
    ],
    "taco (class Solution)": [
        {
            "columns": {
                "question": "Count the vowels of a word.",
                "input_output": json.dumps({"fn_name": "countVowels", "inputs": [["banana"], ["sky"], ["AEIOU"]],
                                            "outputs": [3, 0, 5]}),
            },
            "canonical": "class Solution:\n    def countVowels(self, word):\n"
            "        return sum(1 for c in word.lower() if c in 'aeiou')\n",
            "wrong": {
                "changed constant": "class Solution:\n    def countVowels(self, word):\n"
                "        return sum(1 for c in word.lower() if c in 'aeio')\n",
                "dropped line": "class Solution:\n    def countVowels(self, word):\n"
                "        return sum(1 for c in word if c in 'aeiou')\n",
                "pass body": "class Solution:\n    def countVowels(self, word):\n        pass\n",
            },
        }
    ],
    "codecontests": [
        {
            "columns": {
                "name": "own-1",
                "public_tests": {"input": ["2 3\n"], "output": ["5\n"]},
                "private_tests": {"input": ["10 -4\n", "0 0\n"], "output": ["6\n", "0\n"]},
                "generated_tests": {"input": ["1000000000 1000000000\n"], "output": ["2000000000\n"]},
            },
            "canonical": "a, b = map(int, input().split())\nprint(a + b)\n",
            "wrong": {
                "changed constant": "a, b = map(int, input().split())\nprint(a + b + 1)\n",
                "wrong return": "a, b = map(int, input().split())\nprint(a * b)\n",
                "pass body": "pass\n",
            },
        }
    ],
    "codecontests (C++)": [
        {
            "columns": {
                "name": "own-2",
                "public_tests": {"input": ["3\n1 2 3\n"], "output": ["6\n"]},
                "private_tests": {"input": ["1\n-5\n"], "output": ["-5\n"]},
                "generated_tests": {"input": [], "output": []},
            },
            "language": "cpp",
            "canonical": "#include <iostream>\nint main() { int n; long s = 0, v; std::cin >> n;"
            " for (int i = 0; i < n; ++i) { std::cin >> v; s += v; } std::cout << s << std::endl; }\n",
            "wrong": {
                "changed constant": "#include <iostream>\nint main() { int n; long s = 1, v; std::cin >> n;"
                " for (int i = 0; i < n; ++i) { std::cin >> v; s += v; } std::cout << s << std::endl; }\n",
                "pass body": "int main() {}\n",
            },
        }
    ],
    "livecodebench (stdin)": [
        {
            "columns": {
                "question_title": "Own double",
                "platform": "atcoder",
                "starter_code": "",
                "public_test_cases": json.dumps([{"input": "4\n", "output": "8\n", "testtype": "stdin"}]),
                "private_test_cases": private_cases([{"input": "0\n", "output": "0\n", "testtype": "stdin"},
                                                     {"input": "-7\n", "output": "-14\n", "testtype": "stdin"}]),
                "metadata": "{}",
            },
            "canonical": "print(2 * int(input()))\n",
            "wrong": {
                "changed constant": "print(3 * int(input()))\n",
                "wrong return": "print(abs(2 * int(input())))\n",
                "pass body": "pass\n",
            },
        }
    ],
    "livecodebench (functional)": [
        {
            "columns": {
                "question_title": "Own pair sum",
                "platform": "leetcode",
                "starter_code": "class Solution:\n    def pairCount(self, nums: List[int], target: int) -> int:\n        ",
                "public_test_cases": json.dumps([{"input": "[1, 2, 3, 4]\n5", "output": "2", "testtype": "functional"}]),
                "private_test_cases": private_cases([{"input": "[5, 5]\n10", "output": "1", "testtype": "functional"},
                                                     {"input": "[]\n3", "output": "0", "testtype": "functional"}]),
                "metadata": json.dumps({"func_name": "pairCount"}),
            },
            "canonical": "class Solution:\n    def pairCount(self, nums: List[int], target: int) -> int:\n"
            "        seen = Counter()\n        count = 0\n        for x in nums:\n            if seen[target - x]:\n"
            "                count += 1\n                seen[target - x] -= 1\n            else:\n                seen[x] += 1\n"
            "        return count\n",
            "wrong": {
                "dropped line": "class Solution:\n    def pairCount(self, nums: List[int], target: int) -> int:\n"
                "        seen = Counter()\n        count = 0\n        for x in nums:\n            if seen[target - x]:\n"
                "                count += 1\n            else:\n                seen[x] += 1\n        return count + len(nums) // 4\n",
                "wrong return": "class Solution:\n    def pairCount(self, nums: List[int], target: int) -> int:\n"
                "        return len(nums)\n",
                "pass body": "class Solution:\n    def pairCount(self, nums: List[int], target: int) -> int:\n        pass\n",
            },
        }
    ],
    "open-r1 verification_info (Python)": [
        {
            "columns": {
                "problem": "Print the reverse of the line.",
                "verification_info": json.dumps({"language": "python", "test_cases": [
                    {"input": "abc\n", "output": "cba\n", "type": "stdin_stdout"},
                    {"input": "racecar\n", "output": "racecar\n", "type": "stdin_stdout"}]}),
            },
            "canonical": "print(input()[::-1])\n",
            "wrong": {"wrong return": "print(input())\n", "changed constant": "print(input()[::-2])\n", "pass body": "pass\n"},
        }
    ],
    "open-r1 verification_info (C++)": [
        {
            "fence": "cpp",  # the row's `language` says C++: the reward reads it from there
            "columns": {
                "problem": "Print the maximum of three integers.",
                "verification_info": {"language": "cpp", "test_cases": [
                    {"input": "1 5 3\n", "output": "5\n", "type": "stdin_stdout"},
                    {"input": "-1 -5 -3\n", "output": "-1\n", "type": "stdin_stdout"}]},
            },
            "canonical": "#include <algorithm>\n#include <iostream>\nint main() { long a, b, c; std::cin >> a >> b >> c;"
            " std::cout << std::max({a, b, c}) << std::endl; }\n",
            "wrong": {
                "wrong return": "#include <algorithm>\n#include <iostream>\nint main() { long a, b, c; std::cin >> a >> b >> c;"
                " std::cout << std::min({a, b, c}) << std::endl; }\n",
                "pass body": "int main() {}\n",
            },
        }
    ],
    "leetcodedataset": [
        {
            "columns": {
                "task_id": "own-running-sum",
                "prompt": "from typing import *\nfrom collections import *\n",
                "entry_point": "Solution().runningSum",
                "test": "def check(candidate):\n    assert candidate(nums=[1, 2, 3]) == [1, 3, 6]\n"
                "    assert candidate(nums=[5]) == [5]\n",
                "input_output": [{"input": "nums = [1,2,3]", "output": "[1, 3, 6]"}],
                "query": "Running sum of a list.",
            },
            "canonical": "class Solution:\n    def runningSum(self, nums: List[int]) -> List[int]:\n"
            "        out = []\n        for x in nums:\n            out.append(x + (out[-1] if out else 0))\n        return out\n",
            "wrong": {
                "dropped line": "class Solution:\n    def runningSum(self, nums: List[int]) -> List[int]:\n"
                "        out = []\n        return out\n",
                "wrong return": "class Solution:\n    def runningSum(self, nums: List[int]) -> List[int]:\n        return nums\n",
                "pass body": "class Solution:\n    def runningSum(self, nums: List[int]) -> List[int]:\n        pass\n",
            },
        }
    ],
    "rllm functional": [
        {
            "columns": {
                "problem": "Return the index of the smallest element.",
                "tests": {"functional": "def check(candidate):\n    assert candidate([3, 1, 2]) == 1\n"
                          "    assert candidate([0]) == 0\n\ncheck(Solution().argMin)\n"},
            },
            "canonical": "class Solution:\n    def argMin(self, nums: List[int]) -> int:\n        return nums.index(min(nums))\n",
            "wrong": {
                "wrong return": "class Solution:\n    def argMin(self, nums: List[int]) -> int:\n        return nums.index(max(nums))\n",
                "pass body": "class Solution:\n    def argMin(self, nums: List[int]) -> int:\n        pass\n",
            },
        }
    ],
    "deepcoder (testtype)": [
        {
            "columns": {
                "problem": "Return n squared.",
                "tests": [{"input": "3", "output": "9", "testtype": "functional"},
                          {"input": "-4", "output": "16", "testtype": "functional"}],
                "metadata": {"func_name": "square"},
            },
            "canonical": "class Solution:\n    def square(self, n: int) -> int:\n        return n * n\n",
            "wrong": {
                "changed constant": "class Solution:\n    def square(self, n: int) -> int:\n        return n * 2\n",
                "pass body": "class Solution:\n    def square(self, n: int) -> int:\n        pass\n",
            },
        }
    ],
    "kodcode": [
        {
            "columns": {
                "question": "Write is_palindrome(s) ignoring case; raise TypeError for non-strings.",
                "test": "from solution import is_palindrome\nimport pytest\n\n\ndef test_simple():\n"
                "    assert is_palindrome('Abba')\n    assert not is_palindrome('abc')\n\n\n"
                "@pytest.mark.parametrize('word, expected', [('', True), ('x', True), ('xy', False)])\n"
                "def test_edges(word, expected):\n    assert is_palindrome(word) == expected\n\n\n"
                "def test_type():\n    with pytest.raises(TypeError):\n        is_palindrome(5)\n",
                "test_info": [{"function_name": "is_palindrome"}],
            },
            "canonical": "def is_palindrome(s):\n    if not isinstance(s, str):\n        raise TypeError('s')\n"
            "    s = s.lower()\n    return s == s[::-1]\n",
            "wrong": {
                "dropped line": "def is_palindrome(s):\n    if not isinstance(s, str):\n        raise TypeError('s')\n"
                "    return s == s[::-1]\n",
                "wrong return": "def is_palindrome(s):\n    return True\n",
                "pass body": "def is_palindrome(s):\n    pass\n",
            },
        }
    ],
    "bigcodebench": [
        {
            "columns": {
                "task_id": "Own/1",
                "entry_point": "task_func",
                "code_prompt": "import random\n\ndef task_func(n):\n",
                "test": "import unittest\nfrom unittest.mock import patch\n\n\nclass TestCases(unittest.TestCase):\n"
                "    @patch('random.randint', return_value=4)\n    def test_patched(self, mocked):\n"
                "        self.assertEqual(task_func(3), [4, 4, 4])\n        mocked.assert_called()\n\n"
                "    def test_length(self):\n        self.assertEqual(len(task_func(5)), 5)\n\n"
                "    def test_range(self):\n        self.assertTrue(all(1 <= x <= 6 for x in task_func(50)))\n\n"
                "    def test_negative(self):\n        with self.assertRaises(ValueError):\n            task_func(-1)\n",
            },
            "canonical": "import random\n\ndef task_func(n):\n    if n < 0:\n        raise ValueError('n')\n"
            "    return [random.randint(1, 6) for _ in range(n)]\n",
            "wrong": {
                "changed constant": "import random\n\ndef task_func(n):\n    if n < 0:\n        raise ValueError('n')\n"
                "    return [random.randint(0, 6) + 1 for _ in range(n)]\n",
                "dropped line": "import random\n\ndef task_func(n):\n    return [random.randint(1, 6) for _ in range(n)]\n",
                "wrong return": "import random\n\ndef task_func(n):\n    if n < 0:\n        raise ValueError('n')\n"
                "    return [3] * n\n",
                "pass body": "def task_func(n):\n    pass\n",
            },
        },
        {
            # As most BigCodeBench tasks: installed libraries (NumPy, Matplotlib) in the program and its tests.
            "columns": {
                "task_id": "Own/2",
                "entry_point": "task_func",
                "libs": "['numpy', 'matplotlib']",
                "code_prompt": "import numpy as np\nimport matplotlib.pyplot as plt\n\ndef task_func(values):\n",
                "test": "import unittest\nimport numpy as np\nimport matplotlib\nmatplotlib.use('Agg')\n\n\n"
                "class TestCases(unittest.TestCase):\n    def test_mean_line(self):\n"
                "        ax, mean = task_func([1, 2, 3, 6])\n        self.assertAlmostEqual(mean, 3.0)\n"
                "        self.assertEqual(len(ax.lines), 1)\n"
                "        np.testing.assert_allclose(ax.lines[0].get_ydata(), [3.0, 3.0])\n\n"
                "    def test_title(self):\n        ax, _ = task_func(np.array([2.0, 4.0]))\n"
                "        self.assertEqual(ax.get_title(), 'Values and their mean')\n\n"
                "    def test_empty(self):\n        with self.assertRaises(ValueError):\n            task_func([])\n",
            },
            "canonical": "import numpy as np\nimport matplotlib.pyplot as plt\n\ndef task_func(values):\n"
            "    values = np.asarray(values, dtype=float)\n    if values.size == 0:\n        raise ValueError('values')\n"
            "    fig, ax = plt.subplots()\n    ax.bar(range(values.size), values)\n    mean = float(values.mean())\n"
            "    ax.axhline(mean)\n    ax.set_title('Values and their mean')\n    return ax, mean\n",
            "wrong": {
                "changed constant": "import numpy as np\nimport matplotlib.pyplot as plt\n\ndef task_func(values):\n"
                "    values = np.asarray(values, dtype=float)\n    if values.size == 0:\n        raise ValueError('values')\n"
                "    fig, ax = plt.subplots()\n    ax.bar(range(values.size), values)\n    mean = float(np.median(values))\n"
                "    ax.axhline(mean)\n    ax.set_title('Values and their mean')\n    return ax, mean\n",
                "dropped line": "import numpy as np\nimport matplotlib.pyplot as plt\n\ndef task_func(values):\n"
                "    values = np.asarray(values, dtype=float)\n    if values.size == 0:\n        raise ValueError('values')\n"
                "    fig, ax = plt.subplots()\n    ax.bar(range(values.size), values)\n    mean = float(values.mean())\n"
                "    ax.set_title('Values and their mean')\n    return ax, mean\n",
                "pass body": "def task_func(values):\n    pass\n",
            },
        },
    ],
    "codeforces with a Python checker": [
        {
            # Any pair of positive integers summing to n is right: only a checker can judge it.
            "columns": {
                "tests": [{"input": "5\n", "output": "1 4\n"}, {"input": "2\n", "output": "1 1\n"}],
                "checker": "import sys\nn = int(open(sys.argv[1]).read())\ntry:\n"
                "    a, b = map(int, open(sys.argv[3]).read().split())\nexcept ValueError:\n    sys.exit(1)\n"
                "sys.exit(0 if a > 0 and b > 0 and a + b == n else 1)\n",
            },
            "reward": {"checker_column": "checker"},
            "canonical": "n = int(input())\nprint(n - 1, 1)\n",
            "wrong": {"changed constant": "n = int(input())\nprint(n, 1)\n", "wrong return": "n = int(input())\nprint(0, n)\n",
                      "pass body": "pass\n"},
        }
    ],
    "codeforces with a C++ checker": [
        {
            "columns": {
                "tests": [{"input": "6\n", "output": "2 3\n"}, {"input": "9\n", "output": "3 3\n"}],
                "checker": "#include <fstream>\nint main(int argc, char** argv) { std::ifstream in(argv[1]), got(argv[3]);"
                " long n, a = 0, b = 0; in >> n; if (!(got >> a >> b)) return 1;"
                " return (a > 1 && b > 1 && a * b == n) ? 0 : 1; }\n",
            },
            "reward": {"checker_column": "checker"},
            "canonical": "n = int(input())\nd = next(d for d in range(2, n) if n % d == 0)\nprint(n // d, d)\n",
            "wrong": {"wrong return": "n = int(input())\nprint(1, n)\n", "pass body": "pass\n"},
        }
    ],
    "floats within a tolerance": [
        {
            "columns": {"tests": {"inputs": ["2\n", "3\n"], "outputs": ["1.41421356\n", "1.73205081\n"]},
                        "tolerance": {"rel_tol": 1e-6, "abs_tol": 1e-6}},
            "reward": {"tolerance_column": "tolerance"},
            "canonical": "print(float(input()) ** 0.5)\n",
            "wrong": {"changed constant": "print(float(input()) ** 0.49)\n", "pass body": "pass\n"},
        }
    ],
}
