"""Dynamic sampling with a vision-language model (a tiny Gemma 3): image columns travel with refills and carried
groups, and the multimodal tensors TRL builds for the batch belong to each row's own images."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import tiny_training_settings
from datasets import Dataset
from PIL import Image
from tiny_vlm import build_processor, save_tiny_vlm

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.sampling.assembly import images_as_tensors, images_from_tensors

GROUP = 4


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs with one intra-op thread (see `one_torch_thread` in tests/conftest.py)."""


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory) -> str:
    return save_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


def image_of(game: int, shade: int = 0) -> Image.Image:
    """An image whose pixels say which row it belongs to: red = 8 x the row's id, green = its shade."""
    return Image.new("RGB", (28, 28), (8 * game, 40 * shade, 0))


def image_dataset(num_rows: int = 32, multi: bool = False) -> Dataset:
    columns = {
        "prompt": [[{"role": "user", "content": f"Image {i}: which color?"}] for i in range(num_rows)],
        "id": list(range(num_rows)),
    }
    if multi:  # odd rows hold two images, even rows one
        columns["images"] = [[image_of(i, shade) for shade in range(1 + i % 2)] for i in range(num_rows)]
    else:
        columns["image"] = [image_of(i) for i in range(num_rows)]
    return Dataset.from_dict(columns)


def images_match_ids(prompts, completions, id, image=None, images=None, **kwargs):
    """Odd ids informative (a different reward per completion), even ids not; fails when a row's image is not its
    own: rows shuffled against their images fail here."""
    row_images = [[one] for one in image] if image is not None else images
    for i, own in zip(id, row_images, strict=True):
        assert [pixel_of(picture) for picture in own] == [(8 * i, 40 * shade, 0) for shade in range(len(own))]
    return [0.0 if i % 2 == 0 else float(index % GROUP) for index, i in enumerate(id)]


def pixel_of(picture) -> tuple:
    return picture.convert("RGB").getpixel((0, 0))


def make_trainer(tmp_path, model_dir, dataset, **overrides):
    settings = {
        "per_device_train_batch_size": 8,
        "num_generations": GROUP,
        "max_steps": 3,
        "max_completion_length": 6,
        "learning_rate": 1e-2,
        "soft_overlong_punishment": False,
        **overrides,
    }
    config = DAPOConfig(**tiny_training_settings(tmp_path, **settings))
    return DAPOTrainer(model_dir, reward_funcs=images_match_ids, args=config, train_dataset=dataset)


def record_batches(trainer):
    batches = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(generate(inputs)) or batches[-1]
    return batches


def check_pixels_belong_to_their_rows(trainer, batch, multi: bool):
    """Each row's slice of the flattened `pixel_values` is the processed form of that row's own images."""
    processor = build_processor()
    texts = trainer.processing_class.batch_decode(batch["prompt_ids"], skip_special_tokens=True)
    ids = [int(re.search(r"Image (\d+):", text).group(1)) for text in texts]
    assert all(i % 2 == 1 for i in ids)  # only informative groups
    counts = [1 + i % 2 if multi else 1 for i in ids]
    assert batch["num_images"] == counts
    for i, pixels in zip(ids, torch.split(batch["pixel_values"], counts), strict=True):
        own = [image_of(i, shade) for shade in range(len(pixels))]
        expected = processor.image_processor(images=own, return_tensors="pt")["pixel_values"]
        assert torch.allclose(pixels, expected.to(pixels.dtype))


@pytest.mark.slow
@pytest.mark.parametrize("multi", [False, True], ids=["image", "images"])
def test_images_travel_with_their_rows_across_rounds_and_carried_groups(tmp_path, vlm_dir, multi):
    trainer = make_trainer(tmp_path, vlm_dir, image_dataset(multi=multi))
    batches = record_batches(trainer)
    trainer.train()
    history = trainer.state.log_history
    assert sum(e.get("dynamic_sampling/generation_rounds", 0) for e in history) > len(batches)
    assert sum(e.get("dynamic_sampling/carried_groups", 0) for e in history) > 0
    for batch in batches:
        check_pixels_belong_to_their_rows(trainer, batch, multi)


@pytest.mark.slow
def test_carried_images_survive_a_checkpoint_and_resume(tmp_path, vlm_dir):
    dataset = image_dataset()
    uninterrupted = make_trainer(tmp_path / "full", vlm_dir, dataset)
    full_batches = record_batches(uninterrupted)
    uninterrupted.train()
    interrupted = make_trainer(tmp_path / "first", vlm_dir, dataset, max_steps=1, save_strategy="steps", save_steps=1)
    interrupted.train()
    checkpoint = tmp_path / "first" / "out" / "checkpoint-1"
    assert (checkpoint / "dynamic_sampling_carry_0.pt").exists()
    resumed = make_trainer(tmp_path / "first", vlm_dir, dataset)
    resumed_batches = record_batches(resumed)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    # The carried groups restored from the checkpoint (images included) come first in the next batch, as in the run
    # that was never interrupted; the batches hold the same prompts.
    carried = [e["dynamic_sampling/carried_groups"] for e in resumed.state.log_history if "loss" in e and e["step"] > 1]
    carried_rows = int(carried[0]) * GROUP
    assert carried_rows > 0
    for name in ("prompt_ids", "completion_ids", "pixel_values"):
        assert torch.equal(full_batches[1][name][:carried_rows], resumed_batches[0][name][:carried_rows]), name
    for full, again in zip(full_batches[1:], resumed_batches, strict=True):
        assert torch.equal(full["prompt_ids"], again["prompt_ids"])


def test_images_round_trip_through_plain_tensors():
    rows = {"inputs": [{"image": image_of(3), "images": [image_of(5, 1), image_of(5, 2)], "id": 3}], "n": (1, 2)}
    plain = images_as_tensors(rows)
    buffer = __import__("io").BytesIO()
    torch.save(plain, buffer)
    buffer.seek(0)
    restored = images_from_tensors(torch.load(buffer, weights_only=True))
    assert restored["n"] == (1, 2) and restored["inputs"][0]["id"] == 3
    assert pixel_of(restored["inputs"][0]["image"]) == (24, 0, 0)
    assert [pixel_of(p) for p in restored["inputs"][0]["images"]] == [(40, 40, 0), (40, 80, 0)]
