"""torch's L-BFGS with its step compiled (the two-loop recursion) and on numpy (the rest): torch's own iterates, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("numba")

from vispriv.plugins.federated.deep import lbfgs_two_loop
from vispriv.plugins.federated.deep.inversion import InversionSettings, invert
from vispriv.plugins.federated.deep.lbfgs_two_loop import TwoLoopLBFGS, kernel_agrees, sdot_address
from vispriv.plugins.federated.deep.local import LocalWork, client_update
from vispriv.plugins.federated.deep.models import build_model

if sdot_address() is None:  # a torch without an exported BLAS dot: the class is torch's own there
    pytest.skip("torch's CPU library exports no sdot_", allow_module_level=True)


def _wavy(v: torch.Tensor) -> torch.Tensor:
    """Rosenbrock plus a ripple: non-convex, so some steps meet negative curvature."""
    return (100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2).sum() + 3 * torch.sin(5 * v).sum()


def _trajectory(cls: type, sizes: tuple[int, ...], history: int, line_search: str | None, calls: int,
                **kwargs) -> tuple[torch.Tensor, dict]:
    generator = torch.Generator().manual_seed(sum(sizes) + history)
    params = [(torch.rand(n, generator=generator, dtype=torch.float32) * 2 - 1).requires_grad_(True) for n in sizes]
    optimiser = cls(params, lr=1 if line_search else 2e-3, max_iter=7, history_size=history, line_search_fn=line_search,
                    tolerance_grad=0.0, tolerance_change=0.0, **kwargs)

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        loss = _wavy(torch.cat(params))
        loss.backward()
        return loss

    path = []
    for _ in range(calls):
        optimiser.step(closure)
        path.append(torch.cat([p.detach() for p in params]))
    return torch.stack(path), optimiser.state[params[0]]


@pytest.mark.parametrize(("sizes", "history", "line_search"), [
    ((1,), 3, "strong_wolfe"),
    ((37,), 4, "strong_wolfe"),  # a tail past the 16-float vector lanes; the history wraps
    ((1024, 10), 100, "strong_wolfe"),  # DLG's digit and label logits: rows not a multiple of 64 bytes
    ((300,), 5, None),  # torch's fixed step
])
def test_iterates_are_torchs_bit_for_bit(sizes, history, line_search):
    assert kernel_agrees()
    reference, torch_state = _trajectory(torch.optim.LBFGS, sizes, history, line_search, calls=6)
    compiled, state = _trajectory(TwoLoopLBFGS, sizes, history, line_search, calls=6, compiled=True)
    assert torch.equal(compiled, reference)
    assert (state["n_iter"], state["func_evals"]) == (torch_state["n_iter"], torch_state["func_evals"])
    assert len(state["pairs"]) == len(torch_state["old_dirs"])
    assert torch.equal(state["d"], torch_state["d"]) and torch.equal(state["prev_flat_grad"], torch_state["prev_flat_grad"])
    if sizes == (37,):  # the case is what its name says: pairs refused for curvature, and a full history
        assert len(state["pairs"]) == history < state["n_iter"] - 1


def test_the_pairs_sit_in_64_byte_aligned_rows_of_the_ring():
    pairs = lbfgs_two_loop._Pairs(3, 37)
    assert pairs.pairs.shape == (3, 2, 48) and pairs.buffer.data_ptr() % 64 == 0
    for k in range(5):  # the 4th pair overwrites the oldest (row 0), the 5th row 1
        pairs.push(np.full(37, k, dtype=np.float32), np.full(37, -k, dtype=np.float32), np.float32(1.0 / (k + 1)))
    assert len(pairs) == 3 and pairs.order.tolist() == [2, 0, 1]
    assert [pairs.pairs[i, 0, 0] for i in pairs.order] == [2.0, 3.0, 4.0]
    assert pairs.ro[pairs.order].tolist() == pytest.approx([1 / 3, 1 / 4, 1 / 5])
    assert not pairs.pairs[:, :, 37:].any()  # the padding stays zero


def test_dlg_reconstructs_the_same_image_with_the_loop_on_and_off(monkeypatch):
    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(1, 3, 8, 8, generator=g), torch.tensor([2])
    model = build_model("lenet", 4, 3, 8, seed=1)
    update = client_update(model, x, y, LocalWork())
    settings = InversionSettings("dlg", steps=3)
    runs = []
    for switch in ("1", "0"):
        monkeypatch.setenv(lbfgs_two_loop.SWITCH, switch)
        runs.append(invert(model, update, 1, (3, 8, 8), 4, settings, seed=11))
    assert torch.equal(runs[0].images, runs[1].images)
    assert (runs[0].loss, runs[0].evaluations) == (runs[1].loss, runs[1].evaluations) and runs[0].evaluations > 40


def test_torchs_step_runs_where_the_loop_cannot(monkeypatch):
    def made(*tensors: torch.Tensor) -> TwoLoopLBFGS:
        return TwoLoopLBFGS([t.requires_grad_(True) for t in tensors])

    assert made(torch.zeros(3)).compiled
    assert not made(torch.zeros(3, dtype=torch.float64)).compiled
    assert not made(torch.zeros(3), torch.zeros(2, dtype=torch.float64)).compiled
    assert not made(torch.zeros(3, device="meta")).compiled
    assert not made(torch.zeros(3, 2).t()).compiled  # a transposed view: no flat view to write into
    assert not TwoLoopLBFGS([torch.zeros(3, requires_grad=True)], history_size=0).compiled
    assert not TwoLoopLBFGS([torch.zeros(3, requires_grad=True)], lr=torch.tensor(0.5)).compiled
    assert TwoLoopLBFGS([torch.zeros(3, requires_grad=True)], lr=1).compiled
    monkeypatch.setenv(lbfgs_two_loop.SWITCH, "0")
    assert not made(torch.zeros(3)).compiled
    monkeypatch.delenv(lbfgs_two_loop.SWITCH)
    # no sdot_ (or a BLAS whose results differ): the self-check says no and torch's step runs
    monkeypatch.setattr(lbfgs_two_loop, "_SDOT", None)
    kernel_agrees.cache_clear()
    try:
        assert not kernel_agrees() and not made(torch.zeros(3)).compiled
    finally:
        monkeypatch.undo()
        kernel_agrees.cache_clear()
    assert made(torch.zeros(3)).compiled


def test_a_loop_with_another_rounding_fails_the_self_check(monkeypatch):
    # The self-check is what keeps the loop honest on another BLAS or CPU: a loop that rounds the
    # update q + a y twice (a product, then a sum) instead of once must be refused.
    original = lbfgs_two_loop._two_loop

    def rounded_twice(address, g, pairs, ro, order, h_diag, d, al, ints):
        original(address, g, pairs, ro, order, h_diag, d, al, ints)
        d += np.float32(1e-7) * d  # any change in the last bits

    monkeypatch.setattr(lbfgs_two_loop, "_two_loop", rounded_twice)
    assert not lbfgs_two_loop.agrees_with_torch()


def test_zero_grad_clears_or_zeroes_like_torchs():
    v = torch.ones(3, requires_grad=True)
    optimiser = TwoLoopLBFGS([v])
    v.grad = torch.ones(3)
    optimiser.zero_grad(set_to_none=False)
    assert torch.equal(v.grad, torch.zeros(3))
    optimiser.zero_grad()
    assert v.grad is None


def test_float32_parameters_stay_float32_under_a_double_default_dtype():
    # The history buffer and the self-check's problem are float32 whatever torch's default dtype.
    kernel_agrees.cache_clear()
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert kernel_agrees()
        reference, _ = _trajectory(torch.optim.LBFGS, (37,), 4, "strong_wolfe", calls=3)
        compiled, state = _trajectory(TwoLoopLBFGS, (37,), 4, "strong_wolfe", calls=3, compiled=True)
        assert reference.dtype == torch.float32 and torch.equal(compiled, reference)
        assert state["pairs"].buffer.dtype == torch.float32
    finally:
        torch.set_default_dtype(before)
        kernel_agrees.cache_clear()
