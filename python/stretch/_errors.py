"""The exceptions of the stretch package, one per kind of the C++ error tree.

Each class is named after the C++ error it stands for (runtime/common/error.hpp), so the name a
message carries on the command line (``stretch elastic --json``: ``{"error": "ElasticityConfigError",
...}``) is the class a Python caller catches. They also derive from the built-in exception a Python
programmer expects: bad input is a ``ValueError``, an unreadable file an ``OSError``.
"""


class StretchError(Exception):
    """Any error Stretch reports."""


class ConfigError(StretchError, ValueError):
    """Bad input: malformed JSON, an unknown or ill-typed key, an impossible value."""


class IoError(StretchError, OSError):
    """A file that cannot be read or written (missing, a device, too large, ...)."""


class InternalError(StretchError, RuntimeError):
    """A bug in Stretch: please report it with the message."""


class ElasticityError(StretchError):
    """No elastic plan exists (DeepSpeed's ``ElasticityError``)."""


class ElasticityConfigError(ElasticityError):
    """The elasticity section is invalid or missing (DeepSpeed's ``ElasticityConfigError``)."""


class ElasticityIncompatibleWorldSize(ElasticityError):
    """The world size is not one of the plan's valid sizes (DeepSpeed's
    ``ElasticityIncompatibleWorldSize``)."""


class CommError(StretchError, RuntimeError):
    """Communication failed: a store that cannot be reached, a rejected client, a malformed live
    generation record."""


class CommTimeoutError(CommError, TimeoutError):
    """An operation or rendezvous did not finish within its timeout."""


class StoreError(CommError):
    """A key-value store failed (unreachable server, rejected token, oversized key or value)."""


class StoreTimeoutError(StoreError, TimeoutError):
    """A store wait or get did not see its keys within the timeout."""


__all__ = [
    "StretchError",
    "ConfigError",
    "IoError",
    "InternalError",
    "ElasticityError",
    "ElasticityConfigError",
    "ElasticityIncompatibleWorldSize",
    "CommError",
    "CommTimeoutError",
    "StoreError",
    "StoreTimeoutError",
]
