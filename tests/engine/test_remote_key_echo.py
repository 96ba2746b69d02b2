"""A server that echoes the API key in its 401 answer (issue 32, point 13): the key, and any
``Bearer`` token, never reach Hearth's error line, the client's error or ``engines test``.

The server is a real HTTP server on 127.0.0.1 that answers every request 401 with an
OpenAI-shaped error repeating the request's ``Authorization`` header and the bare key.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.engine_clients.client import EngineError
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.probe import probe
from app.engine_clients.remote.redact import REDACTED, redact
from app.engine_clients.remote.spec import RemoteEngine
from tests.helpers.cli import error_line, hearth
from tests.helpers.memory_keyring import keyring_env

KEY = "sk-echoed-secret-0123456789"


class EchoingRefusal(BaseHTTPRequestHandler):
    def _refuse(self) -> None:
        said = self.headers.get("Authorization", "")
        bare = said.split(" ", 1)[-1]
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {bare}. You sent '{said}'",
                                     "type": "invalid_request_error"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def echo_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingRefusal)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_redact_removes_the_key_and_any_bearer_token():
    said = redact(f"bad key {KEY}; header 'Authorization: Bearer other-token-42'", KEY)
    assert KEY not in said and "other-token-42" not in said and said.count(REDACTED) == 2
    assert redact("a plain sentence", "") == "a plain sentence"


def test_the_echoed_key_is_not_in_the_load_error(echo_url):
    client = RemoteClient(RemoteEngine(name="echo", url=echo_url, api_key=KEY))
    client.start()
    try:
        with pytest.raises(EngineError) as failed:
            client.load_model("engine:echo")
    finally:
        client.close()
    message = str(failed.value)
    assert "refused the API key (HTTP 401)" in message and "Incorrect API key" in message
    assert KEY not in message and REDACTED in message


def test_the_echoed_key_is_not_in_engines_test(echo_url):
    result = probe(RemoteEngine(name="echo", url=echo_url, api_key=KEY), timeout=10)
    assert result.ok is False and "HTTP 401" in result.error and KEY not in result.error


@pytest.mark.process
def test_the_echoed_key_is_not_in_hearths_error_line(echo_url, tmp_path, hearth_home):
    secrets = keyring_env(tmp_path / "secrets.json")
    added = hearth("engines", "add", "echo", "--url", echo_url, "--api-key-env", "ECHO_KEY", timeout=120,
                   ECHO_KEY=KEY, **secrets)
    assert added.returncode == 0, added.stderr
    generated = hearth("generate", "--engine", "echo", "hi", timeout=120, **secrets)
    line = error_line(generated)
    assert "refused the API key" in line and KEY not in generated.stderr + generated.stdout
    tested = hearth("engines", "test", "echo", timeout=120, **secrets)
    assert "HTTP 401" in tested.stdout + tested.stderr and KEY not in tested.stdout + tested.stderr
