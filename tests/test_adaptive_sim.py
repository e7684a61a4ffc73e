"""The adaptive sampling simulation runs every arm on the real sampler, and its accounting checks hold and bite."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import adaptive_sim


@pytest.mark.parametrize("extra", [[], ["--drift", "--mix", "sparse"]])
def test_quick_run_reports_every_arm_with_its_accounting(tmp_path, extra):
    out = tmp_path / "adaptive_sim.json"
    adaptive_sim.main(["--quick", "--out", str(out), *extra])
    result = json.loads(out.read_text())
    summary, totals = result["summary"], result["totals"]
    assert set(summary) == set(totals) == set(adaptive_sim.ARM_NAMES)
    assert result["checks"]["generated_tokens_equal_source_tokens"]
    groups, steps = result["settings"]["groups"], result["settings"]["steps"]
    for arm, runs in totals.items():
        assert len(runs) == len(result["seeds"]) == 2
        for run in runs:
            assert run["generated_tokens"] == run["source_tokens"] > 0
            assert run["informative_trained"] <= groups * steps
            assert run["uninformative_tokens"] <= run["generated_tokens"]
            if arm != "grpo":  # dynamic sampling fills every batch with informative groups
                assert run["informative_trained"] == groups * steps and run["exhausted_steps"] == 0
        assert summary[arm]["informative_trained_per_1k_tokens"]["mean"] > 0
    # The plain arm generates exactly one batch per step, and the ratio to dapo of dapo is 1.
    assert all(run["groups_generated"] == groups * steps for run in totals["grpo"])
    assert summary["dapo"]["informative_trained_per_1k_tokens_ratio_to_dapo"]["per_seed"] == [1.0, 1.0]
    # Only the skipping arms skip.
    for arm in ("grpo", "dapo", "adaptive-baseline"):
        assert all(run["prompts_skipped"] == 0 for run in totals[arm])
    assert all(run["prompts_skipped"] > 0 for run in totals["oracle"])
    assert result["oracle"]["threshold"] in result["settings"]["oracle_thresholds"]


def test_the_accounting_checks_catch_a_miscount(monkeypatch):
    """A source that counts a token it did not return must fail the token check."""
    original = adaptive_sim.BernoulliPrompts.generate_and_score

    def miscounting(self, inputs, held_environments):
        result = original(self, inputs, held_environments)
        self.tokens += 1
        return result

    monkeypatch.setattr(adaptive_sim.BernoulliPrompts, "generate_and_score", miscounting)
    config = {"steps": 2, "groups": 4, "group_size": 4, "prompts": 50, "drift_lr": 0.0, "mix": "default"}
    with pytest.raises(AssertionError):
        adaptive_sim.run_arm(adaptive_sim.ARMS[1], seed=0, config=config)


def test_the_source_gives_every_arm_the_same_draws():
    """Common random numbers: the k-th generation of a prompt gets the same rewards and lengths in every arm."""
    world = adaptive_sim.make_world(0, 20)
    first, second = (adaptive_sim.BernoulliPrompts(world, 4, seed=0) for _ in range(2))
    rows = [{"prompt": f"prompt {pid}", "pid": pid} for pid in (3, 7) for _ in range(4)]
    first.generate_and_score(rows[4:], [])  # prompt 7 once before
    a, _ = first.generate_and_score(rows, [])
    b, _ = second.generate_and_score(rows, [])
    assert [float(r) for r in a.columns["rewards"][:4]] == [float(r) for r in b.columns["rewards"][:4]]
    lengths = [[len(ids) for ids in rows.columns["completion_ids"][:4]] for rows in (a, b)]
    assert lengths[0] == lengths[1]
    assert first.visits == {7: 8, 3: 4} and first.tokens > second.tokens  # completions generated per prompt
    # Generated in increments (a pilot of 2, then the other 2), a prompt gets the draws of one call of 4.
    third = adaptive_sim.BernoulliPrompts(world, 4, seed=0)
    pilot, _ = third.generate_and_score(rows[:2], [])
    commit, _ = third.generate_and_score(rows[2:4], [])
    together = [float(r) for r in pilot.columns["rewards"] + commit.columns["rewards"]]
    assert together == [float(r) for r in b.columns["rewards"][:4]]
    assert [len(ids) for ids in pilot.columns["completion_ids"] + commit.columns["completion_ids"]] == lengths[1]
