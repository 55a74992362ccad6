"""Neo4j Browser support: the SGAM style (GraSS), the analyst queries as favourites and as a guide.

Everything here is generated from files shipped in the package, so it never drifts from them:

* :func:`style` is ``resources/browser/sgam.grass``: entities coloured by type and captioned by
  name, ``:Value`` nodes by their value, every fact relationship by
  ``attribute = value [valid_from, valid_to)``. :func:`style_command` is the same text as one
  ``:style ...`` line to paste into the Browser editor.
* :func:`favorites` / :func:`favorites_zip` are the named queries of ``queries/*.cypher`` (plus the
  demo's customer -> account -> policy picture) as Browser favourites: drop the zip onto the
  Browser window and they appear in a ``SGAM`` folder of the Favorites sidebar.
* :func:`render_guide` is the same queries as a Browser guide (HTML slides with runnable code);
  Browser fetches guides only over HTTP from an allow-listed host (``localhost`` by default), so
  :func:`serve_guide` serves it with the CORS header Browser needs, for ``:play <url>``.
* :func:`browser_help` is the how-to text for ``sgam browser help``; :func:`export` writes the
  three files.

GraSS as Browser 5 parses it: no comments, captions are quoted strings whose ``{property}``
placeholders are substituted (``<type>``/``<id>`` alone mean the type/id), and a declaration is
dropped if it contains a colon or a semicolon, so captions can hold neither.
"""

from __future__ import annotations

import html
import io
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path

from sgam.queries.loader import NamedQuery, load_queries

from sgam.demo import BROWSER_QUERY

FAVORITES_FOLDER = "SGAM"
STYLE_FILE = "sgam.grass"
FAVORITES_FILE = "sgam-favorites.zip"
GUIDE_FILE = "sgam-guide.html"
# Browser's "Connect result nodes": off, or Browser adds every relationship between the drawn
# nodes, retired (expired) fact rows included, which would contradict the query's time filter.
CONFIG_COMMAND = ":config autoComplete: false"

#: The demo's picture query (``sgam.demo.BROWSER_QUERY``): customer -> account -> policy.
PICTURE_QUERY = BROWSER_QUERY


def style() -> str:
    """The SGAM GraSS style sheet (the text of ``sgam/resources/browser/sgam.grass``)."""
    return (files("sgam") / "resources" / "browser" / STYLE_FILE).read_text(encoding="utf-8")


def style_command() -> str:
    """``:style`` followed by the style sheet on one line: paste it into the Browser editor."""
    return ":style " + " ".join(style().split())


def parse_grass(text: str) -> dict[str, dict[str, str]]:
    """Parse GraSS the way Neo4j Browser 5 does (``parseGrass``), to check a style before use.

    Returns ``{selector: {property: value}}``. Quotes are dropped and toggle a string in which
    braces are literal (outside one, a nested brace is dropped); a declaration that does not
    split into exactly two parts on ``:`` is ignored by Browser, so it is an error here.
    """
    rules: dict[str, str] = {}
    in_string = in_rule = in_placeholder = False
    selector = body = ""
    for char in text:
        if char in "'\"":
            in_string = not in_string
            continue
        if char == "{" and not in_string:
            # A nested unquoted brace is dropped (Browser's parser skips it too).
            in_placeholder, in_rule = in_rule, True
            continue
        if char == "}" and not in_string:
            if in_placeholder:
                in_placeholder = False
            else:
                in_rule = False
                rules[selector] = body
                selector = body = ""
            continue
        if in_rule:
            body += char
        elif not char.isspace():
            selector += char
    if in_rule or in_string or selector:
        raise ValueError(f"unterminated GraSS near {selector or body[-40:]!r}")
    parsed: dict[str, dict[str, str]] = {}
    for name, block in rules.items():
        props: dict[str, str] = {}
        for declaration in block.split(";"):
            if not declaration.strip():
                continue
            parts = declaration.split(":")
            if len(parts) != 2:
                raise ValueError(f"{name}: Browser ignores {declaration.strip()!r} (one ':' only)")
            props[parts[0].strip()] = parts[1].strip()
        parsed[name] = props
    return parsed


def _queries() -> list[NamedQuery]:
    return sorted(load_queries().values(), key=lambda q: q.name)


def favorites() -> dict[str, str]:
    """Favourite scripts by zip path (``SGAM/<name>.cypher``).

    Each starts with a comment line (Browser shows it as the favourite's title), then the query's
    example ``:param name => value;`` lines and the Cypher; Browser runs them as a multi-statement
    script.
    """
    # Browser commands other than :param/:use cannot share a script with Cypher: one each.
    scripts = {
        f"{FAVORITES_FOLDER}/0-style.cypher": (
            "// SGAM style: colours by entity type, facts captioned with attribute, value, validity\n"
            f"{style_command()}\n"
        ),
        f"{FAVORITES_FOLDER}/0-config.cypher": (
            "// SGAM setup: draw only the facts a query returns (no retired rows between nodes)\n"
            f"{CONFIG_COMMAND}\n"
        ),
        f"{FAVORITES_FOLDER}/0-picture.cypher": (
            f"// SGAM picture: customer -> account -> policy (demo tenant)\n{PICTURE_QUERY}\n"
        ),
    }
    for query in _queries():
        scripts[f"{FAVORITES_FOLDER}/{query.name}.cypher"] = (
            f"// SGAM {query.name}: {query.doc}\n{query.param_script()}\n{query.text.rstrip()}\n"
        )
    return scripts


def favorites_zip() -> bytes:
    """The favourites as a zip that Browser imports when it is dropped onto its window."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in favorites().items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return buffer.getvalue()


def _code(text: str) -> str:
    return f'<pre class="pre-scrollable code runnable">{html.escape(text.strip())}</pre>'


def _slide(title: str, body: str) -> str:
    return (
        '<slide class="row-fluid">\n<div class="col-sm-12">\n'
        f"<h3>{html.escape(title)}</h3>\n{body}\n</div>\n</slide>"
    )


def render_guide() -> str:
    """A Neo4j Browser guide (``:play <url>``): the style, the picture and every named query.

    Code blocks are runnable: a click puts them into the editor. Each query slide has its
    parameters (the query's own example ``:param`` lines) and the Cypher, as in ``queries/``.
    """
    slides = [
        _slide("SGAM: a bitemporal agent memory", (
            "<p>Entities are nodes <code>(:Entity:Customer {tenant_id, id, name})</code>. Facts are "
            "relationships carrying <code>attribute</code>, <code>value</code>, valid time "
            "<code>[valid_from, valid_to)</code> and transaction time "
            "<code>[recorded_at, expired_at)</code>; an attribute fact points at a "
            "<code>(:Value)</code> node.</p>\n<p>First apply the SGAM style (entities coloured by "
            "type, facts captioned <em>attribute = value [valid_from, valid_to)</em>) and switch "
            "off <em>Connect result nodes</em>, so only the facts a query returns are drawn:</p>\n"
            + _code(style_command()) + "\n" + _code(CONFIG_COMMAND)
        )),
        _slide("Customer -> account -> policy", (
            "<p>The demo tenant (<code>sgam demo</code>): Ada holds account acc-1001, covered by "
            "pol-basic until April 2026 and by pol-plus since. Click a fact to see its "
            "bitemporal properties:</p>\n" + _code(PICTURE_QUERY)
        )),
    ]
    for query in _queries():
        params = "".join(
            f"<li><code>{html.escape(p.name)}</code> ({html.escape(p.type)}"
            f"{', optional' if p.optional else ''}): {html.escape(p.doc)}</li>"
            for p in query.params
        )
        slides.append(_slide(f"Query: {query.name}", (
            f"<p>{html.escape(query.doc)}</p>\n<ul>{params}</ul>\n"
            + _code(query.param_script() + "\n" + query.text)
        )))
    return (
        '<article class="guide">\n<carousel class="deck container-fluid">\n'
        + "\n".join(slides)
        + "\n</carousel>\n</article>\n"
    )


def export(directory: Path) -> list[Path]:
    """Write the style, the favourites zip and the guide into ``directory``; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / STYLE_FILE, directory / FAVORITES_FILE, directory / GUIDE_FILE]
    written[0].write_text(style(), encoding="utf-8")
    written[1].write_bytes(favorites_zip())
    written[2].write_text(render_guide(), encoding="utf-8")
    return written


class _GuideHandler(BaseHTTPRequestHandler):
    guide = b""
    grass = b""

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        # The style for `:style <url>` at /sgam.grass; the guide for `:play <url>` at any other path.
        is_style = self.path.split("?")[0].endswith("/" + STYLE_FILE)
        body = self.grass if is_style else self.guide
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8" if is_style else "text/html; charset=utf-8")
        # Browser fetches from its own origin: without this header it cannot read the answer.
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_OPTIONS(self) -> None:  # noqa: N802
        # Browser sends no-cache headers, so its fetch is preflighted.
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.send_header("Access-Control-Max-Age", "600")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


def style_url(guide_url: str) -> str:
    """Where :func:`serve_guide` serves the style, for ``:style <url>``."""
    return guide_url.rsplit("/", 1)[0] + "/" + STYLE_FILE


@contextmanager
def serve_guide(port: int = 0) -> Iterator[str]:
    """Serve :func:`render_guide` (and the style, at :func:`style_url`) on ``localhost:port``
    (0: any free port); yield the guide's URL.

    ``localhost`` is in Browser's default ``browser.remote_content_hostname_allowlist``, so
    ``:play <url>`` and ``:style <url>`` work without server configuration. The server stops
    when the block ends.
    """
    handler = type("GuideHandler", (_GuideHandler,), {"guide": render_guide().encode("utf-8"),
                                                      "grass": style().encode("utf-8")})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, name="sgam-guide", daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}/{GUIDE_FILE}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def browser_help(browser_url: str = "http://127.0.0.1:7474/browser/",
                 style_path: Path | None = None) -> str:
    """How to style the graph and load the analyst queries in Neo4j Browser (for ``sgam browser
    help``, which writes the style to ``style_path`` first). Every step is a command to run or a
    file to drop: no line here is longer than a command, so a terminal never wraps one."""
    style_file = style_path or files("sgam") / "resources" / "browser" / STYLE_FILE
    return "\n".join([
        f"Open {browser_url} and connect (user neo4j; the password is in the server's credentials.json).",
        "",
        "1. Style (entities coloured by type, facts captioned 'attribute = value [valid_from, valid_to)'):",
        f"   drag {style_file} onto the Browser window,",
        "   or run `sgam browser guide` and paste the `:style http://localhost:PORT/sgam.grass` line it prints.",
        "",
        "2. Draw only the facts a query returns (otherwise Browser adds retired fact rows between the nodes):",
        f"   {CONFIG_COMMAND}",
        "",
        "3. Analyst queries as favourites: run `sgam browser export DIR`, then drag",
        f"   DIR/{FAVORITES_FILE} onto the Browser window: they appear under Favorites > {FAVORITES_FOLDER}.",
        "",
        "4. The same queries as a guide: run `sgam browser guide` and paste the `:play URL` line it prints.",
        "",
        "5. The customer -> account -> policy picture (demo tenant, after `sgam demo`):",
        *(f"   {line}" for line in PICTURE_QUERY.splitlines()),
    ])


_SELECTOR = re.compile(r"^(node|relationship)(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def check_style(text: str | None = None) -> dict[str, dict[str, str]]:
    """Parse a style sheet (default: :func:`style`) and check its selectors; return the rules."""
    rules = parse_grass(style() if text is None else text)
    bad = [name for name in rules if not _SELECTOR.match(name)]
    if bad:
        raise ValueError(f"not a GraSS selector: {', '.join(bad)}")
    return rules
