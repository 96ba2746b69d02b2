"""Waiting out a busy engine: a 429 or 503 before the answer began is tried again after a pause
that doubles each time (or the server's ``Retry-After``, capped), a bounded number of times. Once
the answer has begun nothing is retried: what was written is kept and the failure is reported.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

import msgspec

from app.engine_clients.remote.errors import RemoteError

T = TypeVar("T")


class RetryPolicy(msgspec.Struct, frozen=True):
    attempts: int = 4  # the first try and three more
    first_wait_s: float = 1.0
    max_wait_s: float = 20.0  # for one wait, whatever Retry-After asks

    def wait_before(self, attempt: int, error: RemoteError) -> float:
        """Seconds to wait before try ``attempt`` (2, 3, ...) after ``error``."""
        doubling = self.first_wait_s * 2 ** (attempt - 2)
        asked = error.retry_after or 0.0
        return min(self.max_wait_s, max(doubling, asked))


def default_policy() -> RetryPolicy:
    """The policy; the test switch HEARTH_TEST_REMOTE_RETRY="ATTEMPTS,FIRST_WAIT_S" shortens it."""
    value = os.environ.get("HEARTH_TEST_REMOTE_RETRY", "")
    if not value:
        return RetryPolicy()
    attempts, first = value.split(",")
    return RetryPolicy(attempts=int(attempts), first_wait_s=float(first), max_wait_s=float(first) * 4)


def with_retries(policy: RetryPolicy, attempt: Callable[[], T], stopped: threading.Event,
                 on_wait: Callable[[RemoteError, float, int], None] | None = None) -> T:
    """``attempt()`` until it succeeds, fails with a non-retryable error, runs out of tries or
    ``stopped`` is set during a wait (then the last error is raised). ``on_wait(error, seconds,
    next try)`` is told before each wait."""
    for number in range(1, policy.attempts + 1):
        try:
            return attempt()
        except RemoteError as error:
            if not error.retryable or number == policy.attempts:
                raise
            wait = policy.wait_before(number + 1, error)
            if on_wait is not None:
                on_wait(error, wait, number + 1)
            if stopped.wait(wait):
                raise
    raise AssertionError("unreachable")
