"""Memory and step time of a DAPO step: full fine-tuning vs LoRA vs QLoRA (bitsandbytes 4-bit NF4).

The same randomly initialised model (the `small-32m` shape: ~30M parameters, built locally) trains with
DAPOTrainer under the three methods, each in a fresh Python process so that one method's allocations cannot
hide another's. Settings are DAPOConfig's defaults (clip-higher, token-level loss, soft overlong punishment)
except `dynamic_sampling=False`: with a random model the number of generation rounds per step would vary by
method and blur the comparison this benchmark is about.

What "memory" means here (each figure is the increase over the process's memory after imports, before the model
is loaded; "load" is the peak while loading and wrapping the model, "train" the peak during the training steps):
- on CPU, the resident set size (RSS): its peak is the kernel's exact high-water mark (`VmHWM` in
  /proc/self/status), reset between phases through /proc/self/clear_refs. The checkpoint is read into memory
  (`disable_mmap=True`): memory-mapped, frozen weights would stay file pages that count in RSS or not depending on
  the loading path rather than on the method. As a cross-check the script also samples *anonymous* memory (RSS
  minus file-backed and shared pages, /proc/self/statm, every 2 ms). `tracemalloc` would see neither: it tracks
  Python objects, not torch's allocations. Before each phase and reading, the script collects garbage and calls
  glibc's `malloc_trim`, so memory an earlier phase freed (QLoRA's float32 weights before quantisation) does not
  count; within a phase, RSS also holds freed memory the allocator keeps, so a peak is an upper bound.
- on CUDA, `torch.cuda.max_memory_allocated`, reset between the same phases.
Each method also reports its parameter, gradient and optimiser-state bytes, computed from the tensors.

    python benchmarks/memory.py --out benchmarks/results/memory.json      # full: 10 timed steps per method
    python benchmarks/memory.py --quick                                    # smoke: 2 steps, a smaller model
    python benchmarks/memory.py --device cuda --model qwen2-0.5b           # GPU variant
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (offline environment, import path)
from _common import (
    StepTimer,
    add_common_arguments,
    check_device,
    common_training_args,
    count_parameters,
    format_table,
    machine_info,
    median,
    quiet_transformers,
    save_model,
    set_cpu_threads,
    without_log_printing,
    write_json,
)

METHODS = ("full", "lora", "qlora")
MIB = 2**20


# ------------------------------------------------------------------------------------------ memory probes


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} line: the CPU memory probe needs Linux.")


def reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def release_freed_memory() -> None:
    """Collect garbage and hand the heap's free pages back to the kernel (glibc `malloc_trim`), so that memory
    an earlier phase freed (e.g. the float32 weights QLoRA quantises) does not count in the next one."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: freed memory may stay resident, an upper bound
        pass


class AnonymousMemorySampler:
    """Peak anonymous resident memory (resident minus file-backed and shared pages, from /proc/self/statm),
    sampled every `interval` seconds by a background thread."""

    def __init__(self, interval: float = 0.002):
        import os
        import threading

        self.interval = interval
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._fd = os.open("/proc/self/statm", os.O_RDONLY)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak = 0

    def current(self) -> int:
        import os

        _, resident, shared = os.pread(self._fd, 128, 0).split()[:3]
        return (int(resident) - int(shared)) * self._page

    def start(self) -> None:
        import threading

        self.peak = self.current()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name="memory-sampler")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.current())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.current())
        return self.peak


class MemoryProbe:
    """Memory readings and per-phase peaks, as dicts with the headline measure first.

    CPU: `rss` (resident set size; peak = `VmHWM`, exact) and `anonymous` (resident memory not backed by a file;
    peak sampled every 2 ms). CUDA: `cuda_allocated` (`torch.cuda.memory_allocated`; peak =
    `max_memory_allocated`).
    """

    def __init__(self, device: str):
        self.device = device
        self.sampler = AnonymousMemorySampler() if device == "cpu" else None

    def current(self) -> dict[str, int]:
        import torch

        release_freed_memory()
        if self.device == "cuda":
            return {"cuda_allocated": torch.cuda.memory_allocated()}
        return {"rss": _status_kib("VmRSS") * 1024, "anonymous": self.sampler.current()}

    def start_phase(self) -> None:
        import torch

        release_freed_memory()
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            reset_peak_rss()
            self.sampler.start()

    def phase_peak(self) -> dict[str, int]:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()
            return {"cuda_allocated": torch.cuda.max_memory_allocated()}
        return {"rss": _status_kib("VmHWM") * 1024, "anonymous": self.sampler.stop()}


def headline_measure(device: str) -> str:
    return "cuda_allocated" if device == "cuda" else "rss"


# ------------------------------------------------------------------------------------------ one method


def tensor_bytes(tensors) -> int:
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


def load_model(method: str, model_dir: Path, device: str):
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    # Read the checkpoint into memory instead of memory-mapping it: mapped weights would count as file pages for
    # some methods (those whose weights are never written) and as process memory for others.
    kwargs = {"dtype": dtype, "disable_mmap": True}
    if method == "qlora":
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype,
        )
        kwargs["device_map"] = {"": 0 if device == "cuda" else "cpu"}
    return AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)


def lora_config():
    from peft import LoraConfig

    # Every linear layer of the blocks: the usual QLoRA setting.
    return LoraConfig(
        r=16,
        lora_alpha=32,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        task_type="CAUSAL_LM",
    )


def run_method(method: str, args) -> dict:
    """Train one method in this process and measure it; the parent runs each method in its own process."""
    import torch
    from datasets import Dataset

    from trl_ext import DAPOConfig, DAPOTrainer
    from trl_ext.rewards import get_reward

    set_cpu_threads(args.threads)
    quiet_transformers()
    probe = MemoryProbe(args.device)
    pairs = [(a, b) for a in range(100) for b in range(100)][:512]
    dataset = Dataset.from_dict(
        {"prompt": [f"{a}+{b}=" for a, b in pairs], "solution": [str(a + b) for a, b in pairs]}
    )
    rewards = [get_reward("numeric", extract="none"), get_reward("regex_format", pattern=r"\d", match="search")]
    config = DAPOConfig(
        **common_training_args(
            Path(args.scratch) / method,
            args.device,
            per_device_train_batch_size=args.batch_size,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_steps=args.steps + 1,
            learning_rate=1e-4 if method == "full" else 1e-3,
            seed=args.seed,
            dynamic_sampling=False,
        )
    )
    if args.device == "cuda":
        torch.cuda.init()
    baseline = probe.current()

    probe.start_phase()
    model = load_model(method, Path(args.model_dir), args.device)
    timer = StepTimer()
    trainer = DAPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=config,
        train_dataset=dataset,
        peft_config=None if method == "full" else lora_config(),
        callbacks=[timer],
    )
    load_peak = probe.phase_peak()
    after_load = probe.current()

    probe.start_phase()
    started = time.perf_counter()
    without_log_printing(trainer).train()
    train_seconds = time.perf_counter() - started
    train_peak = probe.phase_peak()

    total, trainable = count_parameters(trainer.model)
    parameters = list(trainer.model.parameters())
    optimizer_state = [
        value for state in trainer.optimizer.state.values() for value in state.values() if torch.is_tensor(value)
    ]
    return {
        "method": method,
        "parameters": total,
        "trainable_parameters": trainable,
        "parameter_bytes": tensor_bytes(parameters),
        "trainable_dtypes": sorted({str(p.dtype) for p in parameters if p.requires_grad}),
        "gradient_bytes": tensor_bytes(p for p in parameters if p.requires_grad),
        "optimizer_state_bytes": tensor_bytes(optimizer_state),
        "baseline_bytes": baseline,
        # Increases over the baseline (after imports, before the model is loaded), one entry per measure.
        "load_peak_increase_bytes": {key: load_peak[key] - baseline[key] for key in baseline},
        "after_load_increase_bytes": {key: after_load[key] - baseline[key] for key in baseline},
        "train_peak_increase_bytes": {key: train_peak[key] - baseline[key] for key in baseline},
        "step_seconds": timer.step_seconds,
        "median_step_s": median(timer.step_seconds[1:]),  # the first step is a warm-up
        "train_seconds": train_seconds,
        "headline_measure": headline_measure(args.device),
    }


# ------------------------------------------------------------------------------------------ driver


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--steps", type=int, default=10, help="timed optimiser steps per method (plus one warm-up)")
    parser.add_argument("--batch-size", type=int, default=8, help="completions per step")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    add_common_arguments(parser, model="small-32m")
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(run_method(args.worker, args)), flush=True)
        return None

    if args.quick:
        args.steps, args.model, args.max_completion_length = 2, "tiny-128", 16
    check_device(args.device)
    set_cpu_threads(args.threads)  # the workers set it too; here it makes machine_info report what they use
    quiet_transformers()
    machine = machine_info()
    headline = headline_measure(args.device)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = save_model(args.model, Path(scratch) / "model", seed=args.seed)
        for method in args.methods:
            command = [
                sys.executable, __file__, "--worker", method, "--model-dir", str(model_dir), "--scratch", scratch,
                "--device", args.device, "--threads", str(args.threads), "--model", args.model,
                "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                "--num-generations", str(args.num_generations),
                "--max-completion-length", str(args.max_completion_length), "--seed", str(args.seed),
            ]  # fmt: skip
            finished = subprocess.run(command, capture_output=True, text=True)
            lines = [line for line in finished.stdout.splitlines() if line.startswith("RESULT ")]
            if finished.returncode != 0 or not lines:
                raise RuntimeError(
                    f"The {method} worker failed (exit {finished.returncode}):\n{finished.stderr[-4000:]}"
                )
            result = json.loads(lines[-1][len("RESULT ") :])
            results.append(result)
            print(
                f"{method}: train peak +{result['train_peak_increase_bytes'][headline] / MIB:.1f} MiB ({headline}), "
                f"{result['median_step_s']:.3f} s/step",
                flush=True,
            )

    reference = next((r for r in results if r["method"] == "full"), None)
    measures = list(results[0]["train_peak_increase_bytes"])  # the headline measure first
    rows = []
    for result in results:
        peaks = result["train_peak_increase_bytes"]
        rows.append(
            [
                result["method"],
                f"{result['trainable_parameters'] / 1e6:.2f}M / {result['parameters'] / 1e6:.1f}M",
                result["parameter_bytes"] / MIB,
                (result["gradient_bytes"] + result["optimizer_state_bytes"]) / MIB,
                *(peaks[measure] / MIB for measure in measures),
                peaks[headline] / reference["train_peak_increase_bytes"][headline] if reference else "",
                result["median_step_s"],
                result["median_step_s"] / reference["median_step_s"] if reference else "",
            ]
        )
    print()
    print(
        format_table(
            ["method", "trainable / all", "params MiB", "grads+Adam MiB",
             *(f"train peak {measure} MiB" for measure in measures), "vs full", "s/step", "vs full"],
            rows,
        )
    )  # fmt: skip
    print(
        f"\ntrain peaks: increase over the post-import baseline ({', '.join(measures)}; see the module docstring); "
        f"'vs full' compares {headline}; s/step: median over {args.steps} steps."
    )

    payload = {
        "benchmark": "memory",
        "settings": {
            key: value for key, value in vars(args).items() if key not in ("out", "worker", "model_dir", "scratch")
        },
        "machine": machine,
        "results": results,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
