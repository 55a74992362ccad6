"""mypy over the package under its installed module names (``make typecheck``, run by .ci/run).

graph/, ingest/ and queries/ install as sgam.graph, sgam.ingest and sgam.queries (pyproject.toml
``package-dir``), and the editable install maps them with an import hook that mypy does not follow:
plain ``mypy`` would name graph/store.py ``graph.store`` and not find ``sgam.graph.store``. So this
takes the files and settings ``mypy`` would (``[tool.mypy]``), renames each module by the same
``package-dir`` table, and checks them. Arguments are mypy's (e.g. a narrower list of files).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent


def installed_names() -> dict[str, str]:
    """Source folder as a dotted name -> installed package name, e.g. ``graph`` -> ``sgam.graph``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {folder.replace("/", "."): package
            for package, folder in config["tool"]["setuptools"]["package-dir"].items()}


def installed(module: str, names: dict[str, str]) -> str:
    for folder in sorted(names, key=len, reverse=True):
        if module == folder or module.startswith(folder + "."):
            return names[folder] + module[len(folder):]
    return module


def main(args: list[str]) -> int:
    names = installed_names()
    sources, options = process_options(args)
    renamed = [BuildSource(s.path, installed(s.module, names), s.text, s.base_dir) for s in sources]
    try:
        messages = build.build(renamed, options).errors
    except CompileError as error:
        messages = error.messages
    print("\n".join(messages) if messages else f"mypy: no issues in {len(renamed)} modules")
    return 1 if any(": error:" in m for m in messages) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
