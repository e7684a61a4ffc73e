"""One digest of a model's weights, so processes and reloaded checkpoints can be compared exactly."""

import hashlib

import torch


def state_dict_digest(state_dict: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors of `state_dict` in name order, each as float32 bytes."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        digest.update(name.encode())
        digest.update(state_dict[name].detach().to(torch.float32).contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()
