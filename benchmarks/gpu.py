"""GPU variant of the overhead, sample-efficiency and memory benchmarks, on a model of 0.5B+ parameters.

The model is built from its config, nothing downloaded: Qwen2-0.5B's shape (hidden 896, 24 layers, 14 heads with
2 KV heads, MLP 4864, vocabulary 151,936) with an untied output head, 0.63B parameters, randomly initialised,
with the package's character tokenizer. Training runs in bfloat16 mixed precision on one CUDA device.

1. overhead: `overhead.py` with 64 completions per step of up to 128 tokens, 30 steps x 3 ABBA repeats;
2. sample efficiency: a random model cannot learn from a verifier that never rewards it, so the script first
   warm-starts the 0.63B model by supervised fine-tuning on the *train* split of `builtin:arithmetic` (loss on
   the answer only; the held-out split is never trained on), prints its held-out accuracy, and runs
   `sample_efficiency.py` from that checkpoint (3 seeds per method; `--seeds`, `--steps` shorten it);
3. memory: `memory.py` (full fine-tuning vs LoRA vs QLoRA; CUDA peak allocated memory), 16 completions of up to
   256 tokens per step.

Each part writes its JSON (and the sample-efficiency plot) under `--out-dir` and prints its table.

    python benchmarks/gpu.py --out-dir benchmarks/results/gpu                      # on a machine with a GPU
    python benchmarks/gpu.py --device cpu --model tiny-128 --quick --out-dir /tmp/gpu-dry-run   # dry run (CI)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
import memory
import overhead
import sample_efficiency
import torch
from _common import MODEL_SHAPES, check_device, save_model, set_cpu_threads

from trl_ext.evaluation import evaluate_pass_at_k
from trl_ext.rewards import get_reward
from trl_ext.tasks import load_raw_dataset, supervised_batches

PARTS = ("overhead", "sample_efficiency", "memory")


def supervised_warm_start(model_dir: Path, device: str, steps: int, batch_size: int, learning_rate: float, seed: int):
    """Fine-tune the model in `model_dir` in place on `prompt + solution + EOS` of the train split, the loss on
    the answer tokens only; returns its held-out pass@1 (4 samples at temperature 1.0)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
    task = load_raw_dataset(sample_efficiency.DEFAULT_TASK)
    batches = supervised_batches(tokenizer, task["train"]["prompt"], task["train"]["solution"], batch_size, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    model.train()
    started = time.perf_counter()
    for step in range(1, steps + 1):
        input_ids, attention_mask, labels = next(batches)
        loss = model(
            input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), labels=labels.to(device)
        ).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0 or step == steps:
            elapsed = time.perf_counter() - started
            print(f"warm start: step {step}/{steps}, loss {loss.item():.3f} ({elapsed:.0f} s)", flush=True)
    model.eval()
    result = evaluate_pass_at_k(
        model, tokenizer, task["test"], get_reward("exact_match", extract="none", normalize=False),
        num_samples=4, max_new_tokens=8, temperature=1.0, batch_size=800, progress=False,
    )  # fmt: skip
    model.to(torch.float32).save_pretrained(model_dir)
    return result.pass_at_k[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--model", default="qwen2-0.5b", choices=sorted(MODEL_SHAPES))
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--warm-start-steps", type=int, default=600)
    parser.add_argument("--warm-start-lr", type=float, default=1e-4)
    parser.add_argument(
        "--target-gain", type=float, default=0.05, help="sample efficiency: pass@1 gain over the start to reach"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--overhead-steps", type=int, default=30, help="overhead: optimiser steps per run")
    parser.add_argument("--overhead-repeats", type=int, default=3, help="overhead: GRPO/DAPO run pairs (ABBA)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="sample efficiency: seeds")
    parser.add_argument("--steps", type=int, default=150, help="sample efficiency: optimiser steps per run")
    parser.add_argument("--learning-rate", type=float, default=1e-5, help="sample efficiency: RL learning rate")
    parser.add_argument("--memory-steps", type=int, default=5, help="memory: timed optimiser steps per method")
    parser.add_argument("--quick", action="store_true", help="smoke mode: each part's --quick settings")
    parser.add_argument("--out-dir", default="benchmarks/results/gpu")
    args = parser.parse_args(argv)
    check_device(args.device)
    set_cpu_threads(args.threads)
    out_dir = Path(args.out_dir)
    common = ["--device", args.device, "--threads", str(args.threads)] + (["--quick"] if args.quick else [])
    results = {}

    if "overhead" in args.parts:
        print("== overhead ==", flush=True)
        results["overhead"] = overhead.main(
            common + ["--model", args.model, "--batch-size", "64", "--max-completion-length", "128",
                      "--steps", str(args.overhead_steps), "--repeats", str(args.overhead_repeats),
                      "--out", str(out_dir / "overhead.json")]
        )  # fmt: skip

    if "sample_efficiency" in args.parts:
        print("== sample efficiency ==", flush=True)
        with tempfile.TemporaryDirectory() as scratch:
            model_dir = save_model(args.model, Path(scratch) / "model")
            steps = 2 if args.quick else args.warm_start_steps
            accuracy = supervised_warm_start(model_dir, args.device, steps, 64, args.warm_start_lr, seed=0)
            print(f"warm-started {args.model}: held-out pass@1 {accuracy:.3f}", flush=True)
            results["sample_efficiency"] = sample_efficiency.main(
                common + ["--model-path", str(model_dir), "--target-gain", str(args.target_gain),
                          "--seeds", *map(str, args.seeds), "--steps", str(args.steps),
                          "--learning-rate", str(args.learning_rate),
                          "--out", str(out_dir / "sample_efficiency.json")]
            )  # fmt: skip
            results["sample_efficiency"]["warm_start_pass@1"] = accuracy

    if "memory" in args.parts:
        print("== memory ==", flush=True)
        results["memory"] = memory.main(
            common + ["--model", args.model, "--batch-size", "16", "--max-completion-length", "256",
                      "--steps", str(args.memory_steps), "--out", str(out_dir / "memory.json")]
        )  # fmt: skip
    return results


if __name__ == "__main__":
    main()
