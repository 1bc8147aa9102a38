"""Registers the generic metrics (entry point ``metrics``)."""

from harness import hookimpl
from plugins.metrics.classification import Accuracy, TopKAccuracy
from plugins.metrics.image_quality import MAE, PSNR, SSIM


@hookimpl
def vispriv_register_metrics(register):
    for cls in (MAE, SSIM, PSNR, Accuracy, TopKAccuracy):
        register(cls)
