"""The image-release scenario: an image is published after an obfuscation (pixelation).

The smallest complete threat model the harness ships: it runs in seconds, so it is the
smoke test of every new install and the template third-party plugins start from.
"""
