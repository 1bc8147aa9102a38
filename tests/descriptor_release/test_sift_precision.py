"""SIFT in float64 gives the same keypoints and descriptors whichever CPU kernels PyTorch picks.

PyTorch dispatches its CPU kernels by instruction set (AVX-512, AVX2, none); float32 results
differ between them in the last bits, and SIFT's extrema, sub-pixel refinement and uint8
store turn that into other keypoints. ``ATEN_CPU_CAPABILITY=default`` forces the generic
kernels in a subprocess, standing in for another machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from vispriv.harness import Images
from vispriv.harness.data.bundled import load_bundled
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

PHOTOS = ["astronaut", "coffee"]
SIDE = 200

EXTRACT = """
import sys, numpy as np
from vispriv.harness.data.bundled import load_bundled
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features
photos = load_bundled({photos!r}, {side})
out = {{}}
for detector in ("dog", "dense"):
    f = extract_features(photos, SiftConfig(precision="float64", detector=detector, image_size=160))
    out.update({{detector + "_keypoints": f.keypoints, detector + "_descriptors": f.descriptors,
                detector + "_scales": f.scales, detector + "_orientations": f.orientations}})
np.savez(sys.argv[1], **out)
"""


def _native_capability() -> str:
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


@pytest.mark.skipif(_native_capability().upper() == "DEFAULT", reason="this CPU already runs the generic kernels")
def test_float64_sift_is_the_same_with_the_generic_kernels(tmp_path):
    out = tmp_path / "generic.npz"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    code = EXTRACT.format(photos=PHOTOS, side=SIDE)
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env, timeout=300)
    generic = np.load(out)
    photos: Images = load_bundled(PHOTOS, SIDE)
    for detector in ("dog", "dense"):
        f = extract_features(photos, SiftConfig(precision="float64", detector=detector, image_size=160))
        assert f.n_keypoints > 100
        for name in ("keypoints", "descriptors", "scales", "orientations"):
            assert np.array_equal(getattr(f, name), generic[f"{detector}_{name}"]), (detector, name)


def test_precision_is_a_config_choice_with_one_clear_error():
    from pydantic import ValidationError

    assert SiftConfig().precision == "float32"
    with pytest.raises(ValidationError, match="float64"):
        SiftConfig(precision="float16")
