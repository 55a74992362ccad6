"""A non-editable install into a fresh virtualenv gives working imports, data files and the CLI."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_wheel_installs_under_the_sgam_namespace(tmp_path: Path) -> None:
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", ROOT, cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("sgam-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sgam/queries/current.cypher" in names
    assert "sgam/graph/schemas/default.yaml" in names
    assert "sgam/resources/neo4j-assembly.pom.xml" in names
    assert not any(n.split("/")[0] in ("graph", "queries", "ingest") for n in names)

    run(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path)
    python = tmp_path / "venv" / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", wheel, cwd=tmp_path)
    # A user's own queries.py must not shadow ours.
    (tmp_path / "queries.py").write_text("raise SystemExit('user module imported')\n")
    out = run(python, "-c", (
        "from sgam import MemoryGraph, AsyncMemoryGraph, default_schema\n"
        "from sgam.queries import load_queries\n"
        "print(','.join(sorted(load_queries())), default_schema().name)"
    ), cwd=tmp_path)
    names, schema = out.split()
    assert {"as-of", "current", "history", "provenance", "traverse"} <= set(names.split(","))
    assert schema == "sgam-default"
    assert "neo4j" in run(tmp_path / "venv" / "bin" / "sgam", "--help", cwd=tmp_path)
