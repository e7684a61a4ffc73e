"""GRPOTrainer and DAPOTrainer generating with vLLM colocated (`use_vllm=True, vllm_mode="colocate"`) on CPU.

One process (tests/vllm_cpu/colocate_run.py) trains GRPOTrainer, then DAPOTrainer with DAPOConfig's defaults (TRL's
importance-sampling correction on) on a task whose keep rate is 0.25, then DAPOTrainer resumed from the second
run's first checkpoint; two more processes train DAPOTrainer data-parallel. The tests read their reports.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
from vllm_support import (
    GROUP,
    STEPS,
    informative,
    launch_two_processes,
    read_reports,
    requires_vllm,
    run_script,
    save_wide_tiny_model,
    vllm_environment,
)

pytestmark = [requires_vllm, pytest.mark.slow]

DYNAMIC_DECISIONS = (
    "dynamic_sampling/generation_rounds",
    "dynamic_sampling/prompts_sampled",
    "dynamic_sampling/groups_kept_fraction",
    "dynamic_sampling/carried_groups",
    "dynamic_sampling/rounds_exhausted",
    "dynamic_sampling/backoff",
)


@pytest.fixture(scope="module")
def wide_model_dir(tmp_path_factory):
    return save_wide_tiny_model(tmp_path_factory.mktemp("wide-model"))


@pytest.fixture(scope="module")
def vllm_env():
    return vllm_environment()


@pytest.fixture(scope="module")
def colocated(tmp_path_factory, wide_model_dir, vllm_env) -> dict:
    directory = tmp_path_factory.mktemp("colocated")
    run_script("colocate_run.py", ["trainers", str(wide_model_dir), str(directory)], vllm_env)
    names = ("grpo", "dapo", "resumed", "adaptive", "pilot", "extended")
    return {name: read_reports(directory, f"{name}.json")[0] for name in names}


@pytest.fixture(scope="module")
def data_parallel(tmp_path_factory, wide_model_dir, vllm_env) -> list[dict]:
    directory = tmp_path_factory.mktemp("data-parallel")
    launch_two_processes("colocate_run.py", ["ddp", str(wide_model_dir), str(directory)], vllm_env)
    return read_reports(directory, "rank*.json")


def metric(report: dict, name: str) -> list[float]:
    return [entry[name] for entry in report["log_history"] if name in entry]


def per_step(report: dict, names=DYNAMIC_DECISIONS, after_step: int = 0) -> list[dict]:
    return [
        {name: entry.get(name) for name in names}
        for entry in report["log_history"]
        if "loss" in entry and entry["step"] > after_step
    ]


def test_grpo_trains_with_vllm_colocated(colocated):
    grpo = colocated["grpo"]
    assert grpo["global_step"] == 2
    assert all(math.isfinite(loss) for loss in metric(grpo, "loss")) and len(metric(grpo, "loss")) == 2
    assert grpo["sync_steps"] == [0, 1]  # TRL pushes the weights into vLLM once per optimiser step
    # vLLM returned the sampled tokens' log-probs and TRL's correction used them.
    assert metric(grpo, "sampling/importance_sampling_ratio/mean")


def test_dapo_trains_with_vllm_and_no_uninformative_group_reaches_the_loss(colocated):
    dapo = colocated["dapo"]
    assert dapo["global_step"] == STEPS and len(dapo["batches"]) == STEPS
    assert all(math.isfinite(loss) for loss in metric(dapo, "loss"))
    assert metric(dapo, "dynamic_sampling/rounds_exhausted") == [0.0] * STEPS
    for batch in dapo["batches"]:
        assert all(informative(prompt_id) for prompt_id in batch["ids"]), batch["ids"]
        assert set(Counter(batch["ids"]).values()) == {GROUP}  # whole groups, none twice
        assert all(advantage != 0.0 for advantage in batch["advantages"])  # every row carries a gradient
    # At keep rate 0.25 the first round cannot fill the batch: refill rounds generated through vLLM.
    assert sum(metric(dapo, "dynamic_sampling/generation_rounds")) > STEPS
    assert metric(dapo, "sampling/importance_sampling_ratio/mean")


def test_weights_are_synced_into_vllm_once_per_optimiser_step_not_per_round(colocated):
    dapo = colocated["dapo"]
    rounds = metric(dapo, "dynamic_sampling/generation_rounds")
    assert max(rounds) > 1  # some step generated in several rounds
    assert dapo["sync_steps"] == list(range(STEPS))


def test_dapo_defaults_carry_surplus_groups_under_importance_sampling_correction(colocated):
    dapo = colocated["dapo"]
    assert dapo["importance_sampling_correction"] is True
    assert dapo["carry_max_staleness"] > 0
    assert sum(metric(dapo, "dynamic_sampling/carried_groups")) > 0


def test_resume_under_vllm_takes_the_uninterrupted_runs_decisions(colocated):
    uninterrupted, resumed = colocated["dapo"], colocated["resumed"]
    assert resumed["global_step"] == STEPS
    assert [b["step"] for b in resumed["batches"]] == list(range(1, STEPS))
    # The reward depends on the prompt alone, so a resumed run (a fresh vLLM engine, other completions) must draw,
    # refill, carry and keep exactly what the uninterrupted run did after its first checkpoint.
    for again, full in zip(resumed["batches"], uninterrupted["batches"][1:], strict=True):
        assert sorted(again["ids"]) == sorted(full["ids"])
    assert per_step(resumed, after_step=1) == per_step(uninterrupted, after_step=1)
    assert resumed["sync_steps"] == list(range(1, STEPS))


def test_the_adaptive_mode_trains_with_vllm_and_its_advantages_use_the_history_baseline(colocated):
    adaptive = colocated["adaptive"]
    assert adaptive["global_step"] == STEPS and len(adaptive["batches"]) == STEPS
    assert all(math.isfinite(loss) for loss in metric(adaptive, "loss"))
    for batch in adaptive["batches"]:
        # Uninformative prompts score 0 every time: their history says 0 too, so their groups are still dropped.
        assert all(informative(prompt_id) for prompt_id in batch["ids"]), batch["ids"]
    # First batch, no history yet: A_i = R_i - mean of the group's others, rewards 0..3 -> -2, -2/3, 2/3, 2 (TRL
    # shuffles a batch's rows, so they are grouped by prompt here).
    first = adaptive["batches"][0]
    by_prompt = {}
    for prompt_id, advantage in zip(first["ids"], first["advantages"], strict=True):
        by_prompt.setdefault(prompt_id, []).append(advantage)
    for advantages in by_prompt.values():
        assert sorted(advantages) == pytest.approx([-2.0, -2 / 3, 2 / 3, 2.0], abs=1e-5)
    assert metric(adaptive, "dynamic_sampling/informative_groups_per_1k_tokens")


def test_two_processes_take_the_same_decisions_under_vllm(data_parallel):
    first, second = data_parallel
    assert first["num_processes"] == second["num_processes"] == 2
    assert first["global_step"] == second["global_step"] == 3
    assert per_step(first) == per_step(second)
    assert sum(metric(first, "dynamic_sampling/generation_rounds")) > 3  # refills ran, on both processes alike
    for mine, theirs in zip(first["batches"], second["batches"], strict=True):
        assert all(informative(prompt_id) for prompt_id in mine["ids"] + theirs["ids"])
        assert not set(mine["ids"]) & set(theirs["ids"])  # each process trains its own groups
        assert all(advantage != 0.0 for advantage in mine["advantages"] + theirs["advantages"])
    assert first["sync_steps"] == second["sync_steps"] == [0, 1, 2]
    assert first["parameter_digest"] == second["parameter_digest"]


def test_the_adaptive_modes_pilot_generates_each_prompt_in_two_vllm_calls_and_trains_whole_groups(colocated):
    pilot = colocated["pilot"]
    assert pilot["global_step"] == STEPS and len(pilot["batches"]) == STEPS
    assert all(math.isfinite(loss) for loss in metric(pilot, "loss"))
    for batch in pilot["batches"]:
        counts = {prompt_id: batch["ids"].count(prompt_id) for prompt_id in batch["ids"]}
        assert set(counts.values()) == {GROUP}, counts  # every trained group: one prompt's pilot and commit
        assert all(informative(prompt_id) for prompt_id in counts), counts
    assert metric(pilot, "dynamic_sampling/prompts_stopped")


def test_an_extension_is_generated_by_vllm_and_trains_with_its_group_as_one_group_of_twice_g(colocated):
    extended = colocated["extended"]
    assert extended["global_step"] == STEPS and len(extended["batches"]) == STEPS
    assert all(math.isfinite(loss) for loss in metric(extended, "loss"))
    trained = 0
    for batch in extended["batches"]:
        rows: dict[int, list[float]] = {}
        for prompt_id, advantage in zip(batch["ids"], batch["advantages"]):
            rows.setdefault(prompt_id, []).append(advantage)
        for prompt_id, advantages in rows.items():
            if any(advantages):  # not a filler: a prompt's group and its extension, together, with its one success
                assert informative(prompt_id) and len(advantages) == 2 * GROUP, (prompt_id, advantages)
                assert sum(advantage > 0 for advantage in advantages) == 1, advantages
                trained += 1
    assert trained >= 1 and sum(metric(extended, "dynamic_sampling/prompts_extended")) >= trained
