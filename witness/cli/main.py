"""``witness AREA VERB``: one program, one typer sub-app per area.

Sub-apps import their heavy dependencies inside the verbs, so ``witness --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import __version__
from . import audit, dataset, demo, draft, eval as eval_cli, studio, train

app = typer.Typer(
    name="witness",
    help="Build, audit, train on and evaluate grounded visual-question-answering data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(dataset.app, name="dataset", help="Import detection data, demo scenes, release and statistics.")
app.add_typer(draft.app, name="draft", help="Draft grounded questions: rules, pairs, an LLM.")
app.add_typer(studio.app, name="studio", help="Annotate in a real Label Studio server.")
app.add_typer(audit.app, name="audit", help="Agreement, consensus review, adjudication, judge, release gate.")
app.add_typer(train.app, name="train", help="SFT, ECPO and ConVLM with TRL and PEFT.")
app.add_typer(eval_cli.app, name="eval", help="Score model outputs: AGC, AESP, pairs, GREC, counting.")
app.command("demo", help="Run the main job on the bundled demo scenes.")(demo.demo)


@app.command("ui")
def ui(
    paths: Annotated[list[Path], typer.Argument(help="Release dirs, items files, consensus tables, eval report JSONs.")],
    port: Annotated[int, typer.Option("--port")] = 8501,
) -> None:
    """Browse items with their boxes, audit disagreements and per-sample evaluation errors (Streamlit)."""
    import subprocess
    import sys

    from ..errors import require

    require("streamlit", "ui")
    app_path = Path(__file__).resolve().parent.parent / "ui" / "app.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(app_path), "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--", *[str(p) for p in paths]]
    typer.echo(f"witness ui on http://127.0.0.1:{port}")
    raise typer.Exit(subprocess.call(cmd))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"witness {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
) -> None:
    """witness: grounded VQA data, from detection boxes to a released, audited dataset."""
    import os

    if debug:
        os.environ["WITNESS_DEBUG"] = "1"


if __name__ == "__main__":  # pragma: no cover
    app()
