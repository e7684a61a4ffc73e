"""Trains DAPOTrainer in vLLM server mode against a running `trl vllm-serve`, for tests/vllm_cpu/test_server.py.

    python server_run.py BASE_URL MODEL_DIR OUTPUT_DIR

TRL pushes the trainer's weights into the server over vLLM's NCCL weight-transfer engine, which needs CUDA: on CPU
`VLLMClient.init_communicator` raises `NotImplementedError`, so no server-mode trainer can be built. Here, and only
here, that transfer is replaced: `init_communicator` opens no NCCL group, and `update_named_params` writes the
tensors TRL streams to a safetensors file and asks the server's workers to load it (vLLM's `reload_weights` through
the `/collective_rpc` endpoint of its dev mode, which `trl vllm-serve` turns on). Everything else is TRL's: which
weights it sends and when, generation through `VLLMClient`, the trainer.

The report holds the global step of every weight sync, the dynamic-sampling metrics, and how far the server's
log-probs of its own samples are from the trained model's, and from the untrained model's.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from colocate_run import quarter_informative_reward
from conftest import make_prompt_dataset, tiny_training_settings
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
from trl.generation.vllm_client import VLLMClient
from vllm_support import GROUP, NUM_PROMPTS

from trl_ext import DAPOConfig, DAPOTrainer

STEPS = 2
PROBE_PROMPTS = ["3+3=", "10+10=", "21+21="]


def open_no_nccl_group(self, device=0):
    """Stands in for `VLLMClient.init_communicator` on CPU: the file transfer below needs no process group."""
    self.communicator = None


def file_transfer(directory: Path):
    """Stands in for `VLLMClient.update_named_params` on CPU: the same tensors, through a file the server loads."""

    def update_named_params(self, metadata, named_params):
        destination = tempfile.mkdtemp(prefix="weights-", dir=directory)
        tensors = {name: tensor.detach().to(torch.float32).contiguous().cpu() for name, tensor in named_params}
        assert [name for name, _, _ in metadata] == list(tensors)  # TRL announced exactly what it streamed
        # vLLM's reload completes a layer once all its tensors arrived: with tied embeddings the output head is a
        # layer of its own, which TRL does not stream (it is the embedding), so the file names it too.
        if "lm_head.weight" not in tensors and "model.embed_tokens.weight" in tensors:
            tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
        save_file(tensors, f"{destination}/model.safetensors")
        rpc = {"method": "reload_weights", "kwargs": {"weights_path": destination}}
        self._post(f"{self.base_url}/collective_rpc", json=rpc)

    return update_named_params


def sampled_log_probs(model, prompt_ids: list[int], completion_ids: list[int]) -> torch.Tensor:
    """The model's log-probs of `completion_ids` after `prompt_ids` (temperature 1)."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    return logits.log_softmax(-1).gather(-1, torch.tensor(completion_ids)[:, None])[:, 0]


def log_prob_gap(client: VLLMClient, model) -> float:
    """Largest difference between the server's log-probs of its samples and `model`'s log-probs of them."""
    generated = client.generate(PROBE_PROMPTS, n=2, max_tokens=8, logprobs=0)
    prompts = [ids for ids in generated["prompt_ids"] for _ in range(2)]
    gaps = []
    for prompt_ids, completion_ids, logprobs in zip(
        prompts, generated["completion_ids"], generated["logprobs"], strict=True
    ):
        server = torch.tensor([token[0] for token in logprobs])
        gaps.append((server - sampled_log_probs(model, prompt_ids, completion_ids)).abs().max().item())
    return max(gaps)


def main(base_url: str, model_dir: str, output_dir: Path) -> None:
    VLLMClient.init_communicator = open_no_nccl_group
    VLLMClient.update_named_params = file_transfer(output_dir)
    settings = tiny_training_settings(
        output_dir,
        per_device_train_batch_size=2 * GROUP,
        num_generations=GROUP,
        max_steps=STEPS,
        learning_rate=3e-2,
        soft_overlong_punishment=False,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=base_url,
        vllm_server_timeout=300,
        disable_tqdm=True,
    )
    trainer = DAPOTrainer(
        model_dir,
        reward_funcs=quarter_informative_reward,
        args=DAPOConfig(**settings),
        train_dataset=make_prompt_dataset(NUM_PROMPTS),
    )
    sync_steps = []
    sync = trainer.vllm_generation.sync_weights
    trainer.vllm_generation.sync_weights = lambda: sync_steps.append(trainer.state.global_step) or sync()
    trainer.train()
    synced_while_training = list(sync_steps)
    trainer.vllm_generation.sync_weights()  # the last update, so that the server holds the trained weights
    trained = trainer.accelerator.unwrap_model(trainer.model).eval()
    client = trainer.vllm_generation.vllm_client
    report = {
        "global_step": trainer.state.global_step,
        "sync_steps": synced_while_training,
        "log_history": trainer.state.log_history,
        "gap_to_trained": log_prob_gap(client, trained),
        "gap_to_untrained": log_prob_gap(client, AutoModelForCausalLM.from_pretrained(model_dir).eval()),
    }
    (output_dir / "server.json").write_text(json.dumps(report, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
