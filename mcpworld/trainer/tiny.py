"""Tiny causal LMs and tokenizers built in-process: for tests and the CPU recipe (nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<unk>", "<eos>"]


def tiny_tokenizer(corpus: Iterable[str], actions: Iterable[str] = (),
                   vocab_size: int = 256) -> PreTrainedTokenizerFast:
    """A word-level tokenizer trained on `corpus`; each string in `actions` becomes one token, so a model can
    emit a whole tool call in one step."""
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator(list(corpus), trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=SPECIALS))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    fast.add_tokens(list(actions))
    return fast


def tiny_model(vocab_size: int, hidden: int = 32, layers: int = 2, seed: int = 0) -> LlamaForCausalLM:
    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=False)
    return LlamaForCausalLM(config)


# Chat templates as the model families ship them (ChatML, Meta Llama 3 Instruct, Qwen 2.5 Instruct), and the
# special tokens each needs: a tokenizer built here renders conversations exactly as those models' do.
CHATML_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
                   "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                   "{% endif %}")
LLAMA3_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                   "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
                   "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
                   "{{ content }}{% endfor %}{% if add_generation_prompt %}"
                   "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
QWEN25_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n\
You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\
\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or \
(message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
# style -> (template, special tokens, bos, eos)
CHAT_STYLES: dict[str, tuple[str, list[str], str | None, str]] = {
    "chatml": (CHATML_TEMPLATE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, "<|im_end|>"),
    "llama3": (LLAMA3_TEMPLATE, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                 "<|eot_id|>"], "<|begin_of_text|>", "<|eot_id|>"),
    "qwen2.5": (QWEN25_TEMPLATE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, "<|im_end|>"),
}
# The pre-tokenizer split of Llama 3 and Qwen 2: newlines never merge into the text after them, so a turn's
# boundary tokenizes the same alone as inside the whole conversation.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def chat_tokenizer(style: str, corpus: Iterable[str], vocab_size: int = 600) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `corpus` with the chat template and special tokens of `style`
    (one of CHAT_STYLES): lossless, so rendered conversations round-trip, like the real models' tokenizers."""
    from tokenizers import Regex, decoders

    template, specials, bos, eos = CHAT_STYLES[style]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(list(corpus), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=specials[0])
    fast.add_special_tokens({"additional_special_tokens": [s for s in specials if s not in (bos, eos, specials[0])]})
    fast.chat_template = template
    return fast


def save_tiny_chat_model(path: str, corpus: Iterable[str], style: str = "qwen2.5", hidden: int = 256,
                         layers: int = 2, max_len: int = 4096, seed: int = 0) -> str:
    """A random Llama-architecture model with a `chat_tokenizer`, saved as a Hugging Face directory that vLLM
    and OpenRLHF load like any model (head size 64 for the GPU kernels): the GPU check's model, built offline."""
    import torch
    from transformers import GenerationConfig

    tokenizer = chat_tokenizer(style, corpus, vocab_size=2000)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=hidden // 64, num_key_value_heads=hidden // 64,
                         max_position_embeddings=max_len, tie_word_embeddings=False,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


GGUF_LAYER_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                    "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                    "mlp.down_proj": "ffn_down"}
GGUF_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}


def save_tiny_gguf(path: str, corpus: Iterable[str], hidden: int = 64, seed: int = 0) -> str:
    """A random tiny Llama with a ChatML `chat_tokenizer`, written as a GGUF file (float32, BPE vocabulary and
    merges, chat template): what `train grpo --gguf` is tested on, where no GGUF model can be downloaded."""
    import json

    import gguf

    tokenizer = chat_tokenizer("chatml", corpus, vocab_size=300)
    model = tiny_model(len(tokenizer), hidden=hidden, seed=seed)
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    ids = {**spec["model"]["vocab"], **{t["content"]: t["id"] for t in spec["added_tokens"]}}
    tokens = [""] * len(tokenizer)
    for text, i in ids.items():
        tokens[i] = text
    specials = {t["id"] for t in spec["added_tokens"]}
    c = model.config
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(len(tokenizer))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if i in specials else 1 for i in range(len(tokenizer))])
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in spec["model"]["merges"]])
    writer.add_bos_token_id(tokenizer.convert_tokens_to_ids("<|im_start|>"))
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)
    for name, tensor in model.state_dict().items():
        if name not in GGUF_NAMES:
            _, _, layer, *rest = name.split(".")
        target = GGUF_NAMES.get(name) or f"blk.{layer}.{GGUF_LAYER_NAMES['.'.join(rest[:-1])]}.weight"
        writer.add_tensor(target, tensor.detach().float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
