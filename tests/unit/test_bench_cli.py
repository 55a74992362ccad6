"""The ``sgam bench`` command group: subcommands, defaults of the bare group, the hidden alias."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sgam.bench import replay as bench_replay, scale as bench_scale
from sgam.cli import app
from sgam.cli import bench as cli_bench


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []

    def scale(sizes: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(("scale", {"sizes": sizes, **kwargs}))
        return {"sizes": [], "result_files": {}}

    def replay(**kwargs: Any) -> dict[str, Any]:
        seen.append(("replay", kwargs))
        return {"result_files": {}}

    monkeypatch.setattr(bench_scale, "run", scale)
    monkeypatch.setattr(bench_scale, "print_summary", lambda result, console: None)
    monkeypatch.setattr(bench_replay, "run", replay)
    monkeypatch.setattr(bench_replay, "markdown", lambda result: "")
    return seen


def test_bare_bench_runs_scale_then_replay_with_their_defaults(calls: list, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without NEO4J_URI, on a server of its own: asked for here, started and removed in
    # tests/integration/test_bench_smoke.py (a unit test starts no server).
    servers: list[bool] = []

    @contextmanager
    def server(own: bool) -> Iterator[None]:
        servers.append(own)
        yield

    monkeypatch.delenv("NEO4J_URI", raising=False)
    monkeypatch.setattr(cli_bench, "_bench_server", server)
    result = CliRunner().invoke(app, ["bench"])
    assert result.exit_code == 0, result.output
    assert servers == [True]
    assert [name for name, _ in calls] == ["scale", "replay"]
    scale, replay = calls[0][1], calls[1][1]
    assert scale["sizes"] == list(bench_scale.DEFAULT_SIZES) and scale["window"] == 20_000
    assert scale["lookups"] == bench_scale.LOOKUPS  # the command's default is the module's
    assert scale["graphiti"] is None and scale["out_dir"] == Path("bench/results")
    assert replay["size"] == "smoke" and replay["seed"] == 7


def test_scale_options_and_alias(calls: list) -> None:
    result = CliRunner().invoke(app, ["bench", "scale", "--sizes", "2k,5k", "--huge", "--no-graphiti",
                                      "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert calls[-1][1]["sizes"] == [2_000, 5_000, bench_scale.HUGE_SIZE]
    assert calls[-1][1]["graphiti"] is False and calls[-1][1]["seed"] == 3
    result = CliRunner().invoke(app, ["bench-replay", "--size", "small"])
    assert result.exit_code == 0, result.output
    assert calls[-1] == ("replay", {"size": "small", "seed": 7, "out_dir": Path("bench/results"),
                                    "graphiti": None, "log": calls[-1][1]["log"], "threads": 1,
                                    "new_process": True})
    result = CliRunner().invoke(app, ["bench", "replay", "--no-new-process"])
    assert result.exit_code == 0, result.output
    assert calls[-1][1]["new_process"] is False
    assert "bench-replay" not in CliRunner().invoke(app, ["--help"]).output


def test_sizes_parse_and_reject() -> None:
    assert cli_bench._sizes("10k, 100k,1m,2500") == [10_000, 100_000, 1_000_000, 2_500]
    assert cli_bench._sizes("1.5m") == [1_500_000]
    result = CliRunner().invoke(app, ["bench", "scale", "--sizes", "ten"])
    assert result.exit_code != 0 and "'ten' is not a size" in result.output
