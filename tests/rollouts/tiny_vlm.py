"""A tiny, randomly initialised Gemma 3 vision-language model with a character-level processor, built offline."""

from __future__ import annotations

import os
import string
from pathlib import Path

import torch
import trl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Gemma3ImageProcessor,
    Gemma3Processor,
    PreTrainedTokenizerFast,
)

SPECIAL_TOKENS = [
    "<pad>",
    "<bos>",
    "<eos>",
    "<start_of_image>",
    "<image_soft_token>",
    "<end_of_image>",
    "<start_of_turn>",
    "<end_of_turn>",
]
IMAGE_SIZE = 28  # two 14-pixel patches a side: 4 image tokens per image
IMAGE_TOKENS = 4


def build_processor() -> Gemma3Processor:
    alphabet = SPECIAL_TOKENS + sorted(set(string.printable) - set("\x0b\x0c\r"))
    backend = Tokenizer(models.WordLevel(vocab={token: i for i, token in enumerate(alphabet)}, unk_token=" "))
    backend.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(SPECIAL_TOKENS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        extra_special_tokens={
            "boi_token": "<start_of_image>",
            "image_token": "<image_soft_token>",
            "eoi_token": "<end_of_image>",
        },
    )
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "gemma3.jinja")) as file:
        template = file.read()
    image_processor = Gemma3ImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, do_pan_and_scan=False)
    return Gemma3Processor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=template, image_seq_length=IMAGE_TOKENS
    )


def save_tiny_vlm(directory: str | Path) -> str:
    processor = build_processor()
    config = Gemma3Config(
        text_config={
            "vocab_size": len(processor.tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "max_position_embeddings": 512,
            "sliding_window": 64,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": IMAGE_SIZE,
            "patch_size": 14,
        },
        mm_tokens_per_image=IMAGE_TOKENS,
        boi_token_index=SPECIAL_TOKENS.index("<start_of_image>"),
        image_token_index=SPECIAL_TOKENS.index("<image_soft_token>"),
        eoi_token_index=SPECIAL_TOKENS.index("<end_of_image>"),
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    Gemma3ForConditionalGeneration(config).save_pretrained(directory)
    processor.save_pretrained(directory)
    return str(directory)
