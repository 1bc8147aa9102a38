"""Per-cell claims: concurrent ``vispriv matrix --resume`` runs of one config split the cells.

A claim is a row ``(cell hash, owner, time)`` in a small sqlite file beside a sqlite
tracking store (``mlflow.db.claims``), taken inside one ``BEGIN IMMEDIATE`` transaction,
so two processes can never both hold a cell. A process runs a cell only after claiming
it; a claim of another live process makes it skip the cell ("claimed by another run").

* A FINISHED cell keeps its claim (the FINISHED run in MLflow is what ``--resume`` reads);
  a FAILED cell's claim is released at once, so a later ``--resume`` retries it, and so
  is every claim still held when the run ends early (Ctrl-C, an exception).
* A claim is taken over when its owner is a process of this host that no longer exists
  (SIGKILL), or when it is older than the lease (``VISPRIV_CLAIM_LEASE_S``, default 24 h:
  the only way to free a claim of another host's dead process). The process taking a
  claim over checks MLflow for a FINISHED run of the cell before running it again.
* Only ``--resume`` claims: a run without it reruns every cell by definition. An
  ``http://`` tracking server has no claims file; concurrent resumes against one may
  duplicate cells.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import time
from contextlib import closing
from pathlib import Path

DEFAULT_LEASE_S = 24 * 3600.0


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Claims:
    """The claims file of one tracking store, for this process (owner ``host:pid``)."""

    def __init__(self, path: Path, lease_s: float | None = None) -> None:
        self.path = path
        self.lease_s = lease_s if lease_s is not None else float(os.environ.get("VISPRIV_CLAIM_LEASE_S", DEFAULT_LEASE_S))
        self.host, self.pid = platform.node(), os.getpid()
        self.owner = f"{self.host}:{self.pid}"
        with closing(self._connect()) as con:
            con.execute("create table if not exists claims (cell_hash text primary key, owner text, claimed_at real)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def _stale(self, owner: str, claimed_at: float) -> bool:
        host, _, pid = owner.rpartition(":")
        if time.time() - claimed_at > self.lease_s:
            return True
        return host == self.host and pid.isdigit() and int(pid) != self.pid and not pid_alive(int(pid))

    def claim(self, cell_hash: str) -> tuple[bool, bool]:
        """Try to claim ``cell_hash``: ``(claimed, taken_over)``; ``taken_over`` when a stale claim was replaced."""
        con = self._connect()
        try:
            con.execute("begin immediate")
            row = con.execute("select owner, claimed_at from claims where cell_hash = ?", (cell_hash,)).fetchone()
            if row is not None and row[0] != self.owner and not self._stale(row[0], row[1]):
                con.execute("rollback")
                return False, False
            con.execute(
                "insert or replace into claims (cell_hash, owner, claimed_at) values (?, ?, ?)",
                (cell_hash, self.owner, time.time()),
            )
            con.execute("commit")
            return True, row is not None and row[0] != self.owner
        finally:
            con.close()

    def release(self, cell_hashes: list[str] | set[str]) -> None:
        """Drop this process's claims of ``cell_hashes`` (a failed or never-run cell may be run again)."""
        if not cell_hashes:
            return
        with closing(self._connect()) as con:
            con.executemany(
                "delete from claims where cell_hash = ? and owner = ?", [(h, self.owner) for h in cell_hashes]
            )
