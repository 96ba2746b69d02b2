"""A conversation crosses the pipe to the worker once, not with every request.

A request that carries a branch of messages (an answer, a document read, an opened conversation, a
plain chat) names the part the worker was already sent by a digest, ``known``, and carries only the
messages after it. A question in a chat about a 40-page document is then a few hundred bytes, not
the document again.

Both ends keep a record of what was sent, the latest branches, each as the chained digests of its
prefixes: ``digest[i]`` chains the identity of message ``i`` (:mod:`model_store.message_identity`:
its role, text, reasoning and those of every message before it) with the stored ids of messages
``0..i``, so it changes if any message before it does, or is another stored message with the same
text. The client records a branch when it writes the request, the worker when it reads it, in the
same order. The client names only what is among its last :data:`KEPT` branches; the
worker forgets later (it keeps twice as many, and the messages too, to put each branch back together
before the request is served), so a branch the client names is still there even after a few frames
the client did not record (a test's raw frames). A name the worker does not know is refused as a
bad request, never guessed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import msgspec

from engine import protocol as p
from model_store.message_identity import ROOT, branch_identities, chained

KEPT = 8  # branches the client names (a conversation, its documents, a few others switched between)


def prefix_digests(messages: list[p.WireMessage]) -> list[str]:
    """``[d1, ..., dn]``: ``dk`` names the first ``k`` messages, by their identities and stored ids."""
    digests, digest = [], ROOT
    for message, identity in zip(messages, branch_identities((m.role, m.content, m.reasoning, m.tool_part) for m in messages)):
        digest = chained(digest, identity, message.id or "")
        digests.append(digest)
    return digests


@dataclass
class _Branch:
    depth_of: dict[str, int]  # prefix digest -> number of messages it covers
    messages: list[p.WireMessage] | None  # kept by the worker only


class _Record:
    """The latest ``keep`` branches sent."""

    def __init__(self, keep: int, keep_messages: bool) -> None:
        self._branches: deque[_Branch] = deque(maxlen=keep)
        self._keep_messages = keep_messages

    def deepest_known(self, digests: list[str]) -> int:
        """How many leading messages of a branch with these prefix digests were sent before."""
        for depth in range(len(digests), 0, -1):
            if any(digests[depth - 1] in branch.depth_of for branch in self._branches):
                return depth
        return 0

    def messages_before(self, digest: str) -> list[p.WireMessage] | None:
        for branch in reversed(self._branches):
            depth = branch.depth_of.get(digest)
            if depth is not None and branch.messages is not None:
                return branch.messages[:depth]
        return None

    def add(self, messages: list[p.WireMessage], digests: list[str]) -> None:
        if digests:
            self._branches.append(_Branch({d: i + 1 for i, d in enumerate(digests)},
                                          messages if self._keep_messages else None))


class SentTranscripts:
    """The client's side: shortens each request to what the worker has not seen. Call
    :meth:`shorten` in the order requests are written to the worker (under the writer's lock)."""

    def __init__(self) -> None:
        self._record = _Record(KEPT, keep_messages=False)

    def shorten(self, command: p.Command) -> p.Command:
        if not isinstance(command, p.CARRIES_BRANCH) or command.known:
            return command
        digests = prefix_digests(command.messages)
        depth = self._record.deepest_known(digests)
        self._record.add(command.messages, digests)
        if depth == 0:
            return command
        return msgspec.structs.replace(command, known=digests[depth - 1], messages=command.messages[depth:])


class UnknownTranscript(ValueError):
    """A request built on messages this worker was never sent (or has forgotten)."""


class ReceivedTranscripts:
    """The worker's side: puts each request's whole branch back together, in the order read."""

    def __init__(self) -> None:
        self._record = _Record(2 * KEPT, keep_messages=True)

    def complete(self, command: p.Command) -> p.Command:
        """``command`` with its whole branch. Raises :class:`UnknownTranscript` for a ``known``
        digest this worker does not have."""
        if not isinstance(command, p.CARRIES_BRANCH):
            return command
        if command.known:
            before = self._record.messages_before(command.known)
            if before is None:
                raise UnknownTranscript(
                    "the request builds on messages this engine was not sent; send the whole conversation")
            command = msgspec.structs.replace(command, known="", messages=[*before, *command.messages])
        self._record.add(command.messages, prefix_digests(command.messages))
        return command
