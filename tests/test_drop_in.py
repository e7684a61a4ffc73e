"""The drop-in guarantee: what a script does with `GRPOTrainer`/`GRPOConfig`, it can do with `DAPOTrainer`/`DAPOConfig`.

Each test runs the same arguments through three variants: TRL's own classes (the baseline: a case that fails there
is not ours to pass), `DAPOConfig` with its additions off, and `DAPOConfig`'s defaults (dynamic sampling and the soft
overlong punishment on). They cover every configuration family of `GRPOConfig` (loss types, importance-sampling
level, KL with a reference model, several iterations per generation, PEFT, reward scaling and aggregation,
truncation masking, conversational data), reward sources (functions that return `None`, reward models mixed with
functions, the reward processing classes) and what TRL logs.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import make_prompt_dataset, tiny_training_settings, transformers_logs
from datasets import Dataset
from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification
from trl import GRPOConfig, GRPOTrainer

from trl_ext import DAPOConfig, DAPOTrainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VARIANTS = {
    "grpo": (GRPOConfig, GRPOTrainer, {}),
    "dapo_off": (DAPOConfig, DAPOTrainer, {"dynamic_sampling": False, "soft_overlong_punishment": False}),
    "dapo": (DAPOConfig, DAPOTrainer, {}),
}


def character_sum_reward(completions, **kwargs):
    """Differs between the completions of most groups of the random tiny model, so groups carry signal."""
    return [float(sum(map(ord, text_of(completion))) % 7) for completion in completions]


def text_of(completion) -> str:
    """The text of a standard or conversational completion."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def build(variant, tmp_path, model, reward_funcs=character_sum_reward, dataset=None, **overrides):
    config_class, trainer_class, defaults = VARIANTS[variant]
    settings = {
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_steps": 2,
        "learning_rate": 1e-2,
        **defaults,
        **overrides,
    }
    config = config_class(**tiny_training_settings(tmp_path, **settings))
    return trainer_class(
        model=model,
        reward_funcs=reward_funcs,
        args=config,
        train_dataset=dataset if dataset is not None else make_prompt_dataset(16),
    )


def train_and_check_it_learned(trainer):
    before = {name: param.detach().clone() for name, param in trainer.model.named_parameters() if param.requires_grad}
    trainer.train()
    assert trainer.state.global_step == trainer.args.max_steps
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses and all(math.isfinite(loss) for loss in losses)
    changed = [
        name for name, param in trainer.model.named_parameters() if name in before and not torch.equal(param, before[name])
    ]
    assert changed, "no trainable parameter changed"


# One configuration per family of GRPOConfig options; each must train in every variant.
CONFIG_FAMILIES = {
    "defaults": {},
    "loss_bnpo": {"loss_type": "bnpo"},
    "loss_dr_grpo": {"loss_type": "dr_grpo"},
    "loss_cispo": {"loss_type": "cispo"},
    "sequence_importance_sampling": {"importance_sampling_level": "sequence"},
    "kl_with_reference_model": {"beta": 0.1},
    "several_iterations_per_generation": {"num_iterations": 2, "steps_per_generation": 2},
    "scale_rewards_batch": {"scale_rewards": "batch"},
    "scale_rewards_none": {"scale_rewards": "none"},
    "delta_clipping": {"delta": 2.0},
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("family", CONFIG_FAMILIES)
def test_every_config_family_trains(tmp_path, tiny_model_dir, variant, family):
    train_and_check_it_learned(build(variant, tmp_path, tiny_model_dir, **CONFIG_FAMILIES[family]))


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_truncated_completions_are_masked_out_of_the_loss(tmp_path, tiny_model_dir, variant):
    # The random tiny model never stops within 8 tokens: every completion is truncated, so nothing may be learned.
    trainer = build(variant, tmp_path, tiny_model_dir, mask_truncated_completions=True, max_steps=1)
    before = [param.detach().clone() for param in trainer.model.parameters()]
    trainer.train()
    assert [entry["completions/clipped_ratio"] for entry in trainer.state.log_history if "loss" in entry] == [1.0]
    assert all(torch.equal(param, old) for param, old in zip(trainer.model.parameters(), before))


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["grpo", "dapo_off"])
def test_normalize_then_sum_aggregation_trains(tmp_path, tiny_model_dir, variant):
    def parity_reward(completions, **kwargs):
        return [float(sum(map(ord, completion)) % 2) for completion in completions]

    trainer = build(
        variant,
        tmp_path,
        tiny_model_dir,
        reward_funcs=[character_sum_reward, parity_reward],
        multi_objective_aggregation="normalize_then_sum",
    )
    train_and_check_it_learned(trainer)


def test_normalize_then_sum_with_the_built_in_punishment_is_refused_naming_both(tmp_path):
    # Per-group normalisation would scale the length penalty up to the size of the task reward.
    with pytest.raises(ValueError, match="normalize_then_sum") as error:
        DAPOConfig(**tiny_training_settings(tmp_path, multi_objective_aggregation="normalize_then_sum"))
    assert "soft_overlong_punishment" in str(error.value)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_peft_lora_trains_only_the_adapter(tmp_path, tiny_model_dir, variant):
    from peft import LoraConfig

    config_class, trainer_class, defaults = VARIANTS[variant]
    config = config_class(
        **tiny_training_settings(
            tmp_path, per_device_train_batch_size=4, num_generations=4, max_steps=2, learning_rate=1e-2, **defaults
        )
    )
    trainer = trainer_class(
        model=tiny_model_dir,
        reward_funcs=character_sum_reward,
        args=config,
        train_dataset=make_prompt_dataset(16),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    trainable = [name for name, param in trainer.model.named_parameters() if param.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    train_and_check_it_learned(trainer)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_conversational_prompts_train(tmp_path, tiny_model_dir, variant):
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"{i}+{i}="}] for i in range(16)]})
    train_and_check_it_learned(build(variant, tmp_path, tiny_model_dir, dataset=dataset))


# ------------------------------------------------------------------------------------------------ reward sources


@pytest.fixture(scope="module")
def tiny_reward_model_dir(tmp_path_factory, tiny_model_dir) -> str:
    """A randomly initialised sequence-classification model sharing the tiny model's tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("tiny-reward-model")
    LlamaForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_reward_models_and_functions_mixed(tmp_path, tiny_model_dir, tiny_reward_model_dir, variant):
    trainer = build(variant, tmp_path, tiny_model_dir, reward_funcs=[character_sum_reward, tiny_reward_model_dir])
    train_and_check_it_learned(trainer)
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert "rewards/character_sum_reward/mean" in logged
    assert any(key.startswith("rewards/") and "tiny-reward-model" in key for key in logged)


@pytest.mark.parametrize("variant", VARIANTS)
def test_reward_processing_classes_line_up_with_the_reward_functions(
    tmp_path, tiny_model_dir, tiny_reward_model_dir, variant
):
    trainer = build(variant, tmp_path, tiny_model_dir, reward_funcs=[character_sum_reward, tiny_reward_model_dir])
    assert len(trainer.reward_processing_classes) == len(trainer.reward_funcs)
    # The reward function has no processing class; the reward model has its own tokenizer.
    assert trainer.reward_processing_classes[0] is None
    assert trainer.reward_processing_classes[1] is not None
    # DAPOConfig's defaults append the soft overlong punishment as one more reward function, with no processing class.
    names = trainer.reward_func_names
    assert names[0] == "character_sum_reward" and "tiny-reward-model" in names[1]
    assert len(names) == len(trainer.reward_funcs) == (3 if variant == "dapo" else 2)
    if variant == "dapo":
        assert "overlong" in names[2] and trainer.reward_processing_classes[2] is None


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_rewards_that_return_none_for_some_rows_train(tmp_path, tiny_model_dir, variant):
    def judges_even_ids_only(completions, id, **kwargs):
        return [float(sum(map(ord, completion)) % 5) if i % 2 == 0 else None for completion, i in zip(completions, id)]

    def judges_odd_ids_only(completions, id, **kwargs):
        return [float(sum(map(ord, completion)) % 3) if i % 2 == 1 else None for completion, i in zip(completions, id)]

    trainer = build(variant, tmp_path, tiny_model_dir, reward_funcs=[judges_even_ids_only, judges_odd_ids_only])
    train_and_check_it_learned(trainer)


@pytest.mark.parametrize("variant", VARIANTS)
def test_all_rewards_none_warns_on_trls_logger(tmp_path, tiny_model_dir, variant, caplog):
    def always_none(completions, **kwargs):
        return [None] * len(completions)

    trainer = build(variant, tmp_path, tiny_model_dir, reward_funcs=always_none, max_steps=1)
    with transformers_logs(caplog):
        trainer.train()
    assert "All reward functions returned None" in caplog.text
    assert any(record.name == "trl.trainer.grpo_trainer" for record in caplog.records)


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_reward_source_is_refused_at_construction(tmp_path, tiny_model_dir, variant):
    config_class, trainer_class, defaults = VARIANTS[variant]
    config = config_class(**tiny_training_settings(tmp_path, **defaults))
    with pytest.raises(ValueError, match="No reward source provided"):
        trainer_class(model=tiny_model_dir, args=config, train_dataset=make_prompt_dataset(8))


# ----------------------------------------------------------------------------------------------------- logging

# What TRL logs for every GRPO run; a DAPO run logs the same names (and its own `dynamic_sampling/*`).
TRL_METRICS = {
    "loss",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "rewards/character_sum_reward/mean",
    "rewards/character_sum_reward/std",
    "clip_ratio/region_mean",
    "entropy",
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_trls_metrics_are_logged(tmp_path, tiny_model_dir, variant):
    trainer = build(variant, tmp_path, tiny_model_dir)
    trainer.train()
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert TRL_METRICS <= logged, TRL_METRICS - logged
    has_dynamic_sampling_metrics = any(key.startswith("dynamic_sampling/") for key in logged)
    assert has_dynamic_sampling_metrics == (variant == "dapo")
