"""Execution of one matrix cell, independent of MLflow (so any executor can run it).

Stages that several cells share (a dataset's scene, a defense's release) are computed
once per process and kept in a small in-memory memo keyed by the stage key; each stage
gets its own seed derived from the matrix seed and its key, so a shared stage is the
same whichever cell computes it first.
"""

from __future__ import annotations

import dataclasses
import platform
import sys
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.alignment import align
from vispriv.harness.cache import Cache
from vispriv.harness.context import CellContext
from vispriv.harness.matrix import Cell
from vispriv.harness.payloads import Payload
from vispriv.harness.plugin import AttackResult, Protected

_MEMO: OrderedDict[str, Any] = OrderedDict()
_MEMO_SIZE = 8


def _memo(key: str, compute: Any) -> Any:
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]
    value = compute()
    freeze(value)
    _MEMO[key] = value
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return value


def freeze(value: Any, _seen: set[int] | None = None) -> None:
    """Make every numpy array reachable from ``value`` (through dataclasses, dicts, lists, tuples) read-only.

    Memoised scenes and releases are shared by reference by every cell that needs them: a
    plugin that writes into one in place gets ``ValueError: assignment destination is
    read-only`` (a FAILED cell naming the line) instead of silently changing the next cell's input.
    """
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for item in value.values():
            freeze(item, seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            freeze(item, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            freeze(getattr(value, f.name, None), seen)


def clear_memo() -> None:
    _MEMO.clear()


@dataclass
class CellOutcome:
    """What running one cell gave: metrics with directions, an artifact folder, or an error."""

    status: str  # FINISHED or FAILED
    metrics: dict[str, float] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    artifact_dir: str | None = None
    error: str = ""
    traceback: str = ""
    seconds: float = 0.0
    #: When the cell started and ended (epoch milliseconds): the child run's start and end times.
    start_ms: int | None = None
    end_ms: int | None = None
    #: The device the cell ran on (the context's, or the CUDA device a plugin initialised).
    device: str = "cpu"
    #: The CPU and its numeric kernels (:func:`cpu_used`): results resting on float32 torch code
    #: (trained networks, float32 SIFT) reproduce on the same kernels and thread count.
    cpu: str = ""
    #: Why a FINISHED cell has no privacy score (estimate keys matching no truth key, or no metric), else "".
    warning: str = ""
    #: The metrics its plugins declare a report's default view (``Metric.headline``, ``Defense.headline``).
    headline: list[str] = field(default_factory=list)
    #: What values of its metrics mean (``Metric.anchors``), as logged: ``{"images/psnr": {"success": [20.0, "..."]}}``.
    anchors: dict[str, dict[str, list[float | str]]] = field(default_factory=dict)


def run_cell(cell: Cell, cache_dir: str | None, artifact_dir: str, quiet: bool = True) -> CellOutcome:
    """Run ``cell`` and score it; exceptions become a FAILED outcome with the traceback."""
    start, start_ms = time.perf_counter(), int(time.time() * 1000)
    art = Path(artifact_dir)
    art.mkdir(parents=True, exist_ok=True)
    # In-cell bars (tqdm, Lightning's) only where they can redraw in place: a log file or a
    # pipe (CI, SLURM, nohup) would keep every redraw.
    # There a long stage prints a heartbeat line every 30 s instead, unless the user asked --quiet.
    heartbeat = not quiet and not stderr_is_terminal()
    quiet = quiet or not stderr_is_terminal()
    base = CellContext(seed=cell.seed, cache=Cache(cache_dir), artifact_dir=art, quiet=quiet, device=cell.device,
                       heartbeat=heartbeat)
    meaning = Meaning()
    try:
        metrics, directions, warning = _run(cell, base, meaning)
        status, error, tb = "FINISHED", "", ""
    except Exception as exc:  # noqa: BLE001 -- a failing cell is recorded, the matrix goes on
        metrics, directions, warning = {}, {}, ""
        status, error, tb = "FAILED", f"{type(exc).__name__}: {exc}", traceback.format_exc()
    seconds = time.perf_counter() - start
    return CellOutcome(
        status=status,
        metrics=metrics,
        higher_is_better=directions,
        artifact_dir=str(art),
        error=error,
        traceback=tb,
        seconds=seconds,
        start_ms=start_ms,
        end_ms=start_ms + int(round(seconds * 1000)),
        warning=warning,
        device=device_used(base),
        cpu=cpu_used(),
        headline=meaning.headline if status == "FINISHED" else [],
        anchors=meaning.anchors if status == "FINISHED" else {},
    )


@dataclass
class Meaning:
    """What the plugins of one cell declare about its metrics, gathered while it runs."""

    headline: list[str] = field(default_factory=list)
    anchors: dict[str, dict[str, list[float | str]]] = field(default_factory=dict)

    def add_headline(self, name: str) -> None:
        """Declare ``name`` (a full metric name) a headline metric, once."""
        if name not in self.headline:
            self.headline.append(name)


def stderr_is_terminal() -> bool:
    """Whether progress bars can redraw in place (stderr is a terminal)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def device_used(ctx: CellContext) -> str:
    """``ctx.device``, or the CUDA device when a plugin of this process initialised CUDA (e.g. a Lightning trainer)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        index = torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return ctx.device


def cpu_used() -> str:
    """The machine's architecture and, when a plugin of this process loaded torch, its CPU kernels and threads.

    E.g. ``x86_64; torch AVX2 kernels, 2 threads``. PyTorch picks its float32 CPU kernels by
    instruction set, and a network trained with another kernel set or thread count comes out
    different (docs/paper-scale.md, "Same numbers on another machine"): this tag says which ran.
    """
    arch = platform.machine() or "unknown"
    torch = sys.modules.get("torch")
    if torch is None:
        return arch
    threads = torch.get_num_threads()
    return f"{arch}; torch {torch.backends.cpu.get_cpu_capability()} kernels, {threads} thread{'s' if threads != 1 else ''}"


def _run(cell: Cell, base: CellContext, meaning: Meaning) -> tuple[dict[str, float], dict[str, bool], str]:
    metrics: dict[str, float] = {}
    directions: dict[str, bool] = {}
    d_key, p_key = cell.dataset_key(), cell.defense_key()
    d_seed, p_seed, *attack_seeds = cell.stage_seeds()
    scene = _memo(d_key, lambda: cell.dataset.instance().load(base.with_seed(d_seed)))  # type: ignore[attr-defined]
    protected: Protected = _memo(
        p_key,
        lambda: cell.defense.instance().protect(scene.private, scene.public, base.with_seed(p_seed)),  # type: ignore[attr-defined]
    )
    for name, value in protected.utility.items():
        metrics[f"utility/{name}"] = float(value)
        directions[f"utility/{name}"] = protected.utility_directions.get(name, True)
        if name in cell.defense.cls.headline:  # type: ignore[attr-defined]
            meaning.add_headline(f"utility/{name}")
    if base.artifact_dir is not None:
        for file_name, text in protected.artifacts.items():
            base.artifact(file_name).write_text(text)

    release: Payload = protected.release
    multi = len(cell.attack) > 1
    scored, estimated = 0, set()
    for i, (stage, stage_seed) in enumerate(zip(cell.attack, attack_seeds)):
        if not isinstance(release, stage.cls.consumes):
            wanted = "/".join(t.__name__ for t in stage.cls.consumes)
            raise TypeError(f"attack {stage.name} needs {wanted}, got {type(release).__name__}")
        ctx = base.with_seed(stage_seed)
        if multi and base.artifact_dir is not None:
            ctx = replace(ctx, artifact_dir=base.artifact_dir / f"{i}-{stage.name}")
        result: AttackResult = stage.instance().attack(release, scene.public, ctx)  # type: ignore[attr-defined]
        prefix = f"attack/{stage.name}/" if multi else "attack/"
        for name, value in result.metrics.items():
            metrics[prefix + name] = float(value)
            directions[prefix + name] = result.metric_directions.get(name, True)
        scored += _score(cell, protected.truth, result, base, metrics, directions, meaning)
        estimated |= set(result.estimate)
        if i + 1 < len(cell.attack):
            release = _next_release(result, stage.name, cell.attack[i + 1].cls)
    return metrics, directions, "" if scored else _unscored(cell, protected.truth, estimated)


def _unscored(cell: Cell, truth: dict[str, Payload], estimated: set[str]) -> str:
    """Why no metric scored any estimate of ``cell``: one line for the CLI and the ``vispriv.warning`` tag."""
    shared = sorted(estimated & set(truth))
    if not shared:
        return (f"no privacy score: the attack's estimate keys {sorted(estimated)} match none of the "
                f"defense's truth keys {sorted(truth)}")
    names = ", ".join(m.label() for m in cell.metrics) or "none"
    kinds = ", ".join(f"{k} ({type(truth[k]).__name__})" for k in shared)
    return f"no privacy score: no metric of this cell ({names}) scores {kinds}"


def _score(
    cell: Cell,
    truth: dict[str, Payload],
    result: AttackResult,
    ctx: CellContext,
    metrics: dict[str, float],
    directions: dict[str, bool],
    meaning: Meaning,
) -> int:
    """Score every estimate that has a truth of the same key; returns how many scores were written.

    The metrics' headline names and anchors (what their values mean) go into ``meaning``.
    """
    n = 0
    for key, estimate in result.estimate.items():
        if key not in truth:
            continue
        aligned = align(truth[key], estimate)
        for stage in cell.metrics:
            metric_cls = stage.cls
            truth_types = metric_cls.truth_types or metric_cls.consumes  # type: ignore[attr-defined]
            if isinstance(estimate, metric_cls.consumes) and isinstance(truth[key], truth_types):
                instance = stage.instance()
                scores = instance.score(truth[key], aligned, ctx)  # type: ignore[attr-defined]
                for name, value in scores.items():
                    metrics[f"{key}/{name}"] = float(value)
                    directions[f"{key}/{name}"] = metric_cls.higher_is_better.get(name, True)  # type: ignore[attr-defined]
                    if name in metric_cls.headline:  # type: ignore[attr-defined]
                        meaning.add_headline(f"{key}/{name}")
                    n += 1
                for name, anchors in instance.anchors(truth[key], aligned).items():  # type: ignore[attr-defined]
                    if name in scores:
                        meaning.anchors[f"{key}/{name}"] = anchors.to_json()
    return n


def _next_release(result: AttackResult, name: str, nxt: Any) -> Payload:
    """The payload of ``result.estimate`` that the next stage of a chain consumes."""
    for payload in result.estimate.values():
        if isinstance(payload, nxt.consumes):
            return payload
    wanted = "/".join(t.__name__ for t in nxt.consumes)
    raise TypeError(f"chain: {name} produced no {wanted} for {nxt.name}")
