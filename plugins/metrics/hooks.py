"""Registers the generic metrics (entry point ``metrics``)."""

from vispriv.harness import hookimpl
from vispriv.plugins.metrics.classification import Accuracy, TopKAccuracy
from vispriv.plugins.metrics.image_quality import GMSD, MAE, PSNR, SSIM
from vispriv.plugins.metrics.recognisable import FaithfulShare, RecognisableShare


@hookimpl
def vispriv_register_metrics(register):
    for cls in (MAE, SSIM, PSNR, GMSD, Accuracy, TopKAccuracy, RecognisableShare, FaithfulShare):
        register(cls)
