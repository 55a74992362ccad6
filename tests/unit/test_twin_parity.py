"""The async twins offer every public method of the sync classes, with the same signature
(README: "has the same methods"). A method added to one class only fails here."""

from __future__ import annotations

import inspect

import pytest

from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.graph.store import AsyncStore, Store


def _methods(cls: type) -> dict[str, object]:
    """The public methods ``cls`` defines (class methods included, properties not)."""
    return {name: getattr(cls, name) for name, member in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, classmethod))}


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(method) for name, method in _methods(cls).items()}


@pytest.mark.parametrize(("sync", "twin"), [(MemoryGraph, AsyncMemoryGraph), (Store, AsyncStore)])
def test_the_async_twin_has_every_method_with_the_same_signature(sync: type, twin: type) -> None:
    ours, theirs = _public(sync), _public(twin)
    assert sorted(ours) == sorted(theirs), (f"only {sync.__name__}: {sorted(set(ours) - set(theirs))}; "
                                            f"only {twin.__name__}: {sorted(set(theirs) - set(ours))}")
    for name, signature in ours.items():
        other = theirs[name]
        assert list(signature.parameters.values()) == list(other.parameters.values()), name
        if name != "connect":  # the classmethod returns its own class
            assert str(signature.return_annotation) == str(other.return_annotation), name


@pytest.mark.parametrize("twin", [AsyncMemoryGraph, AsyncStore])
def test_every_method_of_the_async_twin_but_the_properties_is_a_coroutine(twin: type) -> None:
    methods = _methods(twin)
    assert "connect" in methods and "close" in methods
    for name, method in methods.items():
        assert inspect.iscoroutinefunction(method), f"{twin.__name__}.{name} is not async"


def test_both_graphs_expose_the_retries_property() -> None:
    assert isinstance(vars(MemoryGraph)["retries"], property)
    assert isinstance(vars(AsyncMemoryGraph)["retries"], property)
