"""The local server's neo4j.conf (no server started): settings that keep a big import on the disk."""

from __future__ import annotations

from pathlib import Path

from sgam.neo4j_local import LocalServer
from sgam.settings import Settings


def test_transaction_logs_are_bounded(tmp_path: Path) -> None:
    conf = LocalServer(Settings(home=tmp_path / "home", bolt_port=7991, http_port=7992))._config()
    # Neo4j's default keeps "2 days" of logs: 9.5 GB after a 1M-fact import, ~95 GB at 10M.
    assert conf["db.tx_log.rotation.retention_policy"] == "1G size"
    # Logs are pruned only at a checkpoint: the default 15 minutes would let an import outgrow the cap.
    assert conf["db.checkpoint.interval.time"] == "5m"
    assert conf["db.tx_log.preallocate"] == "false"
