"""Tiny, randomly initialised causal LMs with a character-level tokenizer, built locally.

They make every test and the offline default recipe runnable without the Hugging Face Hub: nothing here
downloads anything. The tokenizer maps each printable ASCII character to one token, so arithmetic answers
are short and easy to verify.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN = "<pad>", "<s>", "</s>"

# A minimal ChatML-style template so conversational datasets work with the tiny model too.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_char_tokenizer() -> PreTrainedTokenizerFast:
    """A tokenizer with one token per printable ASCII character plus `<pad>`, `<s>` and `</s>`."""
    alphabet = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN] + sorted(set(string.printable) - set("\x0b\x0c\r"))
    vocab = {token: index for index, token in enumerate(alphabet)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=" "))
    backend.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD_TOKEN, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer



# Only the tools' names, on one line: with one token per character, Qwen2.5's tool preamble (every tool's whole JSON
# schema) would make each prompt hundreds of tokens long.
_TOOL_NAMES_HEADER = (
    "{%- if tools %}{{- '<|im_start|>system\\nTools:' }}{%- for tool in tools %}{{- ' ' + tool.function.name }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}\n"
)


def build_tool_calling_tokenizer(response_schema: bool = True) -> PreTrainedTokenizerFast:
    """The character tokenizer with TRL's Qwen2.5 chat template, its tool preamble cut down to the tools' names.

    Assistant turns, `<tool_call>` blocks and tool messages render as Qwen2.5 renders them, and with
    `response_schema=True` the tokenizer carries Qwen2.5's response schema, so TRL parses completions into tool calls
    (`GRPOTrainer(tools=...)`, `environment_factory`). With `False`, TRL keeps completions as plain text.
    """
    import trl
    from trl.chat_template_utils import add_response_schema

    tokenizer = build_char_tokenizer()
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen2_5.jinja")) as file:
        template = file.read()
    tokenizer.chat_template = template
    if response_schema:
        tokenizer = add_response_schema(tokenizer)  # TRL recognises the schema from the full template
    tokenizer.chat_template = _TOOL_NAMES_HEADER + template[template.index("{%- for message in messages %}") :]
    return tokenizer


# The Llama architecture is used because `AutoTokenizer` then keeps the tokenizer exactly as saved; with
# `model_type="qwen2"` it would rebuild it as a byte-level BPE tokenizer and drop the character vocabulary.
def build_tiny_causal_lm(
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 2,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A randomly initialised Llama-architecture causal LM sized for `tokenizer`."""
    import torch

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_tiny_model(directory: str | Path, **model_kwargs) -> Path:
    """Build the tiny model and its tokenizer and save both to `directory`; returns the directory."""
    directory = Path(directory)
    tokenizer = build_char_tokenizer()
    model = build_tiny_causal_lm(tokenizer, **model_kwargs)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
