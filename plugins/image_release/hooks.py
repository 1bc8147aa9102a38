"""Registers the image-release scenario (entry point ``image-release``)."""

from harness import hookimpl
from plugins.attacks.as_released import AsReleased
from plugins.defenses.pixelate import Pixelate, PublishAsIs
from plugins.image_release.data import SampleImages


@hookimpl
def vispriv_register_datasets(register):
    register(SampleImages)


@hookimpl
def vispriv_register_defenses(register):
    register(PublishAsIs)
    register(Pixelate)


@hookimpl
def vispriv_register_attacks(register):
    register(AsReleased)
