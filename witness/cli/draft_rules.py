"""`witness draft rules` and `witness draft pairs`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

_SCENES = typer.Argument(..., exists=True, dir_okay=False, readable=True, help="Scenes file (Parquet or JSONL).")
_OUT = typer.Option(..., "--out", "-o", dir_okay=False, help="Where to write the items (Parquet).")
_SEED = typer.Option("--seed", help="Seed of the template and class choices (drafts are deterministic for a seed).")
_JSON = typer.Option("--json", help="Print the summary as JSON.")


def _render(summary, out: Path, as_json: bool, title: str) -> None:
    data = summary.as_dict()
    data["out"] = str(out)
    if as_json:
        print_json(data)
        return
    rows = [[q, n] for q, n in sorted(summary.per_qtype.items())]
    console.print(table(f"{title}: items per qtype", ["qtype", "items"], rows))
    rows = [[c, n] for c, n in sorted(summary.per_category.items())]
    console.print(table("items per category", ["category", "items"], rows))
    console.print(
        table(
            "summary",
            ["items", "images", "pairs", "grounded share", "multi-box share", "written to"],
            [[summary.n_items, summary.n_images, summary.n_pairs, summary.grounded_share, summary.multi_box_share, str(out)]],
        )
    )


@app.command("rules")
@handle_errors
def rules(
    scenes: Annotated[Path, _SCENES],
    out: Annotated[Path, _OUT],
    types: Annotated[Optional[str], typer.Option("--types", help="Comma-separated question types (default all): existence,counting,comparison,identification,selection,attribute,spatial.")] = None,
    seed: Annotated[int, _SEED] = 0,
    per_image: Annotated[Optional[int], typer.Option("--per-image", help="At most this many questions per image (round-robin over types).")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Draft grounded questions whose answers and evidence follow exactly from the annotations."""
    from ..annotate.rules import draft_rules, summarize_drafts
    from ..io import read_scenes, write_table

    table_, _report = read_scenes(scenes)
    with progress() as bar:
        task = bar.add_task("drafting", total=table_.num_rows)
        items = draft_rules(table_, types=types, seed=seed, per_image=per_image, progress=lambda k: bar.advance(task, k))
    write_table(items, out)
    _render(summarize_drafts(items), out, as_json, "rule drafts")


@app.command("pairs")
@handle_errors
def pairs(
    scenes: Annotated[Path, _SCENES],
    out: Annotated[Path, _OUT],
    seed: Annotated[int, _SEED] = 0,
    categories: Annotated[Optional[str], typer.Option("--categories", help="Comma-separated pair categories (default all): enumeration,spatial_reasoning,existence,attribute_recognition,behavioral_reasoning.")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Draft logically equivalent question pairs (ConVBench) whose answers determine each other."""
    from ..annotate.pairs import draft_pairs
    from ..annotate.rules import summarize_drafts
    from ..io import read_scenes, write_table

    table_, _report = read_scenes(scenes)
    with progress() as bar:
        task = bar.add_task("drafting pairs", total=table_.num_rows)
        items = draft_pairs(table_, seed=seed, categories=categories, progress=lambda k: bar.advance(task, k))
    write_table(items, out)
    _render(summarize_drafts(items), out, as_json, "pair drafts")
