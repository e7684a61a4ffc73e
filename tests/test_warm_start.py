"""Supervised warm-start batches: the loss falls on the answer and EOS only."""

from trl_ext.tasks import supervised_batches
from trl_ext.tiny import build_char_tokenizer


def test_batches_mask_the_prompt_and_padding_and_keep_the_answer():
    tokenizer = build_char_tokenizer()
    batches = supervised_batches(tokenizer, ["1+1=", "10+10="], ["2", "20"], batch_size=2, seed=0)
    input_ids, attention_mask, labels = next(batches)
    assert input_ids.shape == attention_mask.shape == labels.shape == (2, 9)  # "10+10=" + "20" + EOS
    for row in range(2):
        length = int(attention_mask[row].sum())
        text = tokenizer.decode(input_ids[row, :length])
        prompt = "1+1=" if text.startswith("1+1=") else "10+10="
        answer_ids = labels[row][labels[row] != -100].tolist()
        assert answer_ids[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(answer_ids[:-1]) == {"1+1=": "2", "10+10=": "20"}[prompt]
        assert (labels[row, : len(prompt)] == -100).all() and (labels[row, length:] == -100).all()
        assert (input_ids[row, length:] == tokenizer.pad_token_id).all()


def test_batches_are_reproducible_from_the_seed():
    tokenizer = build_char_tokenizer()
    problems = [f"{i}+{i}=" for i in range(20)], [str(2 * i) for i in range(20)]
    first = next(supervised_batches(tokenizer, *problems, batch_size=4, seed=3))[0]
    again = next(supervised_batches(tokenizer, *problems, batch_size=4, seed=3))[0]
    assert first.equal(again)


def test_warm_start_teaches_a_tiny_model_a_tool_call():
    import torch

    from trl_ext.tasks import warm_start
    from trl_ext.tiny import build_tiny_causal_lm, build_tool_calling_tokenizer

    tokenizer = build_tool_calling_tokenizer()
    tools = [{"type": "function", "function": {"name": "weather", "description": "Weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Paris?"}], tools=tools, tokenize=False, add_generation_prompt=True
    )
    assert "Tools: weather" in prompt and '"parameters"' not in prompt  # the preamble names the tools only
    answer = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    torch.manual_seed(0)
    model = warm_start(build_tiny_causal_lm(tokenizer), tokenizer, [prompt] * 8, [answer] * 8, steps=60,
                       learning_rate=1e-2)
    model.eval()
    prompt_ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        generated = model.generate(prompt_ids, max_new_tokens=len(answer) + 2, do_sample=False)
    assert tokenizer.decode(generated[0, prompt_ids.size(1):], skip_special_tokens=True) == answer
