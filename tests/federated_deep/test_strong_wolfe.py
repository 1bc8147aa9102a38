"""torch's strong-Wolfe line search on numpy scalars: torch's steps and decisions, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.optim.lbfgs import _cubic_interpolate, _strong_wolfe

from vispriv.plugins.federated.deep.strong_wolfe import cubic_interpolate, divide, sqrt, strong_wolfe


def _as_numpy(value):
    """A torch scalar as the numpy port holds it: 0-d tensors as float32, Python numbers as they are."""
    return np.float32(value.item()) if isinstance(value, torch.Tensor) else value


def _same(torch_value, numpy_value) -> bool:
    """The same bits and the same kind (a 0-d tensor <-> numpy.float32, a Python number <-> itself)."""
    if isinstance(torch_value, torch.Tensor):
        return isinstance(numpy_value, np.float32) and np.float32(torch_value.item()).tobytes() == numpy_value.tobytes()
    return type(torch_value) is type(numpy_value) and (torch_value == numpy_value or (math.isnan(torch_value)
                                                                                     and math.isnan(numpy_value)))


def test_a_python_number_over_a_float32_is_a_reciprocal_times_the_number():
    rng = np.random.default_rng(0)
    pairs = [(float(a), np.float32(b)) for a, b in zip(rng.normal(size=400) * 7, rng.normal(size=400) * 3)]
    twice = [(a, b) for a, b in pairs if (np.float32(1) / b) * np.float32(a) != np.float32(a) / b]
    assert len(twice) > 50  # the cases discriminate: two roundings often differ from one
    for a, b in twice:
        assert np.float32((a / torch.tensor(b)).item()) == divide(a, b) == (np.float32(1) / b) * np.float32(a)
        assert divide(np.float32(a), b) == np.float32(a) / b  # float32 over float32: one division
    assert divide(0.3, 0.7) == 0.3 / 0.7


def test_sqrt_is_torchs_even_where_torch_is_not_correctly_rounded():
    values = np.random.default_rng(0).random(4000).astype(np.float32) * 10
    exact = np.sqrt(values)  # IEEE, correctly rounded
    ours = np.array([sqrt(v) for v in values])
    torchs = np.array([torch.tensor(v).sqrt().item() for v in values], dtype=np.float32)
    assert np.array_equal(ours, torchs)
    if np.array_equal(exact, torchs):
        pytest.skip("this CPU's torch sqrt is correctly rounded: nothing to tell apart")
    assert not np.array_equal(ours, exact)


def test_cubic_interpolation_is_torchs_on_every_mix_of_scalars():
    rng = np.random.default_rng(1)
    branches = {"midpoint": 0, "x1 <= x2": 0, "x1 > x2": 0, "bounded": 0}
    for k in range(3000):
        tensor_x = k % 3  # 0: both Python numbers; 1: x2 a float32; 2: both float32
        x1 = float(rng.normal()) if k % 5 else 0
        x2 = x1 + float(rng.normal() * 2) or 1.0
        f1, f2 = float(rng.normal() * 30), float(rng.normal() * 30)
        g1, g2 = (torch.tensor(rng.normal() * 5, dtype=torch.float32) for _ in range(2))
        xs = [x1, x2] if tensor_x == 0 else [x1, torch.tensor(x2, dtype=torch.float32)] if tensor_x == 1 else \
            [torch.tensor(x, dtype=torch.float32) for x in (x1, x2)]
        bounds = None if k % 2 else (xs[1] + 0.01 * (xs[1] - xs[0]), xs[1] * 10)
        ours = cubic_interpolate(_as_numpy(xs[0]), f1, _as_numpy(g1), _as_numpy(xs[1]), f2, _as_numpy(g2),
                                 None if bounds is None else tuple(_as_numpy(b) for b in bounds))
        theirs = _cubic_interpolate(xs[0], f1, g1, xs[1], f2, g2, bounds)
        assert _same(theirs, ours), (k, theirs, ours)
        d1 = float(g1 + g2) - 3 * (f1 - f2) / (x1 - x2)
        branches["midpoint" if d1 * d1 < float(g1 * g2) else "x1 <= x2" if x1 <= x2 else "x1 > x2"] += 1
        branches["bounded"] += bounds is not None
    assert min(branches.values()) > 20, branches


def _both_agree(evaluated, x: torch.Tensor, d: torch.Tensor, t0, max_ls: int = 25) -> int:
    """torch's line search and the port from ``x`` along ``d``: the same value, gradient, step and
    count of evaluations (returned)."""
    f, g = evaluated(x)
    gtd = g.dot(d)
    f_t, g_t, t_t, n_t = _strong_wolfe(lambda x, t, d: evaluated(x[0].add(d, alpha=t)), [x], t0, d, f, g, gtd,
                                       max_ls=max_ls)

    def evaluate(t):
        value, gradient = evaluated(x.add(d, alpha=float(t)))
        return value, gradient.numpy(), np.float32(gradient.dot(d).item())

    with np.errstate(all="ignore"):  # as the optimiser calls it: inf and nan pass silently, as in torch
        f_n, g_n, t_n, n_n = strong_wolfe(evaluate, _as_numpy(t0), np.float32(d.abs().max().item()), f, g.numpy(),
                                          np.float32(gtd.item()), max_ls=max_ls)
    assert n_n == n_t and _same(f_t, f_n) and _same(t_t, t_n) and np.array_equal(g_n, g_t.numpy(), equal_nan=True)
    return n_t


def _gradient_of(value):
    def evaluated(v: torch.Tensor) -> tuple[float, torch.Tensor]:
        v = v.detach().requires_grad_(True)
        loss = value(v)
        (g,) = torch.autograd.grad(loss, v)
        return float(loss.detach()), g

    return evaluated


def _problem(kind: str, n: int, rng: np.random.Generator) -> tuple:
    """An objective of ``n`` float32 variables (value and gradient), a start and a descent direction."""
    x = torch.tensor(rng.normal(size=n), dtype=torch.float32)
    scales = torch.tensor(rng.random(n) * 50 + 0.1, dtype=torch.float32)

    def value(v: torch.Tensor) -> torch.Tensor:
        if kind == "quadratic":
            return 0.5 * (scales * v * v).sum()
        if kind == "rosenbrock":
            return (100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2).sum()
        return (v * v).sum() + 4 * torch.sin(3 * v).sum()  # wavy: non-convex

    evaluated = _gradient_of(value)
    _, g = evaluated(x)
    d = -g * torch.tensor((rng.random(n) + 0.5) * 10.0 ** rng.uniform(-3, 1), dtype=torch.float32)
    return evaluated, x, d


@pytest.mark.parametrize("kind", ["quadratic", "rosenbrock", "wavy"])
def test_the_line_search_is_torchs_bit_for_bit(kind):
    rng = np.random.default_rng(["quadratic", "rosenbrock", "wavy"].index(kind))
    evaluations = [_both_agree(*_problem(kind, 37, rng), t0=[1, 1e-3, 1.0, 30.0, torch.tensor(0.37)][k % 5],
                               max_ls=2 if k % 7 == 0 else 25) for k in range(60)]
    # the cases reach the first point's acceptance, the zoom and the evaluation limit
    assert 1 in evaluations and max(evaluations) >= 4 and 3 in evaluations, sorted(evaluations)


def test_a_minimum_near_the_brackets_end_takes_torchs_insufficient_progress_steps():
    # |v - a|^1.5 from v = 0, step 3: the interpolations crowd the bracket's end near a, where torch
    # moves a trial a tenth of the bracket inwards only after a second such trial in a row.
    for a in np.linspace(0.001, 0.3, 60):
        _both_agree(_gradient_of(lambda v, a=a: ((v - a) ** 2).sum() ** 0.75), torch.zeros(1), torch.ones(1), 3.0)
