"""Every recipe config parses into the recipe's dataclasses and builds its trainer arguments, GPU ones included;
every accelerate config loads with accelerate's own loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.utils import DistributedType
from trl import GRPOConfig, ModelConfig, TrlParser

from trl_ext import DAPOConfig, GSPOConfig
from trl_ext.recipe import RecipeArguments, build_rewards, check_model_args

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
CONFIGS = sorted((RECIPES / "configs").glob("*.yaml"))
CONFIG_CLASSES = {"dapo": DAPOConfig, "gspo": GSPOConfig, "grpo": GRPOConfig}


def parse(config: Path, *overrides: str):
    """The recipe's three dataclasses from `config`; GPU configs are built with use_cpu on a machine without one."""
    config_class = CONFIG_CLASSES[config.name.split("_")[0]]
    if not torch.cuda.is_available():
        overrides = ("--use_cpu", "true", *overrides)
    parser = TrlParser((RecipeArguments, config_class, ModelConfig))
    return parser.parse_args_and_config(["--config", str(config), *overrides])


def test_every_method_has_an_offline_default_and_the_gpu_configs_exist():
    names = {config.name for config in CONFIGS}
    assert {"dapo_default.yaml", "gspo_default.yaml", "grpo_default.yaml"} <= names
    assert {"dapo_qwen2.5_math_7b.yaml", "gspo_qwen2.5_math_7b.yaml"} <= names
    assert {"dapo_qlora_qwen2.5_1.5b_gsm8k.yaml", "dapo_lora_qwen2.5_3b_gsm8k.yaml"} <= names


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_config_parses_and_builds_trainer_arguments(config, tmp_path):
    script_args, training_args, model_args = parse(config, "--output_dir", str(tmp_path))
    assert isinstance(training_args, CONFIG_CLASSES[config.name.split("_")[0]])
    # TrlParser refuses unknown keys; the recipe's own keys arrive unchanged (YAML reward mappings included)
    raw = yaml.safe_load(config.read_text())
    for key, value in raw.items():
        if hasattr(script_args, key):
            assert getattr(script_args, key) == value, key
    check_model_args(model_args, training_args)
    reward_funcs, heldout_reward = build_rewards(script_args, training_args)
    assert reward_funcs and callable(heldout_reward)
    # The batch of every rollout splits into whole prompt groups on each process (8 GPUs for the big configs).
    per_process = training_args.per_device_train_batch_size * training_args.steps_per_generation
    assert per_process % training_args.num_generations == 0
    if getattr(training_args, "dynamic_sampling", False) and training_args.dynamic_sampling_filter_reward:
        assert training_args.dynamic_sampling_filter_reward in [func.__name__ for func in reward_funcs]


def test_paper_settings_of_the_dapo_math_config(tmp_path):
    _, args, model_args = parse(RECIPES / "configs" / "dapo_qwen2.5_math_7b.yaml", "--output_dir", str(tmp_path))
    assert (args.epsilon, args.epsilon_high, args.beta, args.loss_type) == (0.2, 0.28, 0.0, "dapo")
    assert (args.learning_rate, args.warmup_steps, args.num_generations) == (1e-6, 20, 16)
    assert args.dynamic_sampling and args.soft_overlong_punishment
    updates_per_rollout = args.steps_per_generation // args.gradient_accumulation_steps
    assert updates_per_rollout == 16
    completions_per_rollout_on_8_gpus = args.per_device_train_batch_size * 8 * args.steps_per_generation
    assert completions_per_rollout_on_8_gpus // args.num_generations == 128  # prompts per rollout
    assert model_args.model_name_or_path == "Qwen/Qwen2.5-Math-7B"


def test_gspo_config_is_off_policy_with_the_paper_clip_range(tmp_path):
    _, args, _ = parse(RECIPES / "configs" / "gspo_qwen2.5_math_7b.yaml", "--output_dir", str(tmp_path))
    assert (args.importance_sampling_level, args.loss_type, args.epsilon, args.epsilon_high) == (
        "sequence",
        "grpo",
        3e-4,
        4e-4,
    )
    assert args.steps_per_generation // args.gradient_accumulation_steps == 4


def test_qlora_config_is_nf4_with_rl_lora_defaults(tmp_path):
    from trl import get_peft_config, get_quantization_config

    _, args, model_args = parse(
        RECIPES / "configs" / "dapo_qlora_qwen2.5_1.5b_gsm8k.yaml", "--output_dir", str(tmp_path)
    )
    quantization = get_quantization_config(model_args)
    assert quantization.load_in_4bit and quantization.bnb_4bit_quant_type == "nf4"
    lora = get_peft_config(model_args)
    assert lora.lora_dropout == 0.0 and lora.target_modules == "all-linear" and lora.r == 32
    assert not args.use_vllm


def test_command_line_overrides_the_config(tmp_path):
    script_args, args, model_args = parse(
        RECIPES / "configs" / "dapo_default.yaml",
        "--output_dir",
        str(tmp_path),
        "--max_steps",
        "7",
        "--learning_rate",
        "1e-5",
        "--heldout_prompts",
        "0",
        "--model_name_or_path",
        "somewhere",
    )
    assert (args.max_steps, args.learning_rate, script_args.heldout_prompts) == (7, 1e-5, 0)
    assert model_args.model_name_or_path == "somewhere"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--load_in_4bit", "--use_peft", "--use_vllm"], "use_vllm cannot generate with a bitsandbytes"),
        (["--load_in_4bit"], "set use_peft: true"),
    ],
)
def test_incompatible_combinations_fail_before_loading(overrides, message, tmp_path):
    _, args, model_args = parse(RECIPES / "configs" / "dapo_default.yaml", "--output_dir", str(tmp_path), *overrides)
    with pytest.raises(ValueError, match=message):
        check_model_args(model_args, args)


def test_weights_come_from_the_reward_specs(tmp_path):
    script_args, args, _ = parse(RECIPES / "configs" / "dapo_default.yaml", "--output_dir", str(tmp_path))
    script_args.reward_funcs = [{"name": "exact_match", "weight": 2.0}, "think_format"]
    reward_funcs, heldout_reward = build_rewards(script_args, args)
    assert args.reward_weights == [2.0, 1.0]
    assert heldout_reward is reward_funcs[0]
    args.reward_weights = [1.0, 1.0]
    with pytest.raises(ValueError, match="set twice"):
        build_rewards(script_args, args)


ACCELERATE_CONFIGS = {
    "single_gpu.yaml": (DistributedType.NO, 1),
    "ddp.yaml": (DistributedType.MULTI_GPU, 8),
    "zero2.yaml": (DistributedType.DEEPSPEED, 8),
    "zero3.yaml": (DistributedType.DEEPSPEED, 8),
    "fsdp2.yaml": (DistributedType.FSDP, 8),
}


def test_the_accelerate_configs_are_all_there():
    assert {path.name for path in (RECIPES / "accelerate_configs").glob("*.yaml")} == set(ACCELERATE_CONFIGS)


@pytest.mark.parametrize("name", sorted(ACCELERATE_CONFIGS))
def test_accelerate_config_loads(name):
    config = load_config_from_file(str(RECIPES / "accelerate_configs" / name))
    assert isinstance(config, ClusterConfig)
    assert (config.distributed_type, config.num_processes) == ACCELERATE_CONFIGS[name]
    if name.startswith("zero"):
        assert config.deepspeed_config["zero_stage"] == int(name[4])
    if name == "fsdp2.yaml":
        assert config.fsdp_config["fsdp_version"] == 2
        assert config.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"
