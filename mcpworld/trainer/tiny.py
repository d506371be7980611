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
