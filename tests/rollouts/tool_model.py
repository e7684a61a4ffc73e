"""A tiny model taught, in a few supervised steps, to answer with a Hermes `<tool_call>`, for tool-calling tests.

Its tokenizer is `trl_ext.tiny.build_tool_calling_tokenizer`: TRL's Qwen2.5 template with the tool preamble cut
down to the tools' names, and Qwen2.5's response schema, so TRL parses the calls.
"""

from __future__ import annotations

import torch

from trl_ext.tasks import warm_start
from trl_ext.tiny import build_tiny_causal_lm, build_tool_calling_tokenizer


def call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def save_tool_calling_model(directory, conversations, tools, answers, steps: int = 150) -> str:
    """Teach the tiny model `answers[i]` after the chat-rendered `conversations[i]` (with `tools`), save it."""
    tokenizer = build_tool_calling_tokenizer()
    prompts = [
        tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        for messages in conversations
    ]
    torch.manual_seed(0)
    model = warm_start(build_tiny_causal_lm(tokenizer), tokenizer, prompts, answers, steps=steps, learning_rate=1e-2)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)
