"""Shared fixtures of the federated-learning tests: a small digits scene and 512-bit keys."""

from __future__ import annotations

import pytest

from vispriv.harness import Cache, CellContext
from vispriv.plugins.federated.datasets import FederatedImages


@pytest.fixture
def ctx(tmp_path):
    return CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)


def make_scene(ctx, n_users=3, max_per_user=40, **kw):
    cfg = FederatedImages.Config(source="digits", n_users=n_users, max_per_user=max_per_user, **kw)
    return FederatedImages(cfg).load(ctx)


@pytest.fixture
def scene(ctx):
    return make_scene(ctx)


@pytest.fixture
def scene_factory():
    return make_scene
