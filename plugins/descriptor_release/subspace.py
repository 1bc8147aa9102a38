"""Affine subspaces of descriptors: lifting (ref [11]) and the distances the attacks use.

An m-dimensional affine subspace is stored as an offset ``c`` (128,) and ``m`` orthonormal
basis rows ``B`` (m, 128): ``D = {c + B^T t}`` (LDP-Feat (ICCV 2023) section 3).

* :func:`lift` -- random / adversarial / hybrid / sub-hybrid lifting with the
  re-parameterisation of section 3 (fresh offset and basis drawn from U([-1, 1]^128) and
  projected onto D), so neither the offset nor the basis exposes ``d``.
* :func:`project` -- the orthogonal projection ``p_D(x) = c + B^T B (x - c)``.
* :func:`point_subspace_sqdist` / :func:`nearest_to_subspaces` / :func:`subspace_rows_sqdist`
  -- squared point-to-subspace distances ``||w - c||^2 - ||B (w - c)||^2``, batched as matrix
  products and chunked over the database so memory stays bounded whatever ``|W|`` (the hot
  path of sections 4.1-4.2).
* :func:`subspace_sqdist` -- squared subspace-to-subspace distances (closest points of two
  affine subspaces), robust to parallel subspaces.

Numerics: the offset is first replaced by the point of D closest to the origin
(``c - B^T B c``, orthogonal to the basis). All lifted subspaces of unit descriptors pass
within distance 1 of the origin, so the expanded form loses little precision in float32.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM, LiftedFeatures, RawFeatures

if TYPE_CHECKING:  # torch is imported where it runs: listing plugins must not load it
    import torch

LiftingMode = Literal["random", "adversarial", "hybrid", "sub-hybrid"]
#: Number of contiguous sub-databases of sub-hybrid lifting (ref [11]).
N_SUB_DATABASES = 16
#: Default number of matrix entries one kernel chunk may hold (128 MiB of float32; tuned in
#: benchmarks/point_to_subspace.py: on a loaded 2-core machine few large chunks beat many small ones).
CHUNK_ELEMENTS = 1 << 25


@dataclass
class Lifting:
    """Output of :func:`lift`: the public subspaces and the secret adversarial rows.

    ``adversarial_rows`` (K, n_adv) are rows of the lifting database (-1 where none);
    ``sub_database`` (K,) the sub-database used (-1 unless sub-hybrid). Both are
    secrets of the defense: they go to the truth, never into a release.
    """

    offsets: np.ndarray
    bases: np.ndarray
    adversarial_rows: np.ndarray
    sub_database: np.ndarray


def n_adversarial(m: int, mode: LiftingMode) -> int:
    """How many of the m directions come from the database: m, floor(m/2) or 0."""
    if mode == "adversarial":
        return m
    if mode in ("hybrid", "sub-hybrid"):
        return m // 2
    return 0


def sub_database_bounds(size: int, n_sub: int = N_SUB_DATABASES) -> np.ndarray:
    """Start rows of ``n_sub`` contiguous, (nearly) equal sub-databases, plus the end: (n_sub + 1,)."""
    return np.linspace(0, size, n_sub + 1).round().astype(np.int64)


def orthonormal_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Batched Gram-Schmidt (QR) of (K, m, n) row vectors -> orthonormal rows and |diag R| (K, m)."""
    q, r = np.linalg.qr(np.swapaxes(vectors, 1, 2).astype(np.float64))
    return np.swapaxes(q, 1, 2), np.abs(np.diagonal(r, axis1=1, axis2=2))


def project(points: np.ndarray, offsets: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Row-wise orthogonal projection p_D(x) = c + B^T B (x - c) of (K, n) points onto K subspaces."""
    x = np.asarray(points, np.float64) - offsets
    coeff = np.einsum("kmd,kd->km", bases, x)
    return offsets + np.einsum("kmd,km->kd", bases, coeff)


def lift(
    descriptors: np.ndarray,
    m: int,
    mode: LiftingMode,
    rng: np.random.Generator,
    database: np.ndarray | None = None,
    sub_database: np.ndarray | None = None,
) -> Lifting:
    """Lift each descriptor ``d`` to an m-dimensional affine subspace containing it (section 3).

    Directions: ``a_j - d`` for database rows ``a_j`` drawn without repetition
    (``n_adversarial(m, mode)`` of them; sub-hybrid draws from the sub-database
    ``sub_database[k]`` of :data:`N_SUB_DATABASES` contiguous ones) and the rest uniform in
    [-1, 1]^128; Gram-Schmidt. Then the re-parameterisation: the offset becomes
    ``p_D(e_0)`` and each basis vector ``p_D(e_i) - p_D(e_0)`` for fresh uniform ``e_i``,
    re-orthonormalised. ``D`` itself is unchanged: ``d`` and every ``a_j`` lie in it.
    """
    d = np.asarray(descriptors, np.float64)
    if d.ndim != 2 or d.shape[1] != DESCRIPTOR_DIM:
        raise InputError(f"descriptors must be (K, {DESCRIPTOR_DIM}); got {d.shape}")
    if not np.all(np.isfinite(d)):
        raise InputError("descriptors to lift contain NaN or infinite values")
    if not 1 <= m < DESCRIPTOR_DIM:
        raise ConfigError(f"lifting dimension m must be in [1, {DESCRIPTOR_DIM - 1}]; got {m}")
    k, n = d.shape
    n_adv = n_adversarial(m, mode)
    rows = np.full((k, max(n_adv, 1)), -1, np.int64)[:, :n_adv]
    subs = np.full(k, -1, np.int64)
    dirs = rng.uniform(-1.0, 1.0, size=(k, m, n))
    if n_adv:
        if database is None:
            raise ConfigError(f"{mode} lifting needs a lifting database")
        size = len(database)
        if mode == "sub-hybrid":
            if sub_database is None:
                raise ConfigError("sub-hybrid lifting needs a sub-database index per descriptor")
            bounds = sub_database_bounds(size)
            subs = np.asarray(sub_database, np.int64).reshape(k)
            pool = int(np.min(np.diff(bounds)))
        else:
            bounds, pool = np.array([0, size]), size
            subs[:] = -1
        if n_adv > pool:
            where = "a sub-database" if mode == "sub-hybrid" else "the database"
            raise ConfigError(f"m={m} ({mode}) needs {n_adv} distinct rows per descriptor but {where} has {pool}")
        for i in range(k):
            lo, hi = (bounds[subs[i]], bounds[subs[i] + 1]) if mode == "sub-hybrid" else (0, size)
            rows[i] = lo + rng.choice(hi - lo, size=n_adv, replace=False)
        dirs[:, :n_adv] = np.asarray(database, np.float64)[rows] - d[:, None, :]
    basis, diag = orthonormal_rows(dirs)
    if np.any(diag < 1e-9):
        raise InputError("a descriptor equals one of its adversarial database rows; the lifted subspace degenerates")
    # Re-parameterisation (section 3): offset p_D(e0), basis p_D(e_i) - p_D(e0), orthonormalised.
    e = rng.uniform(-1.0, 1.0, size=(k, m + 1, n))
    coeff = np.einsum("kmd,kjd->kjm", basis, e - d[:, None, :])
    on_d = d[:, None, :] + np.einsum("kmd,kjm->kjd", basis, coeff)
    offsets = on_d[:, 0]
    new_basis, diag = orthonormal_rows(on_d[:, 1:] - offsets[:, None, :])
    if np.any(diag < 1e-9):
        raise InputError("re-parameterisation drew a degenerate basis; use another seed")
    return Lifting(offsets.astype(np.float32), new_basis.astype(np.float32), rows, subs)


def canonical_offsets(offsets: np.ndarray | torch.Tensor, bases: np.ndarray | torch.Tensor) -> torch.Tensor:
    """The point of each subspace closest to the origin: c - B^T B c (orthogonal to B)."""
    import torch
    c = torch.as_tensor(_writable(offsets))
    b = torch.as_tensor(_writable(bases))
    return c - torch.einsum("smd,sm->sd", b, torch.einsum("smd,sd->sm", b, c))


def _writable(x: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """``x``, copied if it is a read-only array (cached arrays load read-only; torch wants a writable buffer)."""
    return np.require(x, requirements="W") if isinstance(x, np.ndarray) else x


def _as_tensor(x: np.ndarray | torch.Tensor, device: str, dtype: torch.dtype) -> torch.Tensor:
    import torch
    return torch.as_tensor(x if isinstance(x, torch.Tensor) else _writable(np.asarray(x)), dtype=dtype, device=device)


def _check_subspaces(offsets: np.ndarray, bases: np.ndarray) -> None:
    if offsets.ndim != 2 or offsets.shape[1] != DESCRIPTOR_DIM:
        raise InputError(f"offsets must be (S, {DESCRIPTOR_DIM}); got {offsets.shape}")
    if bases.ndim != 3 or bases.shape[0] != offsets.shape[0] or bases.shape[2] != DESCRIPTOR_DIM:
        raise InputError(f"bases must be (S, m, {DESCRIPTOR_DIM}) with S = {offsets.shape[0]}; got {bases.shape}")


def _subspace_chunk_sqdist(
    w: torch.Tensor,
    w_sq: torch.Tensor,
    m_stack: torch.Tensor,
    c_sq: torch.Tensor,
    m: int,
    buffers: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> torch.Tensor:
    """(s, p) squared distances: ||w||^2 - 2 c.w + ||c||^2 - ||B w||^2 from one matmul.

    ``m_stack`` holds, per subspace, the canonical offset then the m basis rows; the
    product's rows are squared and summed in place. ``buffers`` (keyed by shape) lets a
    caller reuse the product and result memory between chunks instead of re-allocating
    (and page-faulting) ~100 MB per chunk.
    """
    import torch
    s, p = c_sq.shape[0], w.shape[0]
    if buffers is not None:
        if (s, p) not in buffers:
            buffers[(s, p)] = (m_stack.new_empty((s * (m + 1), p)), m_stack.new_empty((s, p)))
        prod, out = buffers[(s, p)]
        torch.mm(m_stack, w.T, out=prod)
    else:
        prod, out = torch.mm(m_stack, w.T), m_stack.new_empty((s, p))
    r = prod.view(s, m + 1, p)
    torch.sum(r[:, 1:].square_(), dim=1, out=out)
    out.neg_().add_(r[:, 0], alpha=-2.0).add_(w_sq[None, :]).add_(c_sq[:, None])
    return out.clamp_(min=0.0)


def _prepare(offsets: np.ndarray | torch.Tensor, bases: np.ndarray | torch.Tensor, device: str, dtype: torch.dtype):
    import torch
    c = _as_tensor(offsets, device, torch.float64)
    b = _as_tensor(bases, device, torch.float64)
    c = canonical_offsets(c, b)
    stack = torch.cat([c[:, None, :], b], dim=1).to(dtype)
    return stack, c.square().sum(dim=1).to(dtype)


def point_subspace_sqdist(
    points: np.ndarray,
    offsets: np.ndarray,
    bases: np.ndarray,
    device: str = "cpu",
    chunk_elements: int = CHUNK_ELEMENTS,
) -> np.ndarray:
    """All squared point-to-subspace distances, (S, P): ``||w - p_D(w)||^2`` (sections 4.1-4.2).

    For few subspaces or points; :func:`nearest_to_subspaces` is the bounded-memory version
    for large databases. Float32 on ``device``.
    """
    import torch
    offsets, bases = np.asarray(offsets), np.asarray(bases)
    _check_subspaces(offsets, bases)
    w = _as_tensor(points, device, torch.float32)
    stack, c_sq = _prepare(offsets, bases, device, torch.float32)
    m = bases.shape[1]
    w_sq = w.square().sum(dim=1)
    out = np.empty((len(offsets), len(w)), np.float32)
    step = max(1, chunk_elements // max(1, (m + 1) * len(w)))
    for s0 in range(0, len(offsets), step):
        s1 = min(s0 + step, len(offsets))
        out[s0:s1] = _subspace_chunk_sqdist(w, w_sq, stack[s0:s1].reshape(-1, DESCRIPTOR_DIM), c_sq[s0:s1], m).cpu().numpy()
    return out


def database_tensor(database: np.ndarray | torch.Tensor, device: str = "cpu") -> torch.Tensor:
    """A (N, 128) database as a float32 tensor on ``device``, checked: the input of :func:`subspace_rows_sqdist`."""
    import torch
    w = _as_tensor(database, device, torch.float32)
    if w.ndim != 2 or w.shape[1] != DESCRIPTOR_DIM:
        raise InputError(f"database must be (N, {DESCRIPTOR_DIM}); got {tuple(w.shape)}")
    return w


def subspace_rows_sqdist(
    database: torch.Tensor,
    offsets: np.ndarray,
    bases: np.ndarray,
    subspace_chunk: int = 64,
    chunk_elements: int = CHUNK_ELEMENTS,
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Yield ``(s0, s1, sqdist)``: the squared distances of every database row to subspaces s0..s1-1, (s, N).

    The same kernel as :func:`nearest_to_subspaces`, for callers that need whole rows of the
    (S, N) matrix (a k-th smallest, a mask over the database) one chunk of subspaces at a
    time: memory O(subspace_chunk N + chunk_elements). ``database`` from :func:`database_tensor`.
    """
    import torch
    offsets, bases = np.asarray(offsets), np.asarray(bases)
    _check_subspaces(offsets, bases)
    m = bases.shape[1]
    w_sq = database.square().sum(dim=1)
    point_chunk = max(1, chunk_elements // max(1, subspace_chunk * (m + 1)))
    buffers: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
    for s0 in range(0, len(offsets), subspace_chunk):
        s1 = min(s0 + subspace_chunk, len(offsets))
        stack, c_sq = _prepare(offsets[s0:s1], bases[s0:s1], str(database.device), torch.float32)
        flat = stack.reshape(-1, DESCRIPTOR_DIM)
        out = database.new_empty((s1 - s0, len(database)))
        for p0 in range(0, len(database), point_chunk):
            p1 = min(p0 + point_chunk, len(database))
            out[:, p0:p1] = _subspace_chunk_sqdist(database[p0:p1], w_sq[p0:p1], flat, c_sq, m, buffers)
        yield s0, s1, out


def nearest_to_subspaces(
    database: np.ndarray | torch.Tensor,
    offsets: np.ndarray,
    bases: np.ndarray,
    n: int,
    device: str = "cpu",
    subspace_chunk: int = 128,
    chunk_elements: int = CHUNK_ELEMENTS,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` database rows nearest to each subspace, ascending: (sqdist (S, n), rows (S, n)).

    Batched kernel: for a chunk of s subspaces and p database rows, one float32 matmul of
    (s (m + 1), 128) x (128, p) gives ``c.w`` and ``B w``; each chunk keeps its top-n and
    the candidates are merged once, so memory is O(chunk_elements + s n |W| / p).
    """
    import torch
    offsets, bases = np.asarray(offsets), np.asarray(bases)
    _check_subspaces(offsets, bases)
    w_all = database_tensor(database, device)
    if not 1 <= n <= len(w_all):
        raise InputError(f"n must be in [1, {len(w_all)}] (the database size); got {n}")
    m = bases.shape[1]
    w_sq_all = w_all.square().sum(dim=1)
    n_sub = len(offsets)
    best_d = np.empty((n_sub, n), np.float32)
    best_i = np.empty((n_sub, n), np.int64)
    point_chunk = max(n, chunk_elements // max(1, subspace_chunk * (m + 1)))
    buffers: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
    for s0 in range(0, n_sub, subspace_chunk):
        s1 = min(s0 + subspace_chunk, n_sub)
        stack, c_sq = _prepare(offsets[s0:s1], bases[s0:s1], device, torch.float32)
        flat = stack.reshape(-1, DESCRIPTOR_DIM)
        cand_d, cand_i = [], []
        for p0 in range(0, len(w_all), point_chunk):
            p1 = min(p0 + point_chunk, len(w_all))
            dist = _subspace_chunk_sqdist(w_all[p0:p1], w_sq_all[p0:p1], flat, c_sq, m, buffers)
            d_c, i_c = torch.topk(dist, min(n, p1 - p0), dim=1, largest=False, sorted=False)
            cand_d.append(d_c)
            cand_i.append(i_c + p0)
        all_d, all_i = torch.cat(cand_d, dim=1), torch.cat(cand_i, dim=1)
        run_d, sel = torch.topk(all_d, n, dim=1, largest=False, sorted=True)
        best_d[s0:s1] = run_d.cpu().numpy()
        best_i[s0:s1] = torch.gather(all_i, 1, sel).cpu().numpy()
    return best_d, best_i


def _psd_solve(g: torch.Tensor, r: torch.Tensor, rtol: float) -> torch.Tensor:
    """``G^+ r`` for batched PSD ``G``: Cholesky where G is well conditioned, eigen-pseudo-inverse elsewhere."""
    import torch
    chol, info = torch.linalg.cholesky_ex(g)
    sol = torch.cholesky_solve(r[..., None], chol)[..., 0]
    diag = torch.diagonal(chol, dim1=-2, dim2=-1)
    bad = (info != 0) | (diag.amin(dim=-1) ** 2 < 1e3 * rtol) | ~torch.isfinite(sol).all(dim=-1)
    if bad.any():
        evals, evecs = torch.linalg.eigh(g[bad])
        inv = torch.where(evals > rtol * 2.0, 1.0 / evals.clamp(min=rtol), torch.zeros_like(evals))
        proj = torch.einsum("nab,na->nb", evecs, r[bad])
        sol[bad] = torch.einsum("nab,nb->na", evecs, proj * inv)
    return sol


def subspace_sqdist(
    offsets1: np.ndarray,
    bases1: np.ndarray,
    offsets2: np.ndarray,
    bases2: np.ndarray,
    chunk_pairs: int | None = None,
    rtol: float = 1e-6,
) -> np.ndarray:
    """Squared distances between every pair of affine subspaces, (S1, S2), float64.

    The distance of D1 = c1 + span(B1) and D2 = c2 + span(B2) is the residual of the
    least-squares problem ``min ||c1 + B1^T s - c2 - B2^T t||``: with ``v = c2 - c1``,
    ``M = [B1; B2]`` and ``G = M M^T`` it is ``||v||^2 - (M v)^T G^+ (M v)``. Parallel or
    intersecting directions make ``G`` singular; the pseudo-inverse (eigenvalues below
    ``rtol`` x 2 dropped) still gives the exact residual.
    """
    import torch
    c1, b1 = np.asarray(offsets1, np.float64), np.asarray(bases1, np.float64)
    c2, b2 = np.asarray(offsets2, np.float64), np.asarray(bases2, np.float64)
    _check_subspaces(c1, b1)
    _check_subspaces(c2, b2)
    t1, t2 = torch.from_numpy(b1), torch.from_numpy(b2)
    k1 = canonical_offsets(torch.from_numpy(c1), t1)
    k2 = canonical_offsets(torch.from_numpy(c2), t2)
    m1, m2 = b1.shape[1], b2.shape[1]
    out = np.empty((len(c1), len(c2)), np.float64)
    if chunk_pairs is None:
        chunk_pairs = max(1, CHUNK_ELEMENTS // 8 // (m1 + m2) ** 2)
    rows = max(1, chunk_pairs // max(1, len(c2)))
    eye1, eye2 = torch.eye(m1, dtype=torch.float64), torch.eye(m2, dtype=torch.float64)
    sq1, sq2 = k1.square().sum(1), k2.square().sum(1)
    for i0 in range(0, len(c1), rows):
        i1 = min(i0 + rows, len(c1))
        cross = torch.einsum("iad,jbd->ijab", t1[i0:i1], t2)
        s, p = cross.shape[:2]
        g = torch.cat(
            [
                torch.cat([eye1.expand(s, p, m1, m1), cross], dim=3),
                torch.cat([cross.transpose(2, 3), eye2.expand(s, p, m2, m2)], dim=3),
            ],
            dim=2,
        )
        # B1 v = B1 c2 (B1 k1 = 0); B2 v = -B2 k1 (B2 k2 = 0)
        r = torch.cat([t1[i0:i1] @ k2.T, -torch.einsum("jbd,id->ijb", t2, k1[i0:i1]).permute(0, 2, 1)], dim=1)
        r = r.permute(0, 2, 1)
        v_sq = sq1[i0:i1, None] + sq2[None, :] - 2.0 * k1[i0:i1] @ k2.T
        sol = _psd_solve(g, r, rtol)
        out[i0:i1] = (v_sq - (r * sol).sum(-1)).clamp(min=0.0).numpy()
    return out


def sub_database_of(image_ids: list[str], seed: int) -> np.ndarray:
    """The sub-database (0..15) of each image, seeded by the image id (ref [11]'s sub-hybrid)."""
    from vispriv.harness.hashing import derive_seed

    return np.array([derive_seed(seed, "sub-database", i) % N_SUB_DATABASES for i in image_ids], np.int64)


def lift_features(
    raw: RawFeatures, m: int, mode: LiftingMode, seed: int, database: np.ndarray | None, publish_database: bool
) -> tuple[LiftedFeatures, Lifting]:
    """Lift every descriptor of ``raw`` (sub-hybrid: one sub-database per image) -> (release, secrets)."""
    subs = sub_database_of(raw.image_ids, seed)[raw.image_index] if mode == "sub-hybrid" else None
    lifting = lift(raw.descriptors, m, mode, np.random.default_rng(seed), database=database, sub_database=subs)
    release = LiftedFeatures(
        **raw.keypoint_fields(),
        offsets=lifting.offsets,
        bases=lifting.bases,
        database=database if publish_database else None,
        mode=mode,
    )
    return release, lifting
