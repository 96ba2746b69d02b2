"""Telemetry for a remote engine: only what is measured here, from the stream (time to first
text, pieces per second). Memory, temperature and devices are the server's, unknown here, so they
are 0 or "unavailable" and ``remote`` names the engine; the window shows that instead."""

from __future__ import annotations

import time

from engine import protocol as p
from app.engine_clients.remote.answer import AnswerStream


def remote_telemetry(engine_name: str, stream: AnswerStream, *, idle: bool) -> p.Telemetry:
    ttft = stream.ttft_ms
    return p.Telemetry(t=time.time(), rss_bytes=0, available_bytes=0, model_bytes=0, state_fixed_bytes=0,
                       state_kv_bytes=0, cpu_temp_c=p.UNAVAILABLE, cpu_freq_mhz=p.UNAVAILABLE,
                       cpu_freq_max_mhz=p.UNAVAILABLE, throttled=p.UNAVAILABLE, prefill_tok_s=0.0,
                       decode_tok_s=stream.decode_tok_s, ttft_ms=ttft if ttft else p.UNAVAILABLE,
                       draft_acceptance=p.UNAVAILABLE, phase_devices={"prefill": "remote", "decode": "remote"},
                       phase="idle" if idle else "decode", remote=engine_name)
