"""Greedy output of ``hearth generate --raw --temperature 0 --repeat-penalty 1 --dry-multiplier 0`` (plain
argmax: the penalties are on by default) equals llama-cpp-python's own ``Llama``."""

import json

import pytest

from app.surfaces.cli.main import main
from engine.backends.base import default_threads
from engine.models.model_files import check_model_file

PROMPTS = [
    "The quick brown fox",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
    "Paris is the capital of France. Its most famous buildings are",
    "1, 2, 3, 4,",
]
N_TOKENS = 48


def hearth_greedy(capsys, model: str, prompt: str) -> dict:
    code = main(["generate", "--model", model, "--raw", "--temperature", "0", "--repeat-penalty", "1",
                 "--dry-multiplier", "0",
                 "--max-tokens", str(N_TOKENS), "--json", prompt])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def reference_greedy(llm, prompt: str, n: int) -> list[int]:
    tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    out = []
    for token in llm.generate(tokens, temp=0.0, reset=True):
        if llm.token_eos() == token or len(out) == n:
            break
        out.append(token)
    return out


@pytest.fixture(scope="module", params=["smollm2", "hybrid_tiny"])
def model_and_reference(request):
    from llama_cpp import Llama

    from engine.backends.llama_cpp import init_backend

    init_backend()  # this machine's CPU build, loaded as the worker loads it: the reference runs on the same
    path = request.getfixturevalue(request.param)
    # n_ctx=0: the trained context, which is also what hearth's automatic context is for these small models
    llm = Llama(model_path=str(path), n_ctx=0, n_batch=512, n_threads=default_threads(),
                flash_attn=True, verbose=False)
    assert llm.n_ctx() == check_model_file(path)[f"{check_model_file(path)['general.architecture']}.context_length"]
    yield str(path), llm
    llm.close()


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_tokens_match_llama_cpp_python(capsys, model_and_reference, prompt):
    path, llm = model_and_reference
    ours = hearth_greedy(capsys, path, prompt)
    assert ours["finish_reason"] == "length", "each prompt must give a full-length continuation to compare"
    assert ours["token_ids"] == reference_greedy(llm, prompt, N_TOKENS)
