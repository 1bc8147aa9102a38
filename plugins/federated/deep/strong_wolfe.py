"""torch's strong-Wolfe line search on numpy scalars: the same decisions and steps, bit for bit.

``torch.optim.LBFGS`` with ``line_search_fn="strong_wolfe"`` (DLG's and iDLG's optimiser) runs
``torch.optim.lbfgs._strong_wolfe`` (a port of ``lswolfe.lua``: bracketing, then zooming by cubic
interpolation; Nocedal & Wright, *Numerical Optimization*, 2nd ed., Algorithms 3.5-3.6). Its
scalars are a mix of Python floats (the objective's values, ``float(loss)``; steps computed from
Python numbers) and 0-d float32 tensors (directional derivatives ``g . d``, the step once it has
been interpolated from them). On the CPU each scalar operation on a tensor costs a few
microseconds, some thirty of them per evaluation: with DLG's LeNet, a tenth of the evaluation.

:func:`strong_wolfe` is that function line for line with every 0-d float32 tensor a
``numpy.float32`` and every Python number left a Python number. The arithmetic is then the same:

* a Python number meeting a float32 scalar is rounded to float32 first and the operation is
  done in float32 (torch's wrapped numbers; NumPy's weak Python scalars, NEP 50), comparisons
  included;
* except a Python number divided by a float32 tensor, which torch computes as
  ``reciprocal(b) * a`` (two roundings): :func:`divide` does the same;
* ``d1 ** 2`` of a tensor is ``d1 * d1``;
* torch's float32 ``sqrt`` on the CPU is not the correctly rounded one (about one result in six
  differs from IEEE's in the last bit, depending on the CPU's vector unit): :func:`sqrt` asks
  torch, once per interpolation;
* ``min``/``max`` are Python's own on the same mix of types, so they return the same objects.

The objective is a function of the step alone, ``evaluate(t) -> (f, g, g . d)``, which the
optimiser (:class:`~vispriv.plugins.federated.deep.lbfgs_two_loop.TwoLoopLBFGS`) computes with
torch's own dot product. The tests hold both functions to torch's on random and adversarial
inputs (every branch) and whole optimisations to torch's iterates.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

Scalar = float | int | np.float32
#: ``evaluate(t)``: the objective's value, its gradient and the directional derivative ``g . d`` at ``x + t d``.
Evaluate = Callable[[Scalar], tuple[float, np.ndarray, np.float32]]

_ONE = np.float32(1.0)


def divide(a: Scalar, b: Scalar) -> Scalar:
    """``a / b`` as torch computes it when either is a 0-d float32 tensor: a Python number over a
    float32 one is ``reciprocal(b) * a`` (torch's ``Tensor.__rtruediv__``); otherwise one division."""
    if isinstance(b, np.float32) and not isinstance(a, np.float32):
        return (_ONE / b) * a
    return a / b


def sqrt(x: np.float32) -> np.float32:
    """``x.sqrt()`` of a 0-d float32 tensor: torch's own kernel (not always correctly rounded)."""
    return np.float32(torch.tensor(x, dtype=torch.float32).sqrt().item())


def cubic_interpolate(x1: Scalar, f1: float, g1: np.float32, x2: Scalar, f2: float, g2: np.float32,
                      bounds: tuple[Scalar, Scalar] | None = None) -> Scalar:
    """torch's ``_cubic_interpolate``: the minimiser of the cubic through ``(x1, f1, g1)`` and
    ``(x2, f2, g2)`` clamped to ``bounds`` (default the two points), the bounds' midpoint when the
    cubic has no real minimiser."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - divide(3 * (f1 - f2), x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0:
        d2 = sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def strong_wolfe(evaluate: Evaluate, t: Scalar, d_norm: np.float32, f: float, g: np.ndarray, gtd: np.float32,
                 c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25,
                 ) -> tuple[float, np.ndarray, Scalar, int]:
    """torch's ``_strong_wolfe`` from step ``t`` along a direction ``d`` with ``d_norm = max |d|``,
    at ``f``, gradient ``g`` and ``gtd = g . d``: ``(f_new, g_new, t, evaluations)``.

    The gradients ``evaluate`` returns are kept, never written to (torch clones them)."""
    f_new, g_new, gtd_new = evaluate(t)
    ls_func_evals = 1
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        f_new, g_new, gtd_new = evaluate(t)
        ls_func_evals += 1
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new, gtd_new = evaluate(t)
        ls_func_evals += 1
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new, gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new, gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
