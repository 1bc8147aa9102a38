"""Descriptor recovery from lifted subspaces: the building blocks of LDP-Feat (ICCV 2023) section 4.

* :func:`weighted_projection` -- Eqs. (1) and (2): ``p_D(sum_i u_i / dist(D, u_i) / alpha)``
  with ``alpha = sum_i 1 / dist(D, u_i)``.
* :func:`database_attack` -- section 4.1 with access to W: the ``n_adv`` nearest rows are the
  adversarial descriptors (distance 0), the next ``|V|`` are scored by their distance to the
  nearest of them and the ``|U|`` highest-scoring ones give d by Eq. (1); streamed over W
  with a selection instead of a sort, so |V| = |W| / 8 at |W| = 256k costs a small multiple
  of the distance kernel itself (benchmarks/database_attack_speed.py).
* :func:`cluster_candidates` -- section 4.2 steps 2-3: the ``|V|`` nearest rows of the public
  database Z, k = n_adv + 1 clusters (batched Lloyd k-means), one candidate per cluster by
  Eq. (2).
* :func:`intersecting` / :func:`select_candidates` -- section 4.2 step 4: the auxiliary
  subspaces Q' that intersect D (``dist(D, Q_j) = 0``) and the candidate farthest from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.subspace import (
    canonical_offsets,
    nearest_to_subspaces,
    project,
    subspace_sqdist,
)

if TYPE_CHECKING:
    import torch

#: Smallest distance used as a weight denominator in Eqs. (1)-(2) (a row lying on D).
EPS = 1e-6


def weighted_projection(points: np.ndarray, dists: np.ndarray, mask: np.ndarray, offsets: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Eq. (1)/(2) for K subspaces at once: p_D of the 1/dist-weighted mean of the masked points.

    ``points`` (K, n, 128), ``dists`` (K, n) point-to-subspace distances (not squared),
    ``mask`` (K, n) which points take part (U of Eq. (1), one cluster of Eq. (2)).
    Rows with an empty mask get the projection of the unweighted mean of all points.
    """
    w = np.where(mask, 1.0 / np.maximum(np.asarray(dists, np.float64), EPS), 0.0)
    alpha = w.sum(axis=1, keepdims=True)
    empty = alpha[:, 0] == 0
    w[empty] = 1.0
    alpha[empty] = w.shape[1]
    mean = np.einsum("kn,knd->kd", w, np.asarray(points, np.float64)) / alpha
    return project(mean, offsets, bases).astype(np.float32)


class DatabaseRecovery(NamedTuple):
    """Output of :func:`database_attack`, per subspace (K of them)."""

    #: The estimates of d by Eq. (1), (K, 128).
    estimates: np.ndarray
    #: The ``n_adv + 1`` rows of W nearest to D, ascending (the first ``n_adv`` are step 2's), (K, n_adv + 1).
    nearest_rows: np.ndarray
    #: Their point-to-subspace distances (not squared), (K, n_adv + 1).
    nearest_dist: np.ndarray
    #: The ``|U|`` rows of V that entered Eq. (1), highest score first, (K, |U|).
    chosen_rows: np.ndarray


def database_attack(
    database: np.ndarray,
    offsets: np.ndarray,
    bases: np.ndarray,
    n_adv: int,
    v_size: int,
    u_size: int,
    device: str = "cpu",
    subspace_chunk: int = 64,
    chunk_elements: int = 1 << 25,
) -> DatabaseRecovery:
    """Section 4.1, steps 1-3, exactly, with W sorted only as far as the steps need.

    Step 1 sorts W by dist(D, w); step 2 takes the first ``n_adv`` as the adversarial
    descriptors a_j; step 3 scores the next ``v_size`` (the set V) by
    ``s_i = min_j ||a_j - v_i||`` and estimates d from the ``u_size`` highest-scoring by Eq. (1).
    Only three facts about the sort are used, so none is computed beyond them: the
    ``n_adv + 1`` nearest rows (a top-k), V as the rows at or below the (n_adv + |V|)-th
    smallest distance (a selection, ties at that distance broken by row index), and the
    scores of every row from one matrix product (``||a||^2 + ||w||^2 - 2 a.w``) masked to V.
    Memory is O(``subspace_chunk`` |W|) whatever |V| (a full sort of |V| = |W| / 8 rows and
    a (chunk, |V|, n_adv, 128) difference tensor is what this replaced).
    """
    import torch

    from vispriv.plugins.descriptor_release.subspace import database_tensor, subspace_rows_sqdist

    w = database_tensor(database, device)
    size = len(w)
    if not (n_adv >= 0 and 1 <= u_size <= v_size and n_adv + v_size <= size):
        raise InputError(f"database attack needs 0 <= n_adv, 1 <= u_size <= v_size and n_adv + v_size <= |W| = {size}; "
                         f"got n_adv {n_adv}, v_size {v_size}, u_size {u_size}")
    n_near = min(n_adv + 1, size)
    k = len(offsets)
    near_rows = np.empty((k, n_near), np.int64)
    near_dist = np.empty((k, n_near), np.float32)
    chosen = np.empty((k, u_size), np.int64)
    chosen_dist = np.empty((k, u_size), np.float32)
    w_sq = w.square().sum(dim=1)
    for s0, s1, sq in subspace_rows_sqdist(w, offsets, bases, subspace_chunk, chunk_elements):
        sq.clamp_(min=0.0)
        nd, ni = torch.topk(sq, n_near, dim=1, largest=False, sorted=True)
        in_v = _smallest_mask(sq, n_adv + v_size)
        adv = ni[:, :n_adv]
        in_v.scatter_(1, adv, False)
        score = _sq_distance_to_nearest_of(w, w_sq, adv) if n_adv else sq.neg()
        score.masked_fill_(~in_v, -torch.inf)
        _, top = torch.topk(score, u_size, dim=1, largest=True, sorted=True)
        near_rows[s0:s1], near_dist[s0:s1] = ni.cpu().numpy(), nd.sqrt().cpu().numpy()
        chosen[s0:s1], chosen_dist[s0:s1] = top.cpu().numpy(), sq.gather(1, top).sqrt().cpu().numpy()
    points = np.asarray(database)[chosen]
    est = weighted_projection(points, chosen_dist, np.ones(chosen.shape, bool), offsets, bases)
    return DatabaseRecovery(est, near_rows, near_dist, chosen)


def _sq_distance_to_nearest_of(w: torch.Tensor, w_sq: torch.Tensor, rows: torch.Tensor, point_chunk: int = 8192) -> torch.Tensor:
    """``min_j ||w_i - w_rows[s, j]||^2`` for every row i of W and every s, (S, N): step 3's score s_i, squared.

    ``||w_i||^2 + min_j (||a_j||^2 - 2 a_j.w_i)``: one product of all (S n_adv) rows a_j
    against a chunk of W at a time (chunks of 8,192 rows were 1.3-1.7x faster than whole-W
    products in a scratch comparison on 2 cores: the product stays in cache for the min).
    """
    import torch
    s, n_adv = rows.shape
    a = w[rows.reshape(-1)]
    a_sq = a.square().sum(dim=1).view(s, n_adv, 1)
    score = w.new_empty((s, len(w)))
    for p0 in range(0, len(w), point_chunk):
        p1 = min(p0 + point_chunk, len(w))
        prod = torch.mm(a, w[p0:p1].T).view(s, n_adv, p1 - p0).mul_(-2.0).add_(a_sq)
        torch.amin(prod, dim=1, out=score[:, p0:p1])
    return score.add_(w_sq[None, :])


def _smallest_mask(values: torch.Tensor, n: int, use_numpy: bool | None = None) -> torch.Tensor:
    """Per row, a mask of exactly its ``n`` smallest entries (ties at the n-th value broken by column index).

    On the CPU through numpy (``use_numpy`` None: where the tensor lives; in a scratch
    comparison on 2 cores numpy's introselect and ``count_nonzero`` were ~5x and ~9x faster
    than torch's ``kthvalue`` and boolean sum on 64 x 262,144 rows), on a GPU through torch.
    """
    import torch
    if use_numpy if use_numpy is not None else values.device.type == "cpu":
        x = values.numpy()
        kth = np.partition(x, n - 1, axis=1)[:, n - 1 : n]
        below, ties = x < kth, x == kth
        room = n - np.count_nonzero(below, axis=1)
        for row in np.flatnonzero(np.count_nonzero(ties, axis=1) > room):
            ties[row, np.flatnonzero(ties[row])[room[row]:]] = False
        return torch.from_numpy(np.logical_or(below, ties, out=below))
    kth = torch.kthvalue(values, n, dim=1, keepdim=True).values
    below, ties = values < kth, values == kth
    room = n - below.sum(dim=1)
    excess = torch.nonzero(ties.sum(dim=1) > room).flatten()
    if len(excess):
        ties[excess] &= ties[excess].cumsum(dim=1) <= room[excess, None]
    return below.logical_or_(ties)


def batched_kmeans(points: np.ndarray, k: int, iters: int = 10) -> np.ndarray:
    """Lloyd k-means of each of S small point sets at once: labels (S, n).

    Farthest-point initialisation from the first point (the one nearest to D), so the
    result is deterministic; empty clusters keep their previous centre.
    """
    import torch
    x = torch.as_tensor(np.asarray(points, np.float32))
    s, n, _ = x.shape
    k = min(k, n)
    centres = [x[:, 0]]
    d_min = (x - centres[0][:, None]).square().sum(-1)
    for _ in range(1, k):
        nxt = torch.argmax(d_min, dim=1)
        c = x[torch.arange(s), nxt]
        centres.append(c)
        d_min = torch.minimum(d_min, (x - c[:, None]).square().sum(-1))
    cent = torch.stack(centres, dim=1)
    labels = torch.zeros(s, n, dtype=torch.long)
    for _ in range(iters):
        labels = torch.cdist(x, cent).argmin(dim=2)
        one_hot = torch.nn.functional.one_hot(labels, k).to(x.dtype)
        counts = one_hot.sum(dim=1)
        sums = torch.einsum("snk,snd->skd", one_hot, x)
        cent = torch.where(counts[..., None] > 0, sums / counts.clamp(min=1)[..., None], cent)
    return labels.numpy()


def cluster_candidates(
    public: np.ndarray, offsets: np.ndarray, bases: np.ndarray, k: int, v_size: int, iters: int = 10, device: str = "cpu"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Section 4.2 steps 1-3: candidates (K, k, 128), cluster sizes (K, k) (0 = empty), the V rows and their distances (K, |V|)."""
    sq, rows = nearest_to_subspaces(public, offsets, bases, v_size, device=device)
    v = public[rows]
    dist = np.sqrt(sq)
    labels = batched_kmeans(v, k, iters)
    cands = np.zeros((len(offsets), k, v.shape[-1]), np.float32)
    sizes = np.zeros((len(offsets), k), np.int64)
    for i in range(k):
        mask = labels == i
        sizes[:, i] = mask.sum(axis=1)
        cands[:, i] = weighted_projection(v, dist, mask, offsets, bases)
    return cands, sizes, rows, dist


def intersecting(
    offsets: np.ndarray, bases: np.ndarray, groups: np.ndarray, tol: float = 1e-6
) -> list[np.ndarray]:
    """For each subspace, the rows of the other subspaces of its group that it intersects (sqdist <= tol)."""
    out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(offsets)
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        d = subspace_sqdist(offsets[rows], bases[rows], offsets[rows], bases[rows])
        np.fill_diagonal(d, np.inf)
        for local, row in enumerate(rows):
            out[row] = rows[np.flatnonzero(d[local] <= tol)]
    return out


def select_candidates(
    cands: np.ndarray, cluster_sizes: np.ndarray, aux: list[np.ndarray], offsets: np.ndarray, bases: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Section 4.2 step 4: per subspace, the candidate with the largest ``min_j dist(d_i, Q'_j)``.

    Without any intersecting auxiliary subspace the candidate of the largest cluster is
    taken (a documented fallback). Returns (estimates (K, 128), chosen index (K,)).
    """
    valid = cluster_sizes > 0
    chosen = np.argmax(cluster_sizes, axis=1)
    width = max([len(q) for q in aux] + [0])
    if width:
        padded = np.full((len(aux), width), -1, np.int64)
        for row, q in enumerate(aux):
            padded[row, : len(q)] = q
        score = _candidate_scores(cands, padded, offsets, bases)
        has_aux = (padded >= 0).any(axis=1)
        best = np.argmax(np.where(valid, score, -np.inf), axis=1)
        chosen = np.where(has_aux, best, chosen)
    return cands[np.arange(len(cands)), chosen], chosen


def _candidate_scores(cands: np.ndarray, aux_rows: np.ndarray, offsets: np.ndarray, bases: np.ndarray, chunk: int = 64) -> np.ndarray:
    """``s_i = min_j dist(d_i, Q'_j)^2`` for every candidate of every subspace, batched (K, k).

    ``aux_rows`` (K, J) are the rows of Q' (-1 = padding, ignored).
    """
    import torch
    k_sub, k = cands.shape[:2]
    c_all = canonical_offsets(torch.from_numpy(np.asarray(offsets, np.float64)), torch.from_numpy(np.asarray(bases, np.float64)))
    b_all = torch.from_numpy(np.asarray(bases, np.float64))
    x_all = torch.from_numpy(np.asarray(cands, np.float64))
    out = np.empty((k_sub, k), np.float64)
    for s0 in range(0, k_sub, chunk):
        rows = torch.from_numpy(aux_rows[s0 : s0 + chunk])
        pad = rows < 0
        idx = rows.clamp(min=0)
        c, b, x = c_all[idx], b_all[idx], x_all[s0 : s0 + chunk]
        diff = x[:, None, :, :] - c[:, :, None, :]
        coeff = torch.einsum("sjmd,sjkd->sjkm", b, diff)
        sq = diff.square().sum(-1) - coeff.square().sum(-1)
        sq = sq.masked_fill(pad[..., None], float("inf"))
        out[s0 : s0 + chunk] = sq.amin(dim=1).clamp(min=0).numpy()
    return out
