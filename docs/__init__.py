"""The user guides (the Markdown files beside this file), shipped as ``vispriv.docs``: ``vispriv docs``."""
