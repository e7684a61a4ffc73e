"""Dynamic sampling on two processes (or one, for single_gpu.yaml) under the shipped accelerate configs, on CPU.

Usage (from `accelerate launch --config_file <config> --num_processes 2`):
    distributed_dynamic_sampling.py MODEL_PATH OUTPUT_DIR

Trains DAPOTrainer for 2 steps (checkpoint at step 2), resumes from that checkpoint for a third step, and writes
from every process OUTPUT_DIR/rank<k>.json with what the back-end resolved to, the rows each generation round
scored, the prompts of every trained batch, the log history, and a digest of the trained parameters.

Each process sees a different keep rate: on process 0 every prompt group is informative, on process 1 only prompts
with id % 4 == 0, so process 1 needs refill rounds that process 0 must run with it.

With `DYNAMIC_SAMPLING_PILOT=<n>` in the environment it trains in the adaptive mode with a pilot of `n`
completions, from a recent yield of one mixed group per 2 completions (so that an all-equal pilot stops): process 0's
odd prompts are always wrong, and process 1's prompts with id % 4 == 1 always right. The processes then stop
different numbers of prompts after their pilots, and must still generate as many rows in every call. With
`DYNAMIC_SAMPLING_EXTENSIONS=<k>` as well, all-equal groups may get `k` more groups of 4 (from a yield of one mixed
group per 20 completions, so that they do): the processes extend different numbers of groups, and still generate as
many rows in every call.

What a CPU needs, and nothing else, is set here: DDP and FSDP configs train with `use_cpu=True` (gloo); DeepSpeed
needs `use_cpu=False` (accelerate ignores DeepSpeed under `cpu=True`) with `ddp_backend="gloo"` and the launching
environment's `DS_ACCELERATOR=cpu`.
"""

import json
import os
import sys
from pathlib import Path

import torch
from accelerate import PartialState
from datasets import Dataset

from parameter_digest import state_dict_digest  # next to this script
from trl_ext import DAPOConfig, DAPOTrainer

model_path, output_dir = sys.argv[1], Path(sys.argv[2])
use_deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false") == "true"
state = PartialState(cpu=not use_deepspeed, backend="gloo" if use_deepspeed else None)
rank = state.process_index
dataset = Dataset.from_dict({"prompt": [f"{i}+{i}=" for i in range(64)], "id": list(range(64))})
pilot = int(os.environ.get("DYNAMIC_SAMPLING_PILOT", "0"))
extensions = int(os.environ.get("DYNAMIC_SAMPLING_EXTENSIONS", "0"))
scored_rows = []  # rows this process scored in each generation round, in order


def rank_dependent_reward(completions, id, **kwargs):
    """Every group informative on process 0; on process 1 only prompts with id % 4 == 0 (keep rate ~0.25)."""
    scored_rows.append(len(completions))
    informative = [(rank == 0 and not (pilot and i % 2)) or i % 4 == 0 for i in id]
    always_right = [bool(pilot) and rank == 1 and i % 4 == 1 for i in id]
    return [
        float(row % 2) if keep else float(right)
        for row, (keep, right) in enumerate(zip(informative, always_right, strict=True))
    ]


def config(max_steps: int, per_device_train_batch_size: int = 8) -> DAPOConfig:
    return DAPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=per_device_train_batch_size,
        num_generations=4,
        max_completion_length=8,
        max_steps=max_steps,
        learning_rate=1e-2,  # large enough that one step visibly moves the tiny model's weights
        lr_scheduler_type="constant",  # a resumed run keeps the checkpoint's schedule: linear would end at 0 there
        logging_steps=1,
        report_to="none",
        use_cpu=not use_deepspeed,
        ddp_backend="gloo" if use_deepspeed else None,
        bf16=False,
        save_strategy="steps",
        save_steps=2,
        save_only_model=False,
        soft_overlong_punishment=False,
        # The optional parts of dynamic sampling too: every process must take the same decisions with them on.
        dynamic_sampling_carry_max_staleness=1,
        dynamic_sampling_max_skip_probability=0.9,
        **({"dynamic_sampling_mode": "adaptive", "dynamic_sampling_pilot_size": pilot} if pilot else {}),
        dynamic_sampling_extensions=extensions,
        seed=0,
    )


def parameter_digest(trainer: DAPOTrainer) -> str | None:
    """SHA-256 of the full trained parameters in name order; None on processes that do not hold them all."""
    state_dict = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # gathers ZeRO-3 shards (to process 0)
    return state_dict_digest(state_dict) if state_dict else None


def fsdp2_sharding_check(model_path: str) -> dict:
    """Shards the model as the launcher's FSDP_* settings ask, with accelerate's plugin and torch's `fully_shard`.

    accelerate enables FSDP only on GPU-class devices: under `cpu=True` it trains with plain DDP over gloo and
    ignores the FSDP variables. This checks the part that does not depend on that choice: the plugin accelerate
    builds from the environment, the layers its auto-wrap policy picks for this model, and that FSDP2 itself
    shards, runs and gathers a full state dict over gloo.
    """
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM

    plugin = FullyShardedDataParallelPlugin()  # reads FSDP_* as the Accelerator does when it enables FSDP
    reference = AutoModelForCausalLM.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    plugin.set_auto_wrap_policy(model)
    wraps = fsdp2_prepare_auto_wrap_policy(plugin, model)
    wrapped = [module for module in model.modules() if wraps(module)]
    wrapped_names = [type(module).__name__ for module in wrapped]
    for module in wrapped:
        fully_shard(module, reshard_after_forward=plugin.reshard_after_forward)
    fully_shard(model, reshard_after_forward=plugin.reshard_after_forward)
    input_ids = torch.arange(3, 19).reshape(2, 8)
    with torch.no_grad():
        logits_match = torch.allclose(model(input_ids).logits, reference(input_ids).logits, atol=1e-6)
    local_numel = sum(parameter.to_local().numel() for parameter in model.parameters())
    # gathered on process 0 only, as a FULL_STATE_DICT save does
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {
        "fsdp_version": plugin.fsdp_version,
        "state_dict_type": str(plugin.state_dict_type).split(".")[-1],
        "reshard_after_forward": plugin.reshard_after_forward,
        "cpu_ram_efficient_loading": plugin.cpu_ram_efficient_loading,
        "wrapped_layers": wrapped_names,
        "logits_match_unsharded": logits_match,
        "local_parameter_fraction": local_numel / sum(parameter.numel() for parameter in reference.parameters()),
        "full_state_dict_digest": state_dict_digest(full) if full else None,
        "unsharded_digest": state_dict_digest(reference.state_dict()),
    }


def train(max_steps: int, resume: bool) -> tuple[DAPOTrainer, list[int], list[list[int]]]:
    trainer = DAPOTrainer(model_path, reward_funcs=rank_dependent_reward, args=config(max_steps), train_dataset=dataset)
    if pilot and not resume:
        trainer.sampler.pilot.yield_.record(mixed_groups=10 if extensions else 100, completions=200)
    batch_sizes, batch_ids = [], []
    generate = trainer._generate_and_score_completions

    def recording(inputs):
        batch = generate(inputs)
        batch_sizes.append(batch["completion_ids"].size(0))
        texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
        batch_ids.append([int(text.split("+")[0]) for text in texts])
        return batch

    trainer._generate_and_score_completions = recording
    trainer.train(resume_from_checkpoint=resume or None)
    return trainer, batch_sizes, batch_ids


# A per-process generation batch that is not a multiple of num_generations must fail at construction.
try:
    config(max_steps=2, per_device_train_batch_size=2)
    invalid_batch_error = None
except ValueError as error:
    invalid_batch_error = str(error)

trainer, batch_sizes, batch_ids = train(max_steps=2, resume=False)
digest = parameter_digest(trainer)
backend = {
    "distributed_type": str(trainer.accelerator.distributed_type).split(".")[-1],
    "num_processes": trainer.accelerator.num_processes,
    "device": str(trainer.accelerator.device),
    "torch_backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
    "model_wrapper": type(trainer.model_wrapped).__name__,
    "zero_stage": trainer.accelerator.state.deepspeed_plugin.zero_stage if use_deepspeed else None,
    "launcher_environment": {
        key: value
        for key, value in os.environ.items()
        if key.startswith(("ACCELERATE_USE_", "FSDP_", "ACCELERATE_DEEPSPEED"))
    },
}
if os.environ.get("ACCELERATE_USE_FSDP") == "true":
    backend["fsdp2_sharding"] = fsdp2_sharding_check(model_path)
first_rounds = len(scored_rows)
first_history = list(trainer.state.log_history)
del trainer

resumed, resumed_sizes, _ = train(max_steps=3, resume=True)
(output_dir / f"rank{rank}.json").write_text(
    json.dumps(
        {
            "backend": backend,
            "invalid_batch_error": invalid_batch_error,
            "batch_sizes": batch_sizes,
            "batch_ids": batch_ids,
            "scored_rows": scored_rows[:first_rounds],
            "log_history": first_history,
            "parameter_digest": digest,
            "resumed_batch_sizes": resumed_sizes,
            "resumed_log_history": resumed.state.log_history,
            "resumed_parameter_digest": parameter_digest(resumed),
        }
    )
)
# Leave together: a process that exits while another still holds gloo connections to it can abort at teardown.
state.wait_for_everyone()
state.destroy_process_group()
# Then skip the interpreter's own teardown: with DeepSpeed on CPU, a library thread still joinable when C++ static
# objects are destroyed aborts the process ("terminate called without an active exception") after everything above
# has run and been written. What the tests check is in the report, so the exit status must not depend on that.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
