"""The Qt binding keeps Python's reference counts: the app emits a signal per engine event, for hours.

PySide6 6.12.0 returns ``Signal.emit()``'s result without a reference under Python 3.11, so each
emit takes one from ``True``; a long answer then ends in "deallocating True or False" and a dead
window. pyproject excludes it; this test catches a binding with the same fault.
"""

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    happened = Signal(object)


def test_emitting_signals_does_not_drop_references(qapp):
    emitter = _Emitter()
    received = []
    emitter.happened.connect(received.append)
    before = [sys.getrefcount(True), sys.getrefcount(False), sys.getrefcount(None)]
    for _ in range(500):
        emitter.happened.emit(None)
    after = [sys.getrefcount(True), sys.getrefcount(False), sys.getrefcount(None)]
    assert len(received) == 500
    # the 500 Nones now in ``received``; a binding that drops a reference per emit is 500 off. Other threads
    # of the process (a finished test's background thread winding down) may move these by a few meanwhile.
    changes = [a - b for a, b in zip(after, before)]
    assert all(abs(change - expected) < 50 for change, expected in zip(changes, [0, 0, 500])), changes
