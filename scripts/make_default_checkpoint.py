"""Build the tiny model the offline default recipe starts from: `trl_ext/assets/tiny-arithmetic/`.

    python scripts/make_default_checkpoint.py   # rebuilds the shipped checkpoint (a few minutes on 2 CPU cores)

A Llama-architecture model (hidden size 128, 4 layers, 4 heads, ~0.67M parameters) with the package's
character tokenizer (`trl_ext.tiny`), warm-started by supervised fine-tuning on the *train* split of the
built-in arithmetic task (`builtin:arithmetic`, two-digit additions) for a fixed, short budget: it learns the
answer format and gets part of the held-out problems right, so RL has both right and wrong samples in most
groups to learn from. The held-out split is never trained on. Everything is seeded: the same command gives the
same weights on the same software versions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from trl_ext.evaluation import evaluate_pass_at_k
from trl_ext.rewards import get_reward
from trl_ext.tasks import BUILTIN_MODELS, make_arithmetic_dataset, warm_start
from trl_ext.tiny import build_char_tokenizer, build_tiny_causal_lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default=str(BUILTIN_MODELS["tiny-arithmetic"]))
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    tokenizer = build_char_tokenizer()
    model = build_tiny_causal_lm(
        tokenizer, hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=args.num_heads, seed=args.seed
    )
    task = make_arithmetic_dataset()
    warm_start(
        model,
        tokenizer,
        task["train"]["prompt"],
        task["train"]["solution"],
        steps=args.steps,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        seed=args.seed,
        weight_decay=0.0,
        log_every=200,
    )
    model.eval()
    # Settings that match what the default recipe's generation and evaluation use.
    model.generation_config.max_new_tokens = 8
    output_dir = Path(args.output_dir)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)

    reward = get_reward("exact_match")
    for name, temperature in (("sampled, temperature 1.0", 1.0), ("greedy", 0.0)):
        result = evaluate_pass_at_k(
            model,
            tokenizer,
            task["test"],
            reward,
            num_samples=4 if temperature else 1,
            max_new_tokens=8,
            temperature=temperature,
            batch_size=512,
            progress=False,
        )
        print(f"held-out accuracy ({name}): {result.pass_at_k[1]:.3f}")
    print(f"Saved to {output_dir}")


if __name__ == "__main__":
    main()
