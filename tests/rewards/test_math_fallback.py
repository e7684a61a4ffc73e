"""`math:fallback=...`: a second opinion asked only about the answers the rules reject, off by default; and
the shipped `CausalLMJudge` on the tiny local model (plumbing: the tiny model's verdicts mean nothing)."""

from __future__ import annotations

import logging
import pickle

import pytest

from trl_ext.rewards import build_reward_funcs, get_reward
from trl_ext.rewards.math_fallback import JUDGE_PROMPT, CausalLMJudge, resolve_fallback


class Recorder:
    """A fallback that records what it is asked and answers `verdict` (or raises it, if an exception)."""

    def __init__(self, verdict=True):
        self.verdict = verdict
        self.asked = []

    def __call__(self, question, reference, answer):
        self.asked.append((question, reference, answer))
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


def math_reward(**kwargs):
    return get_reward("math", num_workers=1, asynchronous=False, **kwargs)


@pytest.fixture
def close_pools():
    rewards = []
    yield rewards
    for reward in rewards:
        reward.pool().close()


def boxed(answer: str) -> str:
    return rf"Working it out... so the answer is $\boxed{{{answer}}}$."


def test_off_by_default():
    reward = math_reward()
    assert reward.fallback is None and reward._fallback_callable() is None
    assert "fallback" not in repr(reward)


def test_asked_only_about_rejected_answers_and_its_yes_accepts(close_pools):
    recorder = Recorder(True)
    reward = math_reward(fallback=recorder)
    close_pools.append(reward)
    completions = [boxed("1/2"), boxed("0.75"), boxed("3"), "no answer here at all, just some words written out"]
    solutions = [r"\frac{1}{2}", r"\frac{1}{2}", r"\boxed{}", "5"]  # the third cannot be judged
    prompts = ["Half of one?", "Half of one?", "Q3", "Q4"]
    scores = reward(prompts=prompts, completions=completions, solution=solutions)
    # Accepted by the rules: not asked. Rejected: asked, and its True accepts. Cannot judge: not asked.
    asked = {(question, answer) for question, _, answer in recorder.asked}
    assert ("Half of one?", "0.75") in asked and all(answer != "1/2" for _, answer in asked)
    assert scores[0] == 1.0 and scores[1] == 1.0
    assert scores[2] is None and all(question != "Q3" for question, _, _ in recorder.asked)
    # No final answer: the fallback gets the completion's text.
    assert ("Q4", completions[3]) in asked and scores[3] == 1.0


def test_a_no_an_abstention_or_an_error_keeps_the_rejection(close_pools, caplog):
    for verdict in (False, None, RuntimeError("judge crashed"), "yes"):
        reward = math_reward(fallback=Recorder(verdict))
        close_pools.append(reward)
        with caplog.at_level(logging.WARNING, logger="trl_ext.rewards.math_fallback"):
            assert reward(completions=[boxed("0.75"), boxed("0.5")], solution=["1/2", "1/2"]) == [0.0, 1.0]
    assert "judge crashed" in caplog.text and "stays rejected" in caplog.text
    assert "'yes'" in caplog.text  # a verdict that is not a bool is named


def test_each_distinct_rejected_answer_is_asked_once_across_calls(close_pools):
    recorder = Recorder(False)
    reward = math_reward(fallback=recorder)
    close_pools.append(reward)
    completions = [boxed("7"), boxed("7"), "Thinking differently: " + boxed("7"), boxed("8")]
    reward(prompts=["Q"] * 4, completions=completions, solution=["6"] * 4)
    reward(prompts=["Q"] * 4, completions=completions, solution=["6"] * 4)
    assert sorted(answer for _, _, answer in recorder.asked) == ["7", "8"]
    # The same answer to another question is another item.
    reward(prompts=["Other"], completions=[boxed("7")], solution=["6"])
    assert len(recorder.asked) == 3


def test_batch_fallbacks_get_all_items_at_once(close_pools):
    class Batch:
        calls = []

        def __call__(self, question, reference, answer):
            raise AssertionError("judge_many should be used")

        def judge_many(self, items):
            self.calls.append(list(items))
            return [answer == "0.75" for _, _, answer in items]

    reward = math_reward(fallback=Batch())
    close_pools.append(reward)
    scores = reward(completions=[boxed("0.75"), boxed("0.8"), boxed("0.5")], solution=["1/2"] * 3)
    assert scores == [1.0, 0.0, 1.0] and len(Batch.calls) == 1 and len(Batch.calls[0]) == 2


def test_bad_fallbacks_fail_at_construction_naming_the_fix():
    with pytest.raises(ValueError, match="package.module:function"):
        math_reward(fallback="nodots")
    with pytest.raises(ValueError, match="cannot import"):
        math_reward(fallback="no_such_module_here:judge")
    with pytest.raises(ValueError, match="has no 'missing'"):
        math_reward(fallback="trl_ext.rewards.math_fallback:missing")
    with pytest.raises(ValueError, match="without a fallback"):
        math_reward(fallback_kwargs={"model": "x"})
    with pytest.raises(ValueError, match="not callable"):
        math_reward(fallback="trl_ext.rewards.math_fallback:JUDGE_PROMPT")
    with pytest.raises(ValueError, match="apply to a class"):
        resolve_fallback(Recorder(), {"model": "x"})


# ---------------------------------------------------------------------------------------------- CausalLMJudge


@pytest.fixture(scope="module")
def judge(tiny_model_dir):
    return CausalLMJudge(tiny_model_dir, device="cpu", batch_size=2)


ITEMS = [
    ("What is half of one?", r"\frac{1}{2}", "0.5"),
    (None, "3", "three"),
    ("Solve $x^2 = 4$ over the reals, listing every solution.", r"\pm 2", "x = 2 or x = -2"),
]


def test_judge_prompt_holds_the_three_parts(judge):
    prompt = judge.prompt(*ITEMS[0])
    assert all(part in prompt for part in ITEMS[0])
    assert "(not given)" in judge.prompt(*ITEMS[1])
    assert JUDGE_PROMPT.split("{")[0] in prompt


def test_judge_margins_do_not_depend_on_batching_or_padding(judge):
    prompts = [judge.prompt(*item) for item in ITEMS]
    together = judge.yes_margins(prompts)  # different lengths: left-padded in one forward
    alone = [judge.yes_margins([prompt])[0] for prompt in prompts]
    assert together == pytest.approx(alone, abs=1e-4)
    assert len({round(margin, 4) for margin in alone}) > 1  # a real score, not a constant


def test_judge_margin_is_the_log_likelihood_difference_of_yes_and_no(judge):
    import torch

    prompt = judge.prompt(*ITEMS[2])

    def log_likelihood(word: str) -> float:
        prompt_ids = judge.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        spaced = word if prompt.endswith((" ", "\n")) else " " + word
        continuation = judge.tokenizer(spaced, add_special_tokens=False)["input_ids"]
        with torch.no_grad():  # one unpadded sequence, every position's logits
            logits = judge.model(torch.tensor([prompt_ids + continuation])).logits[0].float()
        log_probs = torch.log_softmax(logits, dim=-1)
        return sum(log_probs[len(prompt_ids) - 1 + i, token].item() for i, token in enumerate(continuation))

    assert judge.yes_margins([prompt])[0] == pytest.approx(log_likelihood("Yes") - log_likelihood("No"), abs=1e-4)


def test_judge_verdicts_follow_the_margin(tiny_model_dir, judge):
    margins = judge.yes_margins([judge.prompt(*item) for item in ITEMS])
    assert judge.judge_many(ITEMS) == [margin > 0 for margin in margins]
    assert judge(*ITEMS[0]) == (margins[0] > 0)
    strict = CausalLMJudge(tiny_model_dir, device="cpu", margin=1e9)
    assert strict.judge_many(ITEMS) == [False] * len(ITEMS)


def test_the_shipped_judge_from_a_spec_string(tiny_model_dir, close_pools):
    spec = (
        "math:fallback=trl_ext.rewards.math_fallback:CausalLMJudge,"
        f"fallback_kwargs={{'model': '{tiny_model_dir}', 'margin': -1e9}},num_workers=1"
    )
    (reward,), _ = build_reward_funcs([spec], asynchronous=False)
    close_pools.append(reward)
    assert isinstance(reward._fallback_callable(), CausalLMJudge)
    # margin -1e9: the judge says yes to anything it is asked, so every rejection becomes an accept.
    assert reward(completions=[boxed("0.75"), boxed("0.5")], solution=["1/2", "1/2"]) == [1.0, 1.0]
    # A copy (another process) rebuilds the judge from its path instead of carrying the model.
    state = reward.__getstate__()
    assert state["_fallback"] is None
    copy = pickle.loads(pickle.dumps(reward))
    close_pools.append(copy)
    assert isinstance(copy._fallback_callable(), CausalLMJudge)


def test_the_fallback_cost_benchmark_runs(one_torch_thread):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import verifier_throughput

    result = verifier_throughput.time_fallback("tiny-128", repeats=1)
    assert result["answers"] == len(verifier_throughput.FALLBACK_ITEMS) and result["seconds_per_answer"] > 0
    assert result["prompt_tokens_mean"] > 100 and result["parameters"] > 0
