"""TRL's example scripts as offline scenarios, each trained by GRPOTrainer, DAPOTrainer (dynamic sampling on) and,
where the script's objective allows, GSPOTrainer.

Each scenario is written here in the spirit of one script of TRL's `examples/scripts/`: a tiny local model of the
same kind (text, tool-calling, vision-language), a local dataset, the script's trainer arguments (scaled down), and
rewards, tools or environments of the same kind. Only the trainer and config classes change between the three runs.

What every run checks, beyond finishing:
- the trainable parameters moved (some group carried signal to the loss);
- the reward functions check that what they see belongs to their own row (an environment reset with another row's
  fields, an image of another row, a tool reply to another completion's call fails the run);
- DAPO: every group that reaches the loss has a reward spread (nonzero advantages), or is a masked filler.
"""

from __future__ import annotations

import math
import re
import sqlite3
import sys
from pathlib import Path

import pytest
import torch
from conftest import tiny_training_settings
from datasets import Dataset, IterableDataset
from example_models import save_tool_player, tool_call_text
from PIL import Image
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer
from trl.rewards import accuracy_reward, think_format_reward

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig, GSPOTrainer
from trl_ext.rewards import completion_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rollouts"))
from tiny_vlm import IMAGE_SIZE, save_tiny_vlm  # noqa: E402

pytestmark = pytest.mark.slow

TRAINERS = {
    "grpo": (GRPOTrainer, GRPOConfig),
    "dapo": (DAPOTrainer, DAPOConfig),
    "gspo": (GSPOTrainer, GSPOConfig),
}


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


@pytest.fixture(autouse=True)
def _quiet_experimental(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


# ----------------------------------------------------------------------------------------------- shared checks


def record_batches(trainer) -> list[dict]:
    """Each generated-and-scored batch's advantages and completion mask, as the loss receives them."""
    batches = []
    generate = trainer._generate_and_score_completions

    def recording(inputs):
        output = generate(inputs)
        batches.append({"advantages": output["advantages"].detach().clone(), "mask": output["completion_mask"].clone()})
        return output

    trainer._generate_and_score_completions = recording
    return batches


def trainable_snapshot(trainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}


def train_and_check(kind: str, trainer) -> list[dict]:
    """Train; the trainable parameters must move; under DAPO every group reaching the loss carried signal."""
    batches = record_batches(trainer)
    before = trainable_snapshot(trainer)
    trainer.train()
    after = trainable_snapshot(trainer)
    assert any(not torch.equal(before[name], after[name]) for name in before), "no parameter moved"
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses and all(math.isfinite(loss) for loss in losses)
    if kind == "dapo":
        group = trainer.num_generations
        informative = 0
        for batch in batches:
            spread = batch["advantages"].view(-1, group).abs().amax(dim=1) > 0
            masked = batch["mask"].view(batch["advantages"].shape[0] // group, -1).sum(dim=1) == 0
            assert bool((spread | masked).all()), f"an uninformative group reached the loss: {spread}, {masked}"
            informative += int(spread.sum())
        assert informative > 0
    return batches


def make_trainer(kind: str, tmp_path, model, reward_funcs, dataset, settings: dict, **trainer_kwargs):
    trainer_class, config_class = TRAINERS[kind]
    config = config_class(**tiny_training_settings(tmp_path, **settings))
    return trainer_class(model=model, reward_funcs=reward_funcs, args=config, train_dataset=dataset, **trainer_kwargs)


def logged(trainer, name: str) -> list[float]:
    """A metric's values; DAPOTrainer logs rewards over trained rows, None for a step of fillers only."""
    return [entry[name] for entry in trainer.state.log_history if entry.get(name) is not None]


# ----------------------------------------------------------------- grpo_2048.py: a local sliding-tiles game


class SlidingTiles:
    """One row of sliding tiles, played with `move`: sliding left or right merges equal neighbours, which scores
    their sum (as in 2048); sliding up or down moves nothing on a single row."""

    def __init__(self):
        self.tiles: list[int] = []
        self.start: list[int] = []
        self.score = 0

    def reset(self, tiles, **kwargs) -> str:
        self.tiles, self.start, self.score = list(tiles), list(tiles), 0
        return render_tiles(self.tiles)

    def move(self, direction: str) -> str:
        """
        Slide the tiles.

        Args:
            direction: One of "left", "right", "up", "down".
        """
        if direction not in ("left", "right", "up", "down"):
            raise ValueError(f"unknown direction {direction!r}")
        if direction in ("left", "right"):
            self.tiles, gained = slide(self.tiles, towards_start=direction == "left")
            self.score += gained
        return render_tiles(self.tiles)


def render_tiles(tiles: list[int]) -> str:
    return " Tiles: " + " ".join(map(str, tiles))


def slide(tiles: list[int], towards_start: bool) -> tuple[list[int], int]:
    """The row after sliding, and the points its merges scored."""
    line = [t for t in (tiles if towards_start else reversed(tiles)) if t]
    merged, gained, i = [], 0, 0
    while i < len(line):
        if i + 1 < len(line) and line[i] == line[i + 1]:
            merged.append(2 * line[i])
            gained += 2 * line[i]
            i += 2
        else:
            merged.append(line[i])
            i += 1
    merged += [0] * (len(tiles) - len(merged))
    return (merged if towards_start else merged[::-1]), gained


def test_slide_merges_pairs_once_and_scores_them():
    assert slide([2, 2, 4, 4], towards_start=True) == ([4, 8, 0, 0], 12)
    assert slide([2, 2, 2, 0], towards_start=False) == ([0, 0, 2, 4], 4)
    assert slide([2, 4, 8, 16], towards_start=True) == ([2, 4, 8, 16], 0)


def tiles_score(environments, tiles, **kwargs) -> list[float]:
    """The game's score; fails when an environment was reset with another row's tiles."""
    for environment, row_tiles in zip(environments, tiles, strict=True):
        assert environment.start == list(row_tiles)
    return [float(environment.score) for environment in environments]


TILE_ROWS = [[2, 2, 0, 0], [4, 4, 2, 0], [2, 0, 2, 8], [8, 8, 8, 0], [0, 4, 0, 4], [2, 2, 4, 4]]
TILES_PROMPT = [{"role": "user", "content": "Merge tiles."}]


@pytest.fixture(scope="module")
def tiles_model(tmp_path_factory) -> str:
    tools = [get_json_schema(SlidingTiles().move)]
    examples = [
        (
            [{"role": "user", "content": TILES_PROMPT[0]["content"] + render_tiles(tiles)}],
            tools,
            tool_call_text("move", {"direction": d}),
        )
        for tiles in TILE_ROWS
        for d in ("left", "right", "up", "down")
    ]
    return save_tool_player(tmp_path_factory.mktemp("tiles-model"), examples)


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_grpo_2048_sliding_tiles_environment(tmp_path, tiles_model, kind):
    from peft import LoraConfig

    dataset = Dataset.from_dict({"prompt": [TILES_PROMPT] * 16, "tiles": [TILE_ROWS[i % 6] for i in range(16)]})
    settings = dict(
        chat_template_kwargs={"enable_thinking": False},
        log_completions=True,
        num_completions_to_print=2,
        max_completion_length=96,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        num_generations=4,
        max_tool_calling_iterations=2,
        learning_rate=1e-2,
        max_steps=2,
    )
    trainer = make_trainer(
        kind, tmp_path, tiles_model, tiles_score, dataset, settings,
        environment_factory=SlidingTiles, peft_config=LoraConfig(),
    )
    train_and_check(kind, trainer)
    assert sum(logged(trainer, "tools/call_frequency")) > 0


# ---------------------------------------------------------- grpo_agent.py: a database tool (`tools=`), 3 rewards

PETS = [("Rex", "dog"), ("Tom", "cat"), ("Kiki", "parrot"), ("Nemo", "fish")]


def query_pets(sql_command: str) -> list:
    """
    Run a read-only SQL query on the table pets(name, species).

    Args:
        sql_command: The SQL query.
    """
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("CREATE TABLE pets (name TEXT, species TEXT)")
        connection.executemany("INSERT INTO pets VALUES (?, ?)", PETS)
        connection.execute("PRAGMA query_only = ON")
        return [list(row) for row in connection.execute(sql_command).fetchall()]
    finally:
        connection.close()


def tool_turns(completion) -> list[tuple[str, str]]:
    """(SQL of the call, the tool's reply) for each call in a conversational completion."""
    calls, replies = [], []
    for message in completion:
        for call in message.get("tool_calls") or []:
            calls.append(call["function"]["arguments"].get("sql_command"))
        if message["role"] == "tool":
            replies.append(message["content"])
    return list(zip(calls, replies))


def query_reward(completions, **kwargs) -> list[float]:
    """1 when a query ran and returned rows; fails when a reply is not the result of the completion's own call."""
    rewards = []
    for completion in completions:
        turns = tool_turns(completion)
        for sql, reply in turns:
            try:
                expected = str(query_pets(sql))
            except Exception as error:  # the tool failed the same way in the rollout
                expected = str({"error": str(error)})
            assert reply == expected, (sql, reply)
        rewards.append(float(any(reply.startswith("[[") for _, reply in turns)))
    return rewards


def structure_reward(completions, **kwargs) -> list[float]:
    """0.5 for calling the tool, 0.5 more for answering in text after its reply."""
    rewards = []
    for completion in completions:
        called = any(message.get("tool_calls") for message in completion)
        answered = called and completion[-1]["role"] == "assistant" and bool(completion[-1].get("content"))
        rewards.append(0.5 * called + 0.5 * answered)
    return rewards


def correctness_reward(completions, answer, **kwargs) -> list[float]:
    return [float(expected in completion_text(completion[-1:])) for completion, expected in zip(completions, answer)]


@pytest.fixture(scope="module")
def agent_model(tmp_path_factory) -> str:
    tools = [get_json_schema(query_pets)]
    queries = [
        "SELECT species FROM pets WHERE name = 'Rex'",
        "SELECT name FROM pets",
        "SELECT * FROM owners",
        "DELETE FROM pets",
    ]
    examples = [
        ([{"role": "user", "content": f"What is {name}?"}], tools, tool_call_text("query_pets", {"sql_command": q}))
        for name, _ in PETS
        for q in queries
    ]
    return save_tool_player(tmp_path_factory.mktemp("agent-model"), examples)


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_grpo_agent_sql_tool(tmp_path, agent_model, kind):
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": f"What is {name}?"}] for name, _ in PETS * 4],
            "answer": [species for _, species in PETS * 4],
        }
    )
    settings = dict(
        max_completion_length=128,
        log_completions=True,
        per_device_train_batch_size=8,
        num_generations=4,
        learning_rate=1e-2,
        max_steps=2,
    )
    trainer = make_trainer(
        kind, tmp_path, agent_model, [correctness_reward, structure_reward, query_reward], dataset, settings,
        tools=[query_pets],
    )
    train_and_check(kind, trainer)
    assert sum(logged(trainer, "tools/call_frequency")) > 0
    assert sum(logged(trainer, "tools/failure_frequency")) > 0  # failing queries come back as errors


# ------------------------------------------- grpo_continuous_batching.py and gspo.py: math answers, text model

MATH_SYSTEM = "Solve it, then write the answer on the last line as: #### <number>"


def reference_answer_reward(completions, reference_answer, **kwargs) -> list[float]:
    """1 when the last `#### <number>` matches the reference."""
    rewards = []
    for completion, reference in zip(completions, reference_answer, strict=True):
        found = re.findall(r"####\s*([\d,]+)", completion_text(completion))
        rewards.append(float(bool(found) and found[-1].replace(",", "") == reference))
    return rewards


ANIMALS = ["cats", "dogs", "hens", "cows"]


def word_problems(num_rows: int) -> Dataset:
    """Sums from 2 to 4: the warm-started model's blind answers hit one time in three, so groups differ."""
    rows = [(a, b, animal) for animal in ANIMALS for a in (1, 2) for b in (1, 2)][:num_rows]
    return Dataset.from_dict(
        {
            "prompt": [
                [{"role": "system", "content": MATH_SYSTEM}, {"role": "user", "content": f"{a} {animal} and {b} more?"}]
                for a, b, animal in rows
            ],
            "reference_answer": [str(a + b) for a, b, _ in rows],
        }
    )


@pytest.fixture(scope="module")
def math_model(tmp_path_factory) -> str:
    """Answers `#### n`, with n from 2 to 4 alike."""
    examples = [(row, None, f"#### {n}") for row in word_problems(16)["prompt"] for n in range(2, 5)]
    return save_tool_player(tmp_path_factory.mktemp("math-model"), examples, response_schema=False)


@pytest.fixture(scope="module")
def boxed_math_model(tmp_path_factory) -> str:
    """Answers `\\boxed{n}` with n from 2 to 4 alike, half the time after a think block."""
    examples = []
    for row in word_problems(16)["prompt"]:
        examples += [(row, None, f"<think>{n}</think>\\boxed{{{n}}}") for n in range(2, 5)]
        examples += [(row, None, f"\\boxed{{{n}}}") for n in range(2, 5)]
    return save_tool_player(tmp_path_factory.mktemp("boxed-math-model"), examples, response_schema=False)


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_grpo_continuous_batching(tmp_path, math_model, kind):
    settings = dict(
        num_generations=8,
        per_device_train_batch_size=16,
        max_completion_length=24,
        log_completions=True,
        use_transformers_continuous_batching=True,
        transformers_continuous_batching_config={"use_cuda_graph": False},
        learning_rate=1e-2,
        max_steps=1,  # paged generation on CPU takes some 15 s a batch here
    )
    trainer = make_trainer(kind, tmp_path, math_model, reference_answer_reward, word_problems(16), settings)
    train_and_check(kind, trainer)


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_gspo_sequence_level_math(tmp_path, boxed_math_model, kind):
    dataset = word_problems(16).map(lambda row: {"solution": f"${row['reference_answer']}$"})
    settings = dict(
        learning_rate=1e-3,
        max_completion_length=32,
        log_completions=True,
        per_device_train_batch_size=4,
        num_generations=4,
        importance_sampling_level="sequence",
        epsilon=3e-4,
        epsilon_high=4e-4,
        beta=0.0,
        loss_type="grpo",
        gradient_accumulation_steps=2,
        steps_per_generation=4,
        max_steps=2,
    )
    trainer = make_trainer(kind, tmp_path, boxed_math_model, [think_format_reward, accuracy_reward], dataset, settings)
    batches = train_and_check(kind, trainer)
    # One generation of 4 micro-batches feeds 2 optimiser steps.
    assert len(batches) == 1 and batches[0]["advantages"].numel() == 16


# ------------------------------------------------------ grpo_vlm.py and gspo_vlm.py: a vision-language model

SHADES = {"light": 230, "dark": 20}


def shaded_picture(shade: str, game: int) -> Image.Image:
    return Image.new("RGB", (IMAGE_SIZE, IMAGE_SIZE), (SHADES[shade], game * 10, 0))


def picture_dataset(num_rows: int = 16) -> Dataset:
    shades = ["light" if i % 2 else "dark" for i in range(num_rows)]
    return Dataset.from_dict(
        {
            "prompt": [
                [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"{i}: light or dark?"}]}]
                for i in range(num_rows)
            ],
            "image": [shaded_picture(shade, i) for i, shade in enumerate(shades)],
            "solution": shades,
            "picture": list(range(num_rows)),
        }
    )


def shade_accuracy(completions, solution, image, picture, **kwargs) -> list[float]:
    """The first character's case answers (lower: light, upper: dark); fails when a row's image is another row's."""
    rewards = []
    for completion, shade, picture_, index in zip(completions, solution, image, picture, strict=True):
        assert picture_.convert("RGB").getpixel((0, 0)) == (SHADES[shade], index * 10, 0)
        text = completion_text(completion).lstrip()
        answer = "light" if text[:1].islower() else "dark" if text[:1].isupper() else None
        rewards.append(float(answer == shade))
    return rewards


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory) -> str:
    return save_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_grpo_vlm(tmp_path, vlm_dir, kind):
    from peft import LoraConfig

    settings = dict(
        learning_rate=1e-2, max_completion_length=8, log_completions=True,
        per_device_train_batch_size=8, num_generations=4, max_steps=2,
    )
    trainer = make_trainer(
        kind, tmp_path, vlm_dir, [think_format_reward, shade_accuracy], picture_dataset(), settings,
        peft_config=LoraConfig(target_modules=["q_proj", "v_proj"]),
    )
    train_and_check(kind, trainer)


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_gspo_vlm(tmp_path, vlm_dir, kind):
    settings = dict(
        learning_rate=1e-2, max_completion_length=8, log_completions=True,
        per_device_train_batch_size=4, num_generations=4, importance_sampling_level="sequence",
        epsilon=3e-4, epsilon_high=4e-4, beta=0.0, loss_type="grpo", gradient_accumulation_steps=2,
        steps_per_generation=4, max_steps=2,
    )
    trainer = make_trainer(kind, tmp_path, vlm_dir, [think_format_reward, shade_accuracy], picture_dataset(), settings)
    train_and_check(kind, trainer)


# --------------------------------------------- openenv/*.py: environments owning their reward, one or a dict


class EchoBack:
    """Echo-style: the `echo` tool repeats a message; `get_reward` is 1 when the row's word was echoed."""

    def __init__(self):
        self.word = None
        self.echoed: list[str] = []

    def reset(self, word, **kwargs) -> str:
        self.word, self.echoed = word, []
        return f" Word: {word}"

    def echo(self, message: str) -> str:
        """
        Echo a message back.

        Args:
            message: The message.
        """
        self.echoed.append(message)
        return message

    def get_reward(self) -> float:
        return float(self.word in self.echoed)


class CatchBall:
    """Catch-style: a ball falls in column `ball` of 3; the paddle starts in the middle and moves with `move`;
    `get_reward` is 1 when the paddle ends under the ball, -1 otherwise (as the game scores a miss)."""

    def __init__(self):
        self.ball = None
        self.paddle = 1

    def reset(self, ball, **kwargs) -> str:
        self.ball, self.paddle = int(ball), 1
        return f" Ball in column {ball}."

    def move(self, direction: str) -> str:
        """
        Move the paddle one column.

        Args:
            direction: "left" or "right".
        """
        step = {"left": -1, "right": 1}[direction]
        self.paddle = min(2, max(0, self.paddle + step))
        return f"Paddle in column {self.paddle}."

    def get_reward(self) -> float:
        return 1.0 if self.paddle == self.ball else -1.0


WORDS = ["sun", "sky"]  # a blind echo hits one time in two, so groups differ


def echo_prompt() -> list[dict]:
    return [{"role": "user", "content": "Echo the word."}]


def catch_prompt() -> list[dict]:
    return [{"role": "user", "content": "Catch the ball."}]


def reset_with_own_row(environments, environment=None, word=None, ball=None, **kwargs) -> list[None]:
    """Judges nothing (None): fails when a row's environment is not the one reset with the row's fields."""
    for i, instance in enumerate(environments):
        if isinstance(instance, EchoBack):
            assert instance.word == word[i] and (environment is None or environment[i] == "echo")
        else:
            assert instance.ball == ball[i] and environment[i] == "catch"
    return [None] * len(environments)


@pytest.fixture(scope="module")
def openenv_model(tmp_path_factory) -> str:
    echo_tools = [get_json_schema(EchoBack().echo)]
    catch_tools = [get_json_schema(CatchBall().move)]
    examples = []
    for word in WORDS:
        prompt = [{"role": "user", "content": f"Echo the word. Word: {word}"}]
        examples += [(prompt, echo_tools, tool_call_text("echo", {"message": w})) for w in WORDS]
    for ball in range(3):
        prompt = [{"role": "user", "content": f"Catch the ball. Ball in column {ball}."}]
        examples += [(prompt, catch_tools, tool_call_text("move", {"direction": d})) for d in ("left", "right")]
    return save_tool_player(tmp_path_factory.mktemp("openenv-model"), examples)


OPENENV_SETTINGS = dict(
    chat_template_kwargs={"enable_thinking": False},
    log_completions=True,
    num_completions_to_print=1,
    max_completion_length=96,
    max_tool_calling_iterations=1,
    per_device_train_batch_size=8,
    num_generations=4,
    learning_rate=1e-3,
    max_steps=2,
)


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_openenv_echo_environment_owns_the_reward(tmp_path, openenv_model, kind):
    dataset = Dataset.from_dict({"prompt": [echo_prompt()] * 16, "word": [WORDS[i % 2] for i in range(16)]})
    trainer = make_trainer(
        kind, tmp_path, openenv_model, [reset_with_own_row], dataset, OPENENV_SETTINGS, environment_factory=EchoBack
    )
    assert trainer.reward_func_names[-1] == "EchoBack"
    train_and_check(kind, trainer)
    assert max(logged(trainer, "rewards/EchoBack/mean")) > 0


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_openenv_dict_of_two_environments(tmp_path, openenv_model, kind):
    rows = 16
    dataset = Dataset.from_dict(
        {
            "prompt": [echo_prompt() if i % 2 else catch_prompt() for i in range(rows)],
            "environment": ["echo" if i % 2 else "catch" for i in range(rows)],
            "word": [WORDS[i % 2] for i in range(rows)],
            "ball": [0 if i % 4 == 0 else 2 for i in range(rows)],
        }
    )
    played = set()

    def each_row_its_environment(environments, **kwargs):
        played.update(type(instance).__name__ for instance in environments)
        return reset_with_own_row(environments, **kwargs)

    trainer = make_trainer(
        kind, tmp_path, openenv_model, [each_row_its_environment], dataset, OPENENV_SETTINGS,
        environment_factory={"echo": EchoBack, "catch": CatchBall},
    )
    assert trainer.reward_func_names[-2:] == ["EchoBack", "CatchBall"]
    train_and_check(kind, trainer)
    assert played == {"EchoBack", "CatchBall"}
    # Under DAPO a step's logged rewards cover its trained rows, which may all be of one game.
    assert logged(trainer, "rewards/EchoBack/mean") or logged(trainer, "rewards/CatchBall/mean")


# ---------------------------------------------- trl/scripts/grpo.py --dataset_streaming: an IterableDataset


@pytest.mark.parametrize("kind", ["grpo", "dapo", "gspo"])
def test_grpo_script_streaming_dataset(tmp_path, math_model, kind):
    rows = word_problems(16)
    stream = IterableDataset.from_generator(lambda: (row for row in rows))
    settings = dict(
        per_device_train_batch_size=16, num_generations=4, max_completion_length=24, learning_rate=1e-2, max_steps=2
    )
    trainer = make_trainer(kind, tmp_path, math_model, reference_answer_reward, stream, settings)
    train_and_check(kind, trainer)
