"""`witness dataset release` and `witness dataset stats`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.command("release")
@handle_errors
def release_cmd(
    items: Annotated[list[Path], typer.Argument(help="Items files (Parquet or JSONL).", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Release directory (replaced atomically).")],
    test_fraction: Annotated[float, typer.Option("--test-fraction", help="Share of images (without a split) for test.")] = 0.15,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split by image.")] = 0,
    license: Annotated[Optional[str], typer.Option("--license", help="License id for the card, e.g. cc-by-4.0.")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Pretty name for the card.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Write a Parquet release: splits by image, images embedded, card, manifest, stats."""
    from ..dataset.release import release

    extra = {k: v for k, v in (("license", license), ("pretty_name", name)) if v is not None}
    with progress() as bar:
        task = bar.add_task("release", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = release(items, out, test_fraction=test_fraction, seed=seed, card_extra=extra or None, on_progress=tick)
    if as_json:
        print_json(report.to_dict())
        return
    rows = [[s, report.items[s], report.images[s]] for s in report.items]
    console.print(table(f"Release {report.out_dir}", ["split", "items", "images"], rows))
    console.print(
        f"{len(report.files)} files, {_size(sum(f.bytes for f in report.files))}, "
        f"{report.clipped_boxes} box(es) clipped, {report.seconds:.1f} s"
    )


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


@app.command("verify")
@handle_errors
def verify_cmd(
    path: Annotated[Path, typer.Argument(help="Release directory.", exists=True, file_okay=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the problems as JSON.")] = False,
) -> None:
    """Check every file of a release against manifest.json (size and SHA-256); exit 1 on a mismatch."""
    from ..dataset.release import verify_manifest

    problems = verify_manifest(path)
    if as_json:
        print_json({"ok": not problems, "problems": problems})
    elif problems:
        console.print(table(f"Release {path}: {len(problems)} problem(s)", ["problem"], [[p] for p in problems]))
    else:
        console.print(f"{path}: every file matches manifest.json")
    if problems:
        raise typer.Exit(1)


@app.command("stats")
@handle_errors
def stats_cmd(
    path: Annotated[Path, typer.Argument(help="Release directory or items file.", exists=True)],
    plots: Annotated[Optional[Path], typer.Option("--plots", help="Plot directory (default DIR/stats/).")] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the plots.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Print Table II (and Table III) of a release and write its plots."""
    from ..dataset.stats import dataset_stats, write_plots

    stats = dataset_stats(path)
    written: list[Path] = []
    if not no_plots:
        target = plots if plots is not None else (path / "stats" if path.is_dir() else path.parent / f"{path.stem}_stats")
        written = write_plots(path, target)
    if as_json:
        print_json({**stats.to_dict(), "plots": [str(p) for p in written]})
        return
    cols, rows = stats.table_ii()
    console.print(table("Composition (Table II)", cols, rows))
    c3, r3 = stats.table_iii()
    if r3:
        console.print(table("Categories, % of items (Table III)", c3, r3))
    for p in written:
        console.print(f"wrote {p}")
