"""Concurrent ``current`` reads answered together: one statement for the reads that wait together.

Many agents reading through one service ask the same shape of question at once (what is true now
about this subject, for this key). :class:`Coalescer` runs such reads as
:meth:`~sgam.api.AsyncMemoryGraph.current_many`: a read that finds no read of its shape in flight
goes at once, alone; the reads that arrive while one is in flight wait for it and then go together
as one statement. A lone client therefore waits for nothing extra, and under load a round of N
clients costs one round trip and one query execution instead of N (the driver's and the server's
work per statement is most of a small read's cost).

A shape is everything but the subject: the key's tenant and principal, the attribute, whether
candidates are read and the memory types. So every read of a batch is filtered for its own key's
principal exactly as it is alone, and answered exactly as it is alone: the same facts, the same
error for an unknown, forgotten or merged subject, the same read audit record. A read's statement
is sent after the read arrived, so it sees every write committed before it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from sgam.api import AsyncMemoryGraph
from sgam.graph.models import Fact

Shape = tuple[str, str | None, str | None, bool, str | tuple[str, ...] | None]
Waiting = list[tuple[str, "asyncio.Future[list[Fact]]"]]

MAX_BATCH = 64
"""Subjects in one statement at most; more waiting reads of a shape go as several, in turn."""


class Coalescer:
    """Runs concurrent :meth:`current` reads of one shape as one :meth:`AsyncMemoryGraph.current_many`."""

    def __init__(self, graph: AsyncMemoryGraph, *, max_batch: int = MAX_BATCH) -> None:
        self.graph = graph
        self.max_batch = max_batch
        self._waiting: dict[Shape, Waiting] = {}
        self._draining: dict[Shape, asyncio.Task[None]] = {}

    async def current(self, tenant: str, subject: str, attribute: str | None = None, *,
                      principal: str | None = None, include_candidates: bool = False,
                      memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        """:meth:`AsyncMemoryGraph.current`, answered together with the concurrent reads of its shape."""
        types = memory_types if memory_types is None or isinstance(memory_types, str) else tuple(memory_types)
        shape: Shape = (tenant, attribute, principal, include_candidates, types)
        answer: asyncio.Future[list[Fact]] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(shape, []).append((subject, answer))
        if shape not in self._draining:
            self._draining[shape] = asyncio.ensure_future(self._drain(shape))
        return await answer

    async def _drain(self, shape: Shape) -> None:
        """Answer the reads of ``shape`` that wait, batch after batch, until none does."""
        waiting: Waiting = []
        try:
            while waiting := self._waiting.pop(shape, []):
                for start in range(0, len(waiting), self.max_batch):
                    await self._answer(shape, waiting[start:start + self.max_batch])
        except BaseException:
            # The service is shutting down (or worse): no read waits for an answer that cannot come.
            for _, answer in waiting + self._waiting.pop(shape, []):
                answer.cancel()
            raise
        finally:
            del self._draining[shape]

    async def _answer(self, shape: Shape, batch: Waiting) -> None:
        live = [(subject, answer) for subject, answer in batch if not answer.done()]  # a client that left
        if not live:
            return
        tenant, attribute, principal, include_candidates, types = shape
        subjects = list(dict.fromkeys(subject for subject, _ in live))
        options: dict[str, Any] = {"principal": principal, "include_candidates": include_candidates,
                                   "memory_types": types if types is None or isinstance(types, str) else list(types)}
        found: dict[str, Any] | None = None
        if len(subjects) > 1:
            # A failure of the whole statement (a lost connection, a bad argument of one read):
            # each read then runs alone and meets its own answer or error, as it would have
            # without coalescing.
            with contextlib.suppress(Exception):
                found = await self.graph.current_many(tenant, subjects, attribute, errors="return", **options)
        if found is None:   # alone, or after such a failure: each read as the API runs it
            results = await asyncio.gather(*(self.graph.current(tenant, s, attribute, **options) for s in subjects),
                                           return_exceptions=True)
            found = dict(zip(subjects, results))
        for subject, answer in live:
            if answer.done():
                continue
            result = found[subject]
            if isinstance(result, BaseException):
                answer.set_exception(result)
            else:
                answer.set_result(result)
