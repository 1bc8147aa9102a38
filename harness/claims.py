"""Per-cell claims: concurrent ``vispriv matrix --resume`` runs of one config split the cells.

Two kinds, one interface (``claim``, ``done``, ``release``); the runner picks by store.

:class:`Claims`, for a sqlite tracking store: a claim is a row ``(cell hash, owner, time)``
in a small sqlite file beside the store (``mlflow.db.claims``), taken inside one
``BEGIN IMMEDIATE`` transaction, so two processes can never both hold a cell.

:class:`RunClaims`, for any other store (an ``http://`` server, where no file is shared):
a claim is a run of the matrix's experiment (tag ``vispriv.kind=claim``, nested under the
claiming matrix run). MLflow offers no compare-and-swap, so a claim is posted, then all
live claims of the cell are read back: the claim wins only if it is the only one, else it
is withdrawn (deleted) and, unless a rival is marked won (``vispriv.claim=won``), posted
again after a random back-off. Of two processes posting and reading, the one that reads
last sees both claims, so two can never both win (the store orders its writes and reads,
as MLflow's database-backed stores do); processes that see each other back off and retry.

Common rules:

* A process runs a cell only after claiming it; a claim of another live process makes it
  skip the cell ("claimed by another run").
* A FAILED cell's claim is released at once, so a later ``--resume`` retries it, and so
  is every claim still held when the run ends early (Ctrl-C, an exception). A FINISHED
  cell keeps its file claim; its claim run is deleted (the FINISHED cell run is what
  ``--resume`` reads; deleted runs stay in the database until ``mlflow gc``).
* A claim is taken over when its owner is a process of this host that no longer exists
  (SIGKILL), or when it is older than the lease (``VISPRIV_CLAIM_LEASE_S``, default 24 h:
  the only way to free a claim of another host's dead process). ``claim`` says when the
  caller must check MLflow for a FINISHED run of the cell before running it.
* Only ``--resume`` claims: a run without it reruns every cell by definition.
"""

from __future__ import annotations

import os
import platform
import random
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vispriv.harness.tracking import Tracker

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


def lease_s_default() -> float:
    """The claim lease in seconds: ``VISPRIV_CLAIM_LEASE_S``, default 24 h."""
    return float(os.environ.get("VISPRIV_CLAIM_LEASE_S", DEFAULT_LEASE_S))


def owner_id() -> str:
    """This process as a claim owner: ``host:pid``."""
    return f"{platform.node()}:{os.getpid()}"


def stale(owner: str, claimed_at: float, lease: float) -> bool:
    """Whether a claim of ``owner`` (``host:pid``) taken at ``claimed_at`` (epoch s) may be taken over."""
    host, _, pid = owner.rpartition(":")
    if time.time() - claimed_at > lease:
        return True
    return host == platform.node() and pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid))


class Claims:
    """The claims file of one tracking store, for this process (owner ``host:pid``)."""

    def __init__(self, path: Path, lease_s: float | None = None) -> None:
        self.path = path
        self.lease_s = lease_s if lease_s is not None else lease_s_default()
        self.owner = owner_id()
        with closing(self._connect()) as con:
            con.execute("create table if not exists claims (cell_hash text primary key, owner text, claimed_at real)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def _stale(self, owner: str, claimed_at: float) -> bool:
        return stale(owner, claimed_at, self.lease_s)

    def claim(self, cell_hash: str) -> tuple[bool, bool]:
        """Try to claim ``cell_hash``: ``(claimed, recheck)``; ``recheck`` when a stale claim was replaced
        (its owner may have finished the cell: look for a FINISHED run before running it)."""
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

    def done(self, cell_hash: str) -> None:
        """``cell_hash`` FINISHED: its file claim is kept (a resume started earlier must not run it again)."""

    def release(self, cell_hashes: list[str] | set[str]) -> None:
        """Drop this process's claims of ``cell_hashes`` (a failed or never-run cell may be run again)."""
        if not cell_hashes:
            return
        with closing(self._connect()) as con:
            con.executemany(
                "delete from claims where cell_hash = ? and owner = ?", [(h, self.owner) for h in cell_hashes]
            )


class RunClaims:
    """Claims as runs of the tracking store (module docstring), for this process and its matrix run ``parent_id``."""

    def __init__(self, tracker: Tracker, experiment_id: str, parent_id: str, lease_s: float | None = None,
                 backoff_s: tuple[float, float] = (0.05, 1.0)) -> None:
        self.tracker, self.experiment_id, self.parent_id = tracker, experiment_id, parent_id
        self.lease_s = lease_s if lease_s is not None else lease_s_default()
        self.backoff_s = backoff_s
        self.owner = owner_id()
        self.held: dict[str, str] = {}  # cell hash -> claim run id

    def post(self, cell_hash: str) -> str:
        """Post a claim of ``cell_hash``; returns its run id."""
        return self.tracker.start_claim(self.experiment_id, self.parent_id, cell_hash, self.owner)

    def rivals(self, cell_hash: str, mine: str) -> list[Any]:
        """The live claims of ``cell_hash`` other than ``mine``; stale ones are deleted on the way."""
        out = []
        for run in self.tracker.claim_runs(self.experiment_id, cell_hash):
            if run.info.run_id == mine:
                continue
            if stale(run.data.tags.get("vispriv.owner", ""), run.info.start_time / 1000, self.lease_s):
                self.tracker.delete_run(run.info.run_id)
            else:
                out.append(run)
        return out

    def decide(self, cell_hash: str, mine: str) -> bool | None:
        """After posting ``mine``: ``True`` (won: marked won and held), ``False`` (a rival won: ``mine`` withdrawn)
        or ``None`` (contended: ``mine`` withdrawn, post again later)."""
        rivals = self.rivals(cell_hash, mine)
        if not rivals:
            self.tracker.set_tags(mine, {"vispriv.claim": "won"})
            self.held[cell_hash] = mine
            return True
        self.tracker.delete_run(mine)
        return False if any(r.data.tags.get("vispriv.claim") == "won" for r in rivals) else None

    def claim(self, cell_hash: str) -> tuple[bool, bool]:
        """Try to claim ``cell_hash``: ``(claimed, True)``, since a rival may have finished it and released its claim
        (look for a FINISHED run before running it)."""
        while True:
            won = self.decide(cell_hash, self.post(cell_hash))
            if won is not None:
                return won, True
            time.sleep(random.uniform(*self.backoff_s))

    def done(self, cell_hash: str) -> None:
        """``cell_hash`` FINISHED (and logged): its claim run is deleted."""
        self.release([cell_hash])

    def release(self, cell_hashes: list[str] | set[str]) -> None:
        """Withdraw this process's claims of ``cell_hashes``."""
        for cell_hash in cell_hashes:
            run_id = self.held.pop(cell_hash, None)
            if run_id is not None:
                self.tracker.delete_run(run_id)
