"""Named Cypher queries: ``.cypher`` files with a header, loaded by name and bound to parameters.

A file starts with comment lines that describe it, then the Cypher::

    // name: as-of
    // doc: What we believe now (or believed at known_at) was true at valid_at.
    // param: tenant string  the tenant id
    // param: known_at datetime?  transaction time; null = what we believe now
    // example: :param tenant => 'demo'
    // example: :param known_at => null

A ``?`` after the type makes a parameter optional (it is sent as null). A number may carry
inclusive bounds, ``int[1..4]`` or ``float[0..1]`` (either end may be left open: ``int[0..]``),
which :meth:`NamedQuery.bind` checks. The examples are Neo4j Browser's arrow form, one parameter a
line: Browser evaluates the expression on the server (``datetime('...')`` is a datetime, ``10`` an
integer), where its map form ``:param {...}`` keeps ``datetime('...')`` a string and makes every
number a float. Analysts paste :meth:`NamedQuery.param_script` and the Cypher into Browser; Python
loads the same files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from sgam.graph.errors import InvalidDelta, NotFound
from sgam.graph.models import parse_instant
from sgam.graph.steps import ARGS, Statement

TYPES = ("string", "datetime", "int", "float", "bool", "list", "vector")
_HEADER = re.compile(r"^//\s*(name|doc|param|example):\s*(.*)$")
_KIND = re.compile(r"^([a-z]+)(?:\[(-?[0-9.]+)?\.\.(-?[0-9.]+)?\])?(\??)$")
_ARROW = re.compile(r"^:param\s+([A-Za-z_][A-Za-z0-9_]*)\s*=>\s*(\S.*?)\s*;?$")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# A parameter's test for null that is a whole operand: after "(", "," or a boolean keyword, so
# never the tail of a longer expression (``$a + $b IS NULL`` tests the sum). Groups: the space
# before it, the name, NOT.
_NULL_TEST = re.compile(r"(?:(?<=[(,])|(?<=\bAND)|(?<=\bOR)|(?<=\bXOR)|(?<=\bNOT)|(?<=\bWHEN)|(?<=\bWHERE))"
                        r"(\s*)\$([A-Za-z_][A-Za-z0-9_]*)\s+IS\s+(NOT\s+)?NULL\b")
# The migration aliases a read of facts widens its attribute with (graph/evolution.py, "Dual
# reads"): the clause that collects them from the running or recent schema migrations, and the
# disjunct that reads them. :meth:`NamedQuery.packed_for` leaves both out when no migration's dual
# read is in force. Group ``active`` of _ALIASES: the predicate that says which migrations are.
_ALIASES = re.compile(r"WITH CASE WHEN \$attribute IS NULL THEN \[\] ELSE COLLECT \{ MATCH \(m:SchemaMigration\)\s*"
                      r"WHERE (?P<active>[^\n]*?)\s*UNWIND properties\(m\)\.aliases AS pair .*?"
                      r"\} END AS aliases\n", re.S)
_ALIASED = " OR f.attribute IN aliases"
# The order a read of facts closes with (``current``, ``as-of``), and the clause
# :meth:`NamedQuery.packed_for` puts before its last RETURN with ``stop=True``: at most
# ``$args.first`` rows (:func:`first_rows`), 1 for a reader that knows at most one row answers, so
# that the server stops at the first fact that answers, and :data:`EVERY_ROW` for any other. One
# text, so one plan, for both: as two texts (``LIMIT 1`` in place of the order) each was planned on
# its first use, which put 110-250 ms planning runs in the replay benchmark's timed questions
# (sgam/bench/README.md, "Session 35").
_ORDERED = "\nORDER BY attribute, value"
FIRST = "first"
STOP = f"* LIMIT ${ARGS}.{FIRST}"  # after "WITH " (alone it is no statement: tests/cypher_constants.py)
EVERY_ROW = 2**62
# The text's last RETURN (a clause at the start of a line, as every query writes its clauses) and
# what follows it (ORDER BY, SKIP, LIMIT), which :func:`returning` keeps.
_LAST_RETURN = re.compile(r"(?:\A|\n)RETURN (?P<items>(?:(?!\nRETURN ).)*?)"
                          r"(?P<tail>\n(?:ORDER BY|SKIP|LIMIT)\b(?:(?!\nRETURN ).)*)?\s*\Z", re.S)
_RETURN_ITEM = re.compile(r"(?P<expr>.*\S)\s+AS\s+(?P<alias>[A-Za-z_][A-Za-z0-9_]*)"
                          r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What makes a RETURN's rows depend on every item it lists: DISTINCT, an aggregation (its other
# items are the grouping keys); and, anywhere in the text, a UNION (each part must return the
# same columns).
_GROUPING = re.compile(r"\bDISTINCT\b|\b(?:count|collect|sum|avg|min|max|stDevP?|percentile(?:Cont|Disc))\s*\(",
                       re.I)
_UNION = re.compile(r"\bUNION\b", re.I)
# The columns a reader of facts and of paths uses (every fact query's ``fact`` map; traverse's).
FACT_COLUMNS = ("fact",)
PATH_COLUMNS = ("entities", "types", "facts")


@dataclass(frozen=True)
class QueryParam:
    name: str
    type: str
    optional: bool
    doc: str
    minimum: float | None = None
    maximum: float | None = None

    @property
    def kind(self) -> str:
        """The type as the header spells it, bounds included (``int[1..4]``)."""
        if self.minimum is None and self.maximum is None:
            return self.type
        return f"{self.type}[{_num(self.minimum)}..{_num(self.maximum)}]"


@dataclass(frozen=True)
class NamedQuery:
    """One query file: its name, documentation, parameters, example and Cypher text."""

    name: str
    doc: str
    params: tuple[QueryParam, ...]
    example: str
    text: str
    path: str

    def bind(self, values: dict[str, Any]) -> dict[str, Any]:
        """Check ``values`` against the declared parameters and convert them to their types.

        Strings are accepted for every type (as the CLI passes them): ISO 8601 for datetimes (a
        date alone is midnight UTC, a time without a zone is refused; see
        :func:`~sgam.graph.models.parse_instant`), true/false for bools, comma-separated for lists,
        ``null`` for an absent optional value.
        """
        known = {p.name: p for p in self.params}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise InvalidDelta(
                f"query {self.name!r} has no parameter {', '.join(unknown)}; it takes "
                f"{', '.join(self.signature())}"
            )
        bound: dict[str, Any] = {}
        for param in self.params:
            value = values.get(param.name)
            if value is None or value == "null":
                if not param.optional:
                    raise InvalidDelta(
                        f"query {self.name!r} needs parameter {param.name!r} ({param.kind}: {param.doc})"
                    )
                bound[param.name] = None
                continue
            bound[param.name] = _convert(self.name, param, value)
        return bound

    @cached_property
    def packed_text(self) -> str:
        """The Cypher as SGAM sends it: each declared parameter read from one map (``$args.name``),
        an instant as ``datetime($args.name)`` (see :meth:`sendable`)."""
        return self._packed(self.text)

    def _packed(self, text: str) -> str:
        return packed(text, {p.name for p in self.params}, {p.name for p in self.params if p.type == "datetime"})

    @cached_property
    def null_tests(self) -> frozenset[str]:
        """The optional parameters the text tests for null as a whole operand (``$name IS NULL``,
        ``$name IS NOT NULL``): :meth:`packed_for` decides those tests before the text is sent."""
        optional = {p.name for p in self.params if p.optional}
        return frozenset(m.group(2) for m in _NULL_TEST.finditer(self.text)) & optional

    def packed_for(self, bound: dict[str, Any], aliases: bool = True, stop: bool = False,
                   columns: tuple[str, ...] | None = None) -> str:
        """:attr:`packed_text` with each of :attr:`null_tests` replaced by its answer for ``bound``
        (``true`` or ``false``). The server's planner then drops the branches the call cannot
        take (``$attribute IS NULL OR f.attribute = $attribute`` becomes the comparison alone),
        which it cannot do for a parameter, whose plan must serve every value: ``current`` 2-3%
        faster, ``as_of`` 1-2% (sgam/bench/README.md, "Session 27"). One text, so one plan, for
        each combination of null and given parameters among the tested ones.

        ``aliases=False``: without the migration aliases (:attr:`reads_aliases`), for a reader that
        knows no schema migration's dual read is in force (``graph.evolution.MigrationWatch``):
        ``current``'s statement 7% faster (sgam/bench/README.md, "Session 28").

        ``stop=True``: a text that closes with :data:`_ORDERED` keeps at most ``$args.first``
        rows before its last ``RETURN`` (:func:`first_rows`). A reader that knows at most one row
        can answer (one single-valued attribute, confirmed facts only: its believed rows never
        overlap in valid time) sends 1, and the server stops at the first fact that answers
        instead of reading every fact of the subject: half the database hits of ``current`` on the
        scale benchmark's 1M tenant, its statement 1.20x -> 1.15x the raw lookup
        (sgam/bench/README.md, "Session 32"); any other reader sends :data:`EVERY_ROW`, to the
        same text and plan.

        ``columns``: for a reader that uses only these columns of the answer (a typed read: the
        ``fact`` map), the last ``RETURN`` computes only them and those its ``ORDER BY`` names
        (:func:`returning`); the server projects every column it is asked for, read or not."""
        return self.decided(self.nulls(bound), aliases, stop, columns)

    def nulls(self, bound: dict[str, Any]) -> frozenset[str]:
        """The parameters of :attr:`null_tests` that are null in ``bound``: with the other
        arguments of :meth:`packed_for`, what decides its text (see :meth:`decided`)."""
        return frozenset(name for name in self.null_tests if bound.get(name) is None)

    def decided(self, nulls: frozenset[str], aliases: bool = True, stop: bool = False,
                columns: tuple[str, ...] | None = None) -> str:
        """:meth:`packed_for` of a call whose null tested parameters are ``nulls`` (:meth:`nulls`)."""
        lean = not aliases and self.reads_aliases
        first = stop and self.stops_early
        if not self.null_tests and not lean and not first and columns is None:
            return self.packed_text
        return self._folded(nulls, lean, first, columns)

    @cached_property
    def stops_early(self) -> bool:
        """Whether :meth:`packed_for` can make the text stop after ``$args.first`` rows (``stop``)."""
        return self.text.rstrip().endswith(_ORDERED)

    @cached_property
    def reads_aliases(self) -> bool:
        """Whether the text widens its attribute with the migration aliases (``current``,
        ``as-of``, ``history``): the clause that collects them and the disjunct that reads them."""
        return self.aliases_in_force is not None

    @cached_property
    def aliases_in_force(self) -> str | None:
        """The predicate on ``(m:SchemaMigration)`` under which the text reads a migration's
        aliases (``None`` if it reads none)."""
        found = _ALIASES.search(self.text)
        return found.group("active") if found is not None and _ALIASED in self.text else None

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """The query's hash, once: :meth:`_folded`'s cache hashes it on every read, and the
        generated hash walked every parameter's fields each time (3-4 us a read)."""
        return hash((self.name, self.path, self.text))

    @lru_cache(maxsize=None)  # noqa: B019  (queries are loaded once and live as long as the process)
    def _folded(self, nulls: frozenset[str], lean: bool = False, first: bool = False,
                columns: tuple[str, ...] | None = None) -> str:
        tested = self.null_tests

        def answer(m: re.Match[str]) -> str:
            name = m.group(2)
            if name not in tested:
                return m.group(0)
            return m.group(1) + ("true" if (name in nulls) != bool(m.group(3)) else "false")

        text = _ALIASES.sub("", self.text, count=1).replace(_ALIASED, "", 1) if lean else self.text
        if first:
            last = text.rindex("\nRETURN ")
            text = f"{text[:last]}\nWITH {STOP}{text[last:]}"
        if columns is not None:
            text = returning(text, columns)
        return self._packed(_NULL_TEST.sub(answer, text))

    def sendable(self, bound: dict[str, Any]) -> dict[str, Any]:
        """``bound`` as it is sent with :attr:`packed_text`: an instant as ISO 8601 text, which the text
        reads with ``datetime()`` (the driver's conversion of a ``datetime`` parameter cost about
        0.1 ms of the client's CPU a read, 7% of a lookup). ``datetime()`` of an instant is the
        instant, so a typed one is read right too."""
        instants = self._instants
        if not instants:
            return bound
        return {k: v.isoformat() if k in instants and isinstance(v, datetime) else v for k, v in bound.items()}

    @cached_property
    def _instants(self) -> frozenset[str]:
        return frozenset(p.name for p in self.params if p.type == "datetime")

    def statement(self, bound: dict[str, Any], columns: tuple[str, ...] | None = None) -> Statement:
        """The statement that runs this query with ``bound`` (:meth:`bind`'s answer): one map
        parameter, so the server keeps one plan for it whatever the values' types and sizes
        (:class:`~sgam.graph.steps.Statement`), one for each combination of its decided null tests
        (:meth:`packed_for`). Browser and the printed examples keep the flat
        ``$name`` form of :attr:`text`. ``columns``: only these come back (:func:`projected`)."""
        text = self.packed_for(bound, columns=columns)
        return Statement(text if columns is None else projected(text, columns), self.sendable(bound), packed=True)

    def example_params(self) -> list[tuple[str, str]]:
        """The example's ``(name, Cypher expression)`` pairs, in the header's order."""
        return [arrow_param(line) for line in self.example.splitlines()]

    def param_script(self) -> str:
        """The example as Browser runs it: one ``:param name => expression;`` line a parameter.

        Every printed example (queries/README.md, ``sgam query --print``, the favourites and the
        guide) is this text, so none of them can fall back to the map form.
        """
        return "\n".join(f":param {name} => {expr};" for name, expr in self.example_params())

    def signature(self) -> list[str]:
        return [f"{p.name} ({p.kind}{'?' if p.optional else ''})" for p in self.params]


def _num(bound: float | None) -> str:
    if bound is None:
        return ""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _flag(value: Any) -> bool:
    """A bool, or the CLI's spelling of one (true/false, yes/no, 1/0)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    raise ValueError("not true or false")


def _convert(query: str, param: QueryParam, value: Any) -> Any:
    try:
        if param.type == "datetime":
            return parse_instant(value, param.name)
        if param.type == "bool":
            return _flag(value)
        if param.type in ("int", "float"):
            if isinstance(value, bool):
                raise TypeError("bool")
            if param.type == "int" and isinstance(value, float) and not value.is_integer():
                raise ValueError("not a whole number")
            number = int(value) if param.type == "int" else float(value)
            if (param.minimum is not None and number < param.minimum) or \
                    (param.maximum is not None and number > param.maximum):
                raise ValueError("out of range")
            return number
        if param.type == "vector":
            # an embedding: finite floats (a string is comma-separated, as the CLI passes it)
            items = value.split(",") if isinstance(value, str) else list(value)
            vector = [float(x) for x in items if not isinstance(x, bool)]
            if not vector or len(vector) != len(items) or not all(math.isfinite(x) for x in vector):
                raise ValueError("not a non-empty list of finite numbers")
            return vector
        if param.type == "list":
            if isinstance(value, str):
                return [part.strip() for part in value.split(",") if part.strip()]
            return list(value)
        if not isinstance(value, str):
            raise TypeError(type(value).__name__)
        return value
    except (TypeError, ValueError) as exc:
        raise InvalidDelta(
            f"query {query!r}: parameter {param.name!r} must be {param.kind} ({param.doc}); got {value!r}: {exc}"
        ) from None


def returning(text: str, columns: tuple[str, ...]) -> str:
    """``text`` whose last ``RETURN`` keeps only the items named in ``columns`` or in the
    ``ORDER BY`` after it (in their order); ``text`` itself when that clause is not a plain list
    of ``expression AS name`` (or ``name``) items or does not return every one of ``columns``."""
    found = _LAST_RETURN.search(text)
    if found is None or _GROUPING.search(found.group("items")) or _UNION.search(text):
        return text
    tail = (found.group("tail") or "").rstrip()
    wanted = set(columns) | set(_NAME.findall(tail))
    kept: list[str] = []
    named: set[str] = set()
    for item in _top_level(found.group("items"), ","):
        parts = _RETURN_ITEM.fullmatch(item.strip())
        if parts is None:
            return text
        alias = parts.group("alias") or parts.group("name")
        named.add(alias)
        if alias in wanted:
            kept.append(item.strip())
    if not set(columns) <= named or len(kept) == len(named):
        return text
    return f"{text[:found.start('items')]}{', '.join(kept)}{tail}\n"


def _top_level(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside brackets, braces, parentheses and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            if char == quote and text[i - 1] != "\\":
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts if depth == 0 and not quote else [text]


@lru_cache(maxsize=None)
def projected(text: str, columns: tuple[str, ...]) -> str:
    """``text`` returning only ``columns`` of its answer, in its order. The driver decodes every
    column it is sent, and the columns kept for Browser and the CLI cost a reader of facts most of
    its time: about 0.1 ms for each typed instant, every property of every node of a path."""
    return f"CALL () {{\n{text}\n}}\nRETURN {', '.join(columns)}"


def first_rows(single: bool) -> int:
    """The ``first`` argument of a text made with ``stop=True`` (:meth:`NamedQuery.packed_for`):
    1 for a reader that knows at most one row answers, else :data:`EVERY_ROW`."""
    return 1 if single else EVERY_ROW


def packed(text: str, names: Iterable[str], instants: Iterable[str] = ()) -> str:
    """``text`` with each ``$name`` of ``names`` read from the one map parameter (``$args.name``);
    those also in ``instants`` as ``datetime($args.name)`` (sent as ISO 8601 text)."""
    wanted, typed = set(names), set(instants)

    def read(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in wanted:
            return m.group(0)
        return f"datetime(${ARGS}.{name})" if name in typed else f"${ARGS}.{name}"

    return _PARAM.sub(read, text)


def arrow_param(line: str) -> tuple[str, str]:
    """``(name, expression)`` of one ``:param name => expression`` line (ValueError if it is not one)."""
    match = _ARROW.match(line.strip())
    if match is None:
        raise ValueError(f"an example must be Browser's arrow form ':param name => expression', not {line!r}")
    return match.group(1), match.group(2)


def parse(text: str, path: str = "<text>") -> NamedQuery:
    """Parse one query file's text."""
    meta: dict[str, str] = {}
    examples: list[str] = []
    params: list[QueryParam] = []
    body: list[str] = []
    for line in text.splitlines():
        match = _HEADER.match(line.strip()) if not body else None
        if match and match.group(1) == "param":
            name, kind, *doc = match.group(2).split(maxsplit=2)
            parts = _KIND.match(kind)
            if parts is None or parts.group(1) not in TYPES:
                raise ValueError(f"{path}: parameter {name!r} has unknown type {kind!r}; use {TYPES}")
            base, low, high, optional = parts.groups()
            if (low or high) and base not in ("int", "float"):
                raise ValueError(f"{path}: parameter {name!r}: only int and float take bounds")
            params.append(QueryParam(name, base, optional == "?", " ".join(doc),
                                     None if not low else float(low), None if not high else float(high)))
        elif match and match.group(1) == "example":
            examples.append(match.group(2).strip())
        elif match:
            meta[match.group(1)] = match.group(2).strip()
        elif line.strip().startswith("//") and not body:
            continue
        elif line.strip() or body:
            body.append(line)
    if examples:
        meta["example"] = "\n".join(examples)
    for key in ("name", "doc", "example"):
        if key not in meta:
            raise ValueError(f"{path}: the header has no '// {key}:' line")
    return NamedQuery(meta["name"], meta["doc"], tuple(params), meta["example"],
                      "\n".join(body).strip() + "\n", path)


@lru_cache(maxsize=1)
def load_queries() -> dict[str, NamedQuery]:
    """Every query shipped in this package, by name."""
    found: dict[str, NamedQuery] = {}
    for resource in sorted(files(__package__).iterdir(), key=lambda r: r.name):
        if resource.name.endswith(".cypher"):
            query = parse(resource.read_text(encoding="utf-8"), str(Path(resource.name)))
            found[query.name] = query
    return found


def get_query(name: str) -> NamedQuery:
    """The query called ``name``, or :class:`NotFound` listing the known ones."""
    queries = load_queries()
    try:
        return queries[name]
    except (KeyError, TypeError):
        raise NotFound(f"no query named {name!r}; known queries: {', '.join(sorted(queries))}") from None
