"""Puts this folder on ``sys.path`` (pytest's prepend import mode), so every test can use :mod:`cli_fork`."""
