"""L-BFGS with its search direction from the compact representation, for DLG and iDLG on the host.

torch's ``LBFGS`` turns the inverse-Hessian approximation into a direction by the two-loop
recursion (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Algorithm 7.4): with a full
history of 100 pairs that is about 700 operations on vectors of the image's size per
iteration, each a separate tensor call, and on DLG's LeNet it costs 1.2 ms per evaluation
against the 2.8 ms of the objective itself (``benchmarks/probes/dlg_overhead.py``).
:class:`CompactLBFGS` computes the same direction ``d = -H g`` from the compact form of the
same matrix (Byrd, Nocedal & Schnabel, "Representations of quasi-Newton matrices and their
use in limited memory methods", Mathematical Programming 63, 1994, eq. 3.1):

    H = γ I + [S  γY] [[R⁻ᵀ (D + γ YᵀY) R⁻¹, -R⁻ᵀ], [-R⁻¹, 0]] [Sᵀ; γ Yᵀ]

where the columns of ``S`` and ``Y`` are the stored steps ``s_i`` and gradient changes
``y_i``, oldest first, ``R`` is the upper triangle of ``SᵀY`` (``R_ij = s_iᵀ y_j``,
``i <= j``), ``D`` its diagonal and ``γ = sᵀy / yᵀy`` of the newest pair (torch's
``H_diag``). Per iteration that is two passes over the ``2m x n`` history (its products with
``g`` and the newest pair, then the combination into ``H g``) and two triangular solves of size
``m``: a dozen array operations on the host (numpy and BLAS on zero-copy views of the CPU
tensors), whatever ``m``.

Everything else is torch's L-BFGS: the same memory update (a pair is stored only when
``yᵀs > 1e-10``, the oldest dropped beyond ``history_size``), the same first step
(``min(1, 1/|g|₁) * lr`` along ``-g``), torch's own strong-Wolfe line search
(``torch.optim.lbfgs._strong_wolfe``) with the same evaluation budget (``max_eval``,
default ``max_iter * 5 / 4``) and the same stopping tests, and ``state["n_iter"]`` /
``state["func_evals"]`` kept on the first parameter as torch keeps them. The directions
agree with the two-loop recursion's to rounding (tests/federated_deep/test_compact_lbfgs.py
compares them pair by pair in double precision); in single precision the last digits differ,
and an L-BFGS line search grows such differences, so a long search ends at a different iterate
of the same quality, not at the same one.

The history lives in one preallocated buffer a quarter longer than the history
(:data:`SLACK`): the window of the last ``history_size`` pairs is a contiguous slice (no gather
per iteration), moved back to the buffer's start once every quarter of ``history_size``
updates, so the pairs take 1.25 times the memory of torch's lists of them (100 pairs of a
1,034-variable DLG candidate: 1 MB).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy.linalg.blas import dtrsv
from torch.optim.lbfgs import _strong_wolfe

#: torch's threshold on ``yᵀs`` below which a pair is not stored (curvature too small).
CURVATURE_MIN = 1e-10
#: Room for this share of ``history_size`` more pairs in the history's buffer (module docstring).
SLACK = 0.25


class CompactHistory:
    """The last ``size`` pairs ``(s_i, y_i)`` of L-BFGS with ``R`` (the upper triangle of
    ``SᵀY``) and ``YᵀY``, and the direction ``-H g`` of their compact representation (module docstring).

    The pairs are kept in the parameters' precision (float32 for DLG, the two-loop recursion's
    own: the history is read from memory twice per iteration, and in float32 that is half the
    bytes); every product of two vectors is computed directly (as the two-loop recursion
    computes its own), and ``R``, ``YᵀY`` and the small triangular systems are in double
    precision.
    """

    def __init__(self, size: int, n: int, dtype: np.dtype | type = np.float32) -> None:
        self.size, self.n = size, n
        capacity = size + max(1, int(size * SLACK))
        self.pairs = np.zeros((capacity, 2, n), dtype=dtype)  # row i: (s_i, y_i), a window [start, end) in use
        self.sy = np.zeros((capacity, capacity))  # sy[i, j] = s_i . y_j for i <= j (R; below it: unused)
        self.yy = np.zeros((capacity, capacity))  # yy[i, j] = y_i . y_j
        self.start = self.end = 0
        self.gamma = 1.0

    def __len__(self) -> int:
        return self.end - self.start

    def clear(self) -> None:
        self.start = self.end = 0
        self.gamma = 1.0

    def direction(self, g: np.ndarray, s: np.ndarray | None = None, y: np.ndarray | None = None) -> np.ndarray:
        """``-H g`` (Byrd, Nocedal & Schnabel 1994, eq. 3.1) in ``g``'s precision, after storing the
        pair ``(s, y)`` when given (the oldest dropped beyond ``size``; ``γ = sᵀy / yᵀy``); ``-g``
        with no pair stored.

        The stored pairs are read twice per call: once for their products with ``g`` and with
        the new ``y`` (one matrix product with two columns), once to combine them into ``H g``.
        """
        if s is not None and y is not None:
            projected = self._store(s, y, g)
        elif len(self):
            projected = self.pairs[self.start : self.end].reshape(-1, self.n) @ g
        else:
            return -g
        a, b, gamma = self.start, self.end, self.gamma
        projected = projected.astype(np.float64)
        # R is the upper triangle of sy; BLAS reads the C-ordered block as its transpose (lower).
        sy_t = np.ascontiguousarray(self.sy[a:b, a:b]).T
        v = dtrsv(sy_t, projected[0::2], lower=1, trans=1)  # R⁻¹ Sᵀg
        w = np.diagonal(sy_t) * v + gamma * (self.yy[a:b, a:b] @ v - projected[1::2])
        coefficients = np.empty(2 * len(self), dtype=self.pairs.dtype)
        coefficients[0::2] = dtrsv(sy_t, w, lower=1, trans=0)  # R⁻ᵀ w
        coefficients[1::2] = -gamma * v
        d = self.pairs[a:b].reshape(-1, self.n).T @ coefficients
        d += np.asarray(gamma, dtype=d.dtype) * g
        return np.negative(d, out=d)

    def _store(self, s: np.ndarray, y: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Add the pair; the window's products with ``g`` (``s_j . g``, ``y_j . g`` interleaved)."""
        if len(self) == self.size:
            self.start += 1
        if self.end == len(self.pairs):
            k, a, b = len(self), self.start, self.end
            self.pairs[:k] = self.pairs[a:b]
            for matrix in (self.sy, self.yy):
                matrix[:k, :k] = matrix[a:b, a:b]
            self.start, self.end = 0, k
        i, a = self.end, self.start
        # rows: . g, . y; columns: s_j, y_j interleaved. R needs s_j . y (j older), not s . y_j.
        products = np.stack([g, y]) @ self.pairs[a:i].reshape(-1, self.n).T
        self.pairs[i, 0], self.pairs[i, 1] = s, y
        self.sy[a:i, i] = products[1, 0::2]
        self.yy[a:i, i] = self.yy[i, a:i] = products[1, 1::2]
        self.sy[i, i], self.yy[i, i] = s @ y, y @ y
        self.end = i + 1
        self.gamma = float(self.sy[i, i] / self.yy[i, i])
        return np.concatenate([products[0], [s @ g, y @ g]])


class CompactLBFGS(torch.optim.Optimizer):
    """torch's L-BFGS (one parameter group, strong-Wolfe line search or a fixed step) with the
    direction of :class:`CompactHistory`; for parameters on the CPU (module docstring).

    Constructor arguments are torch's ``LBFGS``'s, with the same defaults.
    """

    def __init__(
        self,
        params: list[torch.Tensor],
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"line_search_fn must be None or 'strong_wolfe'; got {line_search_fn!r}")
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_iter * 5 // 4 if max_eval is None else max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("CompactLBFGS takes one parameter group")
        self._params: list[torch.Tensor] = self.param_groups[0]["params"]
        if any(p.device.type != "cpu" for p in self._params):
            raise ValueError("CompactLBFGS keeps its history on the host: its parameters must be on the CPU")
        if len({p.dtype for p in self._params}) != 1 or self._params[0].dtype not in (torch.float32, torch.float64):
            raise ValueError(f"CompactLBFGS takes float32 or float64 parameters of one dtype; got {sorted({str(p.dtype) for p in self._params})}")
        ends = np.cumsum([p.numel() for p in self._params])
        self._slices = [slice(end - p.numel(), end) for p, end in zip(self._params, ends)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params:
            p.grad = None

    def _flat_grad(self) -> torch.Tensor:
        parts = [p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in self._params]
        return torch.cat(parts) if len(parts) > 1 else parts[0].clone()

    def _parts(self, d: np.ndarray) -> list[torch.Tensor]:
        """The flat direction as one tensor view per parameter."""
        return [torch.from_numpy(d[part]).view(p.shape) for p, part in zip(self._params, self._slices)]

    def _move_to(self, x: list[torch.Tensor], step: float, parts: list[torch.Tensor]) -> None:
        """Set the parameters to ``x + step d`` (``parts``: :meth:`_parts` of ``d``)."""
        for p, start, part in zip(self._params, x, parts):
            torch.add(start, part, alpha=step, out=p)

    def _evaluate_at(self, closure: Callable[[], torch.Tensor], x: list[torch.Tensor], step: float,
                     parts: list[torch.Tensor]) -> tuple[float, torch.Tensor]:
        """The loss and gradient at ``x + step d`` (the parameters are left there)."""
        self._move_to(x, step, parts)
        return self._loss_and_gradient(closure)

    def _loss_and_gradient(self, closure: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
        """The closure's loss (read detached: it may still hold its graph) and the flat gradient."""
        with torch.enable_grad():
            loss = float(closure().detach())
        return loss, self._flat_grad()

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        """Up to ``max_iter`` iterations (torch's ``LBFGS.step``, the direction excepted).

        The bookkeeping between evaluations runs on numpy views of the flat gradient and
        direction, in the parameters' precision as torch's does (:class:`CompactHistory`).
        """
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with torch.enable_grad():
            first_loss = closure()
        loss = float(first_loss.detach())
        evaluations = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if np.abs(g.numpy()).max() <= tolerance_grad:
            return first_loss
        history: CompactHistory = state.setdefault(
            "history", CompactHistory(group["history_size"], g.numel(), g.numpy().dtype))
        d, t, previous = state.get("d"), state.get("t"), state.get("prev_flat_grad")
        previous_loss = state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            g_now = g.numpy()
            if state["n_iter"] == 1:
                history.clear()
                d = -g_now
            else:
                s, y = d * t, g_now - previous
                stored = float(y @ s) > CURVATURE_MIN
                d = history.direction(g_now, s if stored else None, y if stored else None)
            previous, previous_loss = g_now.copy(), loss
            t = min(1.0, 1.0 / float(np.abs(g_now).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(g.numpy() @ d)
            if gtd > -tolerance_change:
                break
            direction, parts = torch.from_numpy(d), self._parts(d)
            if group["line_search_fn"] == "strong_wolfe":
                x = [p.clone() for p in self._params]
                loss, g, t, ls_evaluations = _strong_wolfe(
                    lambda x_, t_, d_, parts=parts: self._evaluate_at(closure, x_, float(t_), parts), x, t, direction, loss, g, gtd,
                    max_ls=max_eval - evaluations,
                )
                t = float(t)
                self._move_to(x, t, parts)
            else:
                for p, part in zip(self._params, parts):
                    p.add_(part, alpha=t)
                ls_evaluations = 0
                if n_iter != max_iter:
                    loss, g = self._loss_and_gradient(closure)
                    ls_evaluations = 1
            evaluations += ls_evaluations
            state["func_evals"] += ls_evaluations
            if (n_iter == max_iter or evaluations >= max_eval or np.abs(g.numpy()).max() <= tolerance_grad
                    or np.abs(d).max() * abs(t) <= tolerance_change or abs(loss - previous_loss) < tolerance_change):
                break
        state.update(d=d, t=t, prev_flat_grad=previous, prev_loss=previous_loss)
        return first_loss
