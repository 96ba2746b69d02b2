"""The fixture models with real tokenizers and chat templates (tests/fixtures/real_families.py).

Each small model loads in llama-cpp-python, its tokenizer gives back the text it read, its chat
template (from its GGUF) renders a conversation through Hearth's own renderer, and every special
token the rendering holds is read as one control token; the family's end-of-turn token is its EOS
and EOT. The scripted model answers, greedily, exactly its script. The models are built once into
the persistent test-model cache (tests/helpers/real_models.py).
"""

from __future__ import annotations

import importlib.util
import os

import llama_cpp
import numpy as np
import pytest

from engine.backends.llama_cpp import LlamaModel, init_backend
from engine.templates.chat_template import ChatMessage, render_chat
from tests.conftest import ROOT
from tests.fixtures import llama_sdist
from tests.helpers.real_models import END_OF_TURN, REAL_SCRIPT, REAL_TINY, SCRIPT, TEMPLATES, real_model

# The control tokens each family's template writes for a system-less conversation.
TEMPLATE_CONTROLS = {
    "qwen35": ("<|im_start|>", "<|im_end|>"),
    "lfm2": ("<|startoftext|>", "<|im_start|>", "<|im_end|>"),
    "granite": ("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"),
    "llama": ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
}
SAMPLE = "Hello world! Ünïcode, 数字 12345, tabs\tand\nnew lines; <not a token> </think> <|im_end|>"
CONVERSATION = [ChatMessage("user", "What is 2 + 2?"), ChatMessage("assistant", "4."),
                ChatMessage("user", "And 3 + 3?")]


@pytest.fixture(scope="module", params=sorted(REAL_TINY))
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tiny(family):
    init_backend()
    llm = llama_cpp.Llama(model_path=str(real_model(REAL_TINY[family])), n_ctx=512, verbose=False)
    yield llm
    llm.close()


def test_a_small_model_loads_reads_text_back_and_decodes(family, tiny):
    tokens = tiny.tokenize(SAMPLE.encode(), add_bos=False, special=False)
    assert tiny.detokenize(tokens).decode() == SAMPLE
    out = tiny.create_completion("The weather today", max_tokens=6, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1
    end = tiny.tokenize(END_OF_TURN[family].encode(), add_bos=False, special=True)
    assert len(end) == 1
    assert tiny.token_eos() == end[0] == int(tiny.metadata["tokenizer.ggml.eot_token_id"])


def test_the_template_renders_a_conversation_whose_special_tokens_are_single_control_tokens(family, tiny):
    template = tiny.metadata["tokenizer.chat_template"]
    assert template == llama_sdist.template(TEMPLATES[family])
    model = LlamaModel(real_model(REAL_TINY[family]))
    try:
        bos = model.token_text(model.bos) if model.adds_bos else ""
        rendered = render_chat(template, CONVERSATION, bos_token=bos, eos_token=model.token_text(model.eos)).text
        controls = model.control_tokens()
        tokens = model.tokenize(rendered, add_special=False, parse_special=True)
        for text in TEMPLATE_CONTROLS[family]:
            assert text in rendered
            assert text in controls, f"{text} is not a control token"
            assert model.tokenize(text, add_special=False, parse_special=True) == [controls[text]]
            assert tokens.count(controls[text]) == rendered.count(text)
        assert END_OF_TURN[family] in rendered
        if family == "qwen35":  # Qwen's reasoning markers are text in the output: user-defined, not control
            for text in ("<think>", "</think>"):
                (token,) = model.tokenize(text, add_special=False, parse_special=True)
                assert llama_cpp.llama_vocab_get_attr(model.vocab, token) & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
                assert model.piece(token) == text.encode()
    finally:
        model.close()


def _greedy_with_margins(llm, prompt: str, limit: int) -> tuple[list[int], list[float]]:
    llm.reset()
    llm.eval(llm.tokenize(prompt.encode(), add_bos=False, special=True))
    out, margins = [], []
    while len(out) < limit:
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        second, first = np.argsort(logits)[-2:]
        out.append(int(first))
        margins.append(float(logits[first] - logits[second]))
        if first == llm.token_eos():
            break
        llm.eval([int(first)])
    return out, margins


def test_the_scripted_model_answers_its_script_greedily_after_any_conversation():
    init_backend()
    llm = llama_cpp.Llama(model_path=str(real_model(REAL_SCRIPT)), n_ctx=512, verbose=False)
    try:
        template = llm.metadata["tokenizer.chat_template"]
        script = llm.tokenize(SCRIPT.encode(), add_bos=False, special=True)
        assert len(script) == len(set(script)) and script[-1] == llm.token_eos()
        short = render_chat(template, [ChatMessage("user", "hi")]).text
        assert short == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
        long = render_chat(template, [
            ChatMessage("system", "You answer briefly."),
            ChatMessage("user", "Tell me about the history of Paris, from the Romans to today, in detail."),
            ChatMessage("assistant", "Paris grew from Lutetia.", reasoning="The user wants history."),
            ChatMessage("user", "And what about Rome? " * 8),
            ChatMessage("assistant", SCRIPT.removesuffix("<|im_end|>")),
            ChatMessage("user", "Thanks!"),
        ]).text
        for prompt in (short, long):
            out, margins = _greedy_with_margins(llm, prompt, len(script) + 4)
            assert llm.detokenize(out, special=True).decode() == SCRIPT
            assert out == script
            assert min(margins) > 10, margins
    finally:
        llm.close()


# -- where the templates and vocabularies come from ------------------------------------------------


def test_sdist_members_are_asked_for_by_plain_relative_paths_only():
    for bad in ("/etc/passwd", "../secret", "vendor/../../x", "vendor//x", "a\\b", ""):
        with pytest.raises(ValueError):
            llama_sdist.sdist_member(bad)
    for bad in ("../x", "a/b", ".."):
        with pytest.raises(ValueError):
            llama_sdist.template(bad)


def _llama_build():
    spec = importlib.util.spec_from_file_location("llama_build_for_sdist", ROOT / "installers" / "llama_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_set_up_keeps_the_sdist_it_downloaded_and_uses_that_copy_next_time(tmp_path, monkeypatch):
    llama_build = _llama_build()
    downloads = []

    def fake_run(command, log, **kwargs):
        downloads.append(command)
        work = command[command.index("-d") + 1]
        with open(os.path.join(work, "llama_cpp_python-9.9.9.tar.gz"), "wb") as out:
            out.write(b"sdist bytes")

    monkeypatch.setattr(llama_build, "run", fake_run)
    cache, log = tmp_path / "cache", tmp_path / "log"
    first_work = tmp_path / "work1"
    first_work.mkdir()
    got = llama_build.fetch_sdist("pip", "9.9.9", first_work, log, cache)
    kept = cache / "sdist" / "llama_cpp_python-9.9.9.tar.gz"
    assert got.read_bytes() == kept.read_bytes() == b"sdist bytes" and len(downloads) == 1
    assert llama_build.fetch_sdist("pip", "9.9.9", tmp_path / "work2", log, cache) == kept
    assert len(downloads) == 1
    monkeypatch.setenv(llama_sdist.CACHE_ENV, str(cache))
    assert llama_sdist.sdist_path("9.9.9") == kept  # where the fixtures look for it
