"""Fact-version ids (``reconcile.new_memory_id``): 80 random bits, never repeated.

The store holds each ``memory_id`` once per relationship type, so an id that comes again refuses
a write. Nothing a caller does to the ``random`` module (Hypothesis seeds it for every example)
may make ids repeat, nor may a forked child repeat its parent's.
"""

from __future__ import annotations

import os
import random
import re

from sgam.graph.reconcile import new_memory_id


def test_an_id_is_m_and_twenty_hex_digits_and_ids_do_not_repeat() -> None:
    ids = [new_memory_id() for _ in range(50_000)]
    assert all(re.fullmatch(r"m-[0-9a-f]{20}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_seeding_the_random_module_does_not_repeat_ids() -> None:
    state = random.getstate()
    try:
        random.seed(7)
        first = [new_memory_id() for _ in range(10)]
        random.seed(7)
        assert not set(first) & {new_memory_id() for _ in range(10)}
    finally:
        random.setstate(state)


def test_a_forked_child_does_not_repeat_its_parent_s_ids() -> None:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_memory_id() for _ in range(20)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split())
    assert len(theirs) == 20
    assert not theirs & {new_memory_id() for _ in range(20)}
