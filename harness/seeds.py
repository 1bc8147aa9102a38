"""What a cell's random seeds derive from: the parameters a config changes, nothing else.

A cell's seeds (the dataset's split, the defense's randomness, each attack's) are derived
from the matrix ``seed`` and the *seed identity* of each stage: its kind, its name, and
the config values that differ from their field defaults (recursively into nested
configs). Three things are left out on purpose:

* **fields at their default.** A plugin that gains a field with a default keeps its
  seeds, so every result logged before (and every number quoted in the docs) is drawn
  again by the same command.
* **folders** (fields typed :data:`~vispriv.harness.plugin.FolderPath`). The same data
  under ``/data/x`` or ``./x`` draws the same subsets, so a documented command gives the
  documented numbers in any checkout.
* **utility-only settings** (fields marked :data:`~vispriv.harness.plugin.UtilityOnly`,
  e.g. a descriptor defense's ``matching``). Only the defense's utility evaluation reads
  them, so sweeping one must leave the release and every attack's draws as they were: the
  attack metrics of the swept cells agree to the last digit.

The cell's *hash* (resume and cache identity) still holds the whole config and the
plugin's version: changing a default changes what is computed, and ``--resume`` must see
it. Only the seeds are stable.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from vispriv.harness.hashing import derive_seed, stable_hash
from vispriv.harness.plugin import _existing_folder, is_utility_only

__all__ = ["chain_seeds", "seed_identity", "stage_seed_key"]


def _is_folder(field: FieldInfo) -> bool:
    return any(getattr(m, "func", None) is _existing_folder for m in field.metadata)


def seed_identity(config: BaseModel) -> dict[str, Any]:
    """The config values that differ from their field defaults, nested configs recursed;
    folders and utility-only settings left out."""
    out: dict[str, Any] = {}
    for name, field in type(config).model_fields.items():
        if _is_folder(field) or is_utility_only(field):
            continue
        value = getattr(config, name)
        if isinstance(value, BaseModel):
            inner = seed_identity(value)
            if inner:
                out[name] = inner
            continue
        plain = to_jsonable_python(value)
        if field.is_required() or plain != to_jsonable_python(field.get_default(call_default_factory=True)):
            out[name] = plain
    return out


def stage_seed_key(kind: str, name: str, config: BaseModel) -> list[Any]:
    """One stage's part of the seed chain: kind, name and :func:`seed_identity`."""
    return [kind, name, seed_identity(config)]


def chain_seeds(matrix_seed: int, keys: list[list[Any]]) -> list[int]:
    """A seed per stage, each derived from the matrix seed and the stages up to it (dataset first)."""
    seeds, previous = [], "seed-chain-v1"
    for key in keys:
        previous = stable_hash(previous, key)
        seeds.append(derive_seed(matrix_seed, previous))
    return seeds
