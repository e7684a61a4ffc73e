"""The guessing game of benchmarks/sparse_environment.py: its rules, its reward, a warm start that leaks no secret."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sparse_environment as game  # noqa: E402

from trl_ext.tiny import build_tool_calling_tokenizer  # noqa: E402


def test_guess_answers_higher_lower_correct_and_rewards_a_hit():
    environment = game.NumberGuessingGame()
    assert environment.reset(secret=5, game=3, prompt="ignored") is None
    assert environment.guess(2) == "higher"
    assert environment.get_reward() == 0.0
    assert environment.guess(5) == "correct"
    assert environment.get_reward() == 1.0


def test_guesses_run_out_and_later_ones_do_not_count():
    environment = game.NumberGuessingGame()
    environment.reset(secret=7)
    for _ in range(game.GUESSES_PER_GAME):
        assert environment.guess(9) == "lower"
    assert environment.guess(7) == "no guesses left"
    assert environment.get_reward() == 0.0
    environment.reset(secret=7)  # a reused instance starts over
    assert environment.guess(7) == "correct" and environment.get_reward() == 1.0


def test_tool_arguments_arrive_as_json_numbers_or_strings():
    environment = game.NumberGuessingGame()
    environment.reset(secret="4")
    assert environment.guess("4") == "correct"


def test_dataset_rows_carry_the_secret_that_reset_reads():
    dataset = game.game_dataset(8)
    assert set(dataset["secret"]) == set(game.SECRETS)
    for row in dataset:
        assert row["secret"] == game.secret_of(row["game"])
        assert str(row["game"]) in row["prompt"][0]["content"]
    # Prompts differ only by the game's number: the secret is learnable from it, readable nowhere.
    texts = {row["prompt"][0]["content"].replace(str(row["game"]), "#", 1) for row in dataset}
    assert len(texts) == 1


def test_blind_warm_start_teaches_the_same_uniform_guesses_for_every_game():
    tokenizer = build_tool_calling_tokenizer()
    prompts, answers = game.blind_play_examples(tokenizer, num_games=2)
    by_prompt: dict[str, Counter] = {}
    for prompt, answer in zip(prompts, answers, strict=True):
        by_prompt.setdefault(prompt, Counter())[game.first_guess(answer)] += 1
    first_turns = [game.render_prompt(tokenizer, g, game.tool_schemas()) for g in range(2)]
    # Every number guessed equally often on every game's first turn: nothing about the secrets.
    for prompt in first_turns:
        assert set(by_prompt[prompt].values()) == {game.SECRET_RANGE - 1}
        assert sorted(by_prompt[prompt]) == list(range(1, game.SECRET_RANGE + 1))
    # Second turns follow TRL's concatenation: the call, EOS, then the tool reply and a new assistant header.
    second = next(p for p in by_prompt if p not in first_turns)
    assert tokenizer.eos_token + "<|im_start|>user\n<tool_response>\n" in second
    assert second.endswith("<|im_start|>assistant\n")


def test_first_guess_reads_the_first_call_only():
    assert game.first_guess(game.guess_call(3) + game.guess_call(8)) == 3
    assert game.first_guess('{"name": "guess", "arguments": {}}') is None


def test_first_seed_runs_a_slice_of_the_seeds(tmp_path, monkeypatch):
    """`--first-seed 3 --seeds 2` runs seeds 3 and 4 (the slice a second process takes), each method once."""
    ran = []

    def run(method, seed, args, model_path, output_dir):
        ran.append((method, seed))
        return {"method": method, "seed": seed, "steps": 1, "generated_tokens": 1, "initial_accuracy": 0.0,
                "final_accuracy": 0.0, "signal_fraction": 0.0, "train_seconds": 0.0, "steps_to_target": None,
                "tokens_to_target": None, "rollout_reward_mean": 0.0, "signal_groups": 0, "trained_groups": 0}

    monkeypatch.setattr(game, "run", run)
    monkeypatch.setattr(game, "save_blind_player", lambda path, games, steps: str(path))
    game.main(["--first-seed", "3", "--seeds", "2", "--methods", "grpo", "dapo", "--out", str(tmp_path / "out.json")])
    assert ran == [("grpo", 3), ("dapo", 3), ("grpo", 4), ("dapo", 4)]
