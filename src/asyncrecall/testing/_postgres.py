"""A throw-away PostgreSQL cluster from the machine's binaries, for tests and benchmarks.

:class:`LocalPostgres` runs ``initdb`` and ``pg_ctl`` from ``pg_config --bindir`` (or
Debian's ``/usr/lib/postgresql/<N>/bin``) on a private data folder, listening only on a
private Unix socket folder (``listen_addresses=''``: no TCP port). PostgreSQL refuses
to run as root; as root, the commands run as the ``postgres`` user through ``runuser``
and the folders are given to that user. Durability is off (``fsync=off``): it is a
scratch database.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from asyncrecall._exceptions import ConfigError

__all__ = ["LocalPostgres", "find_postgres_bindir"]

_SERVER_USER: Final = "postgres"


def find_postgres_bindir() -> Path | None:
    """The folder of ``initdb``/``pg_ctl``: ``pg_config --bindir``, else Debian's layout."""
    pg_config = shutil.which("pg_config")
    candidates: list[Path] = []
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            )
            candidates.append(Path(out.stdout.strip()))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


class LocalPostgres:
    """A private PostgreSQL server: :meth:`start`, :attr:`url`, :meth:`stop`, :meth:`close`."""

    def __init__(self, bindir: Path | None = None) -> None:
        found = bindir or find_postgres_bindir()
        if found is None:
            raise ConfigError(
                "PostgreSQL binaries not found (no pg_config --bindir, no "
                "/usr/lib/postgresql/*/bin): apt-get install postgresql-15"
            )
        self.bindir = found
        # Root runs the server as another user (POSIX only: Windows has no such root).
        self._as_root = getattr(os, "geteuid", lambda: -1)() == 0
        self.folder = Path(tempfile.mkdtemp(prefix="asyncrecall-pg-"))
        self.data = self.folder / "data"
        self.socket_dir = self.folder / "sock"
        self.socket_dir.mkdir()
        if self._as_root:
            import pwd  # here: Windows has no password database

            user = pwd.getpwnam(_SERVER_USER)
            for path in (self.folder, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._initialised = False
        self.running = False

    @property
    def url(self) -> str:
        """A libpq URI for the ``postgres`` database over the private socket."""
        return f"postgresql:///postgres?host={self.socket_dir}&user={_SERVER_USER}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", _SERVER_USER, "--", *command]
        # Not pytest's PYTEST_CURRENT_TEST: a test's id can exceed what exec accepts.
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        if result.returncode != 0:
            raise ConfigError(
                f"{args[0]} failed ({result.returncode}): {(result.stderr or result.stdout)[-800:]}"
            )

    def start(self) -> LocalPostgres:
        """Create the cluster on first call, then start the server and wait until it is up."""
        if not self._initialised:
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                _SERVER_USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
                "--no-instructions",
            )
            self._initialised = True
        options = (
            f"-c listen_addresses='' -k {self.socket_dir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-o", options,
            "start",
        )  # fmt: skip
        self.running = True
        return self

    def stop(self) -> None:
        """Stop the server now (``-m fast``: connections are cut); the data stays."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "fast", "stop")
            self.running = False

    def close(self) -> None:
        """Stop the server and delete its folder."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
