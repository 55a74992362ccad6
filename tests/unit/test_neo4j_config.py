"""The local server's neo4j.conf (no server started): settings that keep a big import on the disk."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sgam.local.server import LocalServer, restrict_tree
from sgam.settings import Settings


def test_transaction_logs_are_bounded(tmp_path: Path) -> None:
    conf = LocalServer(Settings(home=tmp_path / "home", bolt_port=7991, http_port=7992))._config()
    # Neo4j's default keeps "2 days" of logs: 9.5 GB after a 1M-fact import, ~95 GB at 10M.
    assert conf["db.tx_log.rotation.retention_policy"] == "1G size"
    # Logs are pruned only at a checkpoint: the default 15 minutes would let an import outgrow the cap.
    assert conf["db.checkpoint.interval.time"] == "5m"
    assert conf["db.tx_log.preallocate"] == "false"


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]
            if not p.is_symlink()}


def test_an_existing_home_is_made_private(tmp_path: Path) -> None:
    """A home made world-readable (0755 folders, 0644 files: the store and transaction logs hold
    episode text) keeps only its owner's bits; links are not followed out of it."""
    home = tmp_path / "home"
    logs = home / "data" / "transactions" / "neo4j"
    logs.mkdir(parents=True)
    for path, mode in ((logs / "neostore.transaction.db.0", 0o644), (home / "conf" / "neo4j.conf", 0o664),
                       (home / "run" / "tool", 0o755)):
        path.parent.mkdir(exist_ok=True)
        path.write_text("x")
        path.chmod(mode)
    for folder in (home, home / "data", home / "data" / "transactions", logs, home / "conf", home / "run"):
        folder.chmod(0o755)
    outside = tmp_path / "shared.txt"
    outside.write_text("not the home's")
    outside.chmod(0o644)
    os.symlink(outside, home / "link")
    restrict_tree(home)
    modes = _modes(home)
    assert {name: mode for name, mode in modes.items() if mode & 0o077} == {}
    assert modes["data/transactions/neo4j"] == 0o700
    assert modes["data/transactions/neo4j/neostore.transaction.db.0"] == 0o600
    assert modes["run/tool"] == 0o700  # the owner's execute bit stays
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
