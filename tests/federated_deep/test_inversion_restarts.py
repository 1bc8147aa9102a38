"""Which restart and which iterate an inversion returns, how it splits its budget, and Inverting Gradients' box.

The real search runs on a LeNet at 8 x 8 px; the distance and ``_search`` are wrapped by spies that
record what they return, so the expectation (the minimum over every restart and every iterate) is
read from the search itself, not from a second implementation of it. The searches with several
restarts run one after the other (``batched: off``) so the spies see each call; that the batched
path returns the same restart is pinned in tests/federated_deep/test_batched_inversion.py.
"""

from __future__ import annotations

import pytest
import torch

from vispriv.plugins.federated.deep import inversion
from vispriv.plugins.federated.deep.inversion import InversionSettings, cosine_distance, invert
from vispriv.plugins.federated.deep.local import LocalWork, client_update, trainable
from vispriv.plugins.federated.deep.models import build_model

SHAPE = (3, 8, 8)


@pytest.fixture(scope="module")
def scene():
    g = torch.Generator().manual_seed(4)
    x, y = torch.rand(1, *SHAPE, generator=g), torch.randint(0, 5, (1,), generator=g)
    model = build_model("lenet", 5, 3, 8, seed=4)
    return model, client_update(model, x, y, LocalWork()), y


@pytest.fixture
def recorded(monkeypatch):
    """Spies on the search: every restart's (share of the steps, returned loss) and every distance evaluated."""
    runs: list[tuple[int, float]] = []
    losses: list[float] = []
    search, cosine, l2 = inversion._search, inversion.cosine_distance, inversion.l2_distance

    def search_spy(*args, **kwargs):
        run = search(*args, **kwargs)
        runs.append((args[9], run.loss))
        return run

    def distance_spy(real):
        def spy(*args, **kwargs):
            value = real(*args, **kwargs)
            losses.append(float(value.detach()))
            return value
        return spy

    monkeypatch.setattr(inversion, "_search", search_spy)
    monkeypatch.setattr(inversion, "cosine_distance", distance_spy(cosine))
    monkeypatch.setattr(inversion, "l2_distance", distance_spy(l2))
    return runs, losses


def test_inverting_gradients_keeps_the_lowest_loss_over_restarts_and_iterates(scene, recorded):
    model, update, _ = scene
    runs, losses = recorded
    rec = invert(model, update, 1, SHAPE, 5, InversionSettings("inverting-gradients", steps=7, restarts=3, lr=1.0, batched="off"), seed=0)
    # 7 steps over 3 restarts: 3, 2, 2 (the remainder to the first); each restart scores its final iterate too.
    assert [share for share, _ in runs] == [3, 2, 2]
    assert rec.steps == 7 and rec.evaluations == 7 + 3 == len(losses) and rec.stopped == "steps"
    assert rec.loss == min(losses) == min(loss for _, loss in runs)
    # each restart returns the lowest of its own 4, 3, 3 evaluations, not its last one
    segments = [losses[0:4], losses[4:7], losses[7:10]]
    assert [loss for _, loss in runs] == [min(s) for s in segments]
    assert segments[0].index(min(segments[0])) != len(segments[0]) - 1, segments  # its best is not its final iterate
    best_restart = min(range(3), key=lambda r: runs[r][1])
    assert best_restart == 1, runs  # neither the first nor the last restart: "keep the first" or "the last" both fail
    assert losses.index(min(losses)) not in (0, len(losses) - 1)


def test_inverting_gradients_returns_an_image_in_the_box_whose_loss_is_the_reported_one(scene, recorded):
    """Adam on the gradient's sign moves every pixel by the step size, so pixels near 0 or 1 leave the box: only the
    clamp after every step keeps the scored iterate and the returned (clamped) image the same point."""
    model, update, _ = scene
    _, losses = recorded
    rec = invert(model, update, 1, SHAPE, 5, InversionSettings("inverting-gradients", steps=8, restarts=1, lr=0.3), seed=0)
    assert losses.index(rec.loss) == 8  # the best is the last iterate, 8 steps from the start
    assert float(rec.images.min()) >= 0.0 and float(rec.images.max()) <= 1.0
    params = dict(trainable(model))
    again = client_update(model, rec.images, torch.as_tensor(rec.labels), LocalWork())
    assert len(again) == len(params)
    assert float(cosine_distance(again, update)) == pytest.approx(rec.loss, rel=1e-4, abs=1e-7)


def test_dlg_keeps_the_lowest_loss_and_clamps_the_returned_image(scene, recorded):
    """L-BFGS is not boxed: the iterate leaves [0, 1]; the image returned is the best one, clamped."""
    model, update, _ = scene
    runs, losses = recorded
    rec = invert(model, update, 1, SHAPE, 5, InversionSettings("dlg", steps=7, restarts=3, lbfgs_inner=2), seed=1)
    assert rec.loss == min(losses) == min(loss for _, loss in runs)
    assert min(range(len(runs)), key=lambda r: runs[r][1]) not in (0, len(runs) - 1), runs
    assert float(rec.images.min()) == 0.0 and float(rec.images.max()) == 1.0  # the clamp was active, both ends


def test_more_restarts_than_steps_is_one_step_each(scene, recorded):
    model, update, _ = scene
    runs, _ = recorded
    rec = invert(model, update, 1, SHAPE, 5, InversionSettings("inverting-gradients", steps=2, restarts=5, lr=0.1, batched="off"), seed=0)
    assert [share for share, _ in runs] == [1, 1] and rec.steps == 2
    with pytest.raises(ValueError, match=r"^steps must be >= 1; got 0$"):
        invert(model, update, 1, SHAPE, 5, InversionSettings("dlg", steps=0), seed=0)


def test_an_update_with_a_tensor_too_few_is_refused(scene):
    model, update, _ = scene
    with pytest.raises(ValueError, match=r"^the update has 7 tensors but the model has 8 trainable parameters$"):
        invert(model, update[:-1], 1, SHAPE, 5, InversionSettings("dlg", steps=1), seed=0)
