"""Build the tiny model the offline code recipe starts from: `trl_ext/assets/tiny-code/`.

    python scripts/make_code_checkpoint.py   # rebuilds the shipped checkpoint (about two minutes on 2 CPU cores)

A Llama-architecture model with the package's character tokenizer (`trl_ext.tiny`; hidden size 64, 2 layers,
4 heads, about 0.1M parameters), warm-started by supervised fine-tuning on the *train* split of the built-in code
task (`builtin:code-functions`: the one-line body of the function a docstring describes, HumanEval's schema), for
a fixed, short budget, stopped while it is learning to copy the docstring's operation and constant into
`    return x + 347`: it gets part of the held-out problems right, so RL has both passing and failing programs in
most groups to learn from. The held-out split is never trained on. Everything is
seeded: the same command gives the same weights on the same software versions. The held-out pass@1 printed at
the end runs every sample's program against the row's tests in the sandbox (the `code` reward).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from trl_ext.evaluation import evaluate_pass_at_k
from trl_ext.rewards import get_reward
from trl_ext.tasks import BUILTIN_MODELS, make_code_dataset, warm_start
from trl_ext.tiny import build_char_tokenizer, build_tiny_causal_lm

MAX_NEW_TOKENS = 24  # `    return x - 999`, a newline and the end-of-sequence token, with room to spare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default=str(BUILTIN_MODELS["tiny-code"]))
    parser.add_argument("--steps", type=int, default=1100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--eval-prompts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a 0.1M-parameter model trains fastest on one thread, the more so on a busy machine
    tokenizer = build_char_tokenizer()
    model = build_tiny_causal_lm(
        tokenizer, hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=args.num_heads, seed=args.seed
    )
    task = make_code_dataset()
    warm_start(
        model,
        tokenizer,
        task["train"]["prompt"],
        task["train"]["canonical_solution"],
        steps=args.steps,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        seed=args.seed,
        weight_decay=0.0,
        log_every=100,
    )
    model.eval()
    model.generation_config.max_new_tokens = MAX_NEW_TOKENS
    output_dir = Path(args.output_dir)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)

    heldout = task["test"].select(range(args.eval_prompts))
    result = evaluate_pass_at_k(
        model,
        tokenizer,
        heldout,
        get_reward("code"),
        num_samples=4,
        max_new_tokens=MAX_NEW_TOKENS,
        temperature=1.0,
        batch_size=400,
        progress=False,
    )
    print(f"held-out pass@1 (sampled, temperature 1.0, programs run against the tests): {result.pass_at_k[1]:.3f}")
    print(f"Saved to {output_dir}")


if __name__ == "__main__":
    main()
