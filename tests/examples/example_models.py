"""Tiny local models for the example-script scenarios: a text model that plays tools, built offline in seconds.

The tool-playing model uses the character tokenizer with TRL's Qwen2.5 chat template (tool preamble cut down to the
tools' names, so prompts stay short) and Qwen2.5's response schema, so TRL parses its `<tool_call>` blocks into tool
calls. A short supervised warm start on (prompt, answer) pairs teaches it the call format; a prompt given several
answers (calls with different arguments) is answered with any of them, which makes groups of completions differ.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import trl
from trl.chat_template_utils import add_response_schema

from trl_ext.tasks import supervised_batches
from trl_ext.tiny import build_char_tokenizer, build_tiny_causal_lm

# Only the tools' names, on one line: each character is a token, and Qwen2.5's preamble (whole JSON schemas) would
# make every prompt hundreds of tokens long.
TOOL_NAMES_ONLY = (
    "{%- if tools %}{{- '<|im_start|>system\\nTools:' }}{%- for tool in tools %}{{- ' ' + tool.function.name }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}\n"
)


def tool_chat_tokenizer(response_schema: bool = True):
    """With `response_schema=False` TRL keeps completions as plain text (the schema would also move a leading
    `<think>` block out of the content)."""
    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen2_5.jinja")) as file:
        qwen_template = file.read()
    tokenizer.chat_template = qwen_template
    if response_schema:
        tokenizer = add_response_schema(tokenizer)  # recognised from the full template
    messages_part = qwen_template[qwen_template.index("{%- for message in messages %}") :]
    tokenizer.chat_template = TOOL_NAMES_ONLY + messages_part
    return tokenizer


def tool_call_text(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def save_tool_player(
    directory: Path, examples: list[tuple[list[dict], list[dict], str]], steps: int = 250, response_schema: bool = True
) -> str:
    """Warm-start the tiny model on `examples`, each `(messages, tool schemas, answer text)`, and save it."""
    tokenizer = tool_chat_tokenizer(response_schema)
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
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    batches = supervised_batches(tokenizer, prompts, answers, batch_size=8, seed=0)
    for _ in range(steps):
        input_ids, attention_mask, labels = next(batches)
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.set_num_threads(threads)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)
