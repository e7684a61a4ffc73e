"""A small verifiable task: integer arithmetic written out as plain-text prompts such as ``"47+38="``.

It is what the offline default recipe trains on. Every prompt has one right answer (the ``solution`` column),
checked exactly by a rule-based reward, so the held-out accuracy is an honest measure of learning. The
problems are enumerated, shuffled with a fixed seed and split into disjoint train and held-out sets, so the
same arguments always give the same datasets and no held-out problem is ever trained on.
"""

from __future__ import annotations

import operator
import random

from datasets import Dataset, DatasetDict

OPERATIONS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def format_problem(left: int, op: str, right: int) -> str:
    """The prompt text for one problem, e.g. ``format_problem(47, "+", 38) == "47+38="``."""
    return f"{left}{op}{right}="


def arithmetic_problems(max_operand: int = 99, operations: str = "+") -> list[tuple[int, str, int, int]]:
    """Every problem ``(left, op, right, answer)`` with operands in ``[0, max_operand]``, in a fixed order.

    Subtraction only keeps ``left >= right`` so answers stay non-negative and the answer format is digits only.
    """
    unknown = sorted(set(operations) - set(OPERATIONS))
    if unknown:
        raise ValueError(
            f"operations={operations!r} has unknown operators {unknown}; use some of {''.join(OPERATIONS)}."
        )
    if max_operand < 1:
        raise ValueError(f"max_operand must be at least 1, got {max_operand}.")
    problems = []
    for op in dict.fromkeys(operations):
        for left in range(max_operand + 1):
            for right in range(max_operand + 1):
                if op == "-" and left < right:
                    continue
                problems.append((left, op, right, OPERATIONS[op](left, right)))
    return problems


def make_arithmetic_dataset(
    num_train: int = 4000,
    num_test: int = 200,
    max_operand: int = 99,
    operations: str = "+",
    seed: int = 0,
) -> DatasetDict:
    """Disjoint ``train`` and ``test`` splits of arithmetic problems, deterministic in the arguments.

    Columns: ``prompt`` (plain text, e.g. ``"47+38="``) and ``solution`` (the answer as a string, e.g. ``"85"``),
    the column names TRL's reward functions and this package's registry rewards read.
    """
    problems = arithmetic_problems(max_operand, operations)
    if num_train + num_test > len(problems):
        raise ValueError(
            f"num_train + num_test = {num_train + num_test} exceeds the {len(problems)} distinct problems with "
            f"max_operand={max_operand} and operations={operations!r}; lower them or raise max_operand."
        )
    random.Random(seed).shuffle(problems)

    def to_dataset(rows):
        return Dataset.from_dict(
            {
                "prompt": [format_problem(left, op, right) for left, op, right, _ in rows],
                "solution": [str(answer) for *_, answer in rows],
            }
        )

    return DatasetDict(
        train=to_dataset(problems[:num_train]), test=to_dataset(problems[num_train : num_train + num_test])
    )
