"""Base classes of the four plugin kinds: datasets, defenses, attacks, metrics.

Every plugin class declares

* ``name`` -- unique within its kind, used in configs (``affine-lifting``);
* ``version`` -- part of every cache key and of the cell hash;
* ``scenario`` -- the threat model it belongs to (``descriptor-release``, ...);
* ``Config`` -- a pydantic model with defaults; unknown keys are rejected;
* ``consumes`` / ``produces`` -- payload types (see :mod:`vispriv.harness.payloads`).

The flow of one matrix cell is::

    scene     = dataset.load(ctx)                              # Scene(private, public)
    protected = defense.protect(scene.private, scene.public, ctx)  # Protected(release, truth, utility)
    result    = attack.attack(protected.release, scene.public, ctx) # AttackResult(estimate, ...)
    scores    = metric.score(truth[key], result.estimate[key], ctx) for matching keys

An attack never receives ``scene.private`` nor ``protected.truth``: only metrics do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.fields import FieldInfo

from vispriv.harness.payloads import Payload, Scene

if TYPE_CHECKING:
    from vispriv.harness.context import CellContext


class PluginConfig(BaseModel):
    """Base of every plugin's ``Config``: typed, with defaults, unknown keys forbidden."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def ignored_fields(self) -> frozenset[str]:
        """The fields this config's other values make the plugin ignore (left out of its label).

        None by default; a plugin with modes overrides it (album-pruning ignores
        ``time_limit`` when ``mode`` is ``greedy``).
        """
        return frozenset()


def _existing_folder(root: str) -> str:
    if root and not Path(root).expanduser().is_dir():
        raise ValueError(f"folder {os.path.abspath(Path(root).expanduser())!r} does not exist or is not a directory")
    return root


#: A folder a plugin reads (a dataset's ``root``), checked when the config is built: a missing
#: folder is then one config error before the parent run exists, not a failed cell per pair.
#: The empty string means "not set"; a plugin that needs the folder says so when it runs.
FolderPath = Annotated[str, AfterValidator(_existing_folder)]


class _ReadsFileMark:
    """The type of :data:`READS_FILE` (one instance; a marker, no behaviour)."""

    def __repr__(self) -> str:
        return "ReadsFile"


READS_FILE = _ReadsFileMark()

#: A file a plugin reads (a captured model, a feature file). Like a :data:`FolderPath`, a
#: relative path written in a config file is read from the config's folder
#: (:mod:`vispriv.harness.config_paths`); the plugin checks the file itself when its config is
#: built. The empty string means "not set".
FilePath = Annotated[str, READS_FILE]


def is_path_field(field: FieldInfo) -> bool:
    """Whether a config field holds a folder or a file the plugin reads (:data:`FolderPath`, :data:`FilePath`)."""
    return any(m is READS_FILE or getattr(m, "func", None) is _existing_folder for m in field.metadata)


class _UtilityOnlyMark:
    """The type of :data:`UtilityOnly` (one instance; a marker, no behaviour)."""

    def __repr__(self) -> str:
        return "UtilityOnly"


#: Marks a setting that only the plugin's utility evaluation or the report reads, never what
#: an attack receives (a defense's ``matching``: ``Annotated[MatchingConfig, UtilityOnly]``).
#: Such a setting never enters a seed (:mod:`~vispriv.harness.seeds`), so sweeping it leaves
#: the release and every attack's draws as they were; it still enters the cell's hash
#: (``--resume``), and ``vispriv plugins NAME`` marks it "utility only". Mark a field only when
#: its value provably cannot change the release, the truth or the public knowledge.
UtilityOnly = _UtilityOnlyMark()


def is_utility_only(field: FieldInfo) -> bool:
    """Whether a config field is marked :data:`UtilityOnly`."""
    return any(m is UtilityOnly for m in field.metadata)


@dataclass(frozen=True)
class Anchor:
    """A value of a metric that means something on its own (``Anchor(20.0, "recognisable")``)."""

    value: float
    meaning: str


@dataclass(frozen=True)
class Anchors:
    """What a privacy metric's values mean, from the attack's point of view; reports anchor their colours to it.

    ``nothing`` is the value of an attack that learned nothing (chance: ``k / L`` for top-k
    accuracy over L places; none of the images recognisable); ``success`` the value from which
    the attack has succeeded (the recognisable threshold of a reconstruction's PSNR, an identical
    image's SSIM of 1). Either may be ``None``: the report then takes that end from the table, and
    its legend says so. A table holding a no-leak baseline attack (:attr:`Attack.no_leak`) puts
    the ``nothing`` end at that attack's value instead, the floor the data themselves set.
    """

    nothing: Anchor | None = None
    success: Anchor | None = None

    def to_json(self) -> dict[str, list[float | str]]:
        """As logged in a cell run's ``vispriv.anchors`` tag: ``{"success": [20.0, "recognisable"]}``."""
        return {k: [a.value, a.meaning] for k, a in (("nothing", self.nothing), ("success", self.success)) if a}


class _Plugin:
    kind: ClassVar[str] = "plugin"
    name: ClassVar[str] = ""
    version: ClassVar[str] = "0.0.0"
    scenario: ClassVar[str] = "any"
    description: ClassVar[str] = ""
    Config: ClassVar[type[PluginConfig]] = PluginConfig
    consumes: ClassVar[tuple[type[Payload], ...]] = ()
    produces: ClassVar[tuple[type[Payload], ...]] = ()
    #: Resources one cell of this plugin wants from an executor (``{"cpus": 1, "gpus": 0}``).
    resources: ClassVar[dict[str, float]] = {}

    def __init__(self, config: PluginConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()


@dataclass
class Protected:
    """What a defense returns.

    ``release`` is the adversary's view. ``truth`` maps keys (``"images"``,
    ``"labels"``, ``"descriptors"``) to private payloads that metrics compare the
    attack's estimate against; it never reaches an attack. ``utility`` holds the
    defense's own utility metrics (higher or lower is better as named in
    ``utility_directions``; missing names default to higher is better).
    ``artifacts`` maps file names to text the driver writes into the artifact folder of
    every cell that uses this release (a release is computed once and shared by the cells
    of one defense config, so a file that ``protect`` writes through ``ctx.artifact``
    reaches only the first of them); only the defense's own non-secret output belongs
    there, e.g. album pruning's kept masks.
    """

    release: Payload
    truth: dict[str, Payload] = field(default_factory=dict)
    utility: dict[str, float] = field(default_factory=dict)
    utility_directions: dict[str, bool] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)


@dataclass
class AttackResult:
    """What an attack returns: ``estimate`` maps the same keys as ``Protected.truth``.

    ``metrics`` are the attack's own diagnostics (assumption checks, timings);
    ``metric_directions`` says which are higher-is-better.
    """

    estimate: dict[str, Payload] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    metric_directions: dict[str, bool] = field(default_factory=dict)


class Dataset(_Plugin):
    """Yields the :class:`Scene` of a scenario: private input and public knowledge."""

    kind: ClassVar[str] = "dataset"

    def load(self, ctx: CellContext) -> Scene:
        raise NotImplementedError

    def provenance(self) -> str:
        """Where the data come from when a reader must be told, e.g. ``"SIMULATED world"``.

        The runner tags every cell with it and every report prints it under the tables of
        the cells it concerns; the default (real data) is the empty string.
        """
        return ""


class Defense(_Plugin):
    """Turns a private input into the release an untrusted party sees.

    A defense that accepts several input types (a linear and a deep federated task, say)
    declares which release each gives in ``releases`` (input type -> release types), so the
    matrix pairs an attack only with the releases it can meet; empty means ``produces``.
    """

    kind: ClassVar[str] = "defense"
    releases: ClassVar[dict[type[Payload], tuple[type[Payload], ...]]] = {}
    #: The config of each input type, for a defense whose inputs use different settings (a
    #: classifier task and a clustering task): the matrix builds a cell with the config of its
    #: dataset's input, so the cell carries only the settings that input uses and refuses the
    #: others. ``Config`` then holds every setting (direct use, and inputs not listed here);
    #: empty means ``Config`` for every input.
    configs: ClassVar[dict[type[Payload], type[PluginConfig]]] = {}
    #: The utility metrics (names in ``Protected.utility``) a report shows when no ``--metric`` is asked
    #: for: the defense's cost, not its bookkeeping (timings, sizes).
    headline: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def release_types(cls, inputs: tuple[type[Payload], ...]) -> tuple[type[Payload], ...]:
        """The release types this defense gives for a dataset that produces ``inputs``."""
        if not cls.releases:
            return cls.produces
        out = tuple(t for consumed, made in cls.releases.items() if any(issubclass(i, consumed) for i in inputs) for t in made)
        return out or cls.produces

    @classmethod
    def config_for(cls, inputs: tuple[type[Payload], ...]) -> type[PluginConfig]:
        """The config class of a cell whose dataset produces ``inputs``: the first ``configs`` entry they fit, else ``Config``."""
        for consumed, config in cls.configs.items():
            if any(issubclass(i, consumed) for i in inputs):
                return config
        return cls.Config

    def protect(self, private: Payload, public: Payload | None, ctx: CellContext) -> Protected:
        raise NotImplementedError


class Attack(_Plugin):
    """Tries to recover the private input from a release and public knowledge.

    ``no_leak`` marks a baseline that uses nothing the release carries (the public mean
    image, the most common public label): its score is what guessing from public knowledge
    reaches, and a report's colours put "the attack learned nothing" at its value.
    The attack's own ``AttackResult.metrics`` (steps, seconds, batch size) are bookkeeping:
    reports show them uncoloured, never as a privacy score.
    """

    kind: ClassVar[str] = "attack"
    no_leak: ClassVar[bool] = False

    def attack(self, release: Payload, public: Payload | None, ctx: CellContext) -> AttackResult:
        raise NotImplementedError


class Metric(_Plugin):
    """Scores an estimate against the truth; ``consumes`` names the payload type scored.

    ``higher_is_better`` maps every metric name the plugin emits to its direction, from
    the attack's point of view (``True`` where a higher value means the attack did better);
    reports colour the attack's better end red.
    """

    kind: ClassVar[str] = "metric"
    higher_is_better: ClassVar[dict[str, bool]] = {}
    #: Payload types accepted as the truth; empty means the same as ``consumes``.
    truth_types: ClassVar[tuple[type[Payload], ...]] = ()
    #: The names (as in ``higher_is_better``) a report shows when no ``--metric`` is asked for;
    #: standard errors and secondary statistics stay out of it.
    headline: ClassVar[tuple[str, ...]] = ()

    def score(self, truth: Payload, estimate: Payload, ctx: CellContext) -> dict[str, float]:
        raise NotImplementedError

    def anchors(self, truth: Payload, estimate: Payload) -> dict[str, Anchors]:
        """What the values of the metrics this plugin emits mean (:class:`Anchors`), by name; none by default.

        Called after :meth:`score` with the same payloads, so an anchor may depend on them (top-k
        accuracy's chance is k over the number of places ranked).
        """
        return {}


PLUGIN_KINDS: dict[str, type[_Plugin]] = {
    "dataset": Dataset,
    "defense": Defense,
    "attack": Attack,
    "metric": Metric,
}


def plugin_info(cls: type[_Plugin]) -> dict[str, Any]:
    """A JSON-friendly description of a plugin class (for ``vispriv plugins``)."""
    return {
        "name": cls.name,
        "kind": cls.kind,
        "scenario": cls.scenario,
        "version": cls.version,
        "consumes": [t.__name__ for t in cls.consumes],
        "produces": [t.__name__ for t in cls.produces],
        "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
    }
