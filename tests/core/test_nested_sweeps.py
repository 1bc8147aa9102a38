"""A list inside a nested config (``matching: {criterion: [...]}``) sweeps like a list on a top-level field."""

from __future__ import annotations

import pytest

from vispriv.harness.errors import ConfigError
from vispriv.harness.matrix import expand_entry
from vispriv.harness.registry import load_registry


@pytest.fixture(scope="module")
def registry():
    return load_registry(only=["descriptor-release"])


def test_a_list_in_a_nested_field_sweeps(registry):
    entry = {"name": "ldp-feat", "epsilon": [10.0, 16.0], "matching": {"criterion": ["mutual-nn", "vocabulary"], "ratio": 0.7}}
    stages = expand_entry(registry, "defense", entry, "descriptor-release")
    got = sorted((s.config.epsilon, s.config.matching.criterion, s.config.matching.ratio) for s in stages)
    assert got == [(10.0, "mutual-nn", 0.7), (10.0, "vocabulary", 0.7), (16.0, "mutual-nn", 0.7), (16.0, "vocabulary", 0.7)]
    # Labels tell the swept cells apart.
    assert len({s.label() for s in stages}) == 4 and any("vocabulary" in s.label() for s in stages)
    # A list of nested mappings sweeps too, each mapping expanding its own lists.
    listed = expand_entry(
        registry, "defense", {"name": "ldp-feat", "matching": [{"criterion": "vocabulary"}, {"ratio": [0.6, 0.9]}]}, "descriptor-release"
    )
    assert [(s.config.matching.criterion, s.config.matching.ratio) for s in listed] == [
        ("vocabulary", 0.8), ("mutual-nn", 0.6), ("mutual-nn", 0.9)
    ]


def test_an_empty_nested_sweep_and_a_bad_nested_value_are_one_line(registry):
    with pytest.raises(ConfigError, match=r"^defense 'ldp-feat': sweep over 'matching.criterion' is empty$"):
        expand_entry(registry, "defense", {"name": "ldp-feat", "matching": {"criterion": []}}, "descriptor-release")
    with pytest.raises(ConfigError, match=r"^defense 'ldp-feat': matching.criterion: "):
        expand_entry(registry, "defense", {"name": "ldp-feat", "matching": {"criterion": ["mutual-nn", "voc"]}}, "descriptor-release")
