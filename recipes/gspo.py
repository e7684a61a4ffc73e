"""Train a model with GSPO (sequence-level importance ratio and clipping, arXiv 2507.18071).

    accelerate launch recipes/gspo.py                                   # offline default: tiny model, arithmetic, CPU
    accelerate launch --config_file recipes/accelerate_configs/zero3.yaml \
        recipes/gspo.py --config recipes/configs/gspo_qwen2.5_math_7b.yaml
    python recipes/gspo.py --config my.yaml --learning_rate 1e-6         # any field can be overridden

Without `--config` the offline default (`recipes/configs/gspo_default.yaml`) runs on the built-in tiny model
and arithmetic task, printing the held-out accuracy before and after training.
"""

import sys
from pathlib import Path

from trl import ModelConfig, TrlParser, get_peft_config, get_quantization_config

from trl_ext import GSPOConfig, GSPOTrainer
from trl_ext.plotting import plot_training_curves
from trl_ext.recipe import (
    RecipeArguments,
    add_pass_at_k_callback,
    before_after,
    build_rewards,
    check_model_args,
    load_datasets,
    model_init_kwargs,
    model_path,
)

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "gspo_default.yaml"


def main(script_args: RecipeArguments, training_args: GSPOConfig, model_args: ModelConfig) -> None:
    # 1. Check the combination before loading anything, then describe how to load the model.
    check_model_args(model_args, training_args)
    training_args.model_init_kwargs = model_init_kwargs(model_args, training_args)

    # 2. Data: prompts with a `solution` column, and a held-out split for pass@k.
    train_dataset, eval_dataset = load_datasets(script_args, seed=training_args.seed)

    # 3. Rewards from the registry, by name; the first one is the verifier used for evaluation.
    reward_funcs, eval_reward = build_rewards(script_args, training_args)

    # 4. The trainer: LoRA / QLoRA come from the ModelConfig fields (use_peft, load_in_4bit, lora_*).
    trainer = GSPOTrainer(
        model=model_path(model_args),
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        quantization_config=get_quantization_config(model_args),
        peft_config=get_peft_config(model_args),
    )
    evaluation = add_pass_at_k_callback(trainer, script_args, eval_dataset, eval_reward)

    # 5. Train, save, report.
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.save_state()  # trainer_state.json: the logs `trl-ext plot` draws
    trainer.accelerator.print(before_after(evaluation))
    if script_args.plot and trainer.accelerator.is_main_process:
        png, _ = plot_training_curves(training_args.output_dir)
        print(f"Training curves: {png}")
    # Leave together: a process that closes its process group while another still holds connections to it can
    # abort at exit (gloo), though its work is done.
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()  # finish the trackers, close the process group


if __name__ == "__main__":
    parser = TrlParser((RecipeArguments, GSPOConfig, ModelConfig))
    argv = sys.argv[1:]
    if "--config" not in argv:
        argv = ["--config", str(DEFAULT_CONFIG), *argv]
    main(*parser.parse_args_and_config(argv))
