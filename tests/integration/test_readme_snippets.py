"""Every ```python block of README.md runs as written, in order, against the test server.

The blocks share one namespace, as in one Python session. Tenant names (``"acme"``,
``"acme-archive"``) are replaced by fresh ones so runs never meet. A block that is not meant to
run is preceded by ``<!-- not run: REASON -->``; the marker must give a reason.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from sgam import MemoryGraph, UnknownSubject

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"(?P<before>(?:<!-- not run: (?P<reason>[^>]*?) -->\n)?)```python\n(?P<code>.*?)```",
                   re.DOTALL)
TENANT = re.compile(r'"acme(?P<suffix>-[a-z]+)?"')


def blocks() -> list[tuple[int, str, str | None]]:
    """(line number, code, reason it is not run or None) of every python block, in order."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start("code")) + 1, m.group("code"), m.group("reason"))
            for m in BLOCK.finditer(text)]


def test_the_readme_has_python_blocks_and_every_skip_says_why() -> None:
    found = blocks()
    assert len(found) >= 3
    assert all(reason is None or reason.strip() for _, _, reason in found)
    markers = re.findall(r"^<!-- not run:", README.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(markers) == sum(1 for _, _, reason in found if reason is not None), \
        "a marker not right before a python block"


def test_every_python_block_runs_in_order(env, graph: MemoryGraph) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    namespace: dict[str, object] = {"__name__": "readme"}
    try:
        for line, code, reason in blocks():
            if reason is not None:
                continue
            source = TENANT.sub(lambda m: f'"{tenant}{m.group("suffix") or ""}"', code)
            try:
                exec(compile(source, f"README.md:{line}", "exec"), namespace)
            except Exception as exc:  # name the block that failed
                pytest.fail(f"README.md block at line {line} failed: {type(exc).__name__}: {exc}")
    finally:
        opened = namespace.get("graph")
        if isinstance(opened, MemoryGraph):
            opened.close()
    # what the blocks claim, checked on the stored state
    assert [str(f.value) for f in graph.current(tenant, "mira", "passport_deadline")] == ["2026-07-15"]
    assert [p.entities for p in graph.traverse(tenant, "cust-ada", ["holds", "covered_by"],
                                               valid_at="2026-02-01")] == [("cust-ada", "acc-1001", "pol-basic")]
    assert [f.status.value for f in graph.current(tenant, "mira", "birthday")] == ["confirmed"]
    with pytest.raises(UnknownSubject):  # deleted by the last line of the first block
        graph.history(f"{tenant}-archive", "mira")
    graph.delete_tenant(tenant)
