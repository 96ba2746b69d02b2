"""SHA-256 of a stream of chunks, computed beside the reading when the stream is large.

Restoring a long conversation reads about a hundred megabytes of snapshot chunks; hashing them in
line would add a third to the time. Both SQLite (stepping a cursor) and hashlib (hashing more than
2 KiB) release the GIL, so one helper thread hashes chunk *n* while the reader fetches chunk *n+1*.
The hand-over queue holds one chunk, so a slow hash holds back the reader instead of piling up
chunks.
"""

from __future__ import annotations

import hashlib
import queue
import threading

THREADED_DIGEST_BYTES = 4 << 20  # below this, a thread costs more than it saves
_QUEUE_CHUNKS = 1  # one waiting while one is hashed: enough to overlap, and memory stays at two chunks


class ChunkDigest:
    """``update`` each chunk in order, then ``finish`` (always, also on errors) for the hex digest."""

    def __init__(self, *, threaded: bool) -> None:
        self._hash = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=_QUEUE_CHUNKS)
            self._thread = threading.Thread(target=self._run, name="chunk-digest", daemon=True)
            self._thread.start()

    def update(self, data: bytes) -> None:
        if self._queue is None:
            self._hash.update(data)
        else:
            self._queue.put(data)

    def finish(self) -> str:
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = self._thread = None
        return self._hash.hexdigest()

    def _run(self) -> None:
        assert self._queue is not None
        while (data := self._queue.get()) is not None:
            self._hash.update(data)
