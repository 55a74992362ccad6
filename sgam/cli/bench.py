"""``sgam bench``: the benchmarks (:mod:`sgam.bench`), each imported only when it runs."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from typer.core import TyperGroup

from sgam.cli.common import app, console, err, friendly

bench_app = typer.Typer(invoke_without_command=True,
                        help="Benchmarks; without a subcommand: scale and replay at their default sizes.")
app.add_typer(bench_app, name="bench")


@bench_app.callback()
def bench(ctx: typer.Context,
          own_server: bool = typer.Option(True, "--own-server/--configured-server",
                                          help="Without a subcommand: run on a throwaway local Neo4j of "
                                               "its own (started in a temporary directory, removed "
                                               "afterwards) unless NEO4J_URI names a server; or on the "
                                               "configured one")) -> None:
    """Benchmarks; without a subcommand: scale and replay at their default sizes."""
    if ctx.invoked_subcommand is None:
        group = ctx.command
        assert isinstance(group, TyperGroup)  # a typer app with subcommands
        own = own_server and not os.environ.get("NEO4J_URI")
        with _bench_server(own):
            for name in ("scale", "replay"):  # each with its own defaults, as if run without options
                command = group.get_command(ctx, name)
                # on a throwaway server the last size's tenant goes with the server
                with command.make_context(name, ["--keep"] if own and name == "scale" else [], parent=ctx) as sub:
                    command.invoke(sub)


@contextmanager
def _bench_server(own: bool) -> Iterator[None]:
    """With ``own``: a local Neo4j in a temporary home on free ports, the connection for what runs
    inside, then stopped and removed. The benchmarks leave a million facts behind them; removing
    them from a shared store took over two minutes of the run, removing the directory a second,
    and every run starts from the same empty store."""
    if not own:
        yield
        return
    from sgam.local.server import LocalServer
    from sgam.settings import Settings

    home = Path(tempfile.mkdtemp(prefix="sgam-bench-"))
    names = ("SGAM_HOME", "SGAM_BOLT_PORT", "SGAM_HTTP_PORT")
    saved = {name: os.environ.get(name) for name in names}
    bolt, http = _free_ports(2)
    os.environ.update(SGAM_HOME=str(home), SGAM_BOLT_PORT=str(bolt), SGAM_HTTP_PORT=str(http))
    server = LocalServer(Settings())
    try:
        err.print(f"benchmark server: {server.up().uri} (home {home}, removed afterwards)")
        # The default schema's constraints and indexes, as any server in use has them: created
        # later, by the replay benchmark's first connection, they flushed the server's plan cache
        # just before its timed reads (its first read of each kind then took 25-35 ms).
        from sgam.api import MemoryGraph

        MemoryGraph.connect().close()
        yield
    finally:
        try:
            server.down()
        finally:
            shutil.rmtree(home, ignore_errors=True)
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on the loopback now (held together while they are picked)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


@bench_app.command("baseline")
@friendly
def bench_baseline(
    facts: int = typer.Option(100_000, help="Facts to write"),
    subjects: int = typer.Option(10_000, help="Subjects they are about"),
    lookups: int = typer.Option(2_000, help="Timed lookups per query kind"),
    seed: int = typer.Option(7, help="Random seed of the generated data (same seed, same data)"),
    out_dir: Path = typer.Option(Path("bench/results"), help="Where the JSON result goes"),
) -> None:
    """Write throughput and lookup latency at one size, each next to a raw-Cypher baseline."""
    from sgam.bench import baseline as bench_module

    bench_module.main(facts=facts, subjects=subjects, lookups=lookups, seed=seed, out_dir=out_dir)


def _sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1:], 1)
        try:
            sizes.append(int(float(part[:-1] if scale > 1 else part) * scale))
        except ValueError:
            raise typer.BadParameter(f"--sizes: {part!r} is not a size; use e.g. 10k,100k,1m") from None
    return sizes


@bench_app.command("scale")
@friendly
def bench_scale(
    sizes: str = typer.Option("10k,100k,1m", help="Graph sizes in facts, ascending (e.g. 10k,100k,1m)"),
    huge: bool = typer.Option(False, "--huge", help="Add 10M facts (3-4 hours, ~20 GB of disk, ~1 GB of RAM; see README)"),
    window: int = typer.Option(20_000, help="Deltas written through write_many (timed) at each size"),
    lookups: int = typer.Option(1_000, help="Timed calls per operation and size (sgam.bench.scale.LOOKUPS)"),
    graphiti: bool = typer.Option(None, "--graphiti/--no-graphiti",
                                  help="Graphiti search latency too [default: at sizes up to 10k]"),
    seed: int = typer.Option(7, help="Random seed of the generated data (same seed, same data)"),
    out_dir: Path = typer.Option(Path("bench/results"), help="Where the JSON, Markdown and PNG go"),
    keep: bool = typer.Option(False, "--keep", help="Leave the last size's tenant in the database"),
) -> None:
    """Cost vs graph size (10k, 100k, 1M facts): writes, current, as_of, history, 3-hop traverse
    and context, each next to raw Cypher; store size, heap and RSS."""
    from sgam.bench import scale as scale_module

    chosen = _sizes(sizes) + ([scale_module.HUGE_SIZE] if huge else [])
    result = scale_module.run(chosen, seed=seed, window=window, lookups=lookups, graphiti=graphiti,
                              out_dir=out_dir, keep=keep, log=err.print)
    scale_module.print_summary(result, console)


@bench_app.command("replay")
@friendly
def bench_replay(
    size: str = typer.Option("smoke", help="smoke | small | large"),
    seed: int = typer.Option(7, help="Random seed of the generated data (same seed, same data)"),
    out_dir: Path = typer.Option(Path("bench/results"), help="Where the JSON, Markdown and PNG go"),
    graphiti: bool = typer.Option(None, "--graphiti/--no-graphiti",
                                  help="Include Graphiti (graphiti-core, extra 'graphiti') [default: "
                                       "at smoke and small; at large its load rate is measured on a sample]"),
    threads: int = typer.Option(1, min=0, help="torch threads for MiniLM (0 = torch's default; 1 is "
                                               "fastest on a busy 2-core machine)"),
    new_process: bool = typer.Option(True, "--new-process/--no-new-process",
                                     help="Also ask SGAM's questions from a process that has just "
                                          "started (its own column and tail)"),
) -> None:
    """Deterministic replay benchmark: SGAM vs text memory (BM25, MiniLM) and Graphiti, no LLM."""
    from sgam.bench import replay as replay_module

    if size not in replay_module.SIZES:
        raise typer.BadParameter(f"--size must be one of {', '.join(replay_module.SIZES)}")
    result = replay_module.run(size=size, seed=seed, out_dir=out_dir, graphiti=graphiti,
                               log=err.print, threads=threads, new_process=new_process)
    console.print(replay_module.markdown(result), markup=False, highlight=False)
    console.print(f"results: {result['result_files']}", markup=False, highlight=False)


app.command("bench-replay", hidden=True, help="Alias of `sgam bench replay`.")(bench_replay)


@bench_app.command("locomo")
@friendly
def bench_locomo(
    path: Path = typer.Argument(..., exists=True, dir_okay=False,
                                help="locomo10.json (snap-research/locomo, CC BY-NC 4.0; not shipped)"),
    out_dir: Path = typer.Option(Path("bench/results"), help="Where the JSON and Markdown go"),
    limit: int = typer.Option(0, help="Use only the first N conversations (0 = all)"),
    threads: int = typer.Option(1, min=0, help="torch threads for MiniLM (0 = torch's default; 1 is "
                                               "fastest on a busy 2-core machine)"),
) -> None:
    """Evidence recall@5/10 on LoCoMo: SGAM's context assembly vs plain BM25 and plain MiniLM."""
    from sgam.bench import locomo as locomo_module

    result = locomo_module.run(path, out_dir=out_dir, limit=limit or None, log=err.print,
                               threads=threads)
    console.print(locomo_module.markdown(result), markup=False, highlight=False)
    console.print(f"results: {result['result_files']}", markup=False, highlight=False)
