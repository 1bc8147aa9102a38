"""What an attacker who knows album pruning learns from pruning albums of its own.

Album pruning (Yang et al., AAAI 2020) deletes as few photos as possible so that the true
place leaves the top-k of eq. (1)'s summed scores (problems 3 and 4). An attacker who knows
the algorithm and its public settings (the release's protocol) can run it on albums it
builds from its own labelled photos, where it knows the truth, and learn how pruning moves
the true place (Carlini et al., "On Evaluating Adversarial Robustness", 2019; Tramèr et
al., "On Adaptive Attacks to Adversarial Example Defenses", NeurIPS 2020).

What is learned is a **rank recalibration**: the distribution of the true place's rank
under the attacker's summed scores (eq. 1) after pruning. A top-k guarantee met with the
fewest deletions typically leaves the true place *just* outside the top-k (rank k + 1:
it was pushed down no further than necessary), so the attacker re-orders each released
album's ranking by how often the truth sat at each rank in its own pruned albums (most
frequent rank first, ties and unseen ranks in the original order). With the truth's rank
independent of which place it is, this is the Bayes decision for the place given its
rank: P(place j | release) is proportional to the frequency of rank(j). Against a
black-box defense the rank is taken with the defense's margin (:func:`margin_ranks`: the
places beating c by theta per kept photo under the defender's proxy, the protected-k the
defense would see were c the truth). Which base model and margin to rank with, and
whether the re-ranking helps at all, is decided on held-out albums of the attacker's own
(:func:`choose`), so the adaptive attacker never settles for less than the plain order
there. A per-photo refit on the photos pruning kept can be one of the
base models (the attack's ``model: refit``).

Album sizes: the release shows only kept sizes; unless ``album_size`` is set, the training
albums get the released kept sizes divided by the kept fraction measured on a pilot of
pruned albums of those sizes (moment matching: the original sizes are not public).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vispriv.plugins.album.payloads import GeoModels, linear_log_probs
from vispriv.plugins.album.protocol import fixed_photos, prune, stopped_by_limit

PILOT_ALBUMS = 32


@dataclass
class TrainingAlbums:
    """The attacker's own albums: photo indices into its training photos, with the true place."""

    photos: list[np.ndarray]
    places: np.ndarray


@dataclass
class Pruned:
    """The attacker's albums after the protocol ran on them: the kept photo indices of each.

    ``unproven_fraction``: the share of albums whose exact solve stopped at a limit (its best
    mask kept, as the defense keeps it); 0 for the heuristic modes.
    """

    kept: list[np.ndarray]
    places: np.ndarray
    kept_fraction: float
    unproven_fraction: float = 0.0


@dataclass(frozen=True)
class SolveCaps:
    """The attacker's own caps on each of its solves: they lower the release's limits, never raise them.

    ``node_limit`` (branch-and-bound nodes: the ``fast`` budget search's, and HiGHS's over
    an album's MILPs) and ``deterministic_limit`` (CP-SAT's deterministic seconds) stop a
    solve at the same point on every machine, so what the attacker learns does not depend on
    the machine's load; ``time_limit`` (wall-clock seconds), when set, can. ``None`` leaves
    the release's limit as it is.
    """

    node_limit: int | None = None
    deterministic_limit: float | None = None
    time_limit: float | None = None

    def apply(self, protocol: dict[str, Any]) -> dict[str, Any]:
        """``protocol`` with each limit lowered to the cap (the smaller of the two; ``None`` is no limit)."""
        out = dict(protocol)
        for key, cap in (("node_limit", self.node_limit), ("deterministic_limit", self.deterministic_limit),
                         ("time_limit", self.time_limit)):
            own = protocol.get(key)
            out[key] = cap if own is None else own if cap is None else type(cap)(min(own, cap))
        return out


def draw_albums(places: np.ndarray, sizes: np.ndarray, n_places: int, rng: np.random.Generator) -> TrainingAlbums:
    """One album per entry of ``sizes``: a uniform place among those with photos, its photos drawn without replacement when enough."""
    by_place = [np.flatnonzero(places == p) for p in range(n_places)]
    usable = np.array([p for p in range(n_places) if len(by_place[p])])
    chosen = rng.choice(usable, size=len(sizes))
    photos = [rng.choice(by_place[p], size=int(n), replace=len(by_place[p]) < n) for p, n in zip(chosen, sizes)]
    return TrainingAlbums(photos, chosen.astype(np.int64))


def protocol_scores(models: GeoModels, features: np.ndarray, protocol: dict[str, Any]) -> np.ndarray:
    """The per-photo scores the defense prunes with (``scores_from``: the public proxy or the adversary's model)."""
    return models.log_probs(features, protocol["scores_from"])


def prune_albums(albums: TrainingAlbums, models: GeoModels, protocol: dict[str, Any], caps: SolveCaps) -> Pruned:
    """Run the release's protocol on the attacker's albums, its limits lowered to the attacker's ``caps``.

    An album the protocol cannot protect is kept whole, as the defense releases it; one whose
    exact solve stops at a limit keeps its best mask, as the defense's does, and is counted in
    :attr:`Pruned.unproven_fraction`.
    """
    settings = caps.apply(protocol)
    kept, total, n_kept, unproven = [], 0, 0, 0
    for idx, t in zip(albums.photos, albums.places):
        S = protocol_scores(models, models.adversary_photos[idx], settings)
        result = prune(S, int(t), settings, fixed_photos(S, int(t), settings["keep_rank"]))
        keep = result.keep if result.keep is not None else np.ones(len(idx), dtype=bool)
        kept.append(idx[keep])
        total, n_kept = total + len(idx), n_kept + int(keep.sum())
        unproven += int(stopped_by_limit(settings["mode"], result.status))
    return Pruned(kept, albums.places, n_kept / max(total, 1), unproven / max(len(albums.photos), 1))


def matched_sizes(
    kept_sizes: np.ndarray, n: int, models: GeoModels, protocol: dict[str, Any], caps: SolveCaps, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """``n`` original album sizes whose pruned sizes match the released ``kept_sizes`` on average.

    A pilot of :data:`PILOT_ALBUMS` albums with the kept sizes as their sizes measures the
    kept fraction q; the sizes are the kept sizes over q (at least 2). Returns them and q.
    """
    pilot_sizes = np.maximum(rng.choice(kept_sizes, size=PILOT_ALBUMS), 2)
    pilot = draw_albums(models.adversary_places, pilot_sizes, models.n_places, rng)
    q = max(prune_albums(pilot, models, protocol, caps).kept_fraction, 1e-3)
    return np.maximum(np.round(rng.choice(kept_sizes, size=n) / q), 2).astype(np.int64), q


def margin_ranks(summed: np.ndarray, n_kept: int, margin: float) -> np.ndarray:
    """For every place c, the places j != c with ``summed[j] >= summed[c] + margin * n_kept``.

    With ``margin`` 0 this is the place's rank (ties aside); with the defense's ``theta``
    and its scoring model it is the protected-k the defense would see were c the true
    place (eq. 8: theta is added to the true place's score in every kept photo).
    """
    ascending = np.sort(summed)
    shift = margin * n_kept
    above = len(summed) - np.searchsorted(ascending, summed + shift, side="left")
    return above - (1 if shift <= 0 else 0)


def truth_ranks(pruned: Pruned, photos: np.ndarray, weight: np.ndarray, bias: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """Per album, the truth's :func:`margin_ranks` under the summed scores (eq. 1) of its kept photos (empty albums: -1)."""
    ranks = np.full(len(pruned.kept), -1, dtype=np.int64)
    for a, (idx, t) in enumerate(zip(pruned.kept, pruned.places)):
        if len(idx):
            s = linear_log_probs(photos[idx], weight, bias).sum(axis=0)
            ranks[a] = int(margin_ranks(s, len(idx), margin)[t])
    return ranks


def rank_order(ranks: np.ndarray, n_places: int) -> np.ndarray:
    """The ranks of the base ranking in the order the attacker tries them: most frequent first, ties by rank."""
    counts = np.bincount(ranks[ranks >= 0], minlength=n_places)[:n_places]
    return np.lexsort((np.arange(n_places), -counts))


def rerank(summed: np.ndarray, order: np.ndarray, n_kept: int = 0, margin: float = 0.0) -> np.ndarray:
    """Scores (higher is better) ranking places by the preference ``order`` gives their margin rank.

    The place whose :func:`margin_ranks` value is ``order[0]`` comes first, then ``order[1]``,
    ...; places sharing a value keep the order of ``summed``. With ``margin`` 0 every place
    has its own value: the place at base rank ``order[0]`` comes first.
    """
    n = len(summed)
    preference = np.empty(n, dtype=np.int64)
    preference[order] = np.arange(n)
    feature = preference[np.clip(margin_ranks(summed, n_kept, margin), 0, n - 1)]
    ranked = np.lexsort((-summed, feature))
    out = np.empty(n, dtype=np.float64)
    out[ranked] = n - np.arange(n)
    return out


def hit_rate(order: np.ndarray, ranks: np.ndarray, ks: tuple[int, ...] = (1, 5)) -> float:
    """Sum over ``ks`` of the share of albums whose truth the re-ranking by ``order`` puts in its top-k (empty albums miss)."""
    if len(ranks) == 0:
        return 0.0
    preference = np.empty(len(order), dtype=np.int64)
    preference[order] = np.arange(len(order))
    at = np.where(ranks >= 0, preference[np.maximum(ranks, 0)], len(order))
    return float(sum(np.mean(at < k) for k in ks))


@dataclass
class Choice:
    """The base model, margin and rank order the attacker settles on, with its own validation score."""

    name: str
    margin: float
    order: np.ndarray
    learned: bool
    validation: float


def choose(
    candidates: dict[str, tuple[np.ndarray, np.ndarray]], pruned: Pruned, photos: np.ndarray, n_places: int, margins: tuple[float, ...] = (0.0,)
) -> Choice:
    """Pick the base model, the margin and whether to re-rank, by the attacker's own held-out pruned albums.

    For each candidate model and margin (0, and the defense's theta), the truth's margin
    ranks are counted on the first half of ``pruned`` and the learned order is scored
    (:func:`hit_rate`) on the second half against the model's own plain order; the best
    wins (ties: the earlier candidate, the plain order first, so an adaptation that does
    not help on the attacker's own albums is not used). The winner's order is then
    re-learned on all of ``pruned``.
    """
    half = len(pruned.kept) // 2
    first = Pruned(pruned.kept[:half], pruned.places[:half], pruned.kept_fraction)
    second = Pruned(pruned.kept[half:], pruned.places[half:], pruned.kept_fraction)
    identity = np.arange(n_places)
    best: Choice | None = None
    for name, (weight, bias) in candidates.items():
        plain = hit_rate(identity, truth_ranks(second, photos, weight, bias))
        if best is None or plain > best.validation:
            best = Choice(name, 0.0, identity, False, plain)
        for margin in margins:
            learned_order = rank_order(truth_ranks(first, photos, weight, bias, margin), n_places)
            score = hit_rate(learned_order, truth_ranks(second, photos, weight, bias, margin))
            if score > best.validation:
                best = Choice(name, margin, learned_order, True, score)
    assert best is not None
    if best.learned:
        weight, bias = candidates[best.name]
        best.order = rank_order(truth_ranks(pruned, photos, weight, bias, best.margin), n_places)
    return best
