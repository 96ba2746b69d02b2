import pytest

from engine import protocol as p
from app.engine_clients.client import EngineDead, new_request_id
from app.engine_clients.process_client import ProcessClient


@pytest.fixture
def worker(hearth_home):
    client = ProcessClient(env={"HEARTH_HOME": str(hearth_home)})
    client.start()
    yield client
    client.close(mode="abort", timeout=5)


def generate(prompt="The quick brown fox", max_tokens=16, **kw) -> p.Complete:
    """Continue ``prompt`` greedily as plain text, without drafting unless asked."""
    sampling = kw.pop("sampling", p.SamplingSpec(temperature=0))
    kw.setdefault("draft", p.DraftSpec("off"))
    return p.Complete(request_id=new_request_id("t"), prompt=prompt, max_tokens=max_tokens, sampling=sampling, **kw)


def collect(client, command, timeout=120) -> list:
    return list(client.stream(command, timeout=timeout))


def finished(events) -> p.Finished:
    ends = [e for e in events if isinstance(e, p.Finished)]
    assert len(ends) == 1, events
    return ends[0]


def text_of(events) -> str:
    return "".join(e.text for e in events if isinstance(e, p.TokenDelta))


def wait_for(client, kind, timeout=30.0):
    """The next event of this type, skipping others (telemetry, ...)."""
    import time

    deadline = time.monotonic() + timeout
    while (event := client.next_event(max(0.0, deadline - time.monotonic()))) is not None:
        if isinstance(event, kind if isinstance(kind, tuple) else (kind,)):
            return event
        if isinstance(event, EngineDead) and kind is not EngineDead:
            raise AssertionError(f"engine died: {event.message}")
    raise AssertionError(f"no {kind} within {timeout} s")
