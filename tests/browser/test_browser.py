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
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sgam import MemoryGraph, browser, demo
from sgam.queries import load_queries
from tests.conftest import ROOT, server_settings

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("SGAM_CHROMIUM", "/usr/bin/chromium")
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
    """The test server's Browser; only the locally provisioned server's HTTP port is known."""
    from sgam.neo4j_local import LocalServer

    uri, _ = neo4j_connection
    server = LocalServer(server_settings())
    if os.environ.get("NEO4J_URI") or uri != server.uri:
        pytest.skip(f"the Browser of {uri} is not known to this test (it runs against the local "
                    f"test server {server.uri}; unset NEO4J_URI)")
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


def run(page: Any, command: str) -> Any:
    """Type ``command`` into the editor, run it and return its result frame."""
    editor = page.locator('[data-testid="activeEditor"]')
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    # Inserted as text, not typed: Monaco would auto-close brackets and quotes while typing.
    page.keyboard.insert_text(command)
    page.click('[data-testid="editor-Run"]')
    first_line = command.strip().splitlines()[0][:60]
    frame = page.locator('[data-testid="frame"]').filter(
        has=page.locator('[data-testid="frameCommand"]', has_text=first_line)
    ).first
    frame.wait_for()
    return frame


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
    style_frame = run(page, browser.style_command())
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

    # Run as a multi-statement script: the :param line, then the query (each gets a row).
    frame = run(page, browser.favorites()[f"{browser.FAVORITES_FOLDER}/current.cypher"])
    statements = frame.locator('[data-testid="multi-statement-list-title"]')
    statements.filter(has_text=":param").wait_for()
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
        frame.get_by_text("Query: traverse").wait_for()
        frame.screenshot(path=str(ARTIFACTS / "browser-guide.png"))
