"""Registers the image-release scenario (entry point ``image-release``)."""

from vispriv.harness import hookimpl
from vispriv.plugins.attacks.as_released import AsReleased
from vispriv.plugins.defenses.pixelate import Pixelate, PublishAsIs
from vispriv.plugins.image_release.data import PhotoFolder, SampleImages


@hookimpl
def vispriv_register_datasets(register):
    register(SampleImages)
    register(PhotoFolder)


@hookimpl
def vispriv_register_defenses(register):
    register(PublishAsIs)
    register(Pixelate)


@hookimpl
def vispriv_register_attacks(register):
    register(AsReleased)
