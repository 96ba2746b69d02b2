"""Which CPU builds of llama.cpp a worker picks on the machine running the tests.

It differs between machines of one kind (AVX-512 or not, AMX or not), so tests ask rather than
name a build: a real worker's handshake says what the session's CPU check chose.
"""

from __future__ import annotations

import functools
import os

from engine.backends.cpu_check import VARIANT_ENV
from app.engine_clients.process_client import ProcessClient


@functools.cache
def build_for(requested: str = "auto") -> str:
    """The build a worker loads when asked for ``requested`` (auto, safe or a name)."""
    client = ProcessClient(env={VARIANT_ENV: requested})
    try:
        return client.start(timeout=300).cpu.variant
    finally:
        client.close(mode="abort", timeout=5)


def auto_build() -> str:
    return build_for(os.environ.get(VARIANT_ENV) or "auto")


def safe_build() -> str:
    return build_for("safe")
