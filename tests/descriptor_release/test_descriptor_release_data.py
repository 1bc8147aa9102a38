"""bundled-images: crops of the test photos as private samples."""

import numpy as np


def test_test_grid_gives_half_overlapping_crops_of_the_test_photos():
    from vispriv.harness import Cache, CellContext
    from vispriv.harness.data.bundled import grid_crops
    from vispriv.plugins.descriptor_release.datasets import BundledImages
    from vispriv.plugins.descriptor_release.splits import load_split

    scene = BundledImages(BundledImages.Config(size=32, test_grid=3)).load(CellContext(cache=Cache(None)))
    assert scene.private.images.shape[:3] == (4 * 9, 32, 32)
    assert scene.private.ids[:2] == ["astronaut@0,0", "astronaut@0,1"]
    photo = load_split("test", 64).images[0]
    assert np.array_equal(scene.private.images[1], photo[0:32, 16:48])
    whole = load_split("test", 32)
    assert grid_crops(whole, 32, 1) is whole
    # The attacker's and defender's photos are at the test photos' pixel scale by default.
    assert scene.public.public.images.shape[1:3] == (64, 64)
    assert scene.public.lifting.images.shape[1:3] == (64, 64)


def test_disjoint_test_grid_shares_no_pixel_and_public_size_overrides():
    from vispriv.harness import Cache, CellContext
    from vispriv.plugins.descriptor_release.datasets import BundledImages
    from vispriv.plugins.descriptor_release.splits import load_split

    cfg = BundledImages.Config(size=32, test_grid=2, test_stride="full", public_size=40)
    scene = BundledImages(cfg).load(CellContext(cache=Cache(None)))
    photo = load_split("test", 64).images[0]
    crops = scene.private.images[:4]
    tiled = np.concatenate([np.concatenate(crops[:2], axis=1), np.concatenate(crops[2:], axis=1)], axis=0)
    np.testing.assert_array_equal(tiled, photo)
    assert scene.public.public.images.shape[1:3] == (40, 40)


def test_warps_accept_read_only_images():
    """Cached and shared arrays are read-only; skimage's Cython warp is not (CI failure, session 3)."""
    from vispriv.harness import Images
    from vispriv.plugins.descriptor_release.dictionary import augment_images
    from vispriv.plugins.descriptor_release.matching import warp_image

    rng = np.random.default_rng(0)
    arr = rng.random((2, 24, 24)).astype(np.float32)
    arr.flags.writeable = False
    shifted = warp_image(arr[0], np.array([[1.0, 0, 2], [0, 1, 0], [0, 0, 1]]))
    np.testing.assert_allclose(shifted[:, 2:], arr[0][:, :-2], atol=1e-6)
    views = augment_images(Images(arr, ["a", "b"]), 1, seed=0)
    assert len(views.images) == 4
    np.testing.assert_array_equal(views.images[:2].reshape(arr.shape), arr)
