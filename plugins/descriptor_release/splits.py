"""The fixed split of the bundled photos for descriptor release (LDP-Feat (ICCV 2023) section 6.1).

Split once, by hand, into three disjoint sets:

* ``test`` -- the private images: people and faces (astronaut, cameraman, Grace Hopper)
  and a cat's face (chelsea);
* ``lifting`` and ``public`` -- two disjoint sets of other scenes (section 6.1 keeps the
  defender's database images and the attacker's apart).

The motorcycle stereo pair is in none of them (it serves the matching utility).
"""

from __future__ import annotations

from vispriv.harness.data.bundled import load_bundled
from vispriv.harness.errors import ConfigError
from vispriv.harness.payloads import Images

#: The fixed split: people and faces are private test images; the rest is split in two.
BUNDLED_SPLITS: dict[str, tuple[str, ...]] = {
    "test": ("astronaut", "camera", "grace_hopper", "chelsea"),
    "lifting": ("coffee", "rocket", "china", "brick", "coins", "hubble_deep_field", "page"),
    "public": ("flower", "gravel", "grass", "moon", "clock", "immunohistochemistry", "retina", "present"),
}


def load_split(split: str, size: int) -> Images:
    """One of the fixed splits (``test``, ``lifting``, ``public``) at side ``size``."""
    if split not in BUNDLED_SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {', '.join(BUNDLED_SPLITS)}")
    return load_bundled(BUNDLED_SPLITS[split], size)
