"""User-facing errors: each carries one line that names the problem and what is allowed."""


class VisprivError(Exception):
    """Base class of errors the CLI reports as one line (exit status 2)."""


class ConfigError(VisprivError):
    """A matrix config or a plugin config is invalid."""


class PluginError(VisprivError):
    """A plugin could not be imported, registered or found."""


class TrackingError(VisprivError):
    """The MLflow tracking store cannot be opened or written."""


class InputError(VisprivError):
    """Data handed to a plugin is malformed (wrong shape, NaN, too small, ...)."""
