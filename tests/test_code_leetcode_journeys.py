"""LeetCode-style code RL through the trainer: LiveCodeBench functional rows whose right programs use what
LiveCodeBench's harness and LeetCode's judge provide without an import (`reduce`, `xor`, `pairwise`, `median`,
the builtin `pow` next to `math`'s, `SortedList`), and class-based solutions (`class Solution: def method(self,
...)`) in every format that calls a function by name. Rows are written here in each dataset's schema; the
programs run in the sandbox, called by `DAPOTrainer`'s reward as TRL calls it."""

from __future__ import annotations

import json

import pytest
from conftest import tiny_training_settings
from datasets import Dataset
from test_code_journeys import sandbox_of, scores_in_trainer

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.rewards import get_reward
from trl_ext.rewards.code_formats import LIVECODEBENCH_HEADER, SORTEDCONTAINERS_IMPORT, header_for
from trl_ext.sandbox.testing import close_servers


def livecodebench_row(method: str, signature: str, cases: list[tuple[list, object]]) -> dict:
    """A LiveCodeBench functional row: arguments one JSON value per line, the expected value as JSON."""
    tests = [
        {
            "input": "\n".join(json.dumps(argument) for argument in arguments),
            "output": json.dumps(expected),
            "testtype": "functional",
        }
        for arguments, expected in cases
    ]
    return {
        "prompt": f"Complete the class.\nclass Solution:\n    def {method}(self, {signature}):\n",
        "question_title": method,
        "platform": "leetcode",
        "starter_code": f"class Solution:\n    def {method}(self, {signature}):\n        ",
        "public_test_cases": json.dumps(tests[:1]),
        "private_test_cases": json.dumps(tests[1:]),
        "metadata": json.dumps({"func_name": method}),
    }


def solution(method: str, signature: str, body: str) -> str:
    return f"```python\nclass Solution:\n    def {method}(self, {signature}):\n        {body}\n```"


# (method, signature, tests, right body, wrong body): each right body uses a name only the header provides.
HEADER_ROWS = {
    "reduce and xor": (
        "xorAll",
        "nums: List[int]",
        [([[1, 2, 3]], 0), ([[6, 6]], 0), ([[4, 7]], 3)],
        "return reduce(xor, nums, 0)",
        "return reduce(or_, nums, 0)",
    ),
    "pairwise": (
        "countRises",
        "nums: List[int]",
        [([[1, 1, 2]], 1), ([[3, 3]], 0), ([[2, 2, 3]], 1)],
        "return sum(b > a for a, b in pairwise(nums))",
        "return sum(b >= a for a, b in pairwise(nums))",
    ),
    "SortedList": (
        "smallerAfter",
        "nums: List[int]",
        [([[2, 2, 1]], [1, 1, 0]), ([[1, 1]], [0, 0]), ([[3, 3, 3]], [0, 0, 0])],
        (
            "seen = SortedList()\n        counts = []\n        for x in reversed(nums):\n"
            "            counts.append(seen.bisect_left(x))\n            seen.add(x)\n        return counts[::-1]"
        ),
        (
            "seen = SortedList()\n        counts = []\n        for x in reversed(nums):\n"
            "            counts.append(seen.bisect_right(x))\n            seen.add(x)\n        return counts[::-1]"
        ),
    ),
    "statistics and the builtin pow": (
        "medianPower",
        "nums: List[int], mod: int",
        [([[1, 3, 2], 7], 1), ([[4, 4, 10], 5], 4)],
        "return pow(int(median(nums)), 3, mod)",
        "return pow(int(median(nums)), 2, mod)",
    ),
}


@pytest.fixture(scope="module")
def code_reward():
    reward = get_reward("code", timeout=4.0)
    yield reward
    close_servers(sandbox_of(reward))
    if reward.reward._site_sandbox is not None:
        close_servers(reward.reward._site_sandbox)


def dapo_trainer(model, reward, dataset, tmp_path) -> DAPOTrainer:
    settings = tiny_training_settings(tmp_path, num_generations=2, per_device_train_batch_size=2)
    return DAPOTrainer(model=model, reward_funcs=[reward], args=DAPOConfig(**settings), train_dataset=dataset)


@pytest.mark.parametrize("name", list(HEADER_ROWS))
def test_livecodebench_programs_use_the_header_names_without_importing_them(
    name, code_reward, tiny_model_dir, tmp_path
):
    method, signature, cases, right, wrong = HEADER_ROWS[name]
    dataset = Dataset.from_list([livecodebench_row(method, signature, cases)] * 2)
    trainer = dapo_trainer(tiny_model_dir, code_reward, dataset, tmp_path)
    completions = [solution(method, signature, right), solution(method, signature, wrong), "I would loop."]
    assert scores_in_trainer(trainer, dataset, completions) == [1.0, 0.0, 0.0]


def test_sortedcontainers_is_put_before_the_programs_that_name_it_only():
    assert header_for(LIVECODEBENCH_HEADER, "x = SortedList([3, 1])") == LIVECODEBENCH_HEADER + SORTEDCONTAINERS_IMPORT
    assert header_for(LIVECODEBENCH_HEADER, "x = sorted([3, 1])  # MySortedListLike") == LIVECODEBENCH_HEADER
    assert header_for("import math\n", "x = SortedList()") == "import math\n"  # a row's own header stays as it is


def test_a_program_naming_sortedlist_is_judged_with_installed_packages_or_not_at_all(tiny_model_dir, tmp_path, caplog):
    method, signature, cases, right, _ = HEADER_ROWS["SortedList"]
    dataset = Dataset.from_list([livecodebench_row(method, signature, cases)] * 2)
    reward = get_reward("code", timeout=4.0, site_packages=False)
    trainer = dapo_trainer(tiny_model_dir, reward, dataset, tmp_path)
    xor_method, xor_signature, _, xor_right, _ = HEADER_ROWS["reduce and xor"]
    # Without installed packages SortedList cannot be offered: cannot judge (None), never 0 for a right program.
    assert scores_in_trainer(trainer, dataset, [solution(method, signature, right)]) == [None]
    assert "sortedcontainers" in caplog.text and "site_packages='auto'" in caplog.text
    xor_dataset = Dataset.from_list(
        [livecodebench_row(xor_method, "nums: List[int]", HEADER_ROWS["reduce and xor"][2])] * 2
    )
    assert scores_in_trainer(trainer, xor_dataset, [solution(xor_method, xor_signature, xor_right)]) == [1.0]
    close_servers(sandbox_of(reward))


# Class-based solutions: each format that calls a function by name also calls the method of `class Solution`.
CLASS_ROWS = {
    "livecodebench (functional)": livecodebench_row("doubled", "n: int", [([3], 6), ([-2], -4)]),
    "apps (call-based)": {
        "prompt": "Double n.",
        "input_output": json.dumps({"fn_name": "doubled", "inputs": [[3], [-2]], "outputs": [6, -4]}),
    },
    "leetcodedataset": {
        "prompt": "from typing import *\n",
        "entry_point": "Solution().doubled",
        "test": "def check(candidate):\n    assert candidate(n=3) == 6\n    assert candidate(n=-2) == -4\n",
    },
    "deepcoder (functional)": {
        "prompt": "Double n.",
        "tests": [
            {"input": "3", "output": "6", "testtype": "functional"},
            {"input": "-2", "output": "-4", "testtype": "functional"},
        ],
        "metadata": {"func_name": "doubled"},
    },
    "rllm (functional)": {
        "prompt": "Double n.",
        "tests": {
            "functional": (
                "def check(candidate):\n    assert candidate(3) == 6\n    assert candidate(-2) == -4\n\ncheck(Solution().doubled)\n"
            )
        },
    },
}
CLASS_RIGHT = "```python\nclass Solution:\n    def doubled(self, n: int) -> int:\n        return 2 * n\n```"
CLASS_WRONG = "```python\nclass Solution:\n    def doubled(self, n: int) -> int:\n        return n + 2\n```"
FUNCTION_RIGHT = "```python\ndef doubled(n):\n    return 2 * n\n```"


@pytest.mark.parametrize("name", list(CLASS_ROWS))
def test_class_based_solutions_train_in_every_format_that_calls_by_name(name, code_reward, tiny_model_dir, tmp_path):
    dataset = Dataset.from_list([CLASS_ROWS[name]] * 2)
    trainer = dapo_trainer(tiny_model_dir, code_reward, dataset, tmp_path)
    scores = scores_in_trainer(trainer, dataset, [CLASS_RIGHT, CLASS_WRONG])
    assert scores == [1.0, 0.0], scores
    if name in ("apps (call-based)", "deepcoder (functional)", "livecodebench (functional)"):
        # `fn_name` / `func_name` is called as a top-level function when there is no Solution class
        assert scores_in_trainer(trainer, dataset, [FUNCTION_RIGHT]) == [1.0]
