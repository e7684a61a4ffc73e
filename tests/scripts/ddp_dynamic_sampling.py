"""Dynamic sampling under `accelerate launch --num_processes 2`, with each process seeing a different keep rate.

Writes, from every process, the per-step batch sizes and the logged metrics to OUTPUT_DIR/rank<k>.json.
"""

import json
import sys
from pathlib import Path

from accelerate import PartialState
from datasets import Dataset

from trl_ext import DAPOConfig, DAPOTrainer

model_path, output_dir = sys.argv[1], Path(sys.argv[2])
rank = PartialState(cpu=True).process_index  # the trainer runs on CPU with gloo, as use_cpu=True asks
dataset = Dataset.from_dict({"prompt": [f"{i}+{i}=" for i in range(64)], "id": list(range(64))})


def rank_dependent_reward(completions, id, **kwargs):
    """Every group informative on process 0; on process 1 only prompts with id % 4 == 0 (keep rate ~0.25)."""
    informative = [rank == 0 or i % 4 == 0 for i in id]
    return [float(row) if keep else 0.0 for row, keep in enumerate(informative)]


# A per-process generation batch that is not a multiple of num_generations must fail at construction.
try:
    DAPOConfig(output_dir=str(output_dir), per_device_train_batch_size=2, num_generations=4, use_cpu=True, bf16=False)
    invalid_batch_error = None
except ValueError as error:
    invalid_batch_error = str(error)

config = DAPOConfig(
    output_dir=str(output_dir),
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=8,
    max_steps=4,
    learning_rate=1e-3,
    logging_steps=1,
    report_to="none",
    use_cpu=True,
    bf16=False,
    save_strategy="no",
    soft_overlong_punishment=False,
)
trainer = DAPOTrainer(model_path, reward_funcs=rank_dependent_reward, args=config, train_dataset=dataset)
batch_sizes, batch_ids = [], []
generate = trainer._generate_and_score_completions


def recording(inputs):
    batch = generate(inputs)
    batch_sizes.append(batch["completion_ids"].size(0))
    texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    batch_ids.append([int(text.split("+")[0]) for text in texts])
    return batch


# Rows this process scored in each generation round: every process must run the same rounds with the same
# number of prompts, whatever its own keep rate (scoring gathers across processes).
scored_rows = []
calculate_rewards = trainer._calculate_rewards


def counting(inputs, prompts, completions, completion_ids_list):
    scored_rows.append(len(prompts))
    return calculate_rewards(inputs, prompts, completions, completion_ids_list)


trainer._generate_and_score_completions = recording
trainer._calculate_rewards = counting
trainer.train()
(output_dir / f"rank{rank}.json").write_text(
    json.dumps(
        {
            "batch_sizes": batch_sizes,
            "batch_ids": batch_ids,
            "scored_rows": scored_rows,
            "log_history": trainer.state.log_history,
            "invalid_batch_error": invalid_batch_error,
        }
    )
)
