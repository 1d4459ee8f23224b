"""`witness draft` verbs (each group of verbs lives in its own module)."""

from __future__ import annotations

import typer

from . import draft_rules
from . import draft_llm

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
app.add_typer(draft_rules.app)
app.add_typer(draft_llm.app)
