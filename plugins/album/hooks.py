"""Registers the plugins of the album-sharing scenario (entry point in pyproject.toml)."""

from vispriv.harness import hookimpl


@hookimpl
def vispriv_register_datasets(register):
    from vispriv.plugins.album.dataset import AlbumWorld

    register(AlbumWorld)
    from vispriv.plugins.album.photos import AlbumPhotos

    register(AlbumPhotos)


@hookimpl
def vispriv_register_defenses(register):
    from vispriv.plugins.defenses.album_pruning import AlbumPruning, NoPruning

    register(NoPruning)
    register(AlbumPruning)


@hookimpl
def vispriv_register_attacks(register):
    from vispriv.plugins.attacks.adaptive_geolocator import AdaptiveGeolocator
    from vispriv.plugins.attacks.proxy_geolocator import ProxyGeolocator

    register(ProxyGeolocator)
    register(AdaptiveGeolocator)


@hookimpl
def vispriv_register_metrics(register):
    from vispriv.plugins.metrics.album import ProtectedK

    register(ProtectedK)
