"""A local PostgreSQL cluster with pg_cron, started from the machine's binaries.

Used by ``memgov up`` (the embedded cluster under ``.memgov/``) and by the test
harness (one throw-away cluster per test session). PostgreSQL refuses to run as
root, so when we are root the server runs as an unprivileged OS user
(``postgres`` unless ``MEMGOV_PG_OS_USER`` says otherwise).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ClusterError

DEFAULT_BINDIRS = ("/usr/lib/postgresql/15/bin",)
SUPERUSER = "postgres"


def find_bindir() -> Path:
    """The directory holding initdb/pg_ctl/postgres, or a ClusterError saying how to get it."""
    explicit = os.environ.get("MEMGOV_PG_BINDIR")
    candidates = [explicit] if explicit else list(DEFAULT_BINDIRS)
    if not explicit and (pg_ctl := shutil.which("pg_ctl")):
        candidates.append(str(Path(pg_ctl).resolve().parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    where = explicit or ", ".join(DEFAULT_BINDIRS)
    raise ClusterError(
        f"PostgreSQL server binaries not found in {where}: run `make setup` "
        "(apt-get install postgresql-15 postgresql-15-cron) or set MEMGOV_PG_BINDIR"
    )


def _pkglibdir(bindir: Path) -> Path:
    pg_config = bindir / "pg_config"
    if pg_config.is_file():
        out = subprocess.run([str(pg_config), "--pkglibdir"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    return bindir.parent / "lib"


def check_pg_cron(bindir: Path) -> None:
    """Raise ClusterError unless pg_cron's library is installed for the PostgreSQL in ``bindir``."""
    if not (_pkglibdir(bindir) / "pg_cron.so").is_file():
        raise ClusterError(
            f"pg_cron is not installed for the PostgreSQL in {bindir}: "
            "run `make setup` (apt-get install postgresql-15-cron)"
        )


def dsn_for(port: int, dbname: str) -> str:
    """The superuser DSN of a local cluster on ``port``."""
    return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{dbname}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` of 127.0.0.1 right now.

    It binds as PostgreSQL does, with ``SO_REUSEADDR``: the connections a stopped
    server closed linger in TIME_WAIT for a minute and do not keep it from its port,
    while a server listening there (or a socket bound without that option) does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class OsUser:
    """Who runs the server: ourselves, or (when we are root) an unprivileged user."""

    name: str
    uid: int
    gid: int

    @classmethod
    def for_server(cls) -> OsUser:
        """The user to run PostgreSQL as: ourselves, or when root ``MEMGOV_PG_OS_USER`` (default ``postgres``).

        Raises ClusterError when, as root, that user does not exist or is root itself.
        """
        if os.geteuid() != 0:
            entry = pwd.getpwuid(os.geteuid())
            return cls(entry.pw_name, entry.pw_uid, entry.pw_gid)
        name = os.environ.get("MEMGOV_PG_OS_USER", "postgres")
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ClusterError(
                f"running as root, PostgreSQL needs an unprivileged OS user, and {name!r} "
                "does not exist: create it or set MEMGOV_PG_OS_USER"
            ) from None
        if entry.pw_uid == 0:
            raise ClusterError(f"MEMGOV_PG_OS_USER={name!r} is root; PostgreSQL refuses to run as root")
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid)

    @property
    def is_self(self) -> bool:
        """Whether this user is the one running this process (no switch of user needed)."""
        return self.uid == os.geteuid()

    def run(self, args: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        """Run a command as this user, capturing its output."""
        extra: dict[str, object] = {}
        if not self.is_self:
            extra = {"user": self.uid, "group": self.gid, "extra_groups": []}
        env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
        if not self.is_self:
            env["HOME"] = tempfile.gettempdir()
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            list(args), capture_output=True, text=True, env=env, cwd="/", **extra, **kwargs
        )

    def can_write(self, path: Path) -> bool:
        """Whether this user can write ``path`` (``test -w`` run as the user)."""
        return self.run(["test", "-w", str(path)]).returncode == 0

    def own(self, path: Path) -> None:
        """Give ``path`` to this user (chown), unless it is ourselves."""
        if not self.is_self:
            os.chown(path, self.uid, self.gid)


class LocalCluster:
    """A PostgreSQL cluster in ``base`` (data in ``base/data``, log in ``base/postgres.log``)."""

    def __init__(self, base: Path, port: int, *, durable: bool = True) -> None:
        self.base = base
        self.datadir = base / "data"
        self.logfile = base / "postgres.log"
        self.port = port
        self.durable = durable
        self.bindir = find_bindir()
        self.os_user = OsUser.for_server()

    # -- connection strings ---------------------------------------------------
    def dsn(self, dbname: str = "postgres") -> str:
        """The superuser DSN of database ``dbname`` on this cluster."""
        return dsn_for(self.port, dbname)

    # -- lifecycle ------------------------------------------------------------
    def _pg(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.os_user.run([str(self.bindir / tool), *args])

    @property
    def initialized(self) -> bool:
        """Whether initdb has run (``data/PG_VERSION`` exists)."""
        return (self.datadir / "PG_VERSION").is_file()

    def init(self) -> None:
        """initdb, then configure pg_cron and the port."""
        check_pg_cron(self.bindir)
        self.base.mkdir(parents=True, exist_ok=True)
        self.os_user.own(self.base)
        if not self.os_user.can_write(self.base):
            raise ClusterError(
                f"the server's OS user {self.os_user.name!r} cannot write {self.base}: "
                "choose a directory it can reach (MEMGOV_HOME)"
            )
        out = self._pg(
            "initdb", "-D", str(self.datadir), "-U", SUPERUSER, "-A", "trust",
            "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions", "--no-sync",
        )  # fmt: skip
        if out.returncode != 0:
            raise ClusterError(f"initdb failed: {_last_line(out)}")
        self.configure()

    def configure(self) -> None:
        """Write memgov.conf (included by postgresql.conf) for the current port."""
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": "''",
            "shared_preload_libraries": "'pg_cron'",
            "cron.database_name": "'postgres'",
            "cron.use_background_workers": "on",
            "cron.max_running_jobs": "8",
            "max_worker_processes": "32",
            "timezone": "'UTC'",
            "log_min_messages": "warning",
        }
        if not self.durable:
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        body = "".join(f"{key} = {value}\n" for key, value in settings.items())
        conf = self.datadir / "memgov.conf"
        # the server's user owns the data directory; write through it
        out = self.os_user.run(["tee", str(conf)], input=body)
        if out.returncode != 0:
            raise ClusterError(f"cannot write {conf}: {_last_line(out)}")
        main_conf = self.datadir / "postgresql.conf"
        if "include_if_exists = 'memgov.conf'" not in main_conf.read_text():
            out = self.os_user.run(["sh", "-c", f"echo \"include_if_exists = 'memgov.conf'\" >> '{main_conf}'"])
            if out.returncode != 0:
                raise ClusterError(f"cannot write {main_conf}: {_last_line(out)}")

    def is_running(self) -> bool:
        """Whether the cluster is initialized and its server runs (``pg_ctl status``)."""
        return self.initialized and self._pg("pg_ctl", "-D", str(self.datadir), "status").returncode == 0

    def start(self) -> None:
        """Start the server (no-op when running); ClusterError when the port is taken or it fails."""
        if self.is_running():
            return
        if not port_is_free(self.port):
            raise ClusterError(f"port {self.port} is taken by another server")
        out = self._pg("pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-w", "-t", "60", "start")
        if out.returncode != 0:
            raise ClusterError(f"PostgreSQL did not start ({_last_line(out)}); see {self.logfile}")

    def start_on_a_free_port(self, attempts: int = 5) -> None:
        """Start the server, moving it to another free port when its own is taken: another
        server (a concurrent test run's) may take a port between :func:`free_port` and the start."""
        for attempt in range(1, attempts + 1):
            try:
                self.start()
                return
            except ClusterError:
                if attempt == attempts or port_is_free(self.port):
                    raise
            self.port = free_port()
            self.configure()

    def stop(self) -> None:
        """Stop the server (fast shutdown; no-op when stopped); ClusterError when it fails."""
        if not self.is_running():
            return
        out = self._pg("pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "-t", "60", "stop")
        if out.returncode != 0:
            raise ClusterError(f"PostgreSQL did not stop: {_last_line(out)}")

    def bootstrap(self) -> None:
        """Create pg_cron in the cron database (``postgres``)."""
        from .db import connect
        from .resources import query

        with connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(query("create_extension_pg_cron"))

    def create_database(self, name: str) -> None:
        """Create database ``name`` unless it exists."""
        from psycopg import sql

        from .db import connect
        from .resources import query

        with connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute(query("database_exists"), {"name": name}).fetchone()
            if not (exists and exists[0]):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _last_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (out.stderr + out.stdout).splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit code {out.returncode}"


# -- the embedded cluster of `memgov up` --------------------------------------

EMBEDDED_DB = "memgov"


def memgov_home() -> Path:
    """``MEMGOV_HOME``, else the nearest ``.memgov/`` above the working directory, else ``./.memgov``."""
    if explicit := os.environ.get("MEMGOV_HOME"):
        return Path(explicit).resolve()
    cwd = Path.cwd().resolve()
    for parent in (cwd, *cwd.parents):
        if (parent / ".memgov" / "cluster.json").is_file():
            return parent / ".memgov"
    return cwd / ".memgov"


class EmbeddedCluster:
    """The cluster `memgov up` starts and every command uses when no DSN is given."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = home or memgov_home()
        self.state_file = self.home / "cluster.json"

    def _state(self) -> dict[str, object] | None:
        try:
            return dict(json.loads(self.state_file.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{self.state_file} is unreadable ({exc}): remove it and run `memgov up`") from None

    def _cluster(self, state: dict[str, object]) -> LocalCluster:
        return LocalCluster(Path(str(state["base"])), int(str(state["port"])))

    def _pick_base(self) -> Path:
        """``.memgov/pg``, unless the server's OS user cannot reach it (e.g. under /root)."""
        base = self.home / "pg"
        user = OsUser.for_server()
        if user.is_self:
            return base
        base.mkdir(parents=True, exist_ok=True)
        user.own(base)
        if user.can_write(base):
            return base
        base.rmdir()
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
        return Path("/var/tmp") / f"memgov-{digest}"

    def up(self) -> LocalCluster:
        """Create (on first use), configure and start the embedded cluster; return it.

        Records its place and port in ``cluster.json``, picks another free port when the
        recorded one is taken, and creates pg_cron and the ``memgov`` database.
        """
        state = self._state()
        self.home.mkdir(parents=True, exist_ok=True)
        if state is None:
            cluster = LocalCluster(self._pick_base(), free_port())
        else:
            cluster = self._cluster(state)
        if not cluster.initialized:
            cluster.init()
        if not cluster.is_running() and not port_is_free(cluster.port):
            cluster.port = free_port()
            cluster.configure()
        cluster.start()
        self.state_file.write_text(
            json.dumps({"base": str(cluster.base), "port": cluster.port, "database": EMBEDDED_DB}, indent=2) + "\n"
        )
        cluster.bootstrap()
        cluster.create_database(EMBEDDED_DB)
        return cluster

    def down(self) -> bool:
        """Stop the cluster; False when there was none running."""
        state = self._state()
        if state is None:
            return False
        cluster = self._cluster(state)
        running = cluster.is_running()
        cluster.stop()
        return running

    def dsn(self) -> str | None:
        """The embedded cluster's DSN if it has been set up, else None."""
        state = self._state()
        if state is None:
            return None
        if not (Path(str(state["base"])) / "data" / "postmaster.pid").exists():
            raise ClusterError(f"the embedded cluster in {self.home} is stopped: run `memgov up`")
        return dsn_for(int(str(state["port"])), str(state.get("database", EMBEDDED_DB)))
