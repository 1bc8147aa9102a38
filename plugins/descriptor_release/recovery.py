"""Descriptor recovery from lifted subspaces: the building blocks of LDP-Feat (ICCV 2023) section 4.

* :func:`weighted_projection` -- Eqs. (1) and (2): ``p_D(sum_i u_i / dist(D, u_i) / alpha)``
  with ``alpha = sum_i 1 / dist(D, u_i)``.
* :func:`database_attack` -- section 4.1 with access to W: the ``n_adv`` nearest rows are the
  adversarial descriptors (distance 0), the next ``|V|`` are scored by their distance to the
  nearest of them and the ``|U|`` highest-scoring ones give d by Eq. (1).
* :func:`cluster_candidates` -- section 4.2 steps 2-3: the ``|V|`` nearest rows of the public
  database Z, k = n_adv + 1 clusters (batched Lloyd k-means), one candidate per cluster by
  Eq. (2).
* :func:`intersecting` / :func:`select_candidates` -- section 4.2 step 4: the auxiliary
  subspaces Q' that intersect D (``dist(D, Q_j) = 0``) and the candidate farthest from them.
"""

from __future__ import annotations

import numpy as np

from vispriv.plugins.descriptor_release.subspace import (
    canonical_offsets,
    nearest_to_subspaces,
    project,
    subspace_sqdist,
)

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


def database_attack(
    database: np.ndarray,
    offsets: np.ndarray,
    bases: np.ndarray,
    n_adv: int,
    v_size: int,
    u_size: int,
    device: str = "cpu",
    chunk: int = 256,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Section 4.1: (estimates (K, 128), sorted rows (K, n_adv + |V|), sorted distances).

    Step 1 sorts W by dist(D, w); step 2 takes the first ``n_adv`` as the adversarial
    descriptors; step 3 scores the next ``v_size`` by ``s_i = min_j ||a_j - v_i||`` and
    estimates d from the ``u_size`` highest-scoring by Eq. (1). Steps 2-3 run ``chunk``
    subspaces at a time, so memory is O(chunk |V| 128), not O(K |V| 128).
    """
    sq, rows = nearest_to_subspaces(database, offsets, bases, n_adv + v_size, device=device)
    dist = np.sqrt(np.clip(sq, 0.0, None))
    est = np.empty((len(rows), database.shape[1]), np.float32)
    for s0 in range(0, len(rows), chunk):
        sl = slice(s0, s0 + chunk)
        v = database[rows[sl, n_adv:]]
        v_dist = dist[sl, n_adv:]
        if n_adv:
            a_hat = database[rows[sl, :n_adv]]
            score = np.linalg.norm(v[:, :, None, :] - a_hat[:, None, :, :], axis=-1).min(axis=2)
        else:
            score = -v_dist
        top = np.argsort(-score, axis=1, kind="stable")[:, :u_size]
        mask = np.zeros_like(score, dtype=bool)
        np.put_along_axis(mask, top, True, axis=1)
        est[sl] = weighted_projection(v, v_dist, mask, offsets[sl], bases[sl])
    return est, rows, dist


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
