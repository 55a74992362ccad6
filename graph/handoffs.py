"""The GIL handed over promptly while threads share the work of writes that wait on the server.

An import writes one chunk while a worker thread plans the next, and ``write_many``'s lanes are
threads of one process. The thread waiting on the server needs the GIL back each time part of an
answer arrives (a result comes in many socket reads), and a thread that is computing holds it
until the interpreter's switch interval runs out (5 ms by default): the waiting thread lost up to
that much per read. In a 50,000-delta import the first statement of each chunk took 4.4 s of client
time for 0.4 s of the server's. :func:`prompt_handoffs` shortens the interval for as long as such
work runs (sgam/bench/README.md, session 21, for what it changed).

The interval belongs to the whole process: it is shortened while any such block runs, and the value
found before the first is put back after the last.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# 0.05 ms. Alternating runs of the scale stream's import: 0.2 ms against 5 ms took 9% less time at
# 100k and 14% less at 300k; 0.05 ms against 0.2 ms another 7% (100k) and 5% (300k), for 2-4% more
# Python CPU; 0.5 ms gained about half of what 0.2 ms did.
HANDOFF_INTERVAL = 0.00005
_lock = threading.Lock()
_users = 0
_saved = 0.0


@contextmanager
def prompt_handoffs() -> Iterator[None]:
    """The interpreter's switch interval at most :data:`HANDOFF_INTERVAL` seconds inside the block."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(HANDOFF_INTERVAL, _saved))
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                sys.setswitchinterval(_saved)


__all__ = ["HANDOFF_INTERVAL", "prompt_handoffs"]
