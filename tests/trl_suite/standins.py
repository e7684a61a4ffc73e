"""Local stand-ins for the Hub fixtures that TRL's GRPO tests load by name.

TRL's tests name tiny checkpoints (`trl-internal-testing/tiny-Qwen2ForCausalLM-2.5`, ...) and the `zen` prompt
dataset by their Hub ids. Both `transformers` and `datasets` resolve an id to a local directory when a directory
of that relative path exists, so `build_standins(root)` writes one directory per id under `root`, and the suite
runs with `root` as its working directory. Nothing is downloaded.

- Models: randomly initialised, 16 wide and 2 layers deep, of the architecture the id names, all with one small
  byte-level BPE tokenizer saved as a `Qwen2Tokenizer`, whose ids agree with Qwen's 151,936-token vocabulary where
  the tests write ids by hand, and the Qwen2.5 or Qwen3 chat template that TRL ships.
- Datasets: `zen` with the configs `standard_prompt_only` and `conversational_prompt_only` (17 train and 2 test
  rows), built from the aphorisms that Python ships in its `this` module. The standard prompts are the first words
  of each aphorism, cut where TRL's `zen` cuts them, since one test checks the prompts of the first two batches.
"""

from __future__ import annotations

import codecs
import functools
import json
import shutil
from pathlib import Path

# Hub ids of the causal LMs the suite loads, with the `model_type` and the config overrides that keep them tiny.
# The MoE and hybrid architectures need their expert and layer-pattern fields set small too.
_COMMON = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
CAUSAL_LM_STANDINS: dict[str, tuple[str, dict]] = {
    "trl-internal-testing/tiny-Qwen2ForCausalLM-2.5": ("qwen2", {}),
    "trl-internal-testing/tiny-Qwen3ForCausalLM": ("qwen3", {"head_dim": 4}),
    "trl-internal-testing/tiny-LlamaForCausalLM-3.2": ("llama", {}),
    "trl-internal-testing/tiny-MistralForCausalLM-0.2": ("mistral", {"head_dim": 4}),
    "trl-internal-testing/tiny-Gemma2ForCausalLM": ("gemma2", {"head_dim": 4}),
    "trl-internal-testing/tiny-Cohere2ForCausalLM": ("cohere2", {}),
    "trl-internal-testing/tiny-Qwen3MoeForCausalLM": (
        "qwen3_moe",
        {"head_dim": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16},
    ),
    "trl-internal-testing/tiny-GptOssForCausalLM": (
        "gpt_oss",
        {"head_dim": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "layer_types": None},
    ),
    "trl-internal-testing/tiny-Glm4MoeForCausalLM": (
        "glm4_moe",
        {"head_dim": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
         "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1},
    ),
}
SEQUENCE_CLASSIFICATION_STANDINS: dict[str, tuple[str, dict]] = {
    "trl-internal-testing/tiny-Qwen2ForSequenceClassification-2.5": ("qwen2", {}),
    "trl-internal-testing/tiny-Qwen3ForSequenceClassification": ("qwen3", {"head_dim": 4}),
    "trl-internal-testing/tiny-LlamaForSequenceClassification-3.2": ("llama", {}),
}
ZEN_ID = "trl-internal-testing/zen"

# The stand-in tokenizer reproduces the ids of the real Qwen2.5/Qwen3 vocabulary wherever TRL's tests write token
# ids by hand (faked generations in the tool, environment and truncation tests): the 256 byte tokens in byte-level
# BPE order, the special tokens, and the multi-character tokens those generations use. Every other token (a
# byte-level BPE trained on the aphorisms below) gets an id from 100,000 on, clear of the fixed ones.
QWEN_VOCAB_SIZE = 151936
QWEN_SPECIAL_TOKENS = {  # id: (token, special)
    151643: ("<|endoftext|>", True),
    151644: ("<|im_start|>", True),
    151645: ("<|im_end|>", True),
    151657: ("<tool_call>", False),
    151658: ("</tool_call>", False),
    151665: ("<tool_response>", False),
    151666: ("</tool_response>", False),
    151667: ("<think>", False),
    151668: ("</think>", False),
}
QWEN_TEXT_TOKENS = {
    25: ":", 27: "<", 29: ">", 293: " b", 314: " {", 330: ' "', 397: ">\n", 411: "out", 450: "dec", 497: '",',
    522: "</", 606: "name", 788: '":', 894: " any", 927: "sh", 944: "'t", 1318: "text", 1414: " know", 1513: " don",
    2765: " won", 4913: '{"', 5212: ' {"', 5392: " tool", 6023: "hi", 6659: "call", 7692: "async", 9520: "step",
    11248: "}}\n", 13477: "rement", 14172: "tool", 16252: " increment", 16370: "arguments", 17453: "Done",
    22785: "_tool", 35744: "increment", 64648: "multiply", 93054: "_multiply", 95642: '"}}\n',
}
_FIRST_FREE_ID = 100_000


@functools.cache
def _byte_level_characters() -> dict[int, str]:
    """The character standing for each byte in byte-level BPE, in vocabulary order (the dict's order is ids 0-255).

    Printable Latin-1 bytes stand for themselves and come first; the other bytes map to code points from 256 on.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [byte for byte in range(256) if byte not in printable]
    return {byte: chr(byte) for byte in printable} | {byte: chr(256 + index) for index, byte in enumerate(others)}


def _byte_level(text: str) -> str:
    characters = _byte_level_characters()
    return "".join(characters[byte] for byte in text.encode())


# How many leading words of each aphorism TRL's `zen` prompts keep (the first twelve are checked by a test).
_ZEN_PROMPT_WORDS = [4, 2, 3, 1, 4, 3, 1, 4, 3, 3, 2, 6, 3, 4, 2, 5, 3, 4, 2]
_ZEN_TRAIN_ROWS = 17


def zen_aphorisms() -> list[str]:
    """The 19 aphorisms of `import this`, decoded from the module's ROT13 text without printing it."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the first import prints the text
        import this

    text = codecs.decode(this.s, "rot13")
    return [line.strip() for line in text.splitlines()[2:] if line.strip()]


def build_tokenizer(chat_template: str):
    """A byte-level BPE `Qwen2Tokenizer` whose ids agree with Qwen's where the tests hard-code them."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    vocab = {char: index for index, char in enumerate(_byte_level_characters().values())}
    vocab.update({_byte_level(text): index for index, text in QWEN_TEXT_TOKENS.items()})
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = zen_aphorisms() + ["user assistant system What is 3 times 4? Done! I don't know any tool."]
    backend.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    trained = json.loads(backend.to_str())["model"]
    free_ids = iter(range(_FIRST_FREE_ID, QWEN_VOCAB_SIZE))
    for token in sorted(trained["vocab"], key=trained["vocab"].get):
        if token not in vocab:
            vocab[token] = next(free_ids)
    vocab.update({token: index for index, (token, _) in QWEN_SPECIAL_TOKENS.items()})
    # A random model samples ids all over its embedding: every id must decode to some text, or completions would
    # decode to the same empty string and every reward model would score them alike.
    taken = set(vocab.values())
    for index in range(QWEN_VOCAB_SIZE):
        if index not in taken:
            vocab[_byte_level(f" w{index}")] = index
    merges = [tuple(merge) if isinstance(merge, list) else tuple(merge.split(" ")) for merge in trained["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.add_tokens(
        [AddedToken(token, special=special, normalized=False) for token, special in QWEN_SPECIAL_TOKENS.values()]
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def _tiny_config(model_type: str, overrides: dict, tokenizer):
    from transformers import AutoConfig

    settings = dict(_COMMON, vocab_size=QWEN_VOCAB_SIZE, max_position_embeddings=512, tie_word_embeddings=True)
    settings.update({key: value for key, value in overrides.items() if value is not None})
    config = AutoConfig.for_model(model_type, **settings)
    config.pad_token_id = tokenizer.pad_token_id
    config.eos_token_id = tokenizer.eos_token_id
    config.bos_token_id = None
    return config


def _save_model(directory: Path, model, tokenizer) -> None:
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    model.save_pretrained(directory)
    # Saving a 151,936-token tokenizer takes seconds: it is saved once and its files copied.
    for file in Path(tokenizer.name_or_path).iterdir():
        shutil.copy(file, directory / file.name)


def build_models(root: Path) -> list[str]:
    """Write every stand-in checkpoint under `root/<hub id>`; returns the ids that this transformers cannot build.

    Qwen3-family stand-ins carry TRL's copy of the Qwen3 chat template, the others the Qwen2.5 one: TRL recognises
    both when it sets up tool-call parsing.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template, qwen3_chat_template

    tokenizers = {}
    for name, template in (("qwen2_5", qwen2_5_chat_template), ("qwen3", qwen3_chat_template)):
        tokenizer_dir = root / "tokenizers" / name
        build_tokenizer(template).save_pretrained(tokenizer_dir)
        tokenizers[template] = AutoTokenizer.from_pretrained(tokenizer_dir)

    unbuildable = []
    for table, auto_class, extra in (
        (CAUSAL_LM_STANDINS, AutoModelForCausalLM, {}),
        (SEQUENCE_CLASSIFICATION_STANDINS, AutoModelForSequenceClassification, {"num_labels": 1}),
    ):
        for model_id, (model_type, overrides) in table.items():
            tokenizer = tokenizers[qwen3_chat_template if "Qwen3" in model_id else qwen2_5_chat_template]
            try:
                config = _tiny_config(model_type, {**overrides, **extra}, tokenizer)
                torch.manual_seed(0)
                model = auto_class.from_config(config)
            except (ValueError, TypeError, KeyError, AttributeError) as error:  # architecture absent or changed
                unbuildable.append(f"{model_id}: {error}")
                continue
            _save_model(root / model_id, model, tokenizer)
    return unbuildable


def build_zen(root: Path) -> None:
    """Write the `zen` stand-in: one parquet file per config and split, declared in the dataset card."""
    from datasets import Dataset

    aphorisms = zen_aphorisms()
    prefixes = [" ".join(line.split()[:words]) for line, words in zip(aphorisms, _ZEN_PROMPT_WORDS)]
    questions = [f"How does this continue: {prefix}?" for prefix in prefixes]
    columns = {
        "standard_prompt_only": {"prompt": prefixes},
        "conversational_prompt_only": {"prompt": [[{"role": "user", "content": q}] for q in questions]},
    }
    directory = root / ZEN_ID
    card = ["---", "configs:"]
    for config_name, data in columns.items():
        card += [f"- config_name: {config_name}", "  data_files:"]
        for split, rows in (("train", slice(0, _ZEN_TRAIN_ROWS)), ("test", slice(_ZEN_TRAIN_ROWS, None))):
            path = directory / config_name / f"{split}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            Dataset.from_dict({key: values[rows] for key, values in data.items()}).to_parquet(path)
            card += [f"  - split: {split}", f"    path: {config_name}/{split}.parquet"]
    card.append("---")
    (directory / "README.md").write_text("\n".join(card) + "\n")


def build_standins(root: str | Path) -> list[str]:
    """Build every stand-in under `root`; returns the model ids left out, each with the reason."""
    root = Path(root)
    unbuildable = build_models(root)
    build_zen(root)
    return unbuildable
