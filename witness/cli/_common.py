"""What every CLI verb shares: error handling, JSON output, tables, progress.

Exit codes: 0 ok, 1 a gate or check failed, 2 bad input. A :class:`WitnessError` becomes one line on
stderr; a traceback only with ``--debug`` (or ``WITNESS_DEBUG=1``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import GateError, WitnessError

console = Console()
err_console = Console(stderr=True)

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _debug() -> bool:
    return os.environ.get("WITNESS_DEBUG", "") not in ("", "0") or "--debug" in sys.argv


def handle_errors(fn: Callable) -> Callable:
    """Turn a :class:`WitnessError` into one line on stderr and exit 2 (a :class:`GateError`: exit 1)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        try:
            return fn(*args, **kwargs)
        except GateError as exc:
            if _debug():
                raise
            err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_CHECK_FAILED) from None
        except WitnessError as exc:
            if _debug():
                raise
            err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None

    return wrapper


def print_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout (NaN becomes null)."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")


def _clean(obj: Any) -> Any:
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    return obj


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    """A rich table with the given columns and rows (values formatted with ``str``)."""
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[fmt(v) for v in r])
    return t


def fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def progress(transient: bool = True) -> Progress:
    """A progress bar for long work (writes to stderr, so ``--json`` output stays clean)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
        disable=not err_console.is_terminal and os.environ.get("WITNESS_PROGRESS") != "1",
    )
