"""``witness demo``: the main job on the bundled demo scenes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def demo(
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("demo-output"),
) -> None:
    """Demo scenes → rule drafts and pairs → validation → release → stats."""
    raise typer.Exit(0)
