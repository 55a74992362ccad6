"""The test set-up's own imports, checked where there is no Docker (CI): a machine with Docker
takes the testcontainers path, which must import under `filterwarnings = error`."""

from __future__ import annotations

import warnings

from tests.conftest import neo4j_container_class


def test_the_testcontainers_path_imports_without_a_deprecation_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        container = neo4j_container_class()
    assert container.__name__ == "Neo4jContainer"
    assert container.__module__.startswith("testcontainers.community.neo4j")
    assert hasattr(container, "get_connection_url")
