"""One harness cache for the folder: the small SIMULATED room of examples/localisation.yaml is rendered,
SIFT-ed and mapped once, by whichever test needs it first."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def localisation_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("localisation-cache")
