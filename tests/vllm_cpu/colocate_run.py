"""Trains the tiny wide model with vLLM colocated and writes what each trainer did, for tests/vllm_cpu/test_colocate.py.

    python colocate_run.py trainers MODEL_DIR OUTPUT_DIR   # GRPOTrainer, DAPOTrainer, resumed, adaptive, pilot, extended
    accelerate launch ... colocate_run.py ddp MODEL_DIR OUTPUT_DIR   # DAPOTrainer on every launched process

Each trainer's report records the global step of every weight sync into vLLM (calls of TRL's
`vllm_generation.sync_weights`), the prompt ids and advantages of every batch that reaches the loss
(`compute_loss`), its log history and a digest of its weights.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1]), str(Path(__file__).parents[1] / "scripts")]
sys.path.append(str(Path(__file__).parents[2] / "benchmarks"))

from conftest import make_prompt_dataset, tiny_training_settings
from parameter_digest import state_dict_digest
from trl import GRPOConfig, GRPOTrainer
from vllm_support import GROUP, NUM_PROMPTS, STEPS, informative

from trl_ext import DAPOConfig, DAPOTrainer


def quarter_informative_reward(prompts, completions, id, **kwargs):
    """Informative prompts: the completion's position in its group (0..3, distinct); the others: 0 for all."""
    return [float(index % GROUP) if informative(i) else 0.0 for index, i in enumerate(id)]


def right_in_a_whole_group_call(prompts, completions, id, **kwargs):
    """Informative prompts are right once per call that generates a whole group for them (an extension: the pilot's
    calls run 2 rows per prompt), on its first row; every other completion is wrong."""
    rewards = [0.0] * len(id)
    starts = [index for index in range(len(id)) if index == 0 or id[index - 1] != id[index]] + [len(id)]
    for start, end in zip(starts, starts[1:]):
        rewards[start] = float(informative(id[start]) and end - start == GROUP)
    return rewards


def vllm_settings(output_dir: Path, **overrides) -> dict:
    settings = {
        "per_device_train_batch_size": 2 * GROUP,
        "num_generations": GROUP,
        "max_steps": STEPS,
        "learning_rate": 1e-3,
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_max_model_length": 64,
        "disable_tqdm": True,
        **overrides,
    }
    return tiny_training_settings(output_dir, **settings)


class Recorder:
    """Records, on a built trainer, what its weight syncs and its loss batches were."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.sync_steps: list[int] = []
        self.batches: list[dict] = []
        sync = trainer.vllm_generation.sync_weights

        def counting_sync():
            self.sync_steps.append(trainer.state.global_step)
            return sync()

        trainer.vllm_generation.sync_weights = counting_sync
        compute_loss = trainer.compute_loss

        def recording_loss(model, inputs, *args, **kwargs):
            texts = trainer.processing_class.batch_decode(inputs["prompt_ids"], skip_special_tokens=True)
            self.batches.append(
                {
                    "step": trainer.state.global_step,
                    "ids": [int(re.match(r"(\d+)\+", text).group(1)) for text in texts],
                    "advantages": inputs["advantages"].float().tolist(),
                }
            )
            return compute_loss(model, inputs, *args, **kwargs)

        trainer.compute_loss = recording_loss

    def report(self) -> dict:
        trainer = self.trainer
        return {
            "rank": trainer.accelerator.process_index,
            "num_processes": trainer.accelerator.num_processes,
            "global_step": trainer.state.global_step,
            "carry_max_staleness": getattr(trainer.args, "dynamic_sampling_carry_max_staleness", None),
            "importance_sampling_correction": trainer.args.vllm_importance_sampling_correction,
            "sync_steps": self.sync_steps,
            "batches": self.batches,
            "log_history": [{k: v for k, v in entry.items() if _plain(v)} for entry in trainer.state.log_history],
            "parameter_digest": state_dict_digest(trainer.accelerator.unwrap_model(trainer.model).state_dict()),
        }


def _plain(value) -> bool:
    return isinstance(value, (int, str)) or (isinstance(value, float) and math.isfinite(value))


def train_and_report(
    trainer_class, config, model_dir: str, output: Path, resume_from: str | None = None, reward=None
) -> dict:
    trainer = trainer_class(
        model_dir,
        reward_funcs=reward or quarter_informative_reward,
        args=config,
        train_dataset=make_prompt_dataset(NUM_PROMPTS),
    )
    recorder = Recorder(trainer)
    trainer.train(resume_from_checkpoint=resume_from)
    report = recorder.report()
    output.write_text(json.dumps(report))
    return report


def trainers(model_dir: str, output_dir: Path) -> None:
    grpo = GRPOConfig(**vllm_settings(output_dir / "grpo", max_steps=2))
    train_and_report(GRPOTrainer, grpo, model_dir, output_dir / "grpo.json")
    # DAPOConfig's defaults with vLLM (carrying, TRL's importance-sampling correction), a checkpoint every step.
    dapo = DAPOConfig(
        **vllm_settings(output_dir / "dapo", soft_overlong_punishment=False, save_strategy="steps", save_steps=1)
    )
    train_and_report(DAPOTrainer, dapo, model_dir, output_dir / "dapo.json")
    resumed = DAPOConfig(**vllm_settings(output_dir / "resumed", soft_overlong_punishment=False))
    checkpoint = str(output_dir / "dapo" / "out" / "checkpoint-1")
    train_and_report(DAPOTrainer, resumed, model_dir, output_dir / "resumed.json", resume_from=checkpoint)
    # The adaptive mode: pass-rate beliefs, the estimate skip and the history baseline, generating through vLLM.
    adaptive = DAPOConfig(
        **vllm_settings(
            output_dir / "adaptive",
            soft_overlong_punishment=False,
            dynamic_sampling_mode="adaptive",
            dynamic_sampling_pilot_size=0,
        )
    )
    train_and_report(DAPOTrainer, adaptive, model_dir, output_dir / "adaptive.json")
    # Its defaults, the pilot included: vLLM generates each prompt in two calls of 2 rows.
    pilot = DAPOConfig(
        **vllm_settings(output_dir / "pilot", soft_overlong_punishment=False, dynamic_sampling_mode="adaptive")
    )
    train_and_report(DAPOTrainer, pilot, model_dir, output_dir / "pilot.json")
    # With one extension: an informative prompt's all-wrong group gets 4 more completions in a vLLM call of 4 rows per
    # prompt, one of them right, and the prompt's 8 completions train as one group.
    extended = DAPOConfig(
        **vllm_settings(
            output_dir / "extended",
            soft_overlong_punishment=False,
            dynamic_sampling_mode="adaptive",
            dynamic_sampling_extensions=1,
            dynamic_sampling_max_skip_probability=0.0,
        )
    )
    train_and_report(DAPOTrainer, extended, model_dir, output_dir / "extended.json", reward=right_in_a_whole_group_call)


def ddp(model_dir: str, output_dir: Path) -> None:
    config = DAPOConfig(
        **vllm_settings(output_dir / "ddp", max_steps=3, soft_overlong_punishment=False, ddp_backend="gloo"),
        accelerator_config={"dispatch_batches": False},
    )
    trainer = DAPOTrainer(
        model_dir,
        reward_funcs=quarter_informative_reward,
        args=config,
        train_dataset=make_prompt_dataset(NUM_PROMPTS),
    )
    recorder = Recorder(trainer)
    trainer.train()
    report = recorder.report()
    (output_dir / f"rank{report['rank']}.json").write_text(json.dumps(report))
    # Leave together, then skip the interpreter's teardown: a gloo or vLLM thread still joinable when C++ static
    # objects are destroyed can abort the process after the report is written.
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.state.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    from _common import keep_vllm_cpu_linear_weights

    keep_vllm_cpu_linear_weights()  # TRL's weight sync must reach vLLM on AVX-512 CPUs too (see its docstring)
    scenario, model_dir, output_dir = sys.argv[1:4]
    {"trainers": trainers, "ddp": ddp}[scenario](model_dir, Path(output_dir))
