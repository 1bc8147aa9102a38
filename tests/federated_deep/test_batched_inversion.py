"""Batched restarts (one torch.func evaluation for all, each restart its own optimiser) against
the restarts one after the other: the same seeds give the same reconstructions."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge
from vispriv.plugins.federated.deep.batched import LockStep
from vispriv.plugins.federated.deep.inversion import InversionSettings, Reconstruction, invert
from vispriv.plugins.federated.deep.local import LocalWork, client_update
from vispriv.plugins.federated.deep.models import build_model


def _both(arch: str, method: str, steps: int, restarts: int, work: LocalWork | None = None, n_images: int = 1,
          knowledge: DefenseKnowledge | None = None, **kw: object) -> tuple[Reconstruction, Reconstruction]:
    g = torch.Generator().manual_seed(5)
    size = 27 if arch == "convnet" else 8
    x, y = torch.rand(n_images, 3, size, size, generator=g), torch.arange(n_images) % 4
    model = build_model(arch, 4, 3, size, width=4, seed=1)
    work = work or LocalWork()
    work.set_mode(model)
    update = client_update(model, x, y, work)
    tv = 0.1 if method == "inverting-gradients" else 0.0
    out = []
    for batched in ("off", "on"):
        settings = InversionSettings(method, steps, restarts, tv=tv, batched=batched, **kw)  # type: ignore[arg-type]
        out.append(invert(model, update, n_images, (3, size, size), 4, settings, seed=11, work=work, knowledge=knowledge))
    return out[0], out[1]


def _same(a: Reconstruction, b: Reconstruction, atol: float) -> None:
    assert (a.steps, a.evaluations, a.stopped) == (b.steps, b.evaluations, b.stopped)
    assert a.labels.tolist() == b.labels.tolist()
    assert b.loss == pytest.approx(a.loss, rel=1e-4, abs=1e-7)
    assert float((a.images - b.images).abs().max()) <= atol


@pytest.mark.parametrize("steps", [12, 10])  # equal shares (4, 4, 4), unequal (4, 3, 3): own LR schedules
def test_inverting_gradients_batched_gives_the_per_restart_reconstruction(steps):
    off, on = _both("convnet", "inverting-gradients", steps, 3)
    _same(off, on, atol=1e-5)
    assert off.evaluations == steps + 3  # one evaluation per step and each restart's final iterate


def test_the_lowest_loss_restart_is_kept_in_both_paths():
    # Each restart alone: the best of the three is the one both paths return.
    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(1, 3, 27, 27, generator=g), torch.tensor([2])
    model = build_model("convnet", 4, 3, 27, width=4, seed=1)
    work = LocalWork()
    work.set_mode(model)
    update = client_update(model, x, y, work)
    runs = {b: invert(model, update, 1, (3, 27, 27), 4,
                      InversionSettings("inverting-gradients", 9, 3, tv=0.1, batched=b), seed=11)  # type: ignore[arg-type]
            for b in ("off", "on")}
    generator = torch.Generator().manual_seed(11)
    from vispriv.plugins.federated.deep import inversion

    params = {k: p.detach() for k, p in model.named_parameters()}
    labels = runs["off"].labels
    singles = [inversion._search(model, params, update, work, 1, (3, 27, 27), 4, labels,
                                 InversionSettings("inverting-gradients", 9, 3, tv=0.1), 3, generator, None)
               for _ in range(3)]
    best = min(range(3), key=lambda r: singles[r].loss)
    assert len({round(s.loss, 6) for s in singles}) == 3  # three distinct restarts to choose from
    for run in runs.values():
        assert run.loss == pytest.approx(singles[best].loss, rel=1e-5)
        assert torch.allclose(run.images, singles[best].images, atol=1e-5)


def test_batched_inverting_gradients_with_fedavg_batchnorm_in_training_mode_and_defense_knowledge():
    work = LocalWork("fedavg", steps=2, lr=0.05, batchnorm="train")
    g = torch.Generator().manual_seed(2)
    model = build_model("convnet", 4, 3, 27, width=4, seed=1)
    sent = [torch.rand(p.shape, generator=g) < 0.5 for p in model.parameters()]
    off, on = _both("convnet", "inverting-gradients", 6, 2, work, n_images=2,
                    knowledge=DefenseKnowledge(sent=sent, clip=1.0))
    _same(off, on, atol=1e-5)


@pytest.mark.parametrize("lbfgs", ["torch", "compact"])
def test_batched_dlg_runs_each_restarts_own_lbfgs(lbfgs):
    # A short search: L-BFGS amplifies rounding along a run, so only a few iterations agree to 1e-4.
    off, on = _both("lenet", "dlg", 2, 2, lbfgs_inner=2, lbfgs=lbfgs)
    _same(off, on, atol=1e-4)


@pytest.mark.parametrize(("method", "batched", "restarts", "expected"), [
    ("inverting-gradients", "auto", 4, True), ("dlg", "auto", 4, False), ("idlg", "auto", 4, False),
    ("dlg", "on", 4, True), ("inverting-gradients", "off", 4, False), ("inverting-gradients", "on", 1, False),
])
def test_what_auto_batches(method, batched, restarts, expected):
    assert InversionSettings(method, restarts=restarts, batched=batched).batches() is expected


def test_lockstep_answers_each_worker_in_its_order_and_shrinks_the_batch():
    sizes: list[int] = []

    def evaluate(x: torch.Tensor, z: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, None]:
        sizes.append(len(x))
        return x.sum(dim=1), 2 * x, None

    def worker(r: int, asks: int):
        def run(ask):
            seen = []
            for i in range(asks):
                loss, grad, _ = ask(torch.tensor([float(r), float(i)]), None)
                seen.append((float(loss), grad.tolist()))
            return r, seen
        return run

    results = LockStep([worker(0, 3), worker(1, 1), worker(2, 2)], evaluate).run()
    assert [r for r, _ in results] == [0, 1, 2]
    assert results[0][1] == [(0.0, [0.0, 0.0]), (1.0, [0.0, 2.0]), (2.0, [0.0, 4.0])]
    assert results[1][1] == [(1.0, [2.0, 0.0])]
    assert results[2][1] == [(2.0, [4.0, 0.0]), (3.0, [4.0, 2.0])]
    assert sizes == [3, 2, 1]


def test_lockstep_raises_a_workers_error_and_a_failed_evaluation():
    def fails(ask):
        raise ValueError("worker")

    def asks(ask):
        return ask(torch.zeros(2), None)

    def evaluate(x, z):
        return x.sum(dim=1), x, None

    with pytest.raises(ValueError, match="worker"):
        LockStep([fails, asks], evaluate).run()

    def broken(x, z):
        raise RuntimeError("evaluation")

    before = threading.active_count()
    with pytest.raises(RuntimeError, match="evaluation"):
        LockStep([asks, asks], broken).run()
    assert threading.active_count() == before  # no thread left waiting


def _ig_case() -> tuple[torch.nn.Module, list[torch.Tensor], LocalWork]:
    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(1, 3, 27, 27, generator=g), torch.tensor([2])
    model = build_model("convnet", 4, 3, 27, width=4, seed=1)
    work = LocalWork()
    work.set_mode(model)
    return model, client_update(model, x, y, work), work


def test_batched_inverting_gradients_is_one_stacked_evaluation_per_step_without_threads(monkeypatch):
    # 10 steps over 3 restarts: shares (4, 3, 3). Steps 1-3 evaluate all three restarts at once, step 4
    # only the first, then one call scores every final iterate: 5 calls of sizes 3, 3, 3, 1, 3.
    from vispriv.plugins.federated.deep import inversion

    sizes: list[int] = []
    real = inversion.batch_evaluator

    def spy(loss, buffers):
        evaluate = real(loss, buffers)

        def counted(x, z):
            sizes.append(len(x))
            return evaluate(x, z)

        return counted

    def no_threads(self):
        raise AssertionError("Inverting Gradients' restarts must not run in LockStep threads")

    monkeypatch.setattr(inversion, "batch_evaluator", spy)
    monkeypatch.setattr(LockStep, "run", no_threads)
    model, update, work = _ig_case()
    rec = invert(model, update, 1, (3, 27, 27), 4, InversionSettings("inverting-gradients", 10, 3, tv=0.1, batched="on"),
                 seed=11, work=work)
    assert sizes == [3, 3, 3, 1, 3]
    assert (rec.steps, rec.evaluations, rec.stopped) == (10, 13, "steps")


def test_batched_inverting_gradients_stops_every_running_restart_on_the_clock():
    # A budget of 0 s: every restart takes its first step, is scored at its final iterate and reports "time";
    # the first one is returned (the loop stops there), as one restart after the other does.
    model, update, work = _ig_case()
    settings = InversionSettings("inverting-gradients", 30, 3, tv=0.1, batched="on", max_seconds=0.0)
    from vispriv.plugins.federated.deep import inversion

    runs = inversion._search_batched(model, {k: p.detach() for k, p in model.named_parameters()}, update, work, 1,
                                     (3, 27, 27), 4, [2], settings, [10, 10, 10], torch.Generator().manual_seed(11), 0.0)
    assert [(r.steps, r.evaluations, r.stopped) for r in runs] == [(1, 2, "time")] * 3
    rec = invert(model, update, 1, (3, 27, 27), 4, settings, seed=11, work=work)
    assert (rec.steps, rec.stopped) == (1, "time")


@pytest.mark.parametrize("method, expected", [("dlg", "cpu"), ("idlg", "cpu"), ("inverting-gradients", "cuda")])
def test_lbfgs_keeps_its_iterate_on_the_host_and_signed_adam_on_the_device(method, expected):
    from vispriv.plugins.federated.deep.inversion import optimiser_device

    assert optimiser_device(InversionSettings(method), "cuda") == expected  # type: ignore[arg-type]
    assert optimiser_device(InversionSettings(method), "cpu") == "cpu"  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (runs on a GPU machine)")
@pytest.mark.parametrize("restarts, batched", [(1, "off"), (3, "on")])
def test_dlg_on_cuda_runs_lbfgs_on_the_host_and_matches_the_cpu_search(monkeypatch, restarts, batched):
    where: list[set[str]] = []
    original = torch.optim.LBFGS

    class Recording(original):  # type: ignore[valid-type, misc]
        def __init__(self, params, *args, **kwargs):  # type: ignore[no-untyped-def]
            params = list(params)
            where.append({p.device.type for p in params})
            super().__init__(params, *args, **kwargs)

    monkeypatch.setattr(torch.optim, "LBFGS", Recording)
    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(1, 3, 8, 8, generator=g), torch.tensor([2])
    model = build_model("lenet", 4, 3, 8, seed=1)
    update = client_update(model, x, y, LocalWork())
    settings = InversionSettings("dlg", restarts, restarts, batched=batched, lbfgs_inner=3)  # type: ignore[arg-type]
    on_gpu = invert(model, update, 1, (3, 8, 8), 4, settings, seed=11, device="cuda")
    assert where == [{"cpu"}] * restarts  # every restart's L-BFGS state on the host
    on_cpu = invert(model, update, 1, (3, 8, 8), 4, settings, seed=11)
    assert (on_gpu.evaluations, on_gpu.steps, on_gpu.labels.tolist()) == (on_cpu.evaluations, on_cpu.steps, on_cpu.labels.tolist())
    assert on_gpu.loss == pytest.approx(on_cpu.loss, rel=1e-3)
    assert float((on_gpu.images - on_cpu.images).abs().max()) < 1e-3


def test_padding_repeats_the_first_candidate_up_to_the_graphs_size():
    from vispriv.plugins.federated.deep.batched import _padded

    t = torch.arange(6.0).view(3, 2)
    assert _padded(t, 4).tolist() == [[0, 1], [2, 3], [4, 5], [0, 1]]
    assert _padded(t, 3) is t
    assert _padded(t[:1], 2).tolist() == [[0, 1], [0, 1]]


@pytest.mark.parametrize("method, device, expected", [
    ("dlg", "cuda", True), ("idlg", "cuda:1", True), ("inverting-gradients", "cuda", False), ("dlg", "cpu", False),
])
def test_graphs_replay_lbfgs_objectives_on_cuda_only(method, device, expected):
    from vispriv.plugins.federated.deep.inversion import graphs_on

    assert graphs_on(InversionSettings(method), device) is expected  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (runs on a GPU machine)")
def test_graphed_evaluation_answers_as_the_eager_call_and_captures_one_graph_per_power_of_two():
    from vispriv.plugins.federated.deep.batched import GraphedEvaluate, batch_evaluator

    g = torch.Generator().manual_seed(3)
    w = torch.randn(5, 4, generator=g).cuda()

    def loss(x, z, bufs):
        return ((x.flatten() @ w - torch.softmax(z, -1)) ** 2).sum()

    eager = batch_evaluator(loss, {})
    graphed = GraphedEvaluate(eager)
    for n in (1, 3, 4, 2, 3):
        x, z = torch.rand(n, 5, generator=g).cuda(), torch.randn(n, 4, generator=g).cuda()
        for got, want in zip(graphed(x, z), eager(x, z)):
            assert got.shape == want.shape
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    assert sorted(key[0][0] for key in graphed.graphs) == [1, 2, 4]
    assert graphed.failed is None

    def reads_back(x, z, bufs):
        torch.cuda.synchronize()  # waits on the host: not allowed while a stream is captured
        return loss(x, z, bufs)

    fallback = GraphedEvaluate(batch_evaluator(reads_back, {}))
    x, z = torch.rand(2, 5, generator=g).cuda(), torch.randn(2, 4, generator=g).cuda()
    with pytest.warns(RuntimeWarning, match="CUDA graph"):
        got = fallback(x, z)
    assert fallback.failed is not None
    assert torch.allclose(got[0], batch_evaluator(reads_back, {})(x, z)[0])
    assert torch.allclose(fallback(x, z)[0], got[0])  # eager from then on


@pytest.mark.parametrize("method", ["dlg", "inverting-gradients"])
def test_the_search_differentiates_the_distance_in_the_candidate_only(method):
    # The weights' gradients of the gradient-matching distance are never used: the backward stops
    # at the candidate (and DLG's label logits), so the weight leaves never receive a .grad.
    from vispriv.plugins.federated.deep import inversion

    model, update, work = _ig_case()
    params = {k: p.detach() for k, p in model.named_parameters()}
    run = inversion._search(model, params, update, work, 1, (3, 27, 27), 4, None if method == "dlg" else np.array([2]),
                            InversionSettings(method, 2, 1, tv=0.1, lbfgs_inner=2), 2, torch.Generator().manual_seed(0), None)
    assert run.evaluations > 2
    assert all(p.requires_grad and p.grad is None for p in params.values())


def test_lockstep_wakes_only_the_worker_whose_answer_is_ready():
    # Each answer sets exactly its worker's event (one wake-up per answer, no broadcast to every
    # waiting thread): the events' set counts equal the workers' numbers of asks.
    sets = [0, 0, 0]

    class Counted(threading.Event):
        def __init__(self, r: int) -> None:
            super().__init__()
            self.r = r

        def set(self) -> None:
            sets[self.r] += 1
            super().set()

    def worker(asks: int):
        def run(ask):
            for _ in range(asks):
                ask(torch.zeros(2), None)
            return asks
        return run

    lock = LockStep([worker(3), worker(1), worker(2)], lambda x, z: (x.sum(dim=1), x, None))
    lock.ready = [Counted(r) for r in range(3)]
    assert lock.run() == [3, 1, 2]
    assert sets == [3, 1, 2]
    assert lock.batches == 3


@pytest.mark.parametrize("method, restarts, batched", [("dlg", 1, "off"), ("idlg", 3, "on")])
def test_the_graphed_path_answers_as_the_plain_one_when_its_capture_falls_back(monkeypatch, method, restarts, batched):
    # The CUDA path's plumbing (one candidate as a batch of one, padding to a power of two, answers
    # cut back, gradients onto the host leaves), run on the CPU: the capture fails there (no CUDA
    # stream), warns once, and the eager batched call answers.
    from vispriv.plugins.federated.deep import inversion

    g = torch.Generator().manual_seed(5)
    x, y = torch.rand(1, 3, 8, 8, generator=g), torch.tensor([2])
    model = build_model("lenet", 4, 3, 8, seed=1)
    update = client_update(model, x, y, LocalWork())
    settings = InversionSettings(method, 2 * restarts, restarts, batched=batched, lbfgs_inner=5)  # type: ignore[arg-type]
    plain = invert(model, update, 1, (3, 8, 8), 4, settings, seed=11)
    monkeypatch.setattr(inversion, "graphs_on", lambda settings, device: True)
    with pytest.warns(RuntimeWarning, match="CUDA graph"):
        graphed = invert(model, update, 1, (3, 8, 8), 4, settings, seed=11)
    assert (graphed.evaluations, graphed.steps, graphed.labels.tolist()) == (plain.evaluations, plain.steps, plain.labels.tolist())
    assert graphed.loss == pytest.approx(plain.loss, rel=1e-5)
    assert float((graphed.images - plain.images).abs().max()) < 1e-5
