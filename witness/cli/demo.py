"""``witness demo``: the main job on the bundled demo scenes, end to end.

demo scenes → rule drafts and equivalent pairs → validation → audit (simulated reviewers, kappa,
consensus, gate) → Parquet release → statistics and plots → a CPU training smoke run and its
evaluation (clearly labelled: a tiny random model, a few steps, numbers that mean nothing).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from ._common import console, handle_errors, progress, table


@handle_errors
def demo(
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("demo-output"),
    n: Annotated[int, typer.Option("--n", help="Number of demo scenes.")] = 300,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    train: Annotated[bool, typer.Option("--train/--no-train", help="Run the CPU training smoke stage.")] = True,
    min_kappa: Annotated[float, typer.Option("--min-kappa", help="The gate's minimum reviewer kappa.")] = 0.8,
) -> None:
    """Demo scenes → drafts and pairs → validation → audit and gate → release → stats → smoke run."""
    import pyarrow as pa

    from ..annotate.pairs import draft_pairs
    from ..annotate.rules import draft_rules
    from ..audit.agreement import agreement
    from ..audit.gate import gate
    from ..audit.review import consensus
    from ..audit.simulate import simulate_review
    from ..dataset.demo import demo_image_dir, iter_demo_scenes
    from ..dataset.stats import dataset_stats, write_plots
    from ..io import write_table
    from ..schema import scenes_table, validate_items, validate_scenes

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    scenes_path = out / "scenes.parquet"

    def lap(name: str, start: float) -> None:
        timings[name] = round(time.perf_counter() - start, 2)

    with progress(transient=False) as bar:
        t = time.perf_counter()
        task = bar.add_task("rendering demo scenes", total=n)
        rows = []
        for rec in iter_demo_scenes(n, seed, demo_image_dir(scenes_path)):
            rows.append(rec)
            bar.advance(task)
        scenes, _ = validate_scenes(scenes_table(rows), source=scenes_path)
        write_table(scenes, scenes_path)
        lap("scenes", t)

        t = time.perf_counter()
        task = bar.add_task("drafting rule questions", total=n)
        items = draft_rules(scenes, seed=seed, progress=lambda k: bar.advance(task, k))
        task = bar.add_task("drafting equivalent pairs", total=n)
        pairs = draft_pairs(scenes, seed=seed, progress=lambda k: bar.advance(task, k))
        lap("drafts", t)

    t = time.perf_counter()
    items, _ = validate_items(items, source="rule drafts")
    pairs, _ = validate_items(pairs, source="pair drafts")
    drafts = pa.concat_tables([items, pairs])
    validate_items(drafts, source="all drafts")
    write_table(items, out / "items.parquet")
    write_table(pairs, out / "pairs.parquet")
    lap("validation", t)

    # Audit on simulated reviewers: 5% of drafts are corrupted on purpose, and two simulated
    # reviewers catch most of them; the real consensus, kappa and gate code decide what is released.
    t = time.perf_counter()
    reviewed_items, annotations, corrupted = simulate_review(drafts, seed=seed)
    write_table(reviewed_items, out / "reviewed-items.parquet")
    write_table(annotations, out / "annotations.parquet")
    cons = consensus(annotations, reviewed_items)
    write_table(cons.table, out / "consensus.parquet")
    kappa = agreement(annotations, "decision", roles=["reviewer"], n_boot=500, seed=seed)
    release_dir = out / "release"
    gated = gate(reviewed_items, annotations, release_dir, min_kappa=min_kappa, seed=seed, n_boot=500)
    lap("audit + release", t)

    t = time.perf_counter()
    stats = dataset_stats(release_dir)
    plots = write_plots(release_dir, out / "stats")
    lap("stats", t)

    smoke = None
    if train:
        t = time.perf_counter()
        try:
            from ..train.smoke import run_smoke
        except ImportError as exc:  # pragma: no cover - without the train extra
            console.print(f"[yellow]training smoke stage skipped: {exc}[/yellow]")
        else:
            console.print("[bold]training smoke run[/bold] (tiny random model built offline, a few CPU steps: not a result)")
            import contextlib

            (out / "smoke").mkdir(parents=True, exist_ok=True)
            log_path = out / "smoke" / "train.log"
            # transformers, datasets and TRL print progress bars and deprecation notes: keep them in a log.
            with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                smoke = run_smoke(release_dir, out / "smoke", steps=2)
            smoke["log"] = str(log_path)
            smoke["agc_report"] = str(_evaluate_smoke(release_dir, Path(smoke["predictions"]), out / "smoke" / "agc.json"))
        lap("train smoke", t)

    timings["total"] = round(time.perf_counter() - t0, 2)
    summary = {
        "scenes": scenes.num_rows,
        "drafts": {"rules": items.num_rows, "pairs": pairs.num_rows},
        "corrupted_on_purpose": corrupted,
        "review": cons.to_dict(),
        "kappa": kappa.to_dict(),
        "gate": {k: v for k, v in gated.to_dict().items() if k != "release"},
        "release": {"dir": str(release_dir), "items": gated.release["items"] if gated.release else None},
        "stats": stats.to_dict() if hasattr(stats, "to_dict") else None,
        "smoke": smoke,
        "seconds": timings,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))

    console.print(table("witness demo", ["stage", "result", "seconds"], [
        ["scenes", f"{scenes.num_rows} demo scenes → {scenes_path}", timings["scenes"]],
        ["drafts", f"{items.num_rows} rule items, {pairs.num_rows // 2} pairs", timings["drafts"]],
        ["audit", f"{sum(corrupted.values())} corrupted on purpose; {cons.n_passed}/{cons.n_items} passed review; "
                  f"κ {kappa.result.kappa:.3f} [{kappa.result.ci95[0]:.3f}, {kappa.result.ci95[1]:.3f}]"
         if kappa.result.ci95 else "", timings["audit + release"]],
        ["release", f"{gated.n_admitted} items → {release_dir} (gate report: {release_dir / 'gate' / 'report.md'})", ""],
        ["stats", f"Table II and {len(plots)} plots → {out / 'stats'}", timings["stats"]],
        ["smoke run", "skipped" if smoke is None else f"{smoke['sft_steps']} SFT steps, {smoke['predicted']} predictions "
                                                        f"(SMOKE: numbers mean nothing) → {smoke['agc_report']}", timings.get("train smoke", "")],
    ]))
    cols, rows = stats.table_ii()
    console.print(table("Release composition (Table II of RoadSceneVQA-G)", cols, rows))
    console.print(f"Everything is in {out}/ (summary.json lists it). Load the release with "
                  f"datasets.load_dataset({str(release_dir)!r}); browse it with `witness ui {release_dir}`.")


def _evaluate_smoke(release_dir: Path, predictions: Path, report_path: Path) -> Path:
    """AGC of the smoke run's predictions on the test items it predicted (a smoke check of eval)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..eval.agc import evaluate_agc
    from ..eval.data import align, read_gt, read_predictions_fast
    from ..eval.report import write_report

    preds = read_predictions_fast(predictions)
    gt = pa.concat_tables([read_gt(f, "agc") for f in sorted((release_dir / "data").glob("test-*.parquet"))])
    gt = gt.filter(pc.is_in(gt.column("id"), value_set=pa.array(preds.ids, pa.string())))
    report = evaluate_agc(align(gt, preds, fmt="eta", source=release_dir, pred_source=predictions))
    return write_report(report, report_path, model="tiny-smoke (SMOKE RUN: numbers mean nothing)")
