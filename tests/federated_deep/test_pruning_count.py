"""gradient-pruning zeroes exactly floor(fraction x D) entries, the smallest by magnitude, ties by position."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from vispriv.plugins.defenses.gradient_pruning import GradientPruning, prune_smallest, pruned_count


@pytest.mark.parametrize(("fraction", "size", "count"), [
    (0.29, 100, 29),  # 0.29 * 100 is 28.999999999999996 in binary floating point
    (0.57, 100, 57), (0.58, 100, 58),
    (0.5, 7, 3),  # 3.5: the fraction does not divide the size, floor
    (0.9, 15_826, 14_243),  # LeNet's update
    (0.0, 10, 0), (0.99, 1, 0),
])
def test_the_count_pruned_is_the_floor_of_the_exact_product(fraction, size, count):
    assert pruned_count(fraction, size) == count
    update = np.arange(1, size + 1, dtype=np.float32)
    assert int(np.sum(prune_smallest(update, fraction) == 0)) == count


def test_the_smallest_magnitudes_go_first_and_a_tie_goes_by_position():
    update = np.array([0.3, -0.1, 0.1, 2.0, -0.1, 0.5], np.float32)
    # |.|: .3 .1 .1 2 .1 .5; three of the four smallest tie at .1: positions 1, 2, 4; pruning 2 of 6 zeroes 1 and 2
    np.testing.assert_array_equal(prune_smallest(update, 2 / 6), update * np.array([1, 0, 0, 1, 1, 1], np.float32))
    np.testing.assert_array_equal(prune_smallest(update, 0.5), update * np.array([1, 0, 0, 1, 0, 1], np.float32))
    assert prune_smallest(update, 0.0) is not update


def test_a_fraction_of_one_is_refused_and_just_below_it_one_entry_of_a_hundred_is_sent():
    with pytest.raises(ValidationError, match="less than 1"):
        GradientPruning.Config(prune=1.0)  # every entry zeroed: nothing sent, no update to train on
    assert pruned_count(GradientPruning.Config(prune=0.99).prune, 100) == 99
