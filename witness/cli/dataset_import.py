"""`witness dataset import` and `witness dataset demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


def _summary(tbl, warnings: dict[str, int], out: Path) -> dict:
    from collections import Counter

    labels: Counter = Counter()
    n_obj = 0
    for objs in tbl.column("objects").to_pylist():
        objs = objs or []
        n_obj += len(objs)
        labels.update(o["label"] for o in objs)
    return {
        "out": str(out),
        "scenes": tbl.num_rows,
        "objects": n_obj,
        "per_class": dict(labels.most_common()),
        "warnings": dict(warnings),
    }


def _render(summary: dict, title: str) -> None:
    rows = [["scenes", summary["scenes"]], ["objects", summary["objects"]]]
    rows += [[f"  {k}", v] for k, v in summary["per_class"].items()]
    rows += [[f"warning: {k}", v] for k, v in summary["warnings"].items()]
    console.print(table(title, ["", "count"], rows))
    console.print(f"wrote {summary['out']}")


@app.command("import")
@handle_errors
def import_(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="coco, voc, kitti, yolo, labelstudio (or module:attr).")],
    src: Annotated[Path, typer.Argument(help="Instances JSON (coco, labelstudio) or dataset folder (voc, kitti, yolo).")],
    out: Annotated[Path, typer.Option("--out", help="Scenes Parquet file to write.")],
    images: Annotated[Optional[Path], typer.Option("--images", help="Image root (coco: default the JSON's folder).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Import a detection dataset to a scenes Parquet file."""
    from ..dataset.importers import import_dataset
    from ..io import write_table

    result = import_dataset(fmt, src, images=images)
    write_table(result.table, out)
    summary = _summary(result.table, result.warnings, out)
    if as_json:
        print_json(summary)
    else:
        _render(summary, f"{fmt} import of {src}")


@app.command("demo")
@handle_errors
def demo(
    out: Annotated[Path, typer.Option("--out", help="Scenes Parquet file; PNGs go to <stem>-images/ beside it.")],
    n: Annotated[int, typer.Option("--n", min=1, help="Number of scenes.")] = 300,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same bytes).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Render demo road scenes (PNG) and write their scenes Parquet file."""
    from ..dataset.demo import demo_image_dir, iter_demo_scenes
    from ..io import write_table
    from ..schema import scenes_table, validate_scenes

    rows = []
    with progress() as bar:
        task = bar.add_task("rendering", total=n)
        for row in iter_demo_scenes(n, seed, demo_image_dir(out)):
            rows.append(row)
            bar.advance(task)
    tbl, report = validate_scenes(scenes_table(rows), source=out)
    write_table(tbl, out)
    summary = _summary(tbl, {"clipped_boxes": report.clipped_boxes} if report.clipped_boxes else {}, out)
    summary["images"] = str(demo_image_dir(out).resolve())
    if as_json:
        print_json(summary)
    else:
        _render(summary, f"demo scenes (seed {seed})")
