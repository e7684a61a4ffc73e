"""A small verifiable code task: write the one-line body of a function its docstring describes.

It is what the offline code recipe (`recipes/configs/dapo_code_default.yaml`) trains on. Each row is in
HumanEval's schema (`task_id`, `prompt`, `canonical_solution`, `test`, `entry_point`): the prompt is a function's
signature and docstring, e.g.

    def f(x):
        \"\"\"Return x plus 347.\"\"\"

and a right completion is the body a base model writes after it, `    return x + 347`. The `test` column defines
`check(candidate)` with asserts on several inputs, so only a program that computes the function passes. The `code`
reward runs prompt + completion against the tests in the sandbox, as HumanEval's harness does. The problems are
enumerated, shuffled with a fixed seed and split into disjoint train and held-out sets, so the same arguments
always give the same datasets and no held-out problem is ever trained on.
"""

from __future__ import annotations

import operator
import random

from datasets import Dataset, DatasetDict

ENTRY_POINT = "f"
# The operations a docstring names: word, Python operator, function.
OPERATIONS = {"plus": ("+", operator.add), "minus": ("-", operator.sub), "times": ("*", operator.mul)}
# The inputs every check() tries: a program must compute the function, not return one value.
CHECK_INPUTS = (0, 7, 50)


def function_prompt(operation: str, constant: int) -> str:
    """The HumanEval-style prompt: the signature and docstring, ending in a newline."""
    return f'def {ENTRY_POINT}(x):\n    """Return x {operation} {constant}."""\n'


def function_body(operation: str, constant: int) -> str:
    """The canonical one-line body, e.g. `"    return x + 347\\n"`."""
    return f"    return x {OPERATIONS[operation][0]} {constant}\n"


def check_function(operation: str, constant: int) -> str:
    """HumanEval's `test` column: `check(candidate)` asserting the function's value on `CHECK_INPUTS`."""
    compute = OPERATIONS[operation][1]
    asserts = "".join(f"    assert candidate({x}) == {compute(x, constant)}\n" for x in CHECK_INPUTS)
    return f"def check(candidate):\n{asserts}"


def code_problems(max_constant: int = 999, operations: tuple[str, ...] = tuple(OPERATIONS)) -> list[tuple[str, int]]:
    """Every problem `(operation, constant)` with constants in `[1, max_constant]`, in a fixed order."""
    unknown = sorted(set(operations) - set(OPERATIONS))
    if unknown:
        raise ValueError(f"operations={operations!r} has unknown operations {unknown}; use some of {list(OPERATIONS)}.")
    if max_constant < 1:
        raise ValueError(f"max_constant must be at least 1, got {max_constant}.")
    return [(operation, constant) for operation in dict.fromkeys(operations) for constant in range(1, max_constant + 1)]


def make_code_dataset(
    num_train: int = 2000,
    num_test: int = 200,
    max_constant: int = 999,
    operations: tuple[str, ...] = tuple(OPERATIONS),
    seed: int = 0,
) -> DatasetDict:
    """Disjoint `train` and `test` splits of the task, deterministic in the arguments, in HumanEval's columns."""
    problems = code_problems(max_constant, operations)
    if num_train + num_test > len(problems):
        raise ValueError(
            f"num_train + num_test = {num_train + num_test} exceeds the {len(problems)} distinct problems with "
            f"max_constant={max_constant} and operations={operations!r}; lower them or raise max_constant."
        )
    random.Random(seed).shuffle(problems)

    def to_dataset(rows: list[tuple[str, int]], first_id: int) -> Dataset:
        return Dataset.from_dict(
            {
                "task_id": [f"code-functions/{first_id + i}" for i in range(len(rows))],
                "prompt": [function_prompt(operation, constant) for operation, constant in rows],
                "canonical_solution": [function_body(operation, constant) for operation, constant in rows],
                "test": [check_function(operation, constant) for operation, constant in rows],
                "entry_point": [ENTRY_POINT] * len(rows),
            }
        )

    train, test = problems[:num_train], problems[num_train : num_train + num_test]
    return DatasetDict(train=to_dataset(train, 0), test=to_dataset(test, num_train))
