"""Trains DAPOTrainer on one rollout kind in the launched process and writes what this process did.

Launched on two CPU processes by tests/rollouts/test_ddp_rollouts.py:
`ddp_rollout_kinds.py KIND MODEL_DIR OUTPUT_DIR`, KIND one of `stream`, `environment`, `rollout_func`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1]), str(Path(__file__).parents[1] / "scripts")]

from conftest import make_prompt_dataset, tiny_training_settings  # noqa: E402
from parameter_digest import state_dict_digest  # noqa: E402

from trl_ext import DAPOConfig, DAPOTrainer  # noqa: E402


def main(kind: str, model_dir: str, output_dir: str):
    settings = {
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_steps": 3,
        "learning_rate": 1e-2,
        "soft_overlong_punishment": False,
        "max_completion_length": 12,
        "ddp_backend": "gloo",
        "use_cpu": True,
        "accelerator_config": {"dispatch_batches": False},
    }
    if kind == "stream":
        from test_streaming import informative_odd_ids

        stream = make_prompt_dataset(64).to_iterable_dataset()
        arguments = {"reward_funcs": informative_odd_ids, "train_dataset": stream}
    elif kind == "environment":
        from test_environments import GuessingGame, game_dataset, play_first_digit

        arguments = {
            "reward_funcs": play_first_digit,
            "train_dataset": game_dataset(),
            "environment_factory": GuessingGame,
        }
    else:
        from test_rollout_func import SamplingRollout, informative_odd_ids

        arguments = {
            "reward_funcs": informative_odd_ids,
            "train_dataset": make_prompt_dataset(64),
            "rollout_func": SamplingRollout(),
        }
    config = DAPOConfig(**tiny_training_settings(Path(output_dir), **settings))
    trainer = DAPOTrainer(model_dir, args=config, **arguments)
    rounds, prompts = [], []
    score_round = trainer.generate_and_score

    def recording(inputs, held):
        rows, rewards = score_round(inputs, held)
        rounds.append(len(inputs))
        prompts.append([json.dumps(row.get("prompt"), sort_keys=True) for row in inputs[::4]])
        return rows, rewards

    trainer.generate_and_score = recording
    trainer.train()
    report = {
        "rank": trainer.accelerator.process_index,
        "num_processes": trainer.accelerator.num_processes,
        "round_sizes": rounds,
        "round_prompts": prompts,
        "refill_state": getattr(trainer.sampler.refills, "state_dict", dict)(),
        "log_history": trainer.state.log_history,
        "parameter_digest": state_dict_digest(trainer.accelerator.unwrap_model(trainer.model).state_dict()),
    }
    path = Path(output_dir) / f"rank{report['rank']}.json"
    path.write_text(json.dumps(report, default=str))
    # Leave together, then skip the interpreter's own teardown: a gloo or library thread still joinable when C++
    # static objects are destroyed can abort the process ("terminate called without an active exception") after
    # everything above has run and been written. What the tests check is in the reports.
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.state.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:4])
