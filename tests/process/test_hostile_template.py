"""A model whose chat template would eat the worker's time and memory is refused at load, clearly
(issue 16.3): the worker answers with an error naming the model and keeps serving."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import protocol as p
from engine.backends.llama_cpp import quantize
from app.engine_clients.client import new_request_id
from tests.process.conftest import collect, finished, generate, wait_for

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_TEMPLATES = {
    "huge-string": "{{ strftime_now('%Y' * 10000000) }}",
    "endless-loops": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    # issue 32.14: accepted before, and 1.5 GB on every turn (the '~' operator was not budgeted)
    "tilde-doubling": "{% set n = namespace(s='ab') %}{% for i in range(29) %}{% set n.s = n.s ~ n.s %}{% endfor %}"
                      "{{ n.s | length }}",
}


@pytest.fixture(scope="module", params=sorted(HOSTILE_TEMPLATES))
def hostile_model(request, hybrid_tiny, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("hostile") / f"{request.param}.gguf"
    return quantize(hybrid_tiny, target, "F16", {"tokenizer.chat_template": HOSTILE_TEMPLATES[request.param]})


def test_the_worker_refuses_the_model_naming_it_and_keeps_serving(worker, hostile_model, hybrid_tiny):
    started = time.monotonic()
    load = p.LoadModel(request_id=new_request_id("load"), model=str(hostile_model))
    worker.send(load)
    error = wait_for(worker, p.Error, timeout=120)
    assert error.code == "model_load_failed" and hostile_model.name in error.message
    assert "chat template is too costly" in error.message
    assert time.monotonic() - started < 60  # the budget is 2 s; before the fix: a minute and 4 GB
    worker.send(p.LoadModel(request_id=new_request_id("load"), model=str(hybrid_tiny)))
    assert isinstance(wait_for(worker, p.ModelLoaded, timeout=120), p.ModelLoaded)
    assert finished(collect(worker, generate(max_tokens=3))).finish_reason in ("stop", "length")


def test_the_cli_says_it_in_one_line(hostile_model):
    done = subprocess.run([sys.executable, "-m", "app", "generate", "--model", str(hostile_model), "hi"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "chat template is too costly" in lines[0] and hostile_model.name in lines[0], done.stderr
