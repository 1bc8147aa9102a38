"""The compact L-BFGS (Byrd, Nocedal & Schnabel 1994) against the two-loop recursion and torch's LBFGS."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from vispriv.plugins.federated.deep import local
from vispriv.plugins.federated.deep.inversion import InversionSettings, invert
from vispriv.plugins.federated.deep.lbfgs import CompactHistory, CompactLBFGS
from vispriv.plugins.federated.deep.local import LocalWork, call_with, client_update, ties_weights
from vispriv.plugins.federated.deep.models import build_model


def two_loop(pairs: list[tuple[np.ndarray, np.ndarray]], g: np.ndarray) -> np.ndarray:
    """-H g by the two-loop recursion (Nocedal & Wright, Algorithm 7.4), H0 = (sᵀy / yᵀy) I of the newest pair."""
    q, alphas = -g.copy(), []
    for s, y in reversed(pairs):
        alphas.append(s @ q / (s @ y))
        q -= alphas[-1] * y
    s, y = pairs[-1]
    r = q * (s @ y) / (y @ y)
    for (s, y), alpha in zip(pairs, reversed(alphas)):
        r += (alpha - y @ r / (s @ y)) * s
    return r


@pytest.mark.parametrize("size", [1, 3, 7, 8])
def test_direction_is_the_two_loop_recursion_of_the_last_pairs(size):
    # 25 pairs through a history of `size`: the oldest are dropped and the window is moved back to
    # the buffer's start whenever it reaches the end (every pair for sizes 1, 3 and 7, every 2nd
    # for 8); every direction, the one that stores a pair and one that stores none, equals the
    # recursion on the pairs kept.
    rng = np.random.default_rng(size)
    n = 12
    history, kept = CompactHistory(size, n, np.float64), []
    assert np.array_equal(history.direction(np.arange(3.0)), -np.arange(3.0))
    for _ in range(25):
        s = rng.normal(size=n)
        y = s + 0.4 * rng.normal(size=n)  # s . y > 0
        g = rng.normal(size=n)
        kept = [*kept, (s, y)][-size:]
        np.testing.assert_allclose(history.direction(g, s, y), two_loop(kept, g), rtol=1e-9, atol=1e-12)
        assert len(history) == len(kept)
        assert history.gamma == pytest.approx((s @ y) / (y @ y), rel=1e-12)
        g = rng.normal(size=n)
        np.testing.assert_allclose(history.direction(g), two_loop(kept, g), rtol=1e-9, atol=1e-12)


def test_a_cleared_history_gives_steepest_descent_again():
    history = CompactHistory(2, 3, np.float64)
    assert not np.array_equal(history.direction(np.ones(3), np.array([1.0, 0.0, 0.0]), np.array([2.0, 0.0, 0.0])),
                              -np.ones(3))
    history.clear()
    assert len(history) == 0 and history.gamma == 1.0
    assert np.array_equal(history.direction(np.ones(3)), -np.ones(3))


def _rosenbrock(v: torch.Tensor) -> torch.Tensor:
    return (100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2).sum()


@pytest.mark.parametrize("line_search", ["strong_wolfe", None])
def test_iterates_are_torchs_lbfgs_iterates_in_double_precision(line_search):
    # In float64 the two directions differ only in rounding: the same line-search decisions,
    # evaluations and iterates as torch.optim.LBFGS, history dropping pairs included (size 4).
    runs = []
    for cls in (torch.optim.LBFGS, CompactLBFGS):
        v = torch.linspace(-1.2, 1.0, 8, dtype=torch.float64).requires_grad_(True)
        optimiser = cls([v], lr=1 if line_search else 1e-3, max_iter=20, history_size=4, line_search_fn=line_search,
                        tolerance_grad=0.0, tolerance_change=0.0)
        trajectory = []

        def closure(optimiser: torch.optim.Optimizer = optimiser, v: torch.Tensor = v) -> torch.Tensor:
            optimiser.zero_grad()
            loss = _rosenbrock(v)
            loss.backward()
            return loss.detach()

        for _ in range(3):
            optimiser.step(closure)
            trajectory.append(v.detach().clone())
        state = optimiser.state[v]
        runs.append((torch.stack(trajectory), state["n_iter"], state["func_evals"]))
    (torch_path, torch_iters, torch_evals), (compact_path, iters, evals) = runs
    assert (iters, evals) == (torch_iters, torch_evals)
    assert float(_rosenbrock(compact_path[-1])) < float(_rosenbrock(torch_path[0]))  # it descends
    torch.testing.assert_close(compact_path, torch_path, rtol=1e-7, atol=1e-9)


def test_stops_where_torch_stops_at_the_gradient_tolerance():
    # A quadratic is solved exactly within a few iterations; both stop at tolerance_grad with the
    # same iteration count, short of max_iter.
    a = torch.diag(torch.tensor([1.0, 3.0, 10.0], dtype=torch.float64))
    counts = []
    for cls in (torch.optim.LBFGS, CompactLBFGS):
        v = torch.ones(3, dtype=torch.float64, requires_grad=True)
        optimiser = cls([v], max_iter=50, line_search_fn="strong_wolfe", tolerance_grad=1e-9, tolerance_change=0.0)

        def closure(optimiser: torch.optim.Optimizer = optimiser, v: torch.Tensor = v) -> torch.Tensor:
            optimiser.zero_grad()
            loss = 0.5 * v @ a @ v
            loss.backward()
            return loss.detach()

        optimiser.step(closure)
        assert float((a @ v).detach().abs().max()) <= 1e-9  # the gradient at the last iterate
        counts.append(optimiser.state[v]["n_iter"])
    assert counts[0] == counts[1] < 50


def test_a_closure_returning_its_graphs_loss_warns_nothing():
    # DLG's closure returns the loss still attached to its graph; reading it as a float must not
    # raise torch's "Converting a tensor with requires_grad=True to a scalar" warning (2.13+),
    # in the first evaluation, the line search's or the fixed-step one's.
    for line_search in ("strong_wolfe", None):
        v = torch.linspace(-1.2, 1.0, 6, dtype=torch.float64).requires_grad_(True)
        optimiser = CompactLBFGS([v], lr=1 if line_search else 1e-3, max_iter=5, line_search_fn=line_search)

        def closure(optimiser: torch.optim.Optimizer = optimiser, v: torch.Tensor = v) -> torch.Tensor:
            optimiser.zero_grad()
            loss = _rosenbrock(v)
            loss.backward()
            return loss

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            returned = optimiser.step(closure)
        assert returned.requires_grad and optimiser.state[v]["func_evals"] >= 5


def test_parameters_must_be_on_the_cpu_and_in_one_group():
    with pytest.raises(ValueError, match="on the CPU"):
        CompactLBFGS([torch.zeros(3, device="meta", requires_grad=True)])
    with pytest.raises(ValueError, match="one parameter group"):
        CompactLBFGS([{"params": [torch.zeros(2, requires_grad=True)]}, {"params": [torch.zeros(2, requires_grad=True)]}])
    with pytest.raises(ValueError, match="strong_wolfe"):
        CompactLBFGS([torch.zeros(2, requires_grad=True)], line_search_fn="backtracking")
    with pytest.raises(ValueError, match=r"float32 or float64 parameters of one dtype; got \['torch.bfloat16'\]"):
        CompactLBFGS([torch.zeros(2, dtype=torch.bfloat16, requires_grad=True)])
    with pytest.raises(ValueError, match="of one dtype"):
        CompactLBFGS([torch.zeros(2, requires_grad=True), torch.zeros(2, dtype=torch.float64, requires_grad=True)])


def test_dlg_with_the_compact_lbfgs_recovers_the_image_as_torchs_does():
    # A LeNet digit-sized case: both L-BFGS recover the image and its label from the same start,
    # to the same few hundredths of a gray level (float32: the iterates are not bit-identical).
    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(1, 3, 8, 8, generator=g), torch.tensor([2])
    model = build_model("lenet", 4, 3, 8, seed=1)
    update = client_update(model, x, y, LocalWork())
    recovered = {}
    for lbfgs in ("torch", "compact"):
        settings = InversionSettings("dlg", steps=6, lbfgs=lbfgs)  # type: ignore[arg-type]
        recovered[lbfgs] = invert(model, update, 1, (3, 8, 8), 4, settings, seed=11)
    for rec in recovered.values():
        assert rec.labels.tolist() == [2]
        assert float((rec.images - x).abs().max()) < 0.05, float((rec.images - x).abs().max())
    assert recovered["compact"].loss < 1e-6


def test_the_attack_config_chooses_the_lbfgs_and_inverting_gradients_refuses_it():
    from pydantic import ValidationError

    from vispriv.plugins.attacks.deep_inversion import Dlg, InvertingGradients

    assert Dlg(Dlg.Config(lbfgs="compact")).settings().lbfgs == "compact"
    assert Dlg(Dlg.Config()).settings().lbfgs == "torch"
    with pytest.raises(ValidationError, match="lbfgs applies to dlg and idlg"):
        InvertingGradients.Config(lbfgs="compact")


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 3)
        self.b.weight = self.a.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def test_call_with_unties_only_models_that_tie_weights():
    torch.manual_seed(0)
    tied, lenet = _Tied(), build_model("lenet", 4, 3, 8, seed=1)
    assert ties_weights(tied) and not ties_weights(lenet)
    x = torch.rand(2, 3)
    # Replacing the tied weight by its one name replaces it in both layers (functional_call's untying).
    new = {"a.weight": torch.eye(3), "a.bias": torch.zeros(3), "b.bias": torch.zeros(3)}
    assert torch.equal(call_with(tied, new, (x,)), torch.relu(x))
    images = torch.rand(1, 3, 8, 8)
    params = {k: p.detach() * 0.5 for k, p in lenet.named_parameters()}
    assert torch.equal(call_with(lenet, params, (images,)), torch.func.functional_call(lenet, params, (images,)))


def test_call_with_finds_nested_parameters_and_buffers_as_functional_call_does():
    resnet = build_model("resnet18", 4, 3, 16, 4, 0).eval()  # names three modules deep: layer1.0.bn1.weight
    tensors = {k: t.detach() * 0.5 for k, t in [*resnet.named_parameters(), *resnet.named_buffers()]
               if t.dtype.is_floating_point}
    slots = local._slots(resnet, tensors)  # the direct swap, not functional_call's fallback
    assert slots is not None and all(table[attr] is getattr(resnet.get_submodule(k.rpartition(".")[0]), attr)
                                     for ((table, attr), k) in zip(slots, tensors))
    assert local._slots(resnet, {"layer9.0.conv1.weight": torch.zeros(1)}) is None
    images = torch.rand(2, 3, 16, 16)
    assert torch.equal(call_with(resnet, tensors, (images,)), torch.func.functional_call(resnet, tensors, (images,)))
    assert all(torch.equal(t, getattr(resnet.get_submodule(k.rpartition(".")[0]), k.rpartition(".")[2]) * 0.5)
               for k, t in tensors.items())  # the model's own tensors are back after the call


class _Counting(torch.nn.Module):
    """BatchNorm (buffers updated in place in training mode) and a buffer it replaces each call."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(3)
        self.register_buffer("calls", torch.zeros(()))
        self.scale = torch.tensor(2.0)  # a plain tensor attribute: neither parameter nor buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = self.calls + 1  # a new tensor in the slot, as functional_call writes back
        if torch.isnan(x).any():
            raise ValueError("nan input")
        return self.norm(x) * self.scale


def test_call_with_swaps_and_writes_back_as_functional_call_does():
    torch.manual_seed(0)
    model = _Counting().train()
    own = {k: t.clone() for k, t in [*model.named_parameters(), *model.named_buffers()]}
    x = torch.randn(4, 3)
    results = []
    for call in (call_with, torch.func.functional_call):
        tensors = {k: t.detach().clone() + 0.5 for k, t in own.items()}
        given = dict(tensors)
        out = call(model, tensors, (x,))
        results.append((out, tensors, given))
    (out, tensors, given), (ref_out, ref_tensors, _) = results
    assert torch.equal(out, ref_out)
    assert tensors.keys() == ref_tensors.keys()
    for k in tensors:
        assert torch.equal(tensors[k], ref_tensors[k]), k
    # BatchNorm updated the given running statistics in place; the replaced buffer came back as a new tensor
    assert tensors["norm.running_mean"] is given["norm.running_mean"] and not torch.equal(tensors["norm.running_mean"], own["norm.running_mean"] + 0.5)
    assert tensors["calls"] is not given["calls"] and float(tensors["calls"]) == 1.5
    for k, t in [*model.named_parameters(), *model.named_buffers()]:  # the model's own are back, untouched
        assert torch.equal(t, own[k]), k


def test_call_with_puts_the_model_back_when_the_call_raises_and_defers_odd_names():
    model = _Counting().eval()
    before = {k: id(t) for k, t in [*model.named_parameters(), *model.named_buffers()]}
    with pytest.raises(ValueError, match="nan input"):
        call_with(model, {"norm.weight": torch.zeros(3), "calls": torch.ones(())}, (torch.full((2, 3), float("nan")),))
    assert {k: id(t) for k, t in [*model.named_parameters(), *model.named_buffers()]} == before
    # a plain tensor attribute is not a slot: the call goes through functional_call, which sets it for the call
    x = torch.randn(2, 3)
    assert torch.equal(call_with(model, {"scale": torch.tensor(3.0)}, (x,)),
                       torch.func.functional_call(model, {"scale": torch.tensor(3.0)}, (x,)))
    assert float(model.scale) == 2.0
