"""Every module-level Cypher constant of the installed package, found by walking its modules.

The rule (graph/__init__.py says why the constants exist): a *constant* is a name assigned at the top
level of a module's own source (imported names are their home module's), whose value is a ``str``, or
a ``dict``/``list``/``tuple`` of them (each element counts, named ``NAME[key]``). It is *Cypher* when,
after ``//`` comment lines and leading blanks are stripped, it starts with an upper-case clause
keyword followed by a blank, ``(`` or ``{``: the house writes keywords in upper case, so prose
("Return the ...") and single words ("set") are not taken.

Three kinds:

* a *statement* runs as it is: EXPLAINed as it is;
* a *template* has ``%s`` / ``%(name)s`` slots (relationship types, labels, union branches) filled
  by the function that builds the statement: it is covered by a built statement (a builder's output,
  or another constant of its module) that matches it with the slots as wildcards;
* a *fragment* is a private (``_NAME``) constant spliced verbatim into other constants of its module:
  EXPLAINed inside them, never alone.

The modules are those of every package the project declares (``[tool.setuptools] packages`` in
pyproject.toml), walked recursively, so files that move between subpackages are still found.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent

CLAUSES = ("OPTIONAL MATCH", "MATCH", "MERGE", "CREATE", "UNWIND", "WITH", "RETURN", "CALL", "SHOW",
           "DROP", "LOAD CSV", "FOREACH", "USE", "DETACH DELETE", "DELETE", "SET", "REMOVE")
_CYPHER = re.compile(r"(?:%s)[\s({]" % "|".join(re.escape(c) for c in CLAUSES))
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_SLOT = re.compile(r"%(?:\(\w+\))?s")


@dataclass(frozen=True)
class Constant:
    module: str
    name: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def template(self) -> bool:
        return _SLOT.search(self.text) is not None

    def instance_in(self, statement: str) -> bool:
        """Whether ``statement`` contains this constant, its slots filled with anything."""
        pieces = _SLOT.split(self.text)
        pattern = r".+?".join(re.escape(p) for p in pieces)
        return re.search(pattern, statement, re.DOTALL) is not None


def is_cypher(text: str) -> bool:
    return _CYPHER.match(_COMMENT.sub("", text).lstrip()) is not None


def module_names() -> list[str]:
    """Every module of every declared package (walked, so subpackages not listed are found too),
    except ``__main__`` modules: importing one runs the program (``python -m sgam.cli``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    names: set[str] = set()
    for package in config["tool"]["setuptools"]["packages"]:
        module = importlib.import_module(package)
        names.add(package)
        names.update(m.name for m in pkgutil.walk_packages(module.__path__, package + ".")
                     if not m.name.endswith(".__main__"))
    return sorted(names)


def _assigned(module: ModuleType) -> set[str]:
    """The names the module's own source assigns at top level."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):  # a package of data files has no source
        return set()
    names: set[str] = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _elements(name: str, value: object) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(name, value)]
    if isinstance(value, dict):
        return [(f"{name}[{k!r}]", v) for k, v in value.items() if isinstance(v, str)]
    if isinstance(value, (list, tuple)):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, str)]
    return []


def discover() -> list[Constant]:
    """Every module-level Cypher constant, in module order. Raises if a module does not import."""
    found = []
    for module_name in module_names():
        module = importlib.import_module(module_name)
        for name in sorted(_assigned(module)):
            for label, text in _elements(name, getattr(module, name, None)):
                if is_cypher(text):
                    found.append(Constant(module_name, label, text))
    return found


def fragments(constants: list[Constant]) -> list[Constant]:
    """Private constants that occur verbatim in another constant of their module."""
    return [c for c in constants if c.name.startswith("_") and not c.template and any(
        o is not c and o.module == c.module and c.text in o.text for o in constants)]


def statements(constants: list[Constant]) -> list[Constant]:
    """The constants that run as they are (neither templates nor fragments)."""
    spliced = {c.where for c in fragments(constants)}
    return [c for c in constants if not c.template and c.where not in spliced]


def templates(constants: list[Constant]) -> list[Constant]:
    return [c for c in constants if c.template]
