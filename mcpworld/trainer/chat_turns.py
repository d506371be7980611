"""The text between two assistant turns, as the model's own chat template writes it (token-exact multi-turn).

A multi-turn trainer feeds tool results back as text appended to the token stream. At inference the same
conversation is rendered by the chat template, so the appended text must be exactly what the template puts
between the assistant's reply and the next generation prompt: `<|im_end|>\\n<|im_start|>user\\n...` for ChatML
and Qwen, `<|eot_id|><|start_header_id|>user<|end_header_id|>\\n\\n...` for Llama 3. The reply's end-of-turn
token is part of that text, and an engine (vLLM) usually returns it already, as the reply's last token: it
must then not be written twice. `TurnTemplate` is read off the tokenizer's template once, by rendering a
conversation with placeholder texts and cutting at them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ASSISTANT_MARK = "MCPWORLDREPLYMARK"
RESULTS_MARK = "MCPWORLDRESULTSMARK"
CHATML_STOP = "<|im_end|>"
CHATML_BETWEEN = "\n<|im_start|>user\n" + RESULTS_MARK + "<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class TurnTemplate:
    """`stop` closes an assistant reply; `between` follows it, up to the next reply (RESULTS_MARK = the turn's
    user content). `stop_ids` are the token ids that count as the reply having closed itself."""

    stop: str
    between: str
    stop_ids: frozenset[int] = frozenset()

    def feedback(self, results: str, last_token: int | None) -> str:
        """What to append after a reply whose last generated token is `last_token` (None: unknown)."""
        closed = last_token is not None and last_token in self.stop_ids
        return ("" if closed else self.stop) + self.between.replace(RESULTS_MARK, results)


CHATML = TurnTemplate(CHATML_STOP, CHATML_BETWEEN)


def turn_template(tokenizer: Any) -> TurnTemplate:
    """The tokenizer's `TurnTemplate`; ChatML for a tokenizer without a chat template (said in the docs).

    Raises ValueError for a template that does not write a user turn after an assistant one as a plain
    continuation (it then cannot be trained token-exactly by appending text).
    """
    if not getattr(tokenizer, "chat_template", None):
        return TurnTemplate(CHATML_STOP, CHATML_BETWEEN, _ids(tokenizer, CHATML_STOP))
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                {"role": "assistant", "content": ASSISTANT_MARK}, {"role": "user", "content": RESULTS_MARK}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prefix = tokenizer.apply_chat_template(messages[:2], add_generation_prompt=True, tokenize=False)
    if ASSISTANT_MARK not in text or RESULTS_MARK not in text or not text.startswith(prefix):
        raise ValueError("this chat template does not render an assistant turn followed by a user turn as a "
                         "continuation of the prompt; multi-turn training needs one that does (ChatML, Llama 3, "
                         "Qwen 2.5 do)")
    tail = text[text.index(ASSISTANT_MARK) + len(ASSISTANT_MARK):]
    stop = _leading_special(tokenizer, tail)
    return TurnTemplate(stop, tail[len(stop):], _ids(tokenizer, stop))


def _leading_special(tokenizer: Any, text: str) -> str:
    """The special token `text` starts with (the end-of-turn marker), or "" when it starts with plain text."""
    added = getattr(tokenizer, "added_tokens_decoder", {}).values()
    specials = sorted({str(t) for t in getattr(tokenizer, "all_special_tokens", [])}
                      | {str(getattr(t, "content", t)) for t in added if getattr(t, "special", False)},
                      key=len, reverse=True)
    return next((s for s in specials if s and text.startswith(s)), "")


def _ids(tokenizer: Any, stop: str) -> frozenset[int]:
    if not stop:
        return frozenset()
    ids = tokenizer.convert_tokens_to_ids([stop])
    known = {i for i in ids if i is not None and i != getattr(tokenizer, "unk_token_id", None)}
    eos = getattr(tokenizer, "eos_token", None)
    if eos == stop and tokenizer.eos_token_id is not None:
        known.add(tokenizer.eos_token_id)
    return frozenset(known)
