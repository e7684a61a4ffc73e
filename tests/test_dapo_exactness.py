"""DAPOTrainer is exact under GRPOConfig's options, or refuses them at construction; its metrics mean what they say."""

from __future__ import annotations

import json
import logging
import math
import re

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings, transformers_logs

from trl_ext import DAPOConfig, DAPOTrainer, GSPOConfig
from trl_ext.sampling import sampler as dynamic_sampler
from trl_ext.trainers import trl_bridge

GROUP = 4


def small_config(tmp_path, **overrides) -> DAPOConfig:
    settings = {"per_device_train_batch_size": 8, "num_generations": GROUP, "max_steps": 1, **overrides}
    return DAPOConfig(**tiny_training_settings(tmp_path, **settings))


def prompt_id(text: str) -> int:
    return int(re.match(r"(\d+)\+", text).group(1))


def id_and_position_reward(prompts, completions, id, **kwargs):
    """Odd ids: `0.1 * id + position in the group` (informative); even ids: 0 for the whole group."""
    return [0.0 if i % 2 == 0 else 0.1 * i + index % GROUP for index, i in enumerate(id)]


def none_for_two_rows_of_odd_groups(prompts, completions, id, **kwargs):
    """Odd ids: positions 0 and 1 cannot be judged (None), positions 2 and 3 score 1 and 0. Even ids: always 1."""
    scores = {0: None, 1: None, 2: 1.0, 3: 0.0}
    return [1.0 if i % 2 == 0 else scores[index % GROUP] for index, i in enumerate(id)]


def constant_reward(completions, **kwargs):
    return [1.0] * len(completions)


def record_batches(trainer):
    batches = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(generate(inputs)) or batches[-1]
    return batches


def batch_prompt_ids(trainer, batch) -> list[int]:
    texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    return [prompt_id(text) for text in texts]


def metric_history(trainer, name):
    return [entry[name] for entry in trainer.state.log_history if name in entry]


# ------------------------------------------------------------------------------- "cannot judge" is not "wrong"


@pytest.mark.parametrize("dynamic_sampling", [True, False])
def test_unjudged_completions_stay_unscorable_despite_the_overlong_punishment(
    tmp_path, tiny_model_dir, dynamic_sampling
):
    config = small_config(
        tmp_path, dynamic_sampling=dynamic_sampling, max_completion_length=8, overlong_buffer_length=8
    )
    trainer = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=none_for_two_rows_of_odd_groups,
        args=config,
        train_dataset=make_prompt_dataset(32),
    )
    assert [name for name in trainer.reward_func_names] == [
        "none_for_two_rows_of_odd_groups",
        "soft_overlong_punishment",
    ]
    captured = {}
    calculate = trainer._calculate_rewards

    def keep(*args):
        captured["rewards"] = calculate(*args)
        return captured["rewards"]

    trainer._calculate_rewards = keep
    batches = record_batches(trainer)
    trainer.train()
    rewards = captured["rewards"]
    unjudged = torch.isnan(rewards[:, 0])
    assert unjudged.any()
    assert torch.isnan(rewards[unjudged]).all()  # the punishment no longer scores them
    advantages = batches[0]["advantages"]
    ids = batch_prompt_ids(trainer, batches[0])
    odd = torch.tensor([i % 2 == 1 for i in ids])
    if dynamic_sampling:
        assert odd.all()
    # In an odd group two rows are unscorable (advantage 0) and two judged rows score 1 and 0: +-0.707 (std 0.707).
    for group_advantages in advantages[odd].view(-1, GROUP) if dynamic_sampling else []:
        assert sorted(round(value, 2) for value in group_advantages.tolist()) == [-0.71, 0.0, 0.0, 0.71]


# -------------------------------------------------------------------------- advantages of the assembled batch


def test_batch_scaled_advantages_use_the_assembled_batch_only(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, scale_rewards="batch", soft_overlong_punishment=False)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(32)
    )
    batches = record_batches(trainer)
    trainer.train()
    batch = batches[0]
    ids = torch.tensor(batch_prompt_ids(trainer, batch))
    assert (ids % 2 == 1).all()
    # The trained rewards are 0.1 * id + position; their std over the batch (not over the rounds) scales them.
    rewards = torch.cat([0.1 * i + torch.arange(GROUP, dtype=torch.float) for i in ids.view(-1, GROUP)[:, 0]])
    scale = rewards.std() + 1e-4
    expected = sorted([(p - 1.5) / scale.item() for p in range(GROUP)] * (len(ids) // GROUP))
    assert sorted(batch["advantages"].tolist()) == pytest.approx(expected, abs=1e-4)


def test_normalize_then_sum_with_the_built_in_punishment_is_refused(tmp_path):
    with pytest.raises(ValueError, match="multi_objective_aggregation.*soft_overlong_punishment=False"):
        small_config(tmp_path, multi_objective_aggregation="normalize_then_sum")
    small_config(tmp_path, multi_objective_aggregation="normalize_then_sum", soft_overlong_punishment=False)


# ------------------------------------------------------------------------------------------------- metrics


def test_metrics_describe_trained_rows_and_count_generated_tokens(tmp_path, tiny_model_dir):
    # Without carried groups, a batch trains on a subset of what it generated.
    config = small_config(tmp_path, max_steps=3, soft_overlong_punishment=False, dynamic_sampling_carry_max_staleness=0)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(32)
    )
    batches = record_batches(trainer)
    trainer.train()
    trained_tokens = sum(int(b["prompt_mask"].sum() + b["completion_mask"].sum()) for b in batches)
    assert trainer.state.num_input_tokens_seen == trained_tokens
    generated = metric_history(trainer, "dynamic_sampling/tokens_generated")
    trained_completion_tokens = [int(b["completion_mask"].sum()) for b in batches]
    assert len(generated) == 3 and all(g >= t for g, t in zip(generated, trained_completion_tokens))
    assert generated[0] > trained_completion_tokens[0]  # the first step generated for dropped groups too
    # `reward` is the mean over the trained rows: 0.1 * id + position, position averaging 1.5.
    for entry, batch in zip([e for e in trainer.state.log_history if "reward" in e], batches):
        ids = torch.tensor(batch_prompt_ids(trainer, batch), dtype=torch.float)
        assert entry["reward"] == pytest.approx((0.1 * ids + 1.5).mean().item(), abs=1e-4)
        assert entry["frac_reward_zero_std"] == 0.0


def test_generation_metrics_merge_rounds_by_sample():
    from trl_ext.trainers.scoring import merge_generation_metrics

    per_round = {
        "completions/mean_length": [2.0, 4.0],
        "completions/min_length": [1.0, 3.0],
        "completions/max_length": [3.0, 6.0],
        "completions/clipped_ratio": [0.5, 1.0],
        "completions/mean_terminated_length": [1.0, 0.0],  # the second round has no terminated completion
        "completions/min_terminated_length": [1.0, 0.0],
        "completions/max_terminated_length": [1.0, 0.0],
        "dynamic_sampling/generation_rounds": [7.0],  # not a per-round generation metric: left alone
    }
    merged = merge_generation_metrics(per_round, rows=[8, 24])
    assert merged["completions/mean_length"] == pytest.approx((8 * 2 + 24 * 4) / 32)  # not (2 + 4) / 2
    assert merged["completions/clipped_ratio"] == pytest.approx((4 + 24) / 32)
    assert (merged["completions/min_length"], merged["completions/max_length"]) == (1.0, 6.0)
    assert merged["completions/mean_terminated_length"] == 1.0
    assert merged["completions/min_terminated_length"] == merged["completions/max_terminated_length"] == 1.0
    assert "dynamic_sampling/generation_rounds" not in merged


def test_one_generation_metric_entry_per_batch_whatever_the_rounds(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=1)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(32)
    )
    entries = {}
    log = trainer.log

    def spy(logs, *args, **kwargs):
        entries.update({key: len(values) for key, values in trainer._metrics["train"].items()})
        return log(logs, *args, **kwargs)

    trainer.log = spy
    trainer.train()
    assert metric_history(trainer, "dynamic_sampling/generation_rounds")[0] >= 2
    assert entries["completions/mean_length"] == 1 and entries["reward"] == 1


# --------------------------------------------------------------------------------- a filter that cannot filter


def test_a_continuous_reward_in_the_default_filter_warns_naming_the_setting(tmp_path, tiny_model_dir, caplog):
    from trl.rewards import get_cosine_scaled_reward  # noqa: F401  (TRL ships it; the check keys on its name)

    def cosine_scaled_reward(completions, **kwargs):
        return [len(c) / 10 for c in completions]

    with transformers_logs(caplog):
        DAPOTrainer(
            tiny_model_dir,
            reward_funcs=[constant_reward, cosine_scaled_reward],
            args=small_config(tmp_path),
            train_dataset=make_prompt_dataset(),
        )
    assert "dynamic_sampling_filter_reward" in caplog.text and "cosine_scaled_reward" in caplog.text


def test_a_run_that_keeps_every_group_says_the_filter_does_not_filter(tmp_path, tiny_model_dir, caplog, monkeypatch):
    monkeypatch.setattr(dynamic_sampler, "ALWAYS_INFORMATIVE_BATCHES", 2)

    def always_varied(completions, **kwargs):
        return [float(index % GROUP) for index in range(len(completions))]

    config = small_config(tmp_path, max_steps=3)
    trainer = DAPOTrainer(tiny_model_dir, reward_funcs=always_varied, args=config, train_dataset=make_prompt_dataset())
    with transformers_logs(caplog):
        trainer.train()
    assert caplog.text.count("kept every prompt group for 2 generation batches") == 1


# ---------------------------------------------------------------------------------------- fillers train nothing


def test_filler_groups_are_out_of_the_loss_and_leave_the_model_unchanged(tmp_path, tiny_model_dir):
    # beta > 0 and an entropy bonus would both move the model through a zero-advantage row that stayed in the loss.
    config = small_config(tmp_path, dynamic_sampling_max_rounds=1, beta=0.1, entropy_coef=0.5, learning_rate=1e-2)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=constant_reward, args=config, train_dataset=make_prompt_dataset()
    )
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    batches = record_batches(trainer)
    trainer.train()
    batch = batches[0]
    assert batch["completion_mask"].sum() == 0 and batch["num_items_in_batch"] == 0
    assert (batch["advantages"] == 0).all()
    for name, parameter in trainer.model.named_parameters():
        assert torch.equal(parameter, before[name]), name


# ------------------------------------------------------------------------------------------------ refill draws


def test_no_prompt_is_trained_twice_in_a_generation_batch(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, max_steps=12, per_device_train_batch_size=16)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(40)
    )
    batches = record_batches(trainer)
    trainer.train()
    for batch in batches:
        ids = batch_prompt_ids(trainer, batch)
        assert sorted(ids.count(i) for i in set(ids)) == [GROUP] * (len(ids) // GROUP), ids


def test_refill_sampler_never_repeats_within_a_batch_nor_draws_the_batch_prompts():
    from trl_ext.sampling import RefillSampler

    samplers = [RefillSampler(20, seed=3, num_processes=2, process_index=rank) for rank in range(2)]
    batch = [4, 11]
    drawn, seen = 0, []
    for num_prompts in (3, 2, 4):
        for sampler in samplers:
            seen += sampler.draw(batch_key=5, batch_indices=batch, drawn=drawn, num_prompts=num_prompts)
        drawn += num_prompts * 2
    assert len(seen) == len(set(seen)) == 18 and not set(seen) & set(batch)
    # Past the dataset, a new pass starts: repeats only then.
    more = samplers[0].draw(batch_key=5, batch_indices=batch, drawn=18, num_prompts=3)
    assert len(more) == 3


def test_refill_follows_dataset_order_when_shuffling_is_off():
    from trl_ext.sampling import RefillSampler

    sampler = RefillSampler(10, seed=0, num_processes=1, process_index=0, shuffle=False)
    assert sampler.draw(batch_key=0, batch_indices=[2, 3], drawn=0, num_prompts=4) == [4, 5, 6, 7]
    assert sampler.draw(batch_key=0, batch_indices=[2, 3], drawn=4, num_prompts=4) == [8, 9, 0, 1]


def test_curriculum_refills_in_dataset_order(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, shuffle_dataset=False, soft_overlong_punishment=False)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(32)
    )
    batches = record_batches(trainer)
    trainer.train()
    # The first batch is prompts 0 and 1 (TRL's sequential order); odd ones are informative: 1, then 3, 5, ...
    assert sorted(set(batch_prompt_ids(trainer, batches[0]))) == [1, 3]


# ------------------------------------------------------------------------------------ resume on other processes


def test_keep_rate_windows_pool_over_processes():
    from trl_ext.sampling import KeepRateEstimator

    pooled = KeepRateEstimator.pooled_state([[[1, 4], [2, 4]], [[3, 4], [0, 4]]])
    assert pooled == [[4, 8], [2, 8]]
    estimator = KeepRateEstimator()
    estimator.load_state_dict(pooled)
    assert estimator.estimate() == 6 / 16


def test_resume_on_another_process_count_pools_the_keep_rates(tmp_path, tiny_model_dir, caplog):
    dataset = make_prompt_dataset(32)
    first = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=id_and_position_reward,
        args=small_config(tmp_path, save_strategy="steps", save_steps=1),
        train_dataset=dataset,
    )
    first.train()
    checkpoint = tmp_path / "out" / "checkpoint-1"
    state_file = checkpoint / "dynamic_sampling_state.json"
    # As if written by two processes with different keep rates.
    state_file.write_text(json.dumps({"keep_rate_windows": [[[1, 4]], [[3, 4]]]}))
    resumed = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=id_and_position_reward,
        args=small_config(tmp_path, max_steps=2),
        train_dataset=dataset,
    )
    with transformers_logs(caplog, logging.INFO):
        resumed.train(resume_from_checkpoint=str(checkpoint))
    assert "pooled" in caplog.text
    # The pooled window (4 of 8 groups informative) came first; the resumed step's rounds were added after it.
    assert resumed.sampler.keep_rates[0].state_dict()[0] == [4, 8]


# ---------------------------------------------------------------------------------------- construction errors


def test_overlong_punishment_without_a_length_limit_names_the_field(tmp_path):
    with pytest.raises(ValueError, match="max_completion_length"):
        DAPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, max_completion_length=None)


def test_gspo_refuses_entropy_masking_with_sequence_ratios(tmp_path):
    with pytest.raises(ValueError, match="sequence_token"):
        GSPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, top_entropy_quantile=0.5)
    GSPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        top_entropy_quantile=0.5,
        importance_sampling_level="sequence_token",
    )


@pytest.mark.parametrize("dynamic_sampling", [True, False])
def test_no_reward_function_is_refused_as_grpo_does(tmp_path, tiny_model_dir, dynamic_sampling):
    with pytest.raises(ValueError, match="No reward source"):
        DAPOTrainer(
            tiny_model_dir,
            reward_funcs=[],
            args=small_config(tmp_path, dynamic_sampling=dynamic_sampling),
            train_dataset=make_prompt_dataset(),
        )


# ------------------------------------------------------------------------------ the forwards see kept rows only


def test_log_prob_forwards_run_on_kept_rows_only_with_the_same_values(tmp_path, tiny_model_dir):
    config = small_config(tmp_path, beta=0.1, soft_overlong_punishment=False, dynamic_sampling_carry_max_staleness=0)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(32)
    )
    forward_rows = []
    forward = trainer._get_per_token_logps_and_entropies

    def counting(model, input_ids, *args, **kwargs):
        forward_rows.append(input_ids.size(0))
        return forward(model, input_ids, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counting
    batches = record_batches(trainer)
    trainer.train()
    rounds = metric_history(trainer, "dynamic_sampling/generation_rounds")[0]
    assert rounds >= 2  # the first step generated more rows than it kept
    reference_forwards = forward_rows[: len(forward_rows) - 1]  # the last is the training forward
    assert sum(reference_forwards) == 8  # the reference log-probs of the 8 kept rows, nothing else

    # The same rows forwarded one by one (other padding, other batch) give the same reference log-probs.
    batch = batches[0]
    for row in range(batch["prompt_ids"].size(0)):
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()]
        completion_length = int(batch["completion_mask"][row].sum())
        completion = batch["completion_ids"][row][:completion_length]
        ids = torch.cat([prompt, completion]).unsqueeze(0)
        with torch.no_grad():
            logps, _, _ = forward(trainer.ref_model, ids, torch.ones_like(ids), completion_length, batch_size=1)
        assert torch.allclose(logps[0], batch["ref_per_token_logps"][row][:completion_length], atol=1e-5), row
    assert not math.isnan(float(batch["ref_per_token_logps"].sum()))


# ------------------------------------------------------------------------------- nothing informative: back off


def test_constant_rewards_back_off_to_one_plain_round_and_recover(tmp_path, tiny_model_dir, caplog):
    """TRL's constant-reward case: after enough evidence, one plain round per step, announced once."""
    switch = {"informative": False}

    def switchable_reward(completions, **kwargs):
        if switch["informative"]:
            return [float(index % GROUP) for index in range(len(completions))]
        return [1.0] * len(completions)

    config = small_config(tmp_path, max_steps=6, per_device_train_batch_size=16)
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=switchable_reward, args=config, train_dataset=make_prompt_dataset(64)
    )
    generate = trainer._generate_and_score_completions

    def generate_then_switch(inputs):
        output = generate(inputs)
        switch["informative"] = trainer.state.global_step >= 3  # informative groups reappear from step 5
        return output

    trainer._generate_and_score_completions = generate_then_switch
    with transformers_logs(caplog):
        trainer.train()
    rounds = metric_history(trainer, "dynamic_sampling/generation_rounds")
    backoff = metric_history(trainer, "dynamic_sampling/backoff")
    assert rounds[0] < config.dynamic_sampling_max_rounds  # it stopped over-sampling within the first step
    assert backoff[:4] == [1.0] * 4 and rounds[1:4] == [1.0] * 3  # one plain round per step while nothing varies
    assert backoff[-1] == 0.0  # informative groups came back: over-sampling resumed
    assert caplog.text.count("backing off") == 1


# ------------------------------------------------------------------------------------------- prompt history


def test_prompts_that_stay_uninformative_are_skipped_before_generation(tmp_path, tiny_model_dir):
    def generated_ids(trainer):
        seen = []
        generate = trainer._calculate_rewards

        def recording(inputs, *args):
            seen.append([row["id"] for row in inputs[::GROUP]])
            return generate(inputs, *args)

        trainer._calculate_rewards = recording
        return seen

    def run(max_skip_probability):
        config = small_config(
            tmp_path / str(max_skip_probability),
            max_steps=8,
            dynamic_sampling_max_skip_probability=max_skip_probability,
        )
        trainer = DAPOTrainer(
            tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(16)
        )
        seen = generated_ids(trainer)
        trainer.train()
        return trainer, [i for round_ids in seen for i in round_ids]

    with_history, ids = run(0.9)
    without_history, ids_without = run(0.0)
    skipped = metric_history(with_history, "dynamic_sampling/prompts_skipped")
    assert sum(skipped) > 0 and sum(metric_history(without_history, "dynamic_sampling/prompts_skipped")) == 0
    # Even prompts are always uninformative: the history generates for fewer of them, odd ones as before.
    even_share = sum(i % 2 == 0 for i in ids) / len(ids)
    even_share_without = sum(i % 2 == 0 for i in ids_without) / len(ids_without)
    assert even_share < even_share_without
    state = with_history.sampler.prompt_history.state_dict()["streaks"]
    assert state and all(index % 2 == 0 for index, _, _ in state)  # only even prompts carry a streak


# ------------------------------------------------------------------------------------ carried surplus groups


def test_surplus_groups_are_carried_with_the_log_probs_of_the_policy_that_generated_them(tmp_path, tiny_model_dir):
    config = small_config(
        tmp_path,
        max_steps=4,
        learning_rate=1e-2,
        soft_overlong_punishment=False,
        save_strategy="steps",
        save_steps=1,
        dynamic_sampling_carry_max_staleness=1,
    )
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(64)
    )
    taken_logps = []
    take = trainer.sampler.carry.take

    def recording_take(num_groups, version):
        taken, expired = take(num_groups, version)
        taken_logps.append(([g.payload["logps"] for g in taken], [g.staleness(version) for g in taken]))
        return taken, expired

    trainer.sampler.carry.take = recording_take
    batches = record_batches(trainer)
    trainer.train()
    carried = metric_history(trainer, "dynamic_sampling/carried_groups")
    assert sum(carried) > 0
    assert all(s <= 1 for s in metric_history(trainer, "dynamic_sampling/carried_staleness"))
    for batch, (logps_per_group, lags) in zip(batches, taken_logps):
        ids = batch_prompt_ids(trainer, batch)
        assert sorted(ids.count(i) for i in set(ids)) == [GROUP] * (len(ids) // GROUP)  # never twice in a batch
        rows = [row for group in logps_per_group for row in group]
        assert all(lag == 1 for lag in lags)
        # TRL shuffles the batch after assembling it: find each carried row's behaviour log-probs in the batch.
        old = batch["old_per_token_logps"] if rows else None
        for row in rows:
            width = len(row)
            matches = [torch.allclose(old[r, :width], row, atol=1e-6) for r in range(old.size(0))]
            assert any(matches)
        if rows:
            # The fresh rows' values are the current policy's, which differs from the carried rows' old policy.
            assert "old_per_token_logps" in batch
    # Carried groups are saved per process in every checkpoint that holds some.
    assert any((tmp_path / "out").glob("checkpoint-*/dynamic_sampling_carry_0.pt"))


@pytest.mark.parametrize("accumulation", [1, 2])  # 2: TRL shuffles and splits the batch into micro-batches
def test_fresh_rows_beside_carried_groups_take_their_old_log_probs_from_the_training_forward(
    tmp_path, tiny_model_dir, accumulation
):
    config = small_config(
        tmp_path,
        max_steps=4,
        learning_rate=1e-2,
        gradient_accumulation_steps=accumulation,
        soft_overlong_punishment=False,
        dynamic_sampling_carry_max_staleness=1,
    )
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(64)
    )
    carried_in = []
    add = trainer.sampler.carry.add
    trainer.sampler.carry.add = lambda groups: carried_in.append(len(groups)) or add(groups)
    no_grad_rows, training_logps, compared = [], [], []
    forward = trainer._get_per_token_logps_and_entropies

    def recording(model, input_ids, *args, **kwargs):
        outputs = forward(model, input_ids, *args, **kwargs)
        if torch.is_grad_enabled():
            training_logps.append(outputs[0].detach())
        else:
            no_grad_rows.append(input_ids.size(0))
        return outputs

    compute = trainer._compute_loss

    def checking(model, inputs):
        loss = compute(model, inputs)
        fresh = inputs.get(trl_bridge.FRESH_OLD_LOGPS)
        if fresh is not None:
            compared.append(torch.equal(inputs["old_per_token_logps"][fresh], training_logps[-1][fresh]))
        return loss

    trainer._get_per_token_logps_and_entropies = recording
    trainer._compute_loss = checking
    trainer.train()
    assert sum(metric_history(trainer, "dynamic_sampling/carried_groups")) > 0
    # Batches holding carried groups: the fresh rows' old log-probs are the training forward's, bit for bit (TRL's
    # own choice when it is given none), so their ratio is exactly 1.
    assert compared and all(compared)
    # Outside training, only the first surplus groups go through a forward: the check that the log-probs recorded
    # while generating equal the forward's. Later surplus groups keep the recorded ones.
    assert trainer._recorded_scores_agree is True
    assert sum(no_grad_rows) == GROUP * next(count for count in carried_in if count)


def test_carried_groups_wait_for_the_next_rollout_when_it_feeds_several_updates(tmp_path, tiny_model_dir):
    # A rollout of 2 batches feeds 2 updates: the next generation comes 2 policy versions later, and by default a
    # carried group waits for it instead of expiring (a staleness bound of 1 would drop every carried group).
    config = small_config(tmp_path, max_steps=6, steps_per_generation=2, soft_overlong_punishment=False)
    assert config.dynamic_sampling_carry_max_staleness == 2
    trainer = DAPOTrainer(
        tiny_model_dir, reward_funcs=id_and_position_reward, args=config, train_dataset=make_prompt_dataset(64)
    )
    batches = record_batches(trainer)
    trainer.train()
    assert sum(metric_history(trainer, "dynamic_sampling/carried_groups")) > 0
    assert sum(metric_history(trainer, "dynamic_sampling/carry_dropped")) == 0
    assert all(s == 2 for s in metric_history(trainer, "dynamic_sampling/carried_staleness") if s)
    # TRL computes every row's old log-probs here (a rollout feeds 2 updates); carried rows get their own.
    assert all("old_per_token_logps" in batch and trl_bridge.FRESH_OLD_LOGPS not in batch for batch in batches)


def test_carrying_is_on_by_default_with_vllm_importance_sampling(tmp_path):
    # A carried row keeps the log-probs vLLM returned when it sampled the row; TRL corrects it to the current policy.
    assert small_config(tmp_path, use_vllm=True).dynamic_sampling_carry_max_staleness == 1
    assert small_config(tmp_path, use_vllm=True, dynamic_sampling_carry_max_staleness=2).vllm_importance_sampling_correction
    uncorrected = small_config(tmp_path, use_vllm=True, vllm_importance_sampling_correction=False)
    assert uncorrected.dynamic_sampling_carry_max_staleness == 1
    assert small_config(tmp_path).dynamic_sampling_carry_max_staleness == 1
