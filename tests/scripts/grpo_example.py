"""A GRPO training script written the way TRL's examples are; test_swap.py turns it into a DAPO one."""

import sys

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

model_path, output_dir = sys.argv[1], sys.argv[2]

dataset = Dataset.from_dict({"prompt": [f"Count to {n}:" for n in range(32)]})


# Reward completions whose length is close to 5 characters
def reward_len(completions, **kwargs):
    return [-abs(5 - len(completion)) for completion in completions]


training_args = GRPOConfig(
    output_dir=output_dir,
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=8,
    max_steps=2,
    logging_steps=1,
    report_to="none",
    use_cpu=True,
    bf16=False,
)
trainer = GRPOTrainer(
    model=model_path,
    reward_funcs=reward_len,
    args=training_args,
    train_dataset=dataset,
)
trainer.train()
trainer.save_model(output_dir)
