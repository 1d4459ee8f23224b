"""Typed errors.

One base class, :class:`WitnessError`; every subclass also inherits the builtin that matches it, so
``except ValueError`` keeps working for callers that do not know witness. Messages follow one
pattern: ``Expected <what>, got <value> (<where>). <how to fix>.``
"""

from __future__ import annotations

__all__ = [
    "WitnessError",
    "SchemaError",
    "InputError",
    "UnknownNameError",
    "MissingDependencyError",
    "ServiceError",
    "GateError",
    "where",
    "require",
]


class WitnessError(Exception):
    """Base class of every error witness raises on purpose."""


class SchemaError(WitnessError, ValueError):
    """A record does not satisfy the schema (bad box, missing column, duplicate id, ...)."""


class InputError(WitnessError, ValueError):
    """A file or argument cannot be read or understood (malformed JSON, missing image, ...)."""


class UnknownNameError(WitnessError, ValueError):
    """A plug-in name (format, reward, importer, ...) is not registered."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        super().__init__(
            f"Unknown {kind} {name!r}. Expected one of {self.known} or 'module:attr'."
        )


class MissingDependencyError(WitnessError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class ServiceError(WitnessError, ConnectionError):
    """A service witness talks to (Label Studio, an OpenAI-compatible server) failed or is down."""


class GateError(WitnessError):
    """A dataset-level check failed: the release gate refuses to release."""


def where(file: object = None, row: int | None = None, item: object = None, field: str | None = None) -> str:
    """Format the location part of an error message.

    >>> where("test.parquet", 42, "q17", "boxes")
    "item 'q17', test.parquet row 42, field 'boxes'"
    """
    parts = []
    if item is not None:
        parts.append(f"item {str(item)!r}")
    if file is not None and row is not None:
        parts.append(f"{file} row {row}")
    elif file is not None:
        parts.append(str(file))
    elif row is not None:
        parts.append(f"row {row}")
    if field is not None:
        parts.append(f"field {field!r}")
    return ", ".join(parts)


def require(module: str, extra: str):
    """Import an optional dependency or raise :class:`MissingDependencyError` naming the extra.

    >>> require("json", "dev").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError(
            f"Expected the optional dependency {module!r}, which is not installed ({exc}). "
            f"Install it with: pip install 'witness[{extra}]'."
        ) from exc
