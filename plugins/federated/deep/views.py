"""What the adversary of a deep release holds: one update per view, with the image slots behind it.

* every user's update in plaintext (plain FedAvg, gradient pruning, DP-SGD): one view per user,
  its B images, set ``u{n}``;
* DPHE: only the published average of the N users, one view of all N x B images (set ``all``);
  an insider (``observer``) first subtracts its own update, (N w̄ - w_own) / (N - 1), the mean
  over the other users' (N - 1) x B images (set ``others``), exactly the other user's update
  when N = 2.

Shared by the deep attacks (:mod:`vispriv.plugins.attacks.deep_inversion`,
:mod:`vispriv.plugins.attacks.imprint`), so they read a release the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.payloads import DeepPlaintextUpdates, DeepPublishedAverage, DeepRelease


@dataclass(frozen=True)
class UpdateView:
    """One flat update the adversary holds, the ids of the images behind it, and their set's name."""

    vector: np.ndarray
    ids: list[str]
    set_name: str


def adversary_views(release: DeepRelease, attack: str) -> tuple[list[UpdateView], bool]:
    """The views of ``release`` (module docstring) and whether the adversary is an insider user."""
    if isinstance(release, DeepPlaintextUpdates):
        return [UpdateView(release.updates[n], release.target_ids[n], f"u{n}") for n in range(release.n_users)], False
    if isinstance(release, DeepPublishedAverage):
        n_users = release.n_users
        if release.observer is not None and release.own_update.size:
            others = [n for n in range(n_users) if n != release.observer]
            vector = (n_users * release.average - release.own_update) / max(1, n_users - 1)
            return [UpdateView(vector, [i for n in others for i in release.target_ids[n]], "others")], True
        return [UpdateView(release.average, [i for ids in release.target_ids for i in ids], "all")], False
    raise InputError(f"{attack} cannot read a {type(release).__name__} release")
