"""Dynamic sampling over a streamed dataset (`datasets.IterableDataset`): refills come from the stream, no prompt
repeats within a batch, and a resumed run continues the stream where the interrupted one stopped."""

from __future__ import annotations

import json
import re

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings
from trl import GRPOConfig, GRPOTrainer

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.sampling import StreamRefillSampler, prompt_key

GROUP = 4


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


def stream(num_prompts: int = 64):
    return make_prompt_dataset(num_prompts).to_iterable_dataset()


def informative_odd_ids(prompts, completions, id, **kwargs):
    """Odd ids: a different reward per completion (informative); even ids: 0 for the whole group."""
    return [0.0 if i % 2 == 0 else float(index % GROUP) for index, i in enumerate(id)]


def config_for(tmp_path, config_cls=DAPOConfig, **overrides):
    settings = {"per_device_train_batch_size": 8, "num_generations": GROUP, "max_steps": 3, **overrides}
    return config_cls(**tiny_training_settings(tmp_path, **settings))


def record_batches(trainer):
    batches = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(generate(inputs)) or batches[-1]
    return batches


def batch_ids(trainer, batch) -> list[int]:
    texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    return [int(re.match(r"(\d+)\+", text).group(1)) for text in texts]


def test_stream_refill_sampler_never_repeats_a_prompt_within_a_batch_and_resumes():
    dataset = make_prompt_dataset(10).to_iterable_dataset()
    sampler = StreamRefillSampler(dataset, seed=0, shuffle=True)
    held = [prompt_key(f"{i}+{i}=") for i in (0, 1)]
    first = sampler.take(batch_key=0, batch_indices=held, start=0, count=3)
    more = sampler.take(batch_key=0, batch_indices=held, start=3, count=4)
    drawn = first + more
    assert len(set(drawn)) == 7 and not set(drawn) & set(held)
    assert all(prompt_key(sampler.row(key)["prompt"]) == key for key in drawn)
    state = sampler.state_dict()
    following = sampler.take(batch_key=1, batch_indices=[], start=0, count=5)
    resumed = StreamRefillSampler(dataset, seed=0, shuffle=True)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert resumed.take(batch_key=1, batch_indices=[], start=0, count=5) == following
    # A stream with fewer distinct prompts than a batch asks for repeats some rather than stalling.
    small = StreamRefillSampler(make_prompt_dataset(3).to_iterable_dataset(), seed=0, shuffle=False)
    assert len(small.take(batch_key=0, batch_indices=[], start=0, count=5)) == 5


def test_refills_come_from_the_stream_and_batches_hold_only_informative_groups(tmp_path, tiny_model_dir):
    trainer = DAPOTrainer(
        tiny_model_dir,
        reward_funcs=informative_odd_ids,
        args=config_for(tmp_path, soft_overlong_punishment=False),
        train_dataset=stream(),
    )
    batches = record_batches(trainer)
    trainer.train()
    assert trainer.state.global_step == 3
    assert trainer.sampler.refills.position > 0
    sampled = sum(e.get("dynamic_sampling/prompts_sampled", 0) for e in trainer.state.log_history)
    assert sampled > 3 * 2  # refills were drawn
    assert len(batches) == 3
    for batch in batches:
        ids = batch_ids(trainer, batch)
        assert sorted(ids.count(i) for i in set(ids)) == [GROUP] * (len(ids) // GROUP)  # never twice in a batch
        assert all(i % 2 == 1 for i in ids)  # only informative groups


def test_resuming_continues_the_stream_where_it_stopped(tmp_path, tiny_model_dir):
    def trainer_for(run, **overrides):
        config = config_for(tmp_path / run, **{"max_steps": 3, "dynamic_sampling_carry_max_staleness": 0, **overrides})
        return DAPOTrainer(tiny_model_dir, reward_funcs=informative_odd_ids, args=config, train_dataset=stream())

    uninterrupted = trainer_for("full")
    full_batches = record_batches(uninterrupted)
    uninterrupted.train()

    interrupted = trainer_for("first", max_steps=1, save_strategy="steps", save_steps=1)
    interrupted.train()
    checkpoint = tmp_path / "first" / "out" / "checkpoint-1"
    state = json.loads((checkpoint / "dynamic_sampling_state.json").read_text())
    assert state["refill_stream"]["position"] == interrupted.sampler.refills.position > 0

    resumed = trainer_for("first")
    resumed_batches = record_batches(resumed)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 3
    assert len(full_batches) == 3 and len(resumed_batches) == 2
    for full, again in zip(full_batches[1:], resumed_batches, strict=True):
        assert batch_ids(resumed, again) == batch_ids(uninterrupted, full)
        assert torch.equal(again["completion_ids"], full["completion_ids"])
    assert resumed.sampler.refills.state_dict() == uninterrupted.sampler.refills.state_dict()


@pytest.mark.parametrize("trainer_cls, config_cls", [(GRPOTrainer, GRPOConfig), (DAPOTrainer, DAPOConfig)])
def test_a_stream_needs_max_steps_as_trl_requires(tmp_path, tiny_model_dir, trainer_cls, config_cls):
    config = config_for(tmp_path, config_cls, max_steps=-1)
    with pytest.raises(ValueError, match="max_steps has to be specified"):
        trainer_cls(tiny_model_dir, reward_funcs=informative_odd_ids, args=config, train_dataset=stream())


def test_prompt_history_skips_stream_prompts_by_their_key(tmp_path, tiny_model_dir):
    config = config_for(
        tmp_path, max_steps=4, dynamic_sampling_max_skip_probability=0.9, soft_overlong_punishment=False
    )
    # A small stream, read over several passes, so uninformative (even) prompts come back and can be skipped.
    trainer = DAPOTrainer(tiny_model_dir, reward_funcs=informative_odd_ids, args=config, train_dataset=stream(16))
    batches = record_batches(trainer)
    trainer.train()
    assert trainer.sampler.refills.passes > 0
    streaks = trainer.sampler.prompt_history.state_dict()["streaks"]
    even_keys = {prompt_key(f"{i}+{i}=") for i in range(0, 16, 2)}
    assert streaks and all(key in even_keys for key, _, _ in streaks)  # only uninformative prompts carry a streak
    assert sum(e.get("dynamic_sampling/prompts_skipped", 0) for e in trainer.state.log_history) > 0
    for batch in batches:
        assert all(i % 2 == 1 for i in batch_ids(trainer, batch))
