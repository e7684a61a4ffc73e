"""pass@k: the estimator against the closed form and brute-force enumeration, and evaluation with a real model."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_ext.evaluation import (
    count_correct,
    evaluate_pass_at_k,
    mean_pass_at_k,
    parse_ks,
    pass_at_k,
    sample_completions,
)
from trl_ext.rewards import get_reward
from trl_ext.tasks import make_arithmetic_dataset


def closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def brute_force(n: int, c: int, k: int) -> Fraction:
    """Fraction of all k-subsets of n samples (the first c correct) that contain a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(i < c for i in subset) for subset in subsets), len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_matches_brute_force_enumeration_on_every_small_case(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_force(n, c, k)), abs=1e-12), (n, c, k)


@given(n=st.integers(1, 60), data=st.data())
def test_matches_closed_form(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    assert pass_at_k(n, c, k) == pytest.approx(closed_form(n, c, k), rel=1e-9, abs=1e-12)


@given(n=st.integers(1, 40), data=st.data())
def test_is_a_probability_monotone_in_k_and_c(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    if k < n:
        assert pass_at_k(n, c, k + 1) >= value - 1e-12
    if c < n:
        assert pass_at_k(n, c + 1, k) >= value - 1e-12


@given(n=st.integers(1, 200), data=st.data())
def test_pass_at_1_is_the_fraction_correct(n, data):
    c = data.draw(st.integers(0, n))
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-12)


def test_edge_cases():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c = 4 < k: every 5-subset holds a correct sample
    assert pass_at_k(10, 5, 5) == pytest.approx(1 - 1 / 252)


@settings(deadline=None)
@given(c=st.integers(0, 2000), k=st.sampled_from([1, 10, 100, 1000]))
def test_stable_where_binomials_overflow_floats(c, k):
    n = 2000  # C(2000, 1000) ~ 1e600 does not fit a float; the product form never builds it
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mean_over_problems():
    assert mean_pass_at_k([0, 2, 4], n=4, k=1) == pytest.approx((0 + 0.5 + 1) / 3)
    with pytest.raises(ValueError, match="at least one problem"):
        mean_pass_at_k([], n=4, k=1)


def test_parse_ks():
    assert parse_ks("16,1,4,4", n=16) == [1, 4, 16]
    assert parse_ks([2, 1], n=2) == [1, 2]
    with pytest.raises(ValueError, match="between 1 and n=4"):
        parse_ks("1,8", n=4)


def test_count_correct_groups_consecutive_samples_and_skips_unjudged():
    rewards = [1.0, 0.0, None, 1.0, -1.0, -1.0, float("nan"), 1.0]
    assert count_correct(rewards, num_samples=2) == [1, 1, 0, 1]
    assert count_correct(rewards, num_samples=4) == [2, 1]
    with pytest.raises(ValueError, match="multiple of num_samples"):
        count_correct(rewards, num_samples=3)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


def test_sampling_returns_n_completions_cut_after_eos(tiny):
    model, tokenizer = tiny
    samples = sample_completions(
        model, tokenizer, ["1+1=", "12+3="], num_samples=3, max_new_tokens=5, batch_size=4, progress=False
    )
    assert len(samples.completions) == 2 and all(len(group) == 3 for group in samples.completions)
    for ids_group, text_group in zip(samples.completion_ids, samples.completions, strict=True):
        for ids, text in zip(ids_group, text_group, strict=True):
            assert 1 <= len(ids) <= 5
            assert tokenizer.eos_token_id not in ids[:-1]
            assert text == tokenizer.decode(ids, skip_special_tokens=True)


def test_conversational_prompts_give_assistant_messages(tiny):
    model, tokenizer = tiny
    samples = sample_completions(
        model, tokenizer, [[{"role": "user", "content": "2+2="}]], num_samples=2, max_new_tokens=3, progress=False
    )
    assert all(message[0]["role"] == "assistant" for message in samples.completions[0])


def test_evaluation_scores_with_a_registry_reward_and_is_seeded(tiny):
    model, tokenizer = tiny
    dataset = make_arithmetic_dataset(num_train=10, num_test=6)["test"]
    reward = get_reward("exact_match", extract="none", normalize=False)
    result = evaluate_pass_at_k(
        model, tokenizer, dataset, reward, num_samples=4, ks="1,4", max_new_tokens=4, progress=False
    )
    again = evaluate_pass_at_k(
        model, tokenizer, dataset, reward, num_samples=4, ks="1,4", max_new_tokens=4, progress=False
    )
    assert result.num_correct == again.num_correct  # same seed, same samples
    assert result.num_prompts == 6 and set(result.pass_at_k) == {1, 4}
    assert result.pass_at_k[1] == pytest.approx(sum(result.num_correct) / 24)
    assert set(result.metrics()) == {"eval/pass@1", "eval/pass@4", "eval/mean_reward"}


def test_evaluation_counts_correct_answers(tiny):
    """With the model's own greedy answers as references, every greedy sample is correct: the dataset's
    `solution` column reaches the reward and correct samples are counted per prompt."""
    model, tokenizer = tiny
    dataset = make_arithmetic_dataset(num_train=10, num_test=4)["test"]
    greedy = sample_completions(
        model, tokenizer, dataset["prompt"], num_samples=1, max_new_tokens=4, temperature=0.0, progress=False
    )
    dataset = dataset.remove_columns("solution").add_column("solution", [g[0] for g in greedy.completions])
    reward = get_reward("exact_match", extract="none", normalize=False)
    result = evaluate_pass_at_k(
        model, tokenizer, dataset, reward, num_samples=2, max_new_tokens=4, temperature=0.0, progress=False
    )
    assert result.num_correct == [2, 2, 2, 2] and result.pass_at_k[1] == 1.0


def test_cli_eval_on_builtin_task(tiny_model_dir, tmp_path, capsys):
    from trl_ext.cli import main

    output = tmp_path / "eval.json"
    main(
        [
            "eval",
            "--model",
            tiny_model_dir,
            "--dataset",
            "builtin:arithmetic",
            "--num-prompts",
            "5",
            "--reward",
            "exact_match:extract='none',normalize=false",
            "--n",
            "4",
            "--k",
            "1,2,4",
            "--max-new-tokens",
            "4",
            "--output",
            str(output),
        ]
    )
    report = json.loads(output.read_text())
    assert {"pass@1", "pass@2", "pass@4"} <= set(report) and len(report["num_correct"]) == 5
    assert report["pass@1"] == pytest.approx(sum(report["num_correct"]) / 20)
    assert "pass@4" in capsys.readouterr().out


def test_cli_eval_rejects_k_above_n(tiny_model_dir):
    from trl_ext.cli import main

    with pytest.raises(ValueError, match="between 1 and n=2"):
        main(["eval", "--model", tiny_model_dir, "--dataset", "builtin:arithmetic", "--n", "2", "--k", "1,4"])


def test_cli_lists_rewards(capsys):
    from trl_ext.cli import main

    main(["rewards"])
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"math", "exact_match", "gsm8k"} <= set(names)


def test_every_reward_spec_the_cli_help_shows_builds():
    # A user copies the example from `trl-ext eval --help`: it must be a spec the registry accepts.
    import re

    from trl_ext.cli import build_parser
    from trl_ext.rewards import get_reward, parse_reward_spec

    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.choices and "eval" in action.choices)
    reward = next(action for action in subparsers.choices["eval"]._actions if "--reward" in action.option_strings)
    specs = re.findall(r"'([^']+)'", reward.help)
    assert "exact_match:normalize=false" in specs
    for spec in specs:
        name, kwargs, _ = parse_reward_spec(spec)
        get_reward(name, **kwargs)
