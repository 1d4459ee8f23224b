"""`witness dataset` verbs (each group of verbs lives in its own module)."""

from __future__ import annotations

import typer

from . import dataset_import
from . import dataset_release

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
app.add_typer(dataset_import.app)
app.add_typer(dataset_release.app)
