"""What judging costs when a test runs in the program's own process (a mock, NumPy, pandas, Matplotlib), and when the test
runs much of the program's code outside its calls (a generator it consumes, each resumption guarded; the default time
limit per test is 4 s, this benchmark gives 30 s so that the figure is a time, not a timeout).

Right programs only, one worker, a reused sandbox; milliseconds per program, after one warm-up batch. Run it with
`PYTHONPATH=<another checkout>` to measure that checkout's code side by side (alternate the two).

    python benchmarks/code_in_process.py --out benchmarks/results/code_in_process.json
    python benchmarks/code_in_process.py --batch 24 --rows "pandas, two calls"
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: F401  (offline environment, import path)
from _common import machine_info, write_json

from trl_ext.rewards.code import CodeReward

_UNITTEST = "import unittest\n{imports}\nclass TestCases(unittest.TestCase):\n{decorator}    def test_value(self{mock}):\n"
ROWS = {
    "unittest with a mock, three calls": (
        _UNITTEST.format(imports="from unittest.mock import patch", decorator="    @patch('random.randint', return_value=4)\n",
                         mock=", mock_randint")
        + "        self.assertEqual(task_func(3), 7)\n        self.assertEqual(task_func(4), 9)\n"
        "        self.assertEqual(task_func(0), 1)\n",
        "import random\ndef task_func(x):\n    return 2 * x + 1\n",
    ),
    "NumPy, two calls": (
        _UNITTEST.format(imports="import numpy as np", decorator="", mock="")
        + "        np.testing.assert_array_equal(task_func(3), np.array([7]))\n"
        "        np.testing.assert_array_equal(task_func(4), np.array([9]))\n",
        "import numpy as np\ndef task_func(x):\n    return np.array([2 * x + 1])\n",
    ),
    "pandas, two calls": (
        _UNITTEST.format(imports="import pandas as pd", decorator="", mock="")
        + "        pd.testing.assert_frame_equal(task_func(3), pd.DataFrame({'a': [7]}))\n"
        "        pd.testing.assert_frame_equal(task_func(4), pd.DataFrame({'a': [9]}))\n",
        "import pandas as pd\ndef task_func(x):\n    return pd.DataFrame({'a': [2 * x + 1]})\n",
    ),
    "pandas, methods of the returned frame": (
        _UNITTEST.format(imports="import pandas as pd", decorator="", mock="")
        + "        result = task_func(3)\n        self.assertTrue(result.equals(pd.DataFrame({'a': [7]})))\n"
        "        self.assertEqual(result.to_dict(), {'a': {0: 7}})\n        self.assertEqual(result.sum().tolist(), [7])\n",
        "import pandas as pd\ndef task_func(x):\n    return pd.DataFrame({'a': [2 * x + 1]})\n",
    ),
    "Matplotlib, a plot made in the call": (
        _UNITTEST.format(imports="import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt",
                         decorator="", mock="")
        + "        ax = task_func([1, 2, 3])\n        self.assertEqual(ax.get_title(), 'Values')\n"
        "        self.assertEqual(list(ax.lines[0].get_ydata()), [1, 2, 3])\n",
        "import matplotlib.pyplot as plt\ndef task_func(values):\n    fig, ax = plt.subplots()\n"
        "    ax.plot(values)\n    ax.set_title('Values')\n    return ax\n",
    ),
    "a generator of 300 items, with a mock": (
        _UNITTEST.format(imports="from unittest.mock import patch", decorator="    @patch('random.randint', return_value=4)\n",
                         mock=", mock_randint")
        + "        self.assertEqual(sum(task_func(300)), 44850)\n",
        "import random\ndef task_func(n):\n    for i in range(n):\n        yield i\n",
    ),
    "a generator of 1,000 items, with a mock": (
        _UNITTEST.format(imports="from unittest.mock import patch", decorator="    @patch('random.randint', return_value=4)\n",
                         mock=", mock_randint")
        + "        self.assertEqual(sum(task_func(1000)), 499500)\n",
        "import random\ndef task_func(n):\n    for i in range(n):\n        yield i\n",
    ),
}


def per_program_ms(reward: CodeReward, test: str, program: str, batch: int) -> tuple[float, int]:
    completions = [f"```python\n{program}```\n"] * batch
    reward(completions=completions[:1], test=[test])  # warm-up: the sandbox starts
    started = time.perf_counter()
    scores = reward(completions=completions, test=[test] * batch)
    return (time.perf_counter() - started) / batch * 1000, sum(score == 1.0 for score in scores)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16, help="programs per row (a quarter of it for the generator)")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS), metavar="ROW",
                        help="the rows to measure, by name (all by default)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    reward = CodeReward(timeout=30, memory_mb=1024, num_workers=1)
    results = []
    for name in args.rows:
        test, program = ROWS[name]
        batch = max(1, args.batch // 4) if "generator" in name else args.batch
        milliseconds, right = per_program_ms(reward, test, program, batch)
        results.append({"row": name, "ms_per_program": round(milliseconds, 1), "scored_1": right, "programs": batch})
        print(f"{name}: {milliseconds:.1f} ms per program ({right}/{batch} scored 1.0)")
    if args.out:
        write_json(args.out, {"benchmark": "code_in_process", "machine": machine_info(), "results": results})


if __name__ == "__main__":
    main()
