"""The exceptions of the ``tet`` package.

Every error the package raises on purpose is a :class:`TetError`; the subclasses say what kind
of failure it is, so callers can tell a damaged file from an unsupported input or a typo in a
path.
"""

from __future__ import annotations


class TetError(Exception):
    """Base class of every error raised by ``tet``."""


class CorruptError(TetError):
    """The bytes break a rule of their format: a damaged chunk (its message names the dataset,
    the chunk coordinates and the byte range), an unreadable footer, a malformed input."""


class UnsupportedError(TetError):
    """The input is valid but holds something this build cannot read or convert (an unknown
    format, a type with no ``.tet`` form)."""


class NotFoundError(TetError, LookupError):
    """A file, dataset, group or variable that is not there."""


class ConversionError(TetError):
    """A conversion failed (the message says why)."""


class WorkerCrashError(ConversionError):
    """The supervised conversion worker died (a signal, e.g. a crash of a C library) or was
    killed after its timeout. The interpreter that called :func:`tet.convert` is unharmed."""

    def __init__(self, message: str, signal: int | None = None, timed_out: bool = False):
        super().__init__(message)
        #: The signal that ended the worker, if any.
        self.signal = signal
        #: Whether the worker was killed because it ran past its timeout.
        self.timed_out = timed_out


__all__ = [
    "TetError",
    "CorruptError",
    "UnsupportedError",
    "NotFoundError",
    "ConversionError",
    "WorkerCrashError",
]
