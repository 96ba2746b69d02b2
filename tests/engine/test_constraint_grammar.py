"""An answer's grammar over a real vocabulary (engine.backends.llama_grammar, SmolLM2's): the JSON it
allows is JSON, what would break it is refused before llama.cpp could abort, and the worker turns a
schema it cannot use into ``bad_request`` and keeps answering."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine import protocol as p
from engine.backends.llama_cpp import LlamaModel
from engine.backends.llama_grammar import ConstraintRefused, grammar_text, schema_grammar
from app.engine_clients.client import new_request_id
from app.engine_clients.inproc_client import InprocClient


@pytest.fixture(scope="module")
def model(smollm2):
    loaded = LlamaModel(smollm2)
    yield loaded
    loaded.close()


def walk(grammar, model: LlamaModel, text: str) -> list[bool]:
    """Whether each token of ``text`` is allowed in turn (accepting those that are)."""
    verdicts = []
    for token in model.tokenize(text, add_special=False, parse_special=False):
        ok = bool(grammar.allowed(np.array([token]))[0])
        verdicts.append(ok)
        if not ok:
            break
        grammar.accept(token)
    return verdicts


def schema_state(model, schema: dict):
    return model.grammar(*grammar_text(p.constraint_from_schema_text(json.dumps(schema))))


def test_a_schemas_strings_never_take_a_raw_control_character(model):
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    grammar = schema_state(model, schema)
    try:
        assert all(walk(grammar, model, '{"s": "line one'))
        newline, tab, quote = (model.tokenize(t, add_special=False, parse_special=False)[0] for t in ("\n", "\t", '"'))
        assert grammar.allowed(np.array([newline, tab, quote])).tolist() == [False, False, True]
        assert all(walk(grammar, model, '\\n two"}'))
        eog = model.eos
        assert model.is_eog(eog) and grammar.allowed(np.array([eog]))[0]  # complete: the end is allowed now
    finally:
        grammar.close()


def test_enum_values_with_quotes_backslashes_and_newlines_come_out_as_valid_json(model):
    values = ['say "hi"', "C:\\path", "two\nlines", "café"]
    grammar = schema_state(model, {"enum": values})
    try:
        for value in values:
            fresh = schema_state(model, {"enum": values})
            assert all(walk(fresh, model, json.dumps(value))), value
            assert fresh.allowed(np.array([model.eos]))[0]
            fresh.close()
        assert not all(walk(grammar, model, '"two\nlines"'))  # the raw newline is not what the value says
    finally:
        grammar.close()


def test_accepting_a_token_the_grammar_rejects_raises_instead_of_aborting(model):
    grammar = model.grammar(*grammar_text(p.OutputConstraint(kind="json")))
    try:
        letter = model.tokenize("x", add_special=False, parse_special=False)[0]
        with pytest.raises(RuntimeError, match="does not allow"):
            grammar.accept(letter)  # JSON starts with "{"
        with pytest.raises(RuntimeError, match="does not allow"):
            grammar.accept(model.eos)  # nor ends before it is complete
        assert all(walk(grammar, model, '{"a": [1, 2.5, true, null]}'))
    finally:
        grammar.close()
    with pytest.raises(RuntimeError, match="closed"):
        grammar.allowed(np.array([0]))


def test_a_grammar_llama_cpp_cannot_read_is_refused_in_words(model):
    with pytest.raises(ConstraintRefused, match="llama.cpp could not read the grammar"):
        model.grammar('root ::= "a"{3000}', "root")
    with pytest.raises(ConstraintRefused, match="could not be turned into a grammar"):
        schema_grammar(json.dumps({"type": "string", "pattern": "^ab)$"}))
    with pytest.raises(ConstraintRefused, match="'minimum' at the top level"):
        schema_grammar(json.dumps({"type": "integer", "minimum": 1}))


def test_control_tokens_are_banned_but_the_end_of_turn(smollm2):
    from engine.models.session import open_session

    session = open_session(str(smollm2), n_ctx=256)
    try:
        banned, eog = session.constraint_masks()
        control = session.model.control_tokens()
        assert banned[control["<|im_start|>"]] and not banned[control["<|im_end|>"]] and eog[control["<|im_end|>"]]
        assert not banned[session.model.tokenize("{", add_special=False, parse_special=False)[0]]
    finally:
        session.close()


def events(client, command) -> list:
    return list(client.stream(command, timeout=120))


def test_a_schema_the_worker_cannot_use_is_a_bad_request_and_the_worker_answers_on(tmp_path):
    client = InprocClient(telemetry_interval_ms=0, data_dir=tmp_path)
    client.start()
    try:
        client.load_model("default", n_ctx=512, timeout=120)
        refused = {
            "'minimum' at the top level": p.OutputConstraint(kind="json_schema",
                                                             schema='{"type": "integer", "minimum": 0}'),
            "not valid JSON": p.OutputConstraint(kind="json_schema", schema='{"type": '),
            "could not be turned into a grammar": p.OutputConstraint(
                kind="json_schema", schema='{"type": "string", "pattern": "^ab)$"}'),
            "llama.cpp could not read the grammar": p.OutputConstraint(kind="grammar", grammar='root ::= "a"{3000}'),
        }
        for words, constraint in refused.items():
            got = events(client, p.Complete(request_id=new_request_id("c"), prompt="Hello", max_tokens=4,
                                            sampling=p.SamplingSpec(temperature=0.0), constraint=constraint))
            errors = [e for e in got if isinstance(e, p.Error)]
            assert len(errors) == 1 and errors[0].code == "bad_request" and words in errors[0].message, got
            assert got[-1].finish_reason == "error"
        answer = events(client, p.Complete(request_id=new_request_id("c"), prompt='A JSON object: ', max_tokens=24,
                                           sampling=p.SamplingSpec(temperature=0.0),
                                           constraint=p.OutputConstraint(kind="json")))
        text = "".join(e.text for e in answer if isinstance(e, p.TokenDelta))
        assert isinstance(answer[-1], p.Finished) and text.startswith("{"), answer
        pong = events(client, p.Ping(request_id=new_request_id("ping")))
        assert isinstance(pong[-1], p.Pong)
    finally:
        client.close()
