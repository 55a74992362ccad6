"""When free text names a subject, and how its spans are redacted (used by ``forget``).

A text is read as a sequence of *words*: runs of letters and digits, joined by ``-``, ``.`` or
``@`` between two of them (``acc-1``, ``mira@example.org``, ``2026-07-15`` are one word each;
``user:mira`` and ``Mira's`` are two). Matching ignores case. A *term* (an id, a name, a value)
names the subject wherever its words occur as consecutive words of the text: ``mira`` is named in
``user:mira`` and ``Mira, hi`` but not in ``mira-2`` or ``amira``; ``Mira Costa`` is named in
``mira  costa``. Redaction replaces the span from the first to the last matched word.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

WORD = re.compile(r"\w+(?:[-.@]\w+)*")

REDACTION = "[redacted]"


def words(text: str) -> tuple[str, ...]:
    """The words of ``text``, case-folded."""
    return tuple(m.group().casefold() for m in WORD.finditer(text))


class Terms:
    """A set of terms, each as its word sequence (terms without words are dropped)."""

    def __init__(self, terms: Iterable[str]) -> None:
        self.sequences = {w for w in (words(t) for t in terms) if w}
        self.lengths = sorted({len(s) for s in self.sequences}, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.sequences)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The character spans of ``text`` that name a term (longest match first, no overlaps)."""
        found = list(WORD.finditer(text))
        folded = [m.group().casefold() for m in found]
        spans: list[tuple[int, int]] = []
        i = 0
        while i < len(found):
            for n in self.lengths:
                if i + n <= len(found) and tuple(folded[i:i + n]) in self.sequences:
                    spans.append((found[i].start(), found[i + n - 1].end()))
                    i += n
                    break
            else:
                i += 1
        return spans

    def named_in(self, text: str) -> bool:
        return bool(self.spans(text))

    def redact(self, text: str) -> str:
        """``text`` with every span naming a term replaced by :data:`REDACTION`."""
        out, last = [], 0
        for start, end in self.spans(text):
            out += [text[last:start], REDACTION]
            last = end
        return "".join(out) + text[last:]


def term_hash(salt: str, sequence: tuple[str, ...]) -> str:
    """How a tombstone keeps a term without keeping it: a salted hash of its word sequence."""
    return hashlib.sha256((salt + "\x1f" + " ".join(sequence)).encode("utf-8")).hexdigest()
