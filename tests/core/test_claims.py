"""Per-cell claims of a sqlite store, by hand: who holds a cell, when a claim is taken over, and the lease's boundary."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from vispriv.harness import claims
from vispriv.harness.claims import Claims, stale

HOST = platform.node()


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.fixture
def clock(monkeypatch):
    """Claims read the wall clock; the lease's boundary needs an exact one."""
    now = {"t": 10_000.0}
    monkeypatch.setattr(claims.time, "time", lambda: now["t"])
    return now


def test_a_claim_of_another_host_is_never_taken_over_within_the_lease(dead_pid, clock):
    assert not stale(f"elsewhere:{dead_pid}", 10_000.0 - 99.0, lease=100.0)  # its pid means nothing here
    assert not stale(f"elsewhere:{dead_pid}", 10_000.0 - 100.0, lease=100.0)  # exactly at the lease: still held
    assert stale(f"elsewhere:{dead_pid}", 10_000.0 - 100.5, lease=100.0)  # past it


def test_a_claim_of_a_dead_process_of_this_host_is_taken_over_and_a_live_one_is_not(dead_pid, clock):
    assert stale(f"{HOST}:{dead_pid}", 10_000.0, lease=100.0)
    assert not stale(f"{HOST}:{os.getppid()}", 10_000.0, lease=100.0)  # the parent lives
    assert not stale(f"{HOST}:{os.getpid()}", 10_000.0, lease=100.0)  # this process's own claim
    assert not stale(f"{HOST}:notapid", 10_000.0, lease=100.0)
    assert stale(f"{HOST}:{os.getpid()}", 10_000.0 - 101.0, lease=100.0)  # the lease ends every claim


def test_one_owner_per_cell_in_the_claims_file(tmp_path):
    a, b = Claims(tmp_path / "c.db"), Claims(tmp_path / "c.db")
    b.owner = f"{HOST}:{os.getppid()}"  # a second live process of this host
    assert a.claim("h1") == (True, False)
    assert b.claim("h1") == (False, False)
    assert a.claim("h1") == (True, False)  # its own claim again: no recheck
    b.release(["h1"])  # not b's: nothing dropped
    assert b.claim("h1") == (False, False)
    a.done("h1")  # a FINISHED cell keeps its file claim
    assert b.claim("h1") == (False, False)
    a.release({"h1"})
    assert b.claim("h1") == (True, False)  # released: a plain claim, nothing to recheck
    assert a.claim("h2") == (True, False) and b.claim("h2") == (False, False)


def test_a_dead_owners_and_an_expired_claim_are_taken_over_with_a_recheck(tmp_path, dead_pid):
    dead = Claims(tmp_path / "c.db")
    dead.owner = f"{HOST}:{dead_pid}"
    assert dead.claim("h") == (True, False)
    live = Claims(tmp_path / "c.db")
    assert live.claim("h") == (True, True)  # the dead owner may have finished it: look for a FINISHED run
    other_host = Claims(tmp_path / "c.db", lease_s=3600.0)
    other_host.owner = f"elsewhere:{dead_pid}"
    assert other_host.claim("g") == (True, False)
    assert live.claim("g") == (False, False)
    expired = Claims(tmp_path / "c.db", lease_s=0.0)
    assert expired.claim("g") == (True, True)  # with no lease left, another host's claim is stale too
