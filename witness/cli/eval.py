"""`witness eval` verbs (each group of verbs lives in its own module)."""

from __future__ import annotations

import typer

from . import eval_suites
from . import eval_predict
from . import eval_text

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
app.add_typer(eval_suites.app)
app.add_typer(eval_predict.app)
app.add_typer(eval_text.app)
