"""TRL's experimental GMPO with dynamic sampling and the adaptive mode (`trl_ext.trainers.gmpo`)."""

from __future__ import annotations

import pytest
from conftest import make_prompt_dataset, tiny_training_settings
from test_dapo_trainer import GROUP, batch_prompt_ids, metric_history, record_batches, varied_reward_for_odd_ids
from trl.experimental.gmpo import GMPOTrainer as TRLGMPOTrainer

from trl_ext.trainers.gmpo import GMPOConfig, GMPOTrainer


def gmpo_config(tmp_path, **overrides) -> GMPOConfig:
    settings = {"per_device_train_batch_size": 8, "num_generations": GROUP, "max_steps": 2, "learning_rate": 1e-3}
    return GMPOConfig(**tiny_training_settings(tmp_path, **{**settings, **overrides}))


@pytest.mark.parametrize("mode", ["filter", "adaptive"])
def test_gmpo_trains_on_informative_groups_only(tmp_path, tiny_model_dir, mode):
    config = gmpo_config(tmp_path, dynamic_sampling=True, dynamic_sampling_mode=mode)
    trainer = GMPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(32)
    )
    assert isinstance(trainer, TRLGMPOTrainer) and trainer.sampler is not None
    batches = record_batches(trainer)
    trainer.train()
    for batch in batches:
        assert all(i % 2 == 1 for i in batch_prompt_ids(trainer, batch))  # no zero-variance (even id) group
    assert metric_history(trainer, "dynamic_sampling/generation_rounds")[0] >= 2


def test_gmpo_without_dynamic_sampling_is_trls(tmp_path, tiny_model_dir):
    config = gmpo_config(tmp_path)
    trainer = GMPOTrainer(
        tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config, train_dataset=make_prompt_dataset(8)
    )
    assert trainer.sampler is None
    trainer.train()
    assert not metric_history(trainer, "dynamic_sampling/generation_rounds")


def test_trls_own_config_is_refused_with_the_fix(tmp_path, tiny_model_dir):
    from trl.experimental.gmpo import GMPOConfig as TRLGMPOConfig

    config = TRLGMPOConfig(**tiny_training_settings(tmp_path))
    with pytest.raises(TypeError, match="trl_ext.trainers.gmpo.GMPOConfig"):
        GMPOTrainer(tiny_model_dir, reward_funcs=varied_reward_for_odd_ids, args=config)
