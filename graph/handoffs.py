"""Process-wide settings that the write path changes while it plans, shared by the threads that plan.

**The GIL handed over promptly** while threads share the work of writes that wait on the server.
An import writes one chunk while a worker thread plans the next, and ``write_many``'s lanes are
threads of one process. The thread waiting on the server needs the GIL back each time part of an
answer arrives (a result comes in many socket reads), and a thread that is computing holds it
until the interpreter's switch interval runs out (5 ms by default): the waiting thread lost up to
that much per read. In a 50,000-delta import the first statement of each chunk took 4.4 s of client
time for 0.4 s of the server's. :func:`prompt_handoffs` shortens the interval for as long as such
work runs (sgam/bench/README.md, session 21, for what it changed).

**No cyclic garbage collection** while a batch is planned or written (:func:`collector_paused`): a
batch allocates tens of thousands of short-lived, acyclic objects (records, rows, plans, parameter
maps) that reference counting frees, and with collection on, the collector's passes over
everything the process holds cost about 40% of the in-memory time. A write transaction holds the
pause from its first statement to its commit (``store``), waits on the server included.

Both settings belong to the whole process, and an import's worker and main thread (or two lanes)
may be inside such a block at once: the setting is changed while any block runs, and the value
found before the first is put back after the last.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

# 0.05 ms. Alternating runs of the scale stream's import: 0.2 ms against 5 ms took 9% less time at
# 100k and 14% less at 300k; 0.05 ms against 0.2 ms another 7% (100k) and 5% (300k), for 2-4% more
# Python CPU; 0.5 ms gained about half of what 0.2 ms did.
HANDOFF_INTERVAL = 0.00005


class Shared(Generic[T]):
    """A process-wide setting changed while any of its blocks runs, on any thread: the first block
    to enter reads it and sets ``changed(found)``, the last to leave puts ``found`` back."""

    def __init__(self, read: Callable[[], T], write: Callable[[T], object]) -> None:
        self._read, self._write = read, write
        self._lock = threading.Lock()
        self._users = 0
        self._found: T | None = None

    @contextmanager
    def held(self, changed: Callable[[T], T]) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._found = found = self._read()
                self._write(changed(found))
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._write(self._found)  # type: ignore[arg-type]  # read by the first block


_INTERVAL = Shared(sys.getswitchinterval, sys.setswitchinterval)
_COLLECTOR = Shared(gc.isenabled, lambda on: gc.enable() if on else gc.disable())


def prompt_handoffs() -> AbstractContextManager[None]:
    """The interpreter's switch interval at most :data:`HANDOFF_INTERVAL` seconds inside the block
    (read when the first block starts)."""
    return _INTERVAL.held(lambda found: min(HANDOFF_INTERVAL, found))


def collector_paused() -> AbstractContextManager[None]:
    """No cyclic garbage collection inside the block; the collector is on again after the last
    such block only if it was on before the first. A ``with`` in a frame that runs to its end, never
    across a generator's ``yield``: a generator dropped in a reference cycle is closed only by the
    collector, which it would be keeping off."""
    return _COLLECTOR.held(lambda found: False)


__all__ = ["HANDOFF_INTERVAL", "Shared", "collector_paused", "prompt_handoffs"]
