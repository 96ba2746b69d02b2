"""Turning what the user wrote into prompt tokens: raw text, or chat messages through the template."""

from __future__ import annotations

from engine.backends.llama_cpp import LlamaModel
from engine.chat_template import ChatMessage, render_chat


def raw_prompt_tokens(model: LlamaModel, text: str) -> list[int]:
    """Plain text as the model's tokenizer reads it (BOS added if the model wants one)."""
    return model.tokenize(text, add_special=True, parse_special=True)


def chat_prompt_tokens(model: LlamaModel, messages: list[ChatMessage]) -> list[int]:
    """Messages rendered with the model's own chat template, ready for the assistant's turn."""
    text = render_chat(
        model.chat_template(),
        messages,
        bos_token=model.token_text(model.bos),
        eos_token=model.token_text(model.eos),
    )
    return text_prompt_tokens(model, text)


def text_prompt_tokens(model: LlamaModel, text: str) -> list[int]:
    """Tokens of an already rendered chat prompt (special tokens parsed, BOS added once)."""
    tokens = model.tokenize(text, add_special=True, parse_special=True)
    if len(tokens) >= 2 and tokens[0] == tokens[1] == model.bos:
        tokens = tokens[1:]  # the template wrote BOS itself and the tokenizer added another
    return tokens
