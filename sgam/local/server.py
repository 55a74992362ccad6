"""Provision and run a local Neo4j 5.26 Community server assembled from Maven Central.

No Docker and no dist.neo4j.org: Maven resolves the server's jars once into a cache shared by
every home, and the server is launched the way ``bin/neo4j console`` launches it
(``org.neo4j.server.CommunityEntryPoint``). Each home holds its own conf, data, logs and
``credentials.json``. A home is the user's alone: its store files and transaction logs hold
episode text, so everything under it is created (and, on every ``up``, tightened to) owner-only,
folders 0700 and files 0600; the server runs with umask 077.

    server = LocalServer(Settings())
    info = server.up()        # idempotent: returns the running server if there is one
    server.down()

Clients find the server through :func:`sgam.settings.resolve_connection` (explicit ``NEO4J_*``
settings win, then the credentials this module stores), without importing this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.resources
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator
from typing import NoReturn
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from sgam.graph.errors import ProvisioningError
from sgam.settings import CREDENTIALS_FILE, DEFAULT_USER, Settings, stored_credentials

MAIN_CLASS = "org.neo4j.server.CommunityEntryPoint"
ADMIN_CLASS = "org.neo4j.cli.AdminTool"
SUPPORTED_JAVA = (17, 21)
PID_FILE = "sgam-neo4j.pid"
LIB_MARKER = ".sgam-complete"
# The plugin jars this home got from the cache, so a later `up` replaces them (and only them).
PLUGINS_MANIFEST = ".sgam-plugins"
# APOC core, for the Browser pictures' virtual relationships (queries/picture.cypher). Only the
# apoc.create.* procedures are loaded: nothing else of APOC's (file and URL loading) is reachable.
PROCEDURES_ALLOWLIST = "apoc.create.*"
STOP_TIMEOUT = 60.0
LOG_TAIL_LINES = 15
PRIVATE_UMASK = 0o077
"""The server's umask: what it creates under the home is readable by its user only."""
# The local server's transaction-log retention and checkpoint interval (see ``LocalServer._config``).
TX_LOG_RETENTION = "1G size"
CHECKPOINT_INTERVAL = "5m"

# "auto" server memory (SGAM_HEAP_SIZE, SGAM_PAGECACHE_SIZE): an eighth of the machine's memory for
# each, in steps of 256 MiB, the heap within 1-4 GiB and the page cache within 512 MiB-4 GiB. A bulk
# import's chunk is one transaction held in the heap, and the store is read through the page cache:
# on the 24 GiB development machine, 2.8 GiB each instead of 1 GiB and 512 MiB took a quarter off the
# server's CPU for a 1M-fact import (sgam/bench/README.md). The rest stays for the user's programs.
HEAP_RANGE_MIB = (1024, 4096)
PAGECACHE_RANGE_MIB = (512, 4096)
FALLBACK_MEMORY = ("1g", "512m")

JAVA_MISSING = (
    "Java 17 or 21 is required to run the local Neo4j: install it "
    "(Debian: apt-get install openjdk-17-jre-headless) or point NEO4J_URI at a running server"
)
MAVEN_MISSING = (
    "Maven is required to fetch the local Neo4j from Maven Central: install it "
    "(Debian: apt-get install maven) or point NEO4J_URI at a running server"
)

# What bin/neo4j passes to the server JVM (5.26 default neo4j.conf). The launcher reads these
# from server.jvm.additional, but we start CommunityEntryPoint directly, so they must be on the
# command line. The --add-opens matter: without java.nio, vector index population stalls.
JVM_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:+AlwaysPreTouch",
    "-XX:+UnlockExperimentalVMOptions",
    "-XX:+TrustFinalNonStaticFields",
    "-XX:+DisableExplicitGC",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djdk.tls.ephemeralDHKeySize=2048",
    "-Djdk.tls.rejectClientInitiatedRenegotiation=true",
    "-XX:FlightRecorderOptions=stackdepth=256",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+DebugNonSafepoints",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    "-Dlog4j2.disable.jmx=true",
    "-Dlog4j.layout.jsonTemplate.maxStringLength=32768",
    "-Dfile.encoding=UTF-8",
)

# Shipped rather than relying on the defaults embedded in the jars, whose fallback rules
# changed across 5.x releases.
USER_LOGS_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="ERROR" packages="org.neo4j.logging.log4j">
  <Appenders>
    <RandomAccessFile name="Neo4jLog" fileName="${config:server.directories.logs}/neo4j.log">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSSZ}{GMT+0} %-5p %m%n"/>
    </RandomAccessFile>
    <Console name="ConsoleAppender" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSSZ}{GMT+0} %-5p %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="Neo4jLog"/><AppenderRef ref="ConsoleAppender"/></Root>
  </Loggers>
</Configuration>
"""

SERVER_LOGS_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="ERROR" packages="org.neo4j.logging.log4j">
  <Appenders>
    <RandomAccessFile name="DebugLog" fileName="${config:server.directories.logs}/debug.log">
      <Neo4jDebugLogLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSSZ}{GMT+0} %-5p [%c{1.}] %m%n"/>
    </RandomAccessFile>
    <RandomAccessFile name="QueryLog" fileName="${config:server.directories.logs}/query.log">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSSZ}{GMT+0} %-5p %m%n"/>
    </RandomAccessFile>
    <RandomAccessFile name="HttpLog" fileName="${config:server.directories.logs}/http.log">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSSZ}{GMT+0} %-5p %m%n"/>
    </RandomAccessFile>
    <RandomAccessFile name="SecurityLog" fileName="${config:server.directories.logs}/security.log">
      <PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSSZ}{GMT+0} %-5p %m%n"/>
    </RandomAccessFile>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="DebugLog"/></Root>
    <Logger name="QueryLogger" level="INFO" additivity="false"><AppenderRef ref="QueryLog"/></Logger>
    <Logger name="HttpLogger" level="INFO" additivity="false"><AppenderRef ref="HttpLog"/></Logger>
    <Logger name="SecurityLogger" level="INFO" additivity="false"><AppenderRef ref="SecurityLog"/></Logger>
  </Loggers>
</Configuration>
"""

# Popen objects of servers started by this Python process, kept so they are reaped (no zombie
# left looking alive to kill(pid, 0)) and never garbage-collected while the server runs.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ServerInfo:
    """How to reach a running local server. The password stays in ``credentials_path``."""

    uri: str
    http_url: str
    browser_url: str
    user: str
    credentials_path: Path
    home: Path
    logs_dir: Path
    pid: int


def machine_memory() -> int | None:
    """Bytes of memory this machine has, or its control group's limit when that is lower; None
    when neither can be read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError):
            text = Path(limit).read_text().strip()
            if text.isdigit():
                total = min(total, int(text))
    return total if total > 0 else None


def memory_sizes(total: int | None) -> tuple[str, str]:
    """The heap and page cache sizes that "auto" means on a machine with ``total`` bytes (see
    ``HEAP_RANGE_MIB``); Neo4j's own small defaults when the memory is unknown."""
    if total is None:
        return FALLBACK_MEMORY
    eighth = total // 8 // (256 << 20) * 256
    (heap_min, heap_max), (cache_min, cache_max) = HEAP_RANGE_MIB, PAGECACHE_RANGE_MIB
    return f"{min(max(eighth, heap_min), heap_max)}m", f"{min(max(eighth, cache_min), cache_max)}m"


@dataclass(frozen=True)
class ServerStatus:
    """Whether the local server of a home is running, and where its files are."""

    running: bool
    pid: int | None
    uri: str
    browser_url: str
    home: Path
    logs_dir: Path
    credentials_path: Path


class LocalServer:
    """One Neo4j Community server living in ``settings.home``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Absolute, because the path is matched against the server's --home-dir argument.
        self.home = settings.home.expanduser().resolve()
        self.cache_dir = settings.cache_dir.expanduser().resolve()

    # ---- paths -----------------------------------------------------------------------------

    @property
    def lib_dir(self) -> Path:
        """Jars of this Neo4j version, shared by every home so they are resolved only once."""
        return self.cache_dir / f"neo4j-{self.settings.neo4j_version}" / "lib"

    @property
    def plugins_cache(self) -> Path:
        """APOC core's jars and those of its dependencies the server's lib lacks, shared by every
        home; each home's ``plugins/`` gets a copy."""
        return self.cache_dir / f"apoc-{self.settings.apoc_version}" / "plugins"

    @property
    def plugins_dir(self) -> Path:
        return self.home / "plugins"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def credentials_path(self) -> Path:
        return self.home / CREDENTIALS_FILE

    @property
    def pid_path(self) -> Path:
        return self.home / "run" / PID_FILE

    @property
    def console_log(self) -> Path:
        return self.logs_dir / "console.log"

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.settings.bolt_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.http_port}"

    @property
    def browser_url(self) -> str:
        return self.http_url + "/browser/"

    # ---- public API ------------------------------------------------------------------------

    def up(self) -> ServerInfo:
        """Start the server if it is not running, and return once Bolt accepts our credentials.

        Raises ProvisioningError with a one-line cause (and a log excerpt when the server
        itself failed).
        """
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._home_lock():
            # Homes made before their files were private, and files a server started then still
            # writes, are tightened on every `up`.
            restrict_tree(self.home)
            pid = self._running_pid()
            if pid is not None:
                # Another `up` may have started it moments ago; waiting is cheap once it is ready.
                # It is not ours to stop if that wait fails.
                self._wait_ready(pid, stop_on_failure=False)
                return self._info(pid)

            java = self._check_java()
            self._check_maven()
            self.ensure_jars()
            self.ensure_plugins()
            self._make_dirs()
            self._install_plugins()
            self.write_config()
            if self._is_first_start():
                self._set_initial_password(java)
            else:
                creds = self.credentials()
                if creds is None:
                    raise ProvisioningError(
                        f"the database in {self.home / 'data'} exists but "
                        f"{self.credentials_path} is missing, so its password is unknown: "
                        "restore the file, delete the data directory to start over, "
                        "or point NEO4J_URI/NEO4J_PASSWORD at it"
                    )
                if creds[0] != self.uri:
                    # The Bolt port changed since provisioning; clients read the uri from here.
                    self._store_credentials(creds[2])
            self._check_ports_free()
            pid = self._start(java)
            self._wait_ready(pid, stop_on_failure=True)
            return self._info(pid)

    def down(self) -> bool:
        """Stop the server this home started; return False if none was running.

        Only a process whose command line is our CommunityEntryPoint for this home is signalled,
        so a stale pid file never kills an unrelated process.
        """
        if not self.home.exists():
            return False
        with self._home_lock():
            pid = self._running_pid()
            if pid is None:
                self.pid_path.unlink(missing_ok=True)
                return False
            self._stop(pid)
            self.pid_path.unlink(missing_ok=True)
            return True

    def status(self) -> ServerStatus:
        """Report whether the server is running, without starting or waiting for anything."""
        pid = self._running_pid()
        creds = self.credentials()
        return ServerStatus(
            running=pid is not None,
            pid=pid,
            uri=creds[0] if creds else self.uri,
            browser_url=self.browser_url,
            home=self.home,
            logs_dir=self.logs_dir,
            credentials_path=self.credentials_path,
        )

    def credentials(self) -> tuple[str, str, str] | None:
        """(uri, user, password) stored at first provisioning, or None if there are none."""
        return stored_credentials(self.credentials_path)

    def ensure_jars(self) -> Path:
        """Resolve the server's jars from Maven Central unless a complete lib dir is cached."""
        return _cached(self.lib_dir, self._lib_complete, self._resolve_into)

    def ensure_plugins(self) -> Path:
        """Resolve APOC core from Maven Central unless its plugin jars are cached."""
        self.ensure_jars()  # which of APOC's dependencies to leave out depends on the lib
        return _cached(self.plugins_cache, self._plugins_complete, self._resolve_plugins_into)

    def write_config(self) -> Path:
        """Write conf/neo4j.conf and the log4j files from scratch.

        Never appended to: strict validation refuses to start on a duplicated key.
        """
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        lines = ["# Written by sgam on every `sgam neo4j up`; edits are overwritten."]
        lines += [f"{key}={value}" for key, value in self._config().items()]
        conf = self.conf_dir / "neo4j.conf"
        _write_atomic(conf, "\n".join(lines) + "\n")
        _write_atomic(self.conf_dir / "user-logs.xml", USER_LOGS_XML)
        _write_atomic(self.conf_dir / "server-logs.xml", SERVER_LOGS_XML)
        return conf

    # ---- configuration ---------------------------------------------------------------------

    @property
    def memory(self) -> tuple[str, str]:
        """The heap and page cache sizes the server is configured with ("auto" resolved)."""
        heap, cache = self.settings.heap_size, self.settings.pagecache_size
        if "auto" in (heap, cache):
            auto_heap, auto_cache = memory_sizes(machine_memory())
            heap = auto_heap if heap == "auto" else heap
            cache = auto_cache if cache == "auto" else cache
        return heap, cache

    def configured_memory(self) -> tuple[str, str]:
        """The heap and page cache sizes in the home's neo4j.conf (what a running server was started
        with, even if the settings changed since); :attr:`memory` when there is no config yet."""
        try:
            lines = (self.conf_dir / "neo4j.conf").read_text(encoding="utf-8").splitlines()
        except OSError:
            return self.memory
        conf = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
        heap, cache = conf.get("server.memory.heap.max_size"), conf.get("server.memory.pagecache.size")
        if heap is None or cache is None:
            own_heap, own_cache = self.memory
            heap, cache = heap or own_heap, cache or own_cache
        return heap, cache

    def _config(self) -> dict[str, str]:
        """neo4j.conf as a dict, so a key cannot appear twice. 5.x setting names only."""
        s = self.settings
        heap, pagecache = self.memory
        bolt = f"127.0.0.1:{s.bolt_port}"
        http = f"127.0.0.1:{s.http_port}"
        return {
            "server.directories.data": "data",
            "server.directories.logs": "logs",
            "server.directories.plugins": "plugins",
            "server.directories.import": "import",
            "server.directories.run": "run",
            # Loopback only: the server holds the user's memory and must not face the network.
            "server.default_listen_address": "127.0.0.1",
            "server.default_advertised_address": "127.0.0.1",
            "server.bolt.enabled": "true",
            "server.bolt.listen_address": bolt,
            # Without these, discovery (and the Browser) advertise the default 7687/7474.
            "server.bolt.advertised_address": bolt,
            "server.http.enabled": "true",
            "server.http.listen_address": http,
            "server.http.advertised_address": http,
            "server.https.enabled": "false",
            "dbms.security.auth_enabled": "true",
            # Explicit (see HEAP_RANGE_MIB), because the defaults take ~25% of RAM for heap plus most of the rest.
            "server.memory.heap.initial_size": heap,
            "server.memory.heap.max_size": heap,
            "server.memory.pagecache.size": pagecache,
            "dbms.usage_report.enabled": "false",
            "client.allow_telemetry": "false",
            "dbms.security.procedures.allowlist": PROCEDURES_ALLOWLIST,
            # Otherwise every new database preallocates ~256 MB of transaction log.
            "db.tx_log.preallocate": "false",
            # Transaction logs are kept "2 days" by default: a 1M-fact bulk import left 9.5 GB of
            # them, 10M would fill the disk. A local Community server has no incremental backup to
            # feed, so keep about 1 GB; logs are pruned at checkpoints, so checkpoint at least every
            # 5 minutes too (the default 15 would let a bulk import write many GB in between).
            "db.tx_log.rotation.retention_policy": TX_LOG_RETENTION,
            "db.checkpoint.interval.time": CHECKPOINT_INTERVAL,
            # Bolt's Netty groups each idle 5 s before exiting, so every stop took ~10 s.
            # Connections are already closed by then; a local server need not linger.
            "internal.dbms.bolt.netty_server_shutdown_quiet_period": "1",
            # SGAM_CYPHER_EXPRESSIONS (sgam/settings.py): "compiled" compiles a query's expressions
            # when it is planned; Neo4j's default interprets them for the first runs and compiles
            # them on the 10th, and that run took 14-31 ms where the others took 2-3 ms.
            "internal.cypher.expression_engine": {"compiled": "COMPILED", "hot": "DEFAULT"}[s.cypher_expressions],
        }

    def _java_command(self, java: str) -> list[str]:
        # Same classpath order as the launcher: plugins before lib.
        classpath = f"{self.home / 'plugins'}/*:{self.lib_dir}/*"
        heap, _ = self.memory
        return [
            java,
            f"-Xms{heap}",
            f"-Xmx{heap}",
            *JVM_FLAGS,
            "-cp",
            classpath,
            MAIN_CLASS,
            f"--home-dir={self.home}",
            f"--config-dir={self.conf_dir}",
            # Keeps neo4j.log echoed to stdout (console.log) instead of daemon-mode redirection.
            "--console-mode",
        ]

    # ---- provisioning steps ----------------------------------------------------------------

    def _check_java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise ProvisioningError(JAVA_MISSING)
        major = _java_major(java)
        if major not in SUPPORTED_JAVA:
            raise ProvisioningError(
                f"Neo4j 5.26 needs Java 17 or 21, but {java} is Java {major}: put a supported "
                "java first on PATH or point NEO4J_URI at a running server"
            )
        return java

    def _check_maven(self) -> None:
        # Only needed when the jars are not cached yet.
        if not (self._lib_complete() and self._plugins_complete()) and shutil.which("mvn") is None:
            raise ProvisioningError(MAVEN_MISSING)

    def _lib_complete(self) -> bool:
        """True if the marker written after a successful resolve matches what is on disk."""
        return _complete(self.lib_dir, {"neo4j": self.settings.neo4j_version,
                                        "browser": self.settings.browser_version})

    def _plugins_complete(self) -> bool:
        return _complete(self.plugins_cache, {"apoc": self.settings.apoc_version})

    def _resolve_into(self, build_dir: Path) -> Path:
        """Run Maven on a generated pom; return the staged lib dir inside ``build_dir``."""
        staged = build_dir / "lib"
        jars = _maven_copy(build_dir, staged, "neo4j-assembly.pom.xml", {
            "@NEO4J_VERSION@": self.settings.neo4j_version,
            "@BROWSER_VERSION@": self.settings.browser_version,
        }, f"Neo4j {self.settings.neo4j_version}")
        if not any(p.name.startswith("org.neo4j.app.neo4j-server-") for p in jars):
            raise ProvisioningError(f"Maven finished but {staged} holds no neo4j-server jar")
        _mark(staged, {"neo4j": self.settings.neo4j_version,
                       "browser": self.settings.browser_version}, len(jars))
        return staged

    def _resolve_plugins_into(self, build_dir: Path) -> Path:
        """Resolve APOC core with its dependencies, then drop those the server's lib has already
        (another version of them first on the classpath would shadow the server's own)."""
        staged = build_dir / "plugins"
        jars = _maven_copy(build_dir, staged, "neo4j-plugins.pom.xml", {
            "@APOC_VERSION@": self.settings.apoc_version,
        }, f"APOC core {self.settings.apoc_version}")
        in_lib = {jar_artifact(p.name) for p in self.lib_dir.iterdir() if p.suffix == ".jar"}
        kept = []
        for jar in jars:
            if jar_artifact(jar.name) in in_lib:
                jar.unlink()
            else:
                kept.append(jar)
        if not any(p.name.startswith("org.neo4j.procedure.apoc-core-") for p in kept):
            raise ProvisioningError(f"Maven finished but {staged} holds no apoc-core jar")
        _mark(staged, {"apoc": self.settings.apoc_version}, len(kept))
        return staged

    def _install_plugins(self) -> None:
        """Copy the cached plugin jars into this home's plugins/, replacing those an earlier `up`
        copied there (listed in its manifest); jars the user put there themselves stay."""
        manifest = self.plugins_dir / PLUGINS_MANIFEST
        try:
            previous = set(manifest.read_text(encoding="utf-8").split())
        except OSError:
            previous = set()
        wanted = sorted(p.name for p in self.plugins_cache.iterdir() if p.suffix == ".jar")
        for name in previous - set(wanted):
            (self.plugins_dir / Path(name).name).unlink(missing_ok=True)
        for name in wanted:
            target = self.plugins_dir / name
            if not target.exists():
                shutil.copyfile(self.plugins_cache / name, target)
                target.chmod(0o600)
        _write_atomic(manifest, "\n".join(wanted) + "\n")

    def _make_dirs(self) -> None:
        for name in ("conf", "data", "logs", "plugins", "import", "run"):
            (self.home / name).mkdir(parents=True, exist_ok=True, mode=0o700)

    def _is_first_start(self) -> bool:
        """No user store and no databases yet: the initial password can still be set."""
        data = self.home / "data"
        databases = data / "databases"
        has_databases = databases.is_dir() and any(databases.iterdir())
        return not (data / "dbms" / "auth.ini").exists() and not has_databases

    def _set_initial_password(self, java: str) -> None:
        # Hex, not urlsafe base64: a password starting with '-' reads as an option to the admin
        # tool (exit 64), which broke one first start in 64.
        password = secrets.token_hex(24)
        # Stored before the admin tool runs: if the tool fails, the next `up` is still a first
        # start and simply generates a new password.
        self._store_credentials(password)
        env = {**os.environ, "NEO4J_HOME": str(self.home), "NEO4J_CONF": str(self.conf_dir)}
        result = subprocess.run(
            [java, "-cp", f"{self.lib_dir}/*", ADMIN_CLASS]
            + ["dbms", "set-initial-password", password],
            env=env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            umask=PRIVATE_UMASK,  # it creates the auth store (data/dbms)
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip().splitlines()
            excerpt = "\n".join(output[-LOG_TAIL_LINES:])
            raise ProvisioningError(
                f"neo4j-admin set-initial-password failed (exit {result.returncode}):\n{excerpt}"
            )

    def _store_credentials(self, password: str) -> None:
        data = {"uri": self.uri, "user": DEFAULT_USER, "password": password}
        tmp = self.credentials_path.with_name(f".credentials.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        # O_EXCL + 0600 at creation: the password is never readable by others, not even briefly.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.credentials_path)

    def _check_ports_free(self) -> None:
        for name, port, var in (
            ("Bolt", self.settings.bolt_port, "SGAM_BOLT_PORT"),
            ("HTTP", self.settings.http_port, "SGAM_HTTP_PORT"),
        ):
            if not _port_free(port):
                raise ProvisioningError(
                    f"{name} port {port} on 127.0.0.1 is already in use: stop whatever listens "
                    f"there, choose another port with {var}, or point NEO4J_URI at that server"
                )

    def _start(self, java: str) -> int:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        # Keep the previous run's console output for post-mortems; start this one clean so a
        # failure excerpt only shows this attempt.
        if self.console_log.exists():
            os.replace(self.console_log, self.console_log.with_suffix(".log.1"))
        fd = os.open(self.console_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as log:
            proc = subprocess.Popen(
                self._java_command(java),
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session: Ctrl-C in the terminal that ran `up` must not stop the server.
                start_new_session=True,
                close_fds=True,
                umask=PRIVATE_UMASK,
            )
        _CHILDREN[proc.pid] = proc
        _write_atomic(self.pid_path, f"{proc.pid}\n")
        return proc.pid

    def _wait_ready(self, pid: int, *, stop_on_failure: bool) -> None:
        """Poll until discovery answers and Bolt accepts the stored credentials.

        With ``stop_on_failure`` (a server this call started), death, timeout or refused
        credentials stop the server, so a failed `up` leaves nothing half-running behind.
        """
        stop = pid if stop_on_failure else None
        deadline = time.monotonic() + self.settings.start_timeout
        creds = self.credentials()
        if creds is None:
            self._fail(stop, f"{self.credentials_path} is missing")
        uri, user, password = creds
        while True:
            if not _pid_alive(pid):
                self.pid_path.unlink(missing_ok=True)
                self._fail(None, "the Neo4j server exited during startup")
            if self._discovery_ready() and self._bolt_ready(stop, uri, user, password):
                return
            if time.monotonic() > deadline:
                self._fail(
                    stop,
                    f"the Neo4j server was not ready within {self.settings.start_timeout:.0f} s "
                    "(raise SGAM_START_TIMEOUT if the machine is slow)",
                )
            time.sleep(0.5)

    def _discovery_ready(self) -> bool:
        request = urllib.request.Request(
            self.http_url + "/", headers={"Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return "bolt_direct" in json.loads(response.read())
        except (OSError, ValueError):
            return False

    def _bolt_ready(self, stop: int | None, uri: str, user: str, password: str) -> bool:
        # Imported here so importing this module (e.g. for `status`) stays cheap.
        from neo4j import GraphDatabase
        from neo4j.exceptions import AuthError, DriverError, Neo4jError

        try:
            with GraphDatabase.driver(uri, auth=(user, password)) as driver:
                driver.verify_connectivity()
            return True
        except AuthError:
            # Waiting longer will not help: the database already has another password.
            self._fail(
                stop,
                f"the server refused the credentials in {self.credentials_path}: restore the "
                "right password there, or delete the data directory to start over",
            )
        except (DriverError, Neo4jError, OSError):
            # Still starting: Bolt not bound yet, or the system database not online.
            return False

    def _fail(self, stop: int | None, reason: str) -> NoReturn:
        """Stop ``stop`` (a pid we started, if any) and raise with a log excerpt."""
        if stop is not None and self._is_our_server(stop):
            self._stop(stop)
            self.pid_path.unlink(missing_ok=True)
        log = self.console_log if _nonempty(self.console_log) else self.logs_dir / "neo4j.log"
        excerpt = _tail(log, LOG_TAIL_LINES)
        detail = f"\n--- last lines of {log} ---\n{excerpt}" if excerpt else ""
        raise ProvisioningError(f"{reason}; see {log}{detail}")

    # ---- process handling ------------------------------------------------------------------

    def _running_pid(self) -> int | None:
        """The pid from our pid file, if that process is alive and is this home's server."""
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if self._is_our_server(pid) else None

    def _is_our_server(self, pid: int) -> bool:
        # Pids are recycled: the pid alone could name any process after a reboot or crash.
        if not _pid_alive(pid):
            return False
        args = _cmdline(pid)
        return MAIN_CLASS in args and f"--home-dir={self.home}" in args

    def _stop(self, pid: int) -> None:
        """SIGTERM (Neo4j shuts down cleanly), then SIGKILL after STOP_TIMEOUT."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if _wait_exit(pid, STOP_TIMEOUT):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not _wait_exit(pid, 10.0):
            raise ProvisioningError(f"the Neo4j server (pid {pid}) did not exit after SIGKILL")

    def _info(self, pid: int) -> ServerInfo:
        creds = self.credentials()
        return ServerInfo(
            uri=creds[0] if creds else self.uri,
            http_url=self.http_url,
            browser_url=self.browser_url,
            user=creds[1] if creds else DEFAULT_USER,
            credentials_path=self.credentials_path,
            home=self.home,
            logs_dir=self.logs_dir,
            pid=pid,
        )

    @contextlib.contextmanager
    def _home_lock(self) -> Iterator[None]:
        # Serialises up/down on one home, so two `up`s cannot both start a server.
        run = self.home / "run"
        run.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _file_lock(run / "sgam.lock"):
            yield


# ---- helpers ---------------------------------------------------------------------------------


def _java_major(java: str) -> int:
    """Major version from `java -version` (printed on stderr); 1.8 style counts as 8."""
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisioningError(f"cannot run {java} -version: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        raise ProvisioningError(f"cannot tell the Java version from `{java} -version`")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _cached(target: Path, complete: Callable[[], bool], resolve: Callable[[Path], Path]) -> Path:
    """Fill ``target`` (a folder of jars in the cache) with ``resolve`` unless ``complete()``.

    ``resolve`` stages the jars in the build folder it is given and returns the staged folder.
    """
    if complete():
        return target
    version_dir = target.parent
    version_dir.mkdir(parents=True, exist_ok=True)
    # Two homes provisioning at once would otherwise both download and race on the rename.
    with _file_lock(version_dir / ".lock"):
        if complete():
            return target
        # Under the lock any build dir is the leftover of a killed run.
        for stale in version_dir.glob("build-*"):
            shutil.rmtree(stale, ignore_errors=True)
        build_dir = version_dir / f"build-{os.getpid()}"
        try:
            staged = resolve(build_dir)
            # Rename is atomic: an interrupted download leaves a build dir, never a half folder.
            shutil.rmtree(target, ignore_errors=True)
            staged.rename(target)
        finally:
            shutil.rmtree(build_dir, ignore_errors=True)
    return target


def _maven_copy(build_dir: Path, staged: Path, template_name: str, values: dict[str, str],
                what: str) -> list[Path]:
    """Run Maven on the pom template ``template_name`` (placeholders filled from ``values``, and
    ``@LIB_DIR@``/``@PLUGINS_DIR@`` with ``staged``); return the jars it copied into ``staged``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ProvisioningError(MAVEN_MISSING)
    staged.mkdir(parents=True)
    text = (importlib.resources.files("sgam") / "resources" / template_name).read_text(encoding="utf-8")
    for placeholder, value in {**values, "@LIB_DIR@": str(staged), "@PLUGINS_DIR@": str(staged)}.items():
        text = text.replace(placeholder, xml_escape(value))
    pom = build_dir / "pom.xml"
    pom.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [mvn, "-B", "-q", "-f", str(pom), "package"],
        cwd=build_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()
        excerpt = "\n".join(output[-LOG_TAIL_LINES:])
        raise ProvisioningError(
            f"Maven could not resolve {what} from Maven Central (exit {result.returncode}):\n{excerpt}"
        )
    return [p for p in staged.iterdir() if p.suffix == ".jar"]


def _mark(folder: Path, versions: dict[str, str], jars: int) -> None:
    """Write the marker that says ``folder`` was resolved completely (see :func:`_complete`)."""
    (folder / LIB_MARKER).write_text(json.dumps({**versions, "jars": jars}) + "\n", encoding="utf-8")


def _complete(folder: Path, versions: dict[str, str]) -> bool:
    """True if the marker written after a successful resolve matches what is on disk."""
    try:
        marker = json.loads((folder / LIB_MARKER).read_text(encoding="utf-8"))
        jars = [p for p in folder.iterdir() if p.suffix == ".jar"]
    except (OSError, ValueError):
        return False
    return (
        all(marker.get(key) == value for key, value in versions.items())
        and len(jars) > 0
        and marker.get("jars") == len(jars)
    )


_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[^-]*(?:-[A-Za-z][\w.]*)?\.jar$")


def jar_artifact(jar_name: str) -> str:
    """``group.artifact`` of a jar copied with its group prepended, without the version:
    ``org.ow2.asm.asm-9.3.jar`` -> ``org.ow2.asm.asm``."""
    match = _VERSIONED_JAR.match(jar_name)
    return match.group("artifact") if match else jar_name


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like the server's own bind: TIME_WAIT leftovers do not count, a listener does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pid_alive(pid: int) -> bool:
    """True for a live process; a zombie counts as dead (and is reaped if it is our child)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _CHILDREN[pid]
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and _cmdline decides whether it is ours
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): kill(0) succeeding is the best we know
    # The state follows the parenthesised command name, which may itself contain spaces.
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        pass
    # No /proc (macOS): ps prints the command line space-joined, fine for our substring checks.
    try:
        result = subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split()


def _wait_exit(pid: int, timeout: float) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        _CHILDREN.pop(pid, None)
        return True
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_atomic(path: Path, text: str) -> None:
    # A crash mid-write must not leave a truncated conf that strict validation then rejects.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def restrict_tree(root: Path) -> None:
    """Take group and other permissions off ``root`` and everything under it (owner bits stay).

    Symbolic links are not followed: what they point at is not the home's to change.
    """
    for folder, dirs, files in os.walk(root):
        for name in (folder, *(os.path.join(folder, n) for n in (*dirs, *files))):
            # A file may vanish while the server runs (a rotated log pruned): nothing to tighten.
            with contextlib.suppress(FileNotFoundError):
                mode = os.lstat(name).st_mode
                if not stat.S_ISLNK(mode) and mode & 0o077:
                    os.chmod(name, stat.S_IMODE(mode) & ~0o077)


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines)).rstrip()
    except OSError:
        return ""
