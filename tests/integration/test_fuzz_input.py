"""Fuzzed JSONL files through `sgam replay` and `sgam ingest`: bad lines never cost good ones.

Each example is a file mixing valid lines (episodes about Person subjects with plain asserts,
values and contents full of Unicode, U+2028/U+2029/U+0085 and other characters some splitters
take for line ends, CRLF endings, exact repeats) and bad ones (not JSON, not UTF-8, wrong types,
naive, numeric or overflowing times, unknown fields and attributes, oversized values, lone
surrogates, NaN, integers past 64 bits, JSON nested 100,000 deep, an episode id reused with other
content). The specification (README, "The replay format" and "Ingest"), not the code, says what
must happen:

* the command never ends in a traceback: it exits 0 (every line good) or 2 (some line bad), and
  ``--atomic`` exits 1 when any line is bad;
* every bad line is reported by its number, with a reason; no good line is;
* the good lines are applied exactly as when they alone are replayed (or ingested) into a fresh
  tenant: the same history rows, retired ones included, up to ids and transaction times;
* ``--atomic`` applies nothing when a line is bad (``sgam ingest --atomic`` stores nothing: every
  bad line here is one it finds before storing), and the same as the good lines alone otherwise.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import MemoryGraph, UnknownSubject, UnknownTenant
from sgam.cli import app

runner = CliRunner()
TENANT = "@TENANT@"
SUBJECTS = ("mira", "ana", "ben")
# Person attributes that the write path applies at once (none gated): every valid delta is written.
ATTRIBUTES = ("home_city", "response_style", "contact", "email")
TIMES = ("2026-05-20T09:00:00Z", "2026-05-20T11:00:00+02:00", "2026-06-01T00:00:00.5-05:00",
         "2026-06-10 14:30:00+00:00", "20260701T080000Z")
# Characters that str.splitlines() (but not JSON, and not a JSONL reader) takes for line ends.
SEPARATORS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"
# An example runs three commands against the real server (0.1-0.5 s on a quiet one; the two tests
# take 10-40 s): a failing one is reported as found, since shrinking it would take minutes.
SETTINGS = settings(max_examples=30, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@dataclass(frozen=True)
class Line:
    """One line of a generated file; ``text`` names the tenant as :data:`TENANT`."""

    text: bytes
    valid: bool
    kind: str


def render(lines: list[Line], tenant: str, path: Path, *, valid_only: bool = False) -> tuple[Path, list[int]]:
    """Write the file for ``tenant``; returns it and the numbers of its bad lines."""
    chosen = [x for x in lines if x.valid or not valid_only]
    path.write_bytes(b"\n".join(x.text.replace(TENANT.encode(), tenant.encode()) for x in chosen) + b"\n")
    return path, [n for n, x in enumerate(chosen, start=1) if not x.valid]


def dumps(obj: object) -> bytes:
    """One JSON line: characters raw (separators included, as agents write them), except lone
    surrogates, which UTF-8 cannot hold: those as the ``\\ud800`` escapes JSON has for them."""
    raw = json.dumps(obj, ensure_ascii=False)
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", raw).encode("utf-8")


text = st.text(st.characters(blacklist_categories=("Cs",)) | st.sampled_from(SEPARATORS), max_size=12)
value = st.tuples(st.sampled_from(("Porto", "Lisboa", "straße", "東京")), text).map("".join)


@st.composite
def deltas(draw: st.DrawFn, least: int = 0) -> list[dict]:
    out = []
    for _ in range(draw(st.integers(least, 2))):
        delta = {"subject": draw(st.sampled_from(SUBJECTS)), "attribute": draw(st.sampled_from(ATTRIBUTES)),
                 "subject_type": "Person", "value": draw(value)}
        if draw(st.booleans()):
            delta["valid_from"] = draw(st.sampled_from(TIMES))
        out.append(delta)
    return out


# Lines spoiled whatever the format: raw bytes, and a delta that is refused alone (a delta the
# write path refuses leaves the line's other deltas written, so a spoiled line carries only it).
RAW = {
    "not JSON": b'{"tenant_id": "x", "id": ',
    "not an object": b"[1, 2, 3]",
    "not UTF-8": b'{"content": "caf\xe9 cr\xe8me"}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep object": b'{"a": ' * 70 + b"1" + b"}" * 70,
    "NaN constant": b'{"content": NaN}',
}
BAD_DELTA = {
    "huge value": {"value": "x" * 9000},
    "surrogate value": {"value": "Lis\udc00bon"},
    "surrogate name": {"subject_name": "\ud800"},
    "nan value": {"value": float("nan")},
    "infinite value": {"value": float("-inf")},
    "huge integer": {"value": 2**70},
    "wrong value type": {"value": {"city": "Rome"}},
    "unknown attribute": {"attribute": "shoe_size"},
    "unknown delta field": {"colour": 1},
    "numeric valid_from": {"valid_from": 5},
    "wrong confidence": {"confidence": "high"},
}
# Fields that spoil a line of each format.
REPLAY_LINE = {
    "naive time": {"occurred_at": "2026-06-01T00:00:00"},
    "numeric time": {"occurred_at": 5},
    "numeric string time": {"occurred_at": "1654646400"},
    "overflowing time": {"occurred_at": "9999-12-31T23:00:00-05:00"},
    "underflowing time": {"occurred_at": "0001-01-01T00:00:00+01:00"},
    "not a time": {"occurred_at": "yesterday"},
    "unknown field": {"colour": "red"},
    "huge content": {"content": "x" * 100_001},
    "surrogate content": {"content": "caf\ud800"},
    "deltas not a list": {"deltas": "home_city=Rome"},
}
INGEST_LINE = {
    "naive time": {"occurred_at": "2026-06-01T00:00:00"},
    "numeric time": {"occurred_at": 5},
    "overflowing time": {"occurred_at": "9999-12-31T23:00:00-05:00"},
    "unknown field": {"colour": "red"},
    "huge text": {"text": "x" * 100_001},
    "surrogate text": {"text": "caf\ud800"},
    "other tenant": {"tenant_id": "someone-else"},
    "remember not a bool": {"remember": "yes"},
    "deltas not a list": {"deltas": "home_city=Rome"},
}
REUSED = "reused id"


def replay_record(number: int, words: str, when: str, deltas: list[dict]) -> dict:
    return {"tenant_id": TENANT, "id": f"e{number}", "occurred_at": when, "actor": "user:mira",
            "content": f"line {number}: {words}", "deltas": deltas}


def message_record(number: int, words: str, when: str, deltas: list[dict]) -> dict:
    return {"id": f"m{number}", "speaker": "user:mira", "occurred_at": when, "text": f"line {number}: {words}",
            "deltas": deltas}


Record = Callable[[int, str, str, list[dict]], dict]


def kinds(spoilers: dict) -> tuple[str, ...]:
    return (*RAW, *spoilers, *BAD_DELTA, REUSED)


def spoil(kind: str, record: dict, spoilers: dict, reused: str) -> bytes:
    """``record`` (a bad line's own id and content: never deduplicated with a good line) spoiled."""
    if kind in RAW:
        return RAW[kind]
    if kind in spoilers:
        return dumps({**record, **spoilers[kind]})
    if kind in BAD_DELTA:
        delta = {"subject": "mira", "attribute": "home_city", "subject_type": "Person", "value": "Rome"}
        return dumps({**record, "deltas": [{**delta, **BAD_DELTA[kind]}]})
    return dumps({**record, "id": reused})  # an earlier good line's id, with other content


@st.composite
def files(draw: st.DrawFn, record: Record, spoilers: dict, least: int) -> list[Line]:
    """A file of up to 10 lines, about a third of them bad (``least``: deltas a good line has)."""
    lines: list[Line] = []
    good: list[dict] = []
    for number in range(draw(st.integers(1, 10))):
        fields = (number, draw(text), draw(st.sampled_from(TIMES)), draw(deltas(least)))
        if draw(st.integers(0, 2)) > 0:
            if good and draw(st.integers(0, 5)) == 0:
                lines.append(Line(dumps(draw(st.sampled_from(good))), True, "repeat"))
                continue
            good.append(record(*fields))
            lines.append(Line(dumps(good[-1]) + (b"\r" if draw(st.booleans()) else b""), True, "good"))
            continue
        kind = draw(st.sampled_from(kinds(spoilers)))
        if kind != REUSED or good:
            reused = draw(st.sampled_from(good))["id"] if good else ""
            lines.append(Line(spoil(kind, {**record(*fields), "id": f"x{number}"}, spoilers, reused), False, kind))
    return lines


def every_kind(record: Record, spoilers: dict) -> list[Line]:
    """A good line, one bad line of every kind, a good line: every example run covers them all."""
    def good(number: int, value: str) -> Line:
        said = [{"subject": "mira", "attribute": "home_city", "subject_type": "Person", "value": value}]
        return Line(dumps(record(number, value, TIMES[number % len(TIMES)], said)), True, "good")

    first = good(0, "Porto\u2028Norte")
    bad = [Line(spoil(kind, {**record(number, kind, TIMES[0], []), "id": f"x{number}"}, spoilers,
                      json.loads(first.text)["id"]), False, kind)
           for number, kind in enumerate(kinds(spoilers), start=1)]
    return [first, *bad, good(99, "Lisboa")]


def rows(graph: MemoryGraph, tenant: str) -> list[tuple]:
    """Every history row of the subjects, retired ones included, without ids and transaction times."""
    return sorted(
        (f.subject, f.attribute, repr(f.value), str(f.valid_from), str(f.valid_to), f.expired_at is None, f.op.value,
         f.status.value, f.source_episode_id, f.support_count, tuple(sorted(f.support_episodes)), f.asserted_by,
         f.confidence)
        for subject in SUBJECTS for f in history(graph, tenant, subject))


def history(graph: MemoryGraph, tenant: str, subject: str) -> list:
    """Every row of the subject; none for a subject never stored (a read names it an error)."""
    try:
        return graph.history(tenant, subject, principal="*")
    except (UnknownSubject, UnknownTenant):
        return []


def invoke(args: list[str]) -> tuple[int, str, dict]:
    result = runner.invoke(app, args)
    # No traceback: a clean exit, or SystemExit carrying a documented code.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    report = json.loads(result.stdout) if "--json" in args and result.stdout.strip() else {}
    return result.exit_code, result.output, report


def fresh() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def cli(env, graph: MemoryGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI connects as usual but skips the bootstrap (``graph`` applied the schema already):
    its wait for every index of the server to be online took minutes while other runs on the
    shared server built theirs, and failed when they dropped one meanwhile."""
    connect = MemoryGraph.connect
    monkeypatch.setattr(MemoryGraph, "connect",
                        classmethod(lambda cls, *args, **kwargs: connect(*args, **{**kwargs, "bootstrap": False})))


@SETTINGS
@example(lines=every_kind(replay_record, REPLAY_LINE))
@given(lines=files(replay_record, REPLAY_LINE, least=0))
def test_fuzzed_replay_files(cli, graph: MemoryGraph, tmp_path: Path, lines: list[Line]) -> None:
    mixed, alone, atomic = fresh(), fresh(), fresh()
    for x in lines:
        event(x.kind)
    path, bad = render(lines, mixed, tmp_path / "mixed.jsonl")
    code, _, report = invoke(["replay", str(path), "--json"])
    assert code == (2 if bad else 0), report
    reported = {}
    for error in report["errors"]:
        assert error["error"].strip(), error
        reported.setdefault(error["line"], error["error"])
    assert sorted(reported) == bad, (reported, [(n, x.kind) for n, x in enumerate(lines, start=1)])

    good_path, none = render(lines, alone, tmp_path / "good.jsonl", valid_only=True)
    code, _, report = invoke(["replay", str(good_path), "--json"])
    assert code == 0 and report["errors"] == [] and none == []
    assert rows(graph, mixed) == rows(graph, alone)

    path, _ = render(lines, atomic, tmp_path / "atomic.jsonl")
    code, output, _ = invoke(["replay", str(path), "--atomic"])
    if bad:
        assert code == 1 and "was written" in " ".join(output.split()), output
        assert rows(graph, atomic) == []
    else:
        assert code == 0 and rows(graph, atomic) == rows(graph, alone)


@settings(SETTINGS, max_examples=20)
@example(lines=every_kind(message_record, INGEST_LINE))
@given(lines=files(message_record, INGEST_LINE, least=1))
def test_fuzzed_ingest_files(cli, graph: MemoryGraph, tmp_path: Path, lines: list[Line]) -> None:
    mixed, alone, atomic = fresh(), fresh(), fresh()
    for x in lines:
        event(x.kind)
    path, bad = render(lines, mixed, tmp_path / "mixed.jsonl")
    code, _, report = invoke(["ingest", str(path), "-t", mixed, "--mode", "now", "--json"])
    assert code == (2 if report["errors"] else 0)  # a quarantined delta is no error of the file
    reported: dict[int, str] = {}
    for error in report["errors"]:
        reported.setdefault(int(error["source"].rsplit(":", 1)[1]), error["message"])
    for row in report["episodes"]:
        for entry in row["quarantined"]:
            reported.setdefault(int(row["source"].rsplit(":", 1)[1]), entry["reason"])
    assert sorted(reported) == bad, (reported, [(n, x.kind) for n, x in enumerate(lines, start=1)])
    assert all(reason.strip() for reason in reported.values())

    good_path, _ = render(lines, alone, tmp_path / "good.jsonl", valid_only=True)
    code, _, report = invoke(["ingest", str(good_path), "-t", alone, "--mode", "now", "--json"])
    assert code == 0 and report["errors"] == []
    assert rows(graph, mixed) == rows(graph, alone)

    # Every bad kind here is found before anything is stored: --atomic stores nothing at all.
    path, _ = render(lines, atomic, tmp_path / "atomic.jsonl")
    code, output, _ = invoke(["ingest", str(path), "-t", atomic, "--mode", "now", "--atomic"])
    if bad:
        assert code == 1 and "nothing was stored" in " ".join(output.split()), output
        assert graph.store.read("MATCH (n {tenant_id: $t}) RETURN count(n) AS n", {"t": atomic}) == [{"n": 0}]
    else:
        assert code == 0 and rows(graph, atomic) == rows(graph, alone)
