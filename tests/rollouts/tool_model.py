"""A tiny model taught, in a few supervised steps, to answer with a Hermes `<tool_call>`, for tool-calling tests.

The chat template is TRL's Qwen2.5 template with its tool preamble shortened to one line naming the tools (the
preamble is some 800 characters, each one token for the character tokenizer); the assistant turns, tool calls and
tool messages are rendered as Qwen2.5 renders them, so TRL parses the calls with Qwen2.5's response schema.
"""

from __future__ import annotations

import os

import torch
import trl
from trl.chat_template_utils import add_response_schema

from trl_ext.tasks import supervised_batches
from trl_ext.tiny import build_char_tokenizer, build_tiny_causal_lm

SHORT_TOOL_HEADER = (
    "{%- if tools %}{{- '<|im_start|>system\\nTools:' }}{%- for tool in tools %}{{- ' ' + tool.function.name }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}\n"
)


def tool_calling_tokenizer():
    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen2_5.jinja")) as file:
        template = file.read()
    tokenizer.chat_template = template
    tokenizer = add_response_schema(tokenizer)  # chosen from the template: Qwen2.5's
    tokenizer.chat_template = SHORT_TOOL_HEADER + template[template.index("{%- for message in messages %}") :]
    return tokenizer


def call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def save_tool_calling_model(directory, conversations, tools, answers, steps: int = 150) -> str:
    """Teach the tiny model `answers[i]` after the chat-rendered `conversations[i]` (with `tools`), save it."""
    tokenizer = tool_calling_tokenizer()
    prompts = [
        tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        for messages in conversations
    ]
    torch.manual_seed(0)
    model = build_tiny_causal_lm(tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = supervised_batches(tokenizer, prompts, answers, batch_size=8, seed=0)
    for _ in range(steps):
        input_ids, attention_mask, labels = next(batches)
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)
