"""Tiny local models for the example-script scenarios: a text model that plays tools, built offline in seconds.

The tool-playing model uses `trl_ext.tiny.build_tool_calling_tokenizer` (TRL's Qwen2.5 chat template, tool preamble
cut down to the tools' names, and Qwen2.5's response schema), so TRL parses its `<tool_call>` blocks into tool
calls. A short supervised warm start on (prompt, answer) pairs teaches it the call format; a prompt given several
answers (calls with different arguments) is answered with any of them, which makes groups of completions differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from trl_ext.tasks import warm_start
from trl_ext.tiny import build_tiny_causal_lm, build_tool_calling_tokenizer


def tool_call_text(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def save_tool_player(
    directory: Path, examples: list[tuple[list[dict], list[dict], str]], steps: int = 250, response_schema: bool = True
) -> str:
    """Warm-start the tiny model on `examples`, each `(messages, tool schemas, answer text)`, and save it."""
    tokenizer = build_tool_calling_tokenizer(response_schema)
    while len(examples) < 8:  # a batch draws 8 distinct examples
        examples = examples * 2
    prompts = [
        tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        for messages, tools, _ in examples
    ]
    answers = [answer for _, _, answer in examples]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module fixtures run before the tests' one-thread fixture; see tests/conftest.py
    torch.manual_seed(0)
    model = build_tiny_causal_lm(tokenizer, hidden_size=64, num_layers=2)
    model.config.max_position_embeddings = 1024
    warm_start(model, tokenizer, prompts, answers, steps=steps, learning_rate=5e-3)
    torch.set_num_threads(threads)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)
