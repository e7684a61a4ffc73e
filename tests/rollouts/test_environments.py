"""Dynamic sampling with `environment_factory`: every round's rows get their own environment instances, reset with
the row's fields; an environment's `get_reward` judges for the filter; the kept rows keep their own environments.

The environment is a number-guessing game with one tool, `guess`. A tiny random model rarely writes a well-formed
tool call, so a reward function plays each completion's first digit through the row's environment (the tool call a
trained model would make): groups whose completions guess differently are informative, the others are not.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
import trl
from conftest import tiny_training_settings
from datasets import Dataset
from tool_model import call, save_tool_calling_model
from trl.chat_template_utils import add_response_schema

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.rewards import completion_text
from trl_ext.tiny import build_char_tokenizer, build_tiny_causal_lm

GROUP = 4
BATCH = 8


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


class GuessingGame:
    """Guess the secret number from 1 to 4. Rewarded 1 when a guess hits the secret."""

    created = 0

    def __init__(self):
        type(self).created += 1
        self.secret = self.game = None
        self.guesses: list[int] = []
        self.completion = None
        self.resets = 0

    def reset(self, secret: int, game: int, **kwargs) -> str:
        self.secret, self.game, self.guesses, self.completion = secret, game, [], None
        self.resets += 1
        return f" (game {game})"

    def guess(self, number: int) -> str:
        """
        Guess the secret number.

        Args:
            number: The guess, from 1 to 4.
        """
        self.guesses.append(int(number))
        return "right" if int(number) == self.secret else "wrong"

    def get_reward(self) -> float:
        return float(self.secret in self.guesses)


class HighGuessGame(GuessingGame):
    """The same game scored differently: rewarded 1 when a guess is at least the secret."""

    def get_reward(self) -> float:
        return float(any(guess >= self.secret for guess in self.guesses))


def first_guess(completion) -> int | None:
    """The first digit from 1 to 4 in the completion's text: the number it guesses."""
    return next((int(char) for char in completion_text(completion) if char in "1234"), None)


def play_first_digit(completions, environments, secret, game, **kwargs):
    """Plays each completion's guess in its row's environment, then judges nothing (None): `get_reward` does.

    Fails when a row's environment is not the one reset with the row's fields: rows shuffled against their
    environments fail here."""
    for completion, environment, row_secret, row_game in zip(completions, environments, secret, game, strict=True):
        assert (environment.secret, environment.game) == (row_secret, row_game)
        guess = first_guess(completion)
        if guess is not None:
            environment.guess(guess)
        environment.completion = completion
    return [None] * len(completions)


def prompt(game: int) -> list[dict]:
    return [{"role": "user", "content": f"Game {game}: guess my number from 1 to 4."}]


@pytest.fixture(scope="module")
def tool_model_dir(tmp_path_factory) -> str:
    """The tiny random model with a chat template that renders tools (TRL's Qwen2.5 template)."""
    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen2_5.jinja")) as file:
        tokenizer.chat_template = file.read()
    tokenizer = add_response_schema(tokenizer)
    model = build_tiny_causal_lm(tokenizer)
    model.config.max_position_embeddings = 2048  # the template's tool preamble is some 800 characters
    directory = tmp_path_factory.mktemp("tool-model")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def game_dataset(num_games: int = 32, environments: tuple[str, ...] = ()) -> Dataset:
    columns = {
        "prompt": [prompt(g) for g in range(num_games)],
        "secret": [g % 4 + 1 for g in range(num_games)],
        "game": list(range(num_games)),
    }
    if environments:
        columns["environment"] = [environments[g % len(environments)] for g in range(num_games)]
    return Dataset.from_dict(columns)


def make_trainer(tmp_path, model_dir, environment_factory, dataset, **overrides):
    settings = {
        "per_device_train_batch_size": BATCH,
        "num_generations": GROUP,
        "max_completion_length": 12,
        "max_steps": 3,
        "learning_rate": 1e-3,
        "soft_overlong_punishment": False,
        **overrides,
    }
    config = DAPOConfig(**tiny_training_settings(tmp_path, **settings))
    return DAPOTrainer(
        model_dir,
        reward_funcs=play_first_digit,
        args=config,
        train_dataset=dataset,
        environment_factory=environment_factory,
    )


def watch_batches(trainer):
    """After each assembled batch: the batch's rows (from TRL's scoring of it), and the environments then exposed."""
    batches = []
    calculate = trainer._calculate_rewards

    def recording(inputs, prompts, completions, completion_ids_list):
        rewards = calculate(inputs, prompts, completions, completion_ids_list)
        if trainer._assembled is not None:  # TRL scoring the assembled batch
            batches.append({"inputs": [dict(row) for row in inputs], "completions": completions, "rewards": rewards})
        return rewards

    generate, train_on, fillers = trainer._generate_and_score_completions, trainer.train_on, []
    trainer.train_on = lambda batch: fillers.append(len(batch.filler_rows)) or train_on(batch)

    def generating(inputs):
        output = generate(inputs)
        # The environments' state now: a later batch resets them.
        batches[-1]["environments"] = [
            None if env is None else (type(env), env.secret, env.game, list(env.guesses), env.completion)
            for env in trainer.environments
        ]
        batches[-1]["fillers"] = fillers[-1]
        return output

    trainer._calculate_rewards = recording
    trainer._generate_and_score_completions = generating
    return batches


def check_batch_rows(batch, group_size=GROUP):
    """Kept rows: informative groups only, each row with its own environment (carried rows hold none)."""
    rows = len(batch["inputs"]) - batch["fillers"]
    rewards = torch.nansum(batch["rewards"][:rows], dim=1).view(-1, group_size)
    assert bool((rewards.max(dim=1).values > rewards.min(dim=1).values).all()), rewards
    for row, completion, environment in zip(batch["inputs"], batch["completions"], batch["environments"]):
        if environment is None:
            continue
        _, secret, game, guesses, played = environment
        assert (secret, game) == (row["secret"], row["game"])
        assert played == completion
        guess = first_guess(completion)
        assert guesses == ([] if guess is None else [guess])


@pytest.mark.slow
def test_each_row_keeps_its_own_environment_and_get_reward_filters(tmp_path, tool_model_dir):
    GuessingGame.created = 0
    trainer = make_trainer(tmp_path, tool_model_dir, GuessingGame, game_dataset(), max_steps=4)
    assert trainer.reward_func_names == ["play_first_digit", "GuessingGame"]
    assert trainer.sampler.settings.filter_used.tolist() == [True, True]  # the environment's reward judges
    batches = watch_batches(trainer)
    trainer.train()
    pool_size = len(trainer._environment_pool[None])

    history = trainer.state.log_history
    assert sum(e.get("dynamic_sampling/generation_rounds", 0) for e in history) > len(batches)  # refills ran
    for batch in batches:
        check_batch_rows(batch)
    # The pool grows only to what one batch needs at once (its rows plus one round), then instances are reused.
    largest_round = BATCH * trainer.args.dynamic_sampling_max_oversampling
    assert pool_size <= BATCH + largest_round
    assert GuessingGame.created == pool_size
    assert sum(environment.resets for environment in trainer._environment_pool[None]) > pool_size


@pytest.mark.slow
def test_a_dict_of_environments_routes_rows_by_their_environment_column(tmp_path, tool_model_dir):
    factories = {"exact": GuessingGame, "high": HighGuessGame}
    trainer = make_trainer(tmp_path, tool_model_dir, factories, game_dataset(environments=("exact", "high")))
    assert trainer.reward_func_names == ["play_first_digit", "GuessingGame", "HighGuessGame"]
    batches = watch_batches(trainer)
    trainer.train()
    for batch in batches:
        check_batch_rows(batch)
        for row, environment in zip(batch["inputs"], batch["environments"]):
            if environment is not None:
                assert environment[0] is factories[row["environment"]]


class GameWithItsOwnData(GuessingGame):
    """Owns its data: each reset starts the next game and returns its prompt."""

    games_started = 0

    def reset(self, **kwargs) -> str:
        game = type(self).games_started
        type(self).games_started += 1
        super().reset(secret=game % 4 + 1, game=game)
        return f"Game {game}: guess my number from 1 to 4."


def play_own_game(completions, environments, **kwargs):
    for completion, environment in zip(completions, environments, strict=True):
        guess = first_guess(completion)
        if guess is not None:
            environment.guess(guess)
        environment.completion = completion
    return [None] * len(completions)


@pytest.mark.slow
def test_an_environment_that_owns_its_data_trains_without_a_dataset(tmp_path, tool_model_dir):
    config = DAPOConfig(
        **tiny_training_settings(
            tmp_path,
            per_device_train_batch_size=BATCH,
            num_generations=GROUP,
            max_completion_length=12,
            max_steps=2,
            soft_overlong_punishment=False,
        )
    )
    trainer = DAPOTrainer(
        tool_model_dir, reward_funcs=play_own_game, args=config, environment_factory=GameWithItsOwnData
    )
    batches = watch_batches(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    for batch in batches:
        rows = len(batch["inputs"]) - batch["fillers"]
        rewards = batch["rewards"][:rows, 1].view(-1, GROUP)
        assert bool((rewards.max(dim=1).values > rewards.min(dim=1).values).all())
        for completion, environment in zip(batch["completions"], batch["environments"]):
            if environment is not None:
                assert environment[4] == completion


def called_numbers(completion) -> list[int]:
    """The numbers the completion passed to `guess`, in order, as TRL parsed its tool calls."""
    numbers = []
    for message in completion:
        for call_ in message.get("tool_calls") or []:
            arguments = call_["function"]["arguments"]
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            if call_["function"]["name"] == "guess" and isinstance(arguments.get("number"), int):
                numbers.append(arguments["number"])
    return numbers


@pytest.fixture(scope="module")
def guessing_model(tmp_path_factory) -> str:
    """Taught to answer every game with one `guess` tool call of a number from 1 to 4, at random."""
    # As TRL prompts it: the observation `reset` returns is appended to the last message.
    observed = [f"{prompt(game)[0]['content']} (game {game})" for game in range(8)]
    conversations = [[{"role": "user", "content": text}] for text in observed for _ in range(4)]
    answers = [call("guess", json.dumps({"number": n})) for _ in range(8) for n in range(1, 5)]
    tools = [GuessingGame().guess]
    return save_tool_calling_model(tmp_path_factory.mktemp("guessing-model"), conversations, tools, answers)


@pytest.mark.slow
def test_the_model_plays_each_rows_own_environment_through_its_tools(tmp_path, guessing_model):
    """As in TRL's environment examples: no reward function, the environment's `get_reward` is the reward."""
    settings = {
        "per_device_train_batch_size": BATCH,
        "num_generations": GROUP,
        "max_completion_length": 96,
        "max_steps": 3,
        "learning_rate": 1e-3,
    }
    config = DAPOConfig(**tiny_training_settings(tmp_path, **settings))
    trainer = DAPOTrainer(guessing_model, args=config, train_dataset=game_dataset(), environment_factory=GuessingGame)
    assert trainer.reward_func_names == ["GuessingGame"]  # no overlong punishment without a reward function
    batches = watch_batches(trainer)
    trainer.train()
    calls = [entry["tools/call_frequency"] for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    assert max(calls) > 0.1, calls
    played = 0
    for batch in batches:
        rows = len(batch["inputs"]) - batch["fillers"]
        rewards = batch["rewards"][:rows, 0].view(-1, GROUP)
        assert bool((rewards.max(dim=1).values > rewards.min(dim=1).values).all())
        for row, completion, environment in zip(batch["inputs"], batch["completions"], batch["environments"]):
            if environment is None:  # a carried row
                continue
            _, secret, game, guesses, _ = environment
            assert (secret, game) == (row["secret"], row["game"])
            # The environment received exactly this completion's calls (TRL may drop a last call's result that
            # does not fit in the completion, so compare a prefix).
            assert guesses == called_numbers(completion)[: len(guesses)]
            played += len(guesses)
    assert played > 0
