"""Diagnostic: where the exact budget search (problem 4) spends its nodes on one album.

For one album of a config's ``milp-budget`` cell (album 24 of examples/album.yaml's user
albums by default: 59 photos, d = 14, the album that needs minutes), re-runs the branch
and bound of :mod:`vispriv.plugins.album.budget_search` with the same inputs as
:func:`vispriv.plugins.album.milp.fast_budget`, starting from a given count (the optimum,
so that every node it expands is a node any proof with this bound must expand), and prints:

* the nodes expanded per depth (deletions made) and the time per node;
* at a sample of nodes of depth ``--sample-depth``: the node's bound with the root's
  conflict groups (what the search uses) against the bound from pair conflicts recomputed
  with that node's deletions (the surrogate pair test of
  :func:`vispriv.plugins.album.surrogate.pair_compatibility`, weights 1/4, 1/2, 3/4, on the
  photos still deletable and the deletions left, greedy clique cover as
  :func:`vispriv.plugins.album.budget_search.conflict_groups`), and the time that costs;
  with ``--lp``, also the LP relaxation of MILP (7) at that node (:func:`lp_bound`: the
  budget row, per-place big-M rows, the cover rows of each place, one row per root conflict
  clique) and the exact maximum of the node's subtree (the branch and bound itself, from
  nothing, at most ``--exact-seconds``);
* with ``--lp``, the same LP at the root, also with every pair-conflict row.

``--start`` counts the open places only (places beating under every admissible mask are
not in the search; ``fast_budget``'s own start is the heuristic's count on the open places,
the default here). ``--time-limit`` stops the node loop (the counts are then partial).

    .venv/bin/python benchmarks/album_budget_nodes.py --album 24 --start 124
    .venv/bin/python benchmarks/album_budget_nodes.py --album 10 --time-limit 60 --sample-depth 13 --samples 12 --lp
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
from album_budget_gap import budget_albums
from scipy import sparse
from scipy.optimize import linprog

from vispriv.plugins.album import milp
from vispriv.plugins.album.budget_search import (
    _group_layout,
    _groups_hit,
    branch_and_bound,
    conflict_groups,
    suffix_relief,
)
from vispriv.plugins.album.pruning import caps, greedy_budget, protected_k
from vispriv.plugins.album.surrogate import PAIR_WEIGHTS, pair_compatibility, worst_totals


def search_inputs(A: np.ndarray, d: int):
    """Candidate photos' advantages on the open places, their totals and the root's groups (as fast_budget)."""
    fixed = np.zeros(len(A), dtype=bool)
    t = len(A) - d
    J = np.flatnonzero(caps(A) >= t)
    places = J[worst_totals(A[:, J], fixed, t, at_least=True) < 0]
    relief = np.minimum(A[:, places], 0.0).sum(axis=1)
    cand = np.flatnonzero(relief < 0)
    cand = cand[np.argsort(relief[cand], kind="stable")]
    groups = conflict_groups(pair_compatibility(A, fixed, places, t), len(places))
    return A[cand][:, places], A[:, places].sum(axis=0), groups


def _open_places(A: np.ndarray, d: int) -> tuple[np.ndarray, int]:
    t = len(A) - d
    J = np.flatnonzero(caps(A) >= t)
    return J[worst_totals(A[:, J], np.zeros(len(A), dtype=bool), t, at_least=True) < 0], t


def node_pair_groups(B: np.ndarray, left: np.ndarray, p: int, r: int, possible: np.ndarray) -> int:
    """Number of greedy conflict cliques among the possible places, with pair conflicts
    tested at the node (``left`` totals, at most ``r`` more deletions among rows ``p:``)."""
    cols = np.flatnonzero(possible)
    a, b = np.triu_indices(len(cols), k=1)
    conflict = np.ones(len(a), dtype=bool)
    rest = B[p:]
    for w in PAIR_WEIGHTS:
        s = w * rest[:, cols[a]] + (1 - w) * rest[:, cols[b]]
        best = np.minimum(np.sort(s, axis=0)[:r], 0.0).sum(axis=0)
        conflict &= w * left[cols[a]] + (1 - w) * left[cols[b]] - best < 0
    compatible = np.ones((len(cols), len(cols)), dtype=bool)
    compatible[a[conflict], b[conflict]] = compatible[b[conflict], a[conflict]] = False
    return len(np.unique(conflict_groups(compatible, len(cols))))


def lp_bound(B: np.ndarray, left: np.ndarray, r: int, groups: np.ndarray, compatible: np.ndarray | None = None) -> float:
    """LP relaxation of MILP (7) on the places of ``left`` (x_i: photo i deleted, h_j: place j
    beats; at most ``r`` deletions): per place the big-M row ``sum_i B_ij x_i <= left_j +
    M_j (1 - h_j)`` (``M_j`` the worst total under the budget), the cover rows ``sum_{i in
    L} x_i >= m h_j`` (``L`` the place's most relieving photos, ``m`` the fewest of them any
    deletion set making it beat holds: those outside relieve at most the next one's
    relief each), ``sum h <= 1`` per conflict clique of ``groups`` and, with
    ``compatible``, ``h_j + h_k <= 1`` per conflicting pair. An upper bound on the count."""
    n, m = B.shape
    rows, cols, vals, rhs = [np.zeros(n, dtype=int)], [np.arange(n)], [np.ones(n)], [float(r)]

    def row(photos: np.ndarray, coef: np.ndarray, places: np.ndarray, pcoef: np.ndarray, bound: float) -> None:
        rows.append(np.full(len(photos) + len(places), len(rhs)))
        cols.append(np.r_[photos, n + places])
        vals.append(np.r_[coef, pcoef])
        rhs.append(float(bound))

    upper = np.ones(n + m)
    relief = np.maximum(-B, 0.0)
    for j in range(m):
        M = np.sort(np.maximum(B[:, j], 0.0))[::-1][:r].sum() - left[j]
        if M > 0:
            row(np.arange(n), B[:, j], np.array([j]), np.array([M]), left[j] + M)
        if left[j] >= 0:
            continue
        order = np.argsort(-relief[:, j], kind="stable")
        top = np.r_[0.0, np.cumsum(relief[order, j])]
        if top[min(r, n)] < -left[j]:
            upper[n + j] = 0.0
            continue
        last = 0
        for size in range(1, n + 1):
            nxt = relief[order[size], j] if size < n else 0.0
            ok = [k for k in range(min(size, r) + 1) if top[k] + (r - k) * nxt >= -left[j]]
            if ok and ok[0] > last:
                last = ok[0]
                row(order[:size], -np.ones(size), np.array([j]), np.array([float(last)]), 0.0)
    for label in np.unique(groups):
        members = np.flatnonzero(groups == label)
        if len(members) > 1:
            row(np.zeros(0, dtype=int), np.zeros(0), members, np.ones(len(members)), 1.0)
    if compatible is not None:
        for a, b in zip(*np.nonzero(np.triu(~compatible, 1))):
            row(np.zeros(0, dtype=int), np.zeros(0), np.array([a, b]), np.ones(2), 1.0)
    matrix = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(rhs), n + m))
    result = linprog(np.r_[np.zeros(n), -np.ones(m)], A_ub=matrix, b_ub=rhs, bounds=np.c_[np.zeros(n + m), upper], method="highs")
    return float(-result.fun)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="examples/album.yaml")
    parser.add_argument("--collection", default="albums")
    parser.add_argument("--album", type=int, default=24)
    parser.add_argument("--start", type=int, default=None, help="count of open places to beat (default: fast_budget's heuristic start)")
    parser.add_argument("--sample-depth", type=int, default=10)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=None, help="stop the node loop after this many seconds")
    parser.add_argument("--lp", action="store_true", help="LP relaxation of MILP (7) at the root and the sampled nodes, and the sampled subtrees' exact maxima")
    parser.add_argument("--exact-seconds", type=float, default=60.0)
    args = parser.parse_args()
    albums, _ = budget_albums(args.config, args.collection)
    A, d, St = albums[args.album]
    B, tot, groups = search_inputs(A, d)
    n, m = B.shape
    if args.start is None:
        places, _ = _open_places(A, d)
        greedy = greedy_budget(np.column_stack([St, St]), 0, d).keep
        keep = milp.heuristic_budget(A, d, np.zeros(len(A), dtype=bool), [np.ones(len(A), dtype=bool), greedy])
        args.start = protected_k(A[:, places], keep)
    if args.lp:
        compatible = pair_compatibility(A, np.zeros(len(A), dtype=bool), *_open_places(A, d))
        print(f"root LP bound: {lp_bound(B, tot, d, groups):.2f} (clique rows), {lp_bound(B, tot, d, groups, compatible):.2f} (and every pair row)")
    print(f"album {args.album}: {n} candidate photos, {m} open places, d = {d}, root bound {len(np.unique(groups))} groups, beating {args.start}")
    R = suffix_relief(B, d)
    order, n_single, ends = _group_layout(groups)
    depth: Counter = Counter()
    samples = []
    rng = np.random.default_rng(0)
    stack = [(0, np.zeros(m), 0)]
    start = time.perf_counter()
    stopped = False
    while stack:
        if args.time_limit is not None and time.perf_counter() - start > args.time_limit:
            stopped = True
            break
        p, removed, k = stack.pop()
        r = d - k
        if r == 0 or p == n:
            continue
        depth[k] += 1
        left = tot - removed
        if k == args.sample_depth and len(samples) < args.samples and rng.random() < 0.05:
            possible = left - R[p, r] >= 0
            t0 = time.perf_counter()
            refined = node_pair_groups(B, left, p, r, possible)
            pair_s = time.perf_counter() - t0
            lp = exact = np.nan
            if args.lp:
                lp = lp_bound(B[p:][:, possible], left[possible], r, groups[possible])
                _, exact, proven = branch_and_bound(B[p:][:, possible], left[possible], r, -1, time.perf_counter() + args.exact_seconds, groups=groups[possible])
                exact = exact if proven else np.nan
            samples.append((len(np.unique(groups[possible])), refined, pair_s, lp, exact))
            start += time.perf_counter() - t0
        children = left[None, :] - B[p:]
        possible = children - R[np.arange(p + 1, n + 1), r - 1] >= 0
        bounds = _groups_hit(possible[:, order], n_single, ends)
        for q in np.flatnonzero(bounds > args.start)[::-1]:
            stack.append((p + int(q) + 1, removed + B[p + q], k + 1))
    seconds = time.perf_counter() - start
    total = sum(depth.values())
    print(f"nodes expanded: {total} in {seconds:.1f} s ({1e6 * seconds / max(total, 1):.0f} us a node, this script's loop)"
          + (f"; stopped by --time-limit, {len(stack)} nodes left on the stack" if stopped else ""))
    print("per depth: " + ", ".join(f"{k}: {v}" for k, v in sorted(depth.items())))
    if samples:
        s = np.array(samples)
        print(f"{len(s)} nodes of depth {args.sample_depth}: root-group bound median {np.median(s[:, 0]):.0f}, "
              f"node pair-conflict bound median {np.median(s[:, 1]):.0f} (lower by {np.median(s[:, 0] - s[:, 1]):.0f}), "
              f"pruned by it {int(np.sum(s[:, 1] <= args.start))}/{len(s)}, {1e3 * np.median(s[:, 2]):.0f} ms a node")
        if args.lp:
            print(f"  LP bound median {np.median(s[:, 3]):.2f}, pruned by it (floor <= {args.start}) {int(np.sum(np.floor(s[:, 3] + 1e-6) <= args.start))}/{len(s)}; "
                  f"exact subtree maximum median {np.nanmedian(s[:, 4]):.0f} (max {np.nanmax(s[:, 4]):.0f}, {int(np.sum(np.isnan(s[:, 4])))} not finished)")
            for row in s:
                print(f"  node: root-group bound {row[0]:.0f}, pair-conflict bound {row[1]:.0f}, LP {row[3]:.2f}, exact {row[4]:.0f}")


if __name__ == "__main__":
    main()
