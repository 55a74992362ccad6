"""Importing graphiti-core without its side effects (the one place SGAM imports it).

graphiti-core (the ``graphiti`` extra) does three things on import or use that a library must not
do behind its caller's back, so :func:`load_graphiti` neutralises them before the first import:

* telemetry: ``Graphiti()`` reports to PostHog unless ``GRAPHITI_TELEMETRY_ENABLED`` is false;
  it is set to ``false`` here (SGAM never builds a ``Graphiti`` object, but user code in the
  same process might);
* ``.env`` loading: several of its modules call ``load_dotenv()`` at import, which walks up from
  the installed package; those calls are made no-ops for the duration of the import;
* pydantic v1-style ``class Config`` deprecation warnings raised at import (warnings fail SGAM's
  tests) are silenced for that import only.

Nothing happens at import of this module; call :func:`load_graphiti` first, then import
``graphiti_core`` submodules normally.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

from sgam.graph.errors import SgamError

TELEMETRY_ENV = "GRAPHITI_TELEMETRY_ENABLED"


class GraphitiUnavailable(SgamError):
    """Graphiti cannot do what was asked: graphiti-core is not installed (install the ``graphiti``
    extra), or the benchmarks' no-LLM harness (:mod:`sgam.bench.graphiti`) was asked for something
    it does not do (an LLM call, a cross-encoder) or given a bad group id."""


def load_graphiti() -> ModuleType:
    """Import ``graphiti_core`` with telemetry off, no ``.env`` loading and no import warnings."""
    os.environ[TELEMETRY_ENV] = "false"
    try:
        import dotenv
    except ImportError:
        dotenv = None  # type: ignore[assignment]
    original = dotenv.load_dotenv if dotenv is not None else None
    try:
        if dotenv is not None:
            dotenv.load_dotenv = lambda *args, **kwargs: False  # type: ignore[assignment]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                return importlib.import_module("graphiti_core")
            except ImportError as exc:
                raise GraphitiUnavailable(
                    f"graphiti-core cannot be imported ({exc}); install it with "
                    "`pip install 'sgam[graphiti]'`"
                ) from exc
    finally:
        if dotenv is not None:
            dotenv.load_dotenv = original  # type: ignore[assignment]


__all__ = ["GraphitiUnavailable", "TELEMETRY_ENV", "load_graphiti"]
