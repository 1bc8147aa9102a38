"""A minimal Flower app (Flower's PyTorch quickstart shape) on the bundled digits, captured for vispriv.

``task.py`` holds the model, the data and the local training; ``client_app.py`` the
``ClientApp``; ``server_app.py`` the ``ServerApp`` whose strategy is wrapped in
:class:`vispriv.plugins.federated.flower.capture.CaptureStrategy`; ``attack.yaml`` the matrix
that attacks the capture. ``python -m vispriv.plugins.federated.flower.run_example`` runs both.
"""
