"""What the benchmark scripts share: offline setup, models built from a config, step timing, tables and JSON.

Nothing here downloads anything: models are randomly initialised from a config (or are the package's own tiny
checkpoint) and use the character tokenizer of `trl_ext.tiny`.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # evaluation progress bars would interleave with the tables

# The scripts run as `python benchmarks/<name>.py` from a checkout: make `trl_ext` importable without installing.
_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, TrainerCallback  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from trl_ext.tiny import build_char_tokenizer  # noqa: E402


@dataclass(frozen=True)
class ModelShape:
    """The shape of a randomly initialised Llama-architecture model."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int | None = None  # None: the character tokenizer's size
    tie_word_embeddings: bool = True


MODEL_SHAPES = {
    # Small enough for CPU, large enough that a step is not all Python overhead.
    "tiny-128": ModelShape(hidden_size=128, intermediate_size=256, num_layers=4, num_heads=4, num_kv_heads=4),
    # A few tens of millions of parameters (~32M), for the memory comparison on CPU.
    "small-32m": ModelShape(hidden_size=640, intermediate_size=1728, num_layers=6, num_heads=10, num_kv_heads=10),
    # Qwen2-0.5B's shape (hidden 896, 24 layers, 14 heads, 2 KV heads, MLP 4864, vocab 151,936) with an untied
    # output head: 0.63B parameters. For GPUs; its vocabulary is larger than the character tokenizer, and token
    # ids beyond the tokenizer decode to nothing, which changes no timing.
    "qwen2-0.5b": ModelShape(
        hidden_size=896,
        intermediate_size=4864,
        num_layers=24,
        num_heads=14,
        num_kv_heads=2,
        vocab_size=151_936,
        tie_word_embeddings=False,
    ),
}


def quiet_transformers() -> None:
    """Keep the tables readable: errors only from transformers (and trl_ext, which logs through it), no progress
    bars, no deprecation notices."""
    import warnings

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def without_log_printing(trainer):
    """Stop the trainer printing every step's metrics dict (they stay in `trainer.state.log_history`)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


def build_model(shape_name: str, tokenizer, seed: int = 0) -> LlamaForCausalLM:
    """A randomly initialised model of `MODEL_SHAPES[shape_name]`, in float32, seeded."""
    shape = MODEL_SHAPES[shape_name]
    config = LlamaConfig(
        vocab_size=shape.vocab_size or len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=shape.tie_word_embeddings,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_model(shape_name: str, directory: Path, seed: int = 0) -> Path:
    """Build the model and the character tokenizer and save both to `directory` (trainers load it by path)."""
    tokenizer = build_char_tokenizer()
    model = build_model(shape_name, tokenizer, seed=seed)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def count_parameters(model) -> tuple[int, int]:
    """(all parameters, trainable parameters); 4-bit weights count as the number of values they hold."""
    total = trainable = 0
    for parameter in model.parameters():
        # bitsandbytes packs two 4-bit values per byte into a uint8 tensor of half the element count.
        count = parameter.numel() * 2 if parameter.dtype == torch.uint8 else parameter.numel()
        total += count
        if parameter.requires_grad:
            trainable += count
    return total, trainable


def training_args(device: str) -> dict:
    """Trainer settings that depend on the device: CPU in float32, CUDA in bfloat16."""
    if device == "cpu":
        return dict(use_cpu=True, bf16=False)
    return dict(use_cpu=False, bf16=True)


def common_training_args(output_dir: Path, device: str, **overrides) -> dict:
    """The settings every benchmark run shares: no logging integrations, no checkpoints, log every step."""
    settings = dict(
        output_dir=str(output_dir),
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        **training_args(device),
    )
    settings.update(overrides)
    return settings


class StepTimer(TrainerCallback):
    """Wall time of every optimiser step, from `on_step_begin` to `on_step_end`.

    With one micro-batch per step and one step per generation (the settings these benchmarks use), that interval
    holds the whole step: generation, reward scoring, loss, backward and the optimiser update. On CUDA the device
    is synchronised at both ends so the interval is not just kernel launches.
    """

    def __init__(self):
        self.step_seconds: list[float] = []
        self._started: float | None = None

    @staticmethod
    def _sync():
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def on_step_begin(self, args, state, control, **kwargs):
        self._sync()
        self._started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self._sync()
        if self._started is not None:
            self.step_seconds.append(time.perf_counter() - self._started)
            self._started = None


def set_cpu_threads(threads: int) -> None:
    """Use `threads` intra-op threads for torch on CPU.

    On a machine shared with other jobs, OpenMP worker threads that wait for a busy core make small matrix
    products tens of times slower (measured here: a 16x128 by 128x512 product took 7 ms with 2 threads and
    0.11 ms with 1 while other jobs ran), so the CPU benchmarks default to one thread.
    """
    torch.set_num_threads(threads)


def add_common_arguments(parser, model: str) -> None:
    """The arguments every benchmark takes: device, threads, model shape, quick mode, JSON output."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (see set_cpu_threads)")
    parser.add_argument("--model", default=model, choices=sorted(MODEL_SHAPES), help="model shape (MODEL_SHAPES)")
    parser.add_argument("--quick", action="store_true", help="smoke mode: a few steps, for CI")
    parser.add_argument("--out", help="write the results as JSON to this path")


def median(values) -> float:
    return float(statistics.median(values)) if values else float("nan")


def log_history_values(trainer, name: str) -> list[float]:
    """The values of one logged metric, in step order."""
    return [entry[name] for entry in trainer.state.log_history if name in entry]


def machine_info() -> dict:
    """What the numbers were measured on, and how busy the machine was when the script started."""
    import transformers
    import trl

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        info["load_average_1_5_15"] = [round(value, 2) for value in os.getloadavg()]
    except OSError:
        info["load_average_1_5_15"] = None
    return info


def format_table(headers: list[str], rows: list[list]) -> str:
    """A plain-text table: floats with 3 significant decimals, columns aligned."""

    def cell(value) -> str:
        if isinstance(value, float):
            return f"{value:.3f}" if abs(value) < 1000 else f"{value:.0f}"
        return str(value)

    text_rows = [[cell(value) for value in row] for row in rows]
    widths = [max(len(str(header)), *(len(row[i]) for row in text_rows)) for i, header in enumerate(headers)]
    lines = ["  ".join(str(header).ljust(width) for header, width in zip(headers, widths))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(value.ljust(width) for value, width in zip(row, widths)) for row in text_rows]
    return "\n".join(lines)


def write_json(path: str | Path | None, payload: dict) -> None:
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"\nwrote {path}")


def check_device(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "--device cuda: no CUDA device is visible to torch here. Run on a GPU machine, or use --device cpu."
        )


def keep_vllm_cpu_linear_weights() -> None:
    """Make TRL's weight sync reach vLLM's CPU build on CPUs with AVX-512 BF16 or AMX (call before building a
    trainer).

    There, vLLM loads its full kernel library and runs each linear layer through a oneDNN handle built from a copy
    of the weight (with AMX, through a copy packed for its own kernels first), then replaces the layer's parameter
    with an empty one: TRL's sync (`load_weights`) then fails on it (`'Parameter' object has no attribute
    'weight_loader'`), and the copy would never see new weights anyway. Without either, vLLM takes its plain
    `torch.nn.functional.linear` path, which keeps the parameters, as it does by itself on AVX2-only CPUs.
    Generation is unchanged but for speed. The vLLM tests and benchmark use it; a user of vLLM's CPU build on such
    a CPU needs the same lines."""
    import vllm._custom_ops as vllm_ops
    import vllm.model_executor.layers.utils as vllm_layer_utils

    vllm_ops._supports_onednn = False
    if hasattr(vllm_layer_utils, "check_cpu_sgl_kernel"):  # AMX: the packed kernels come before oneDNN
        vllm_layer_utils.check_cpu_sgl_kernel = lambda *shape_and_dtype: False
