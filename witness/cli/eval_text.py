"""`witness eval formats`, `witness eval parse` and `witness eval text`: the output-format
registry, raw outputs to structured predictions, and text metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import console, handle_errors, print_json, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.command("formats")
@handle_errors
def formats(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the model-output formats, their box conventions and options."""
    from rich.markup import escape

    from ..eval.parse import FORMATS, format_options

    rows = [
        {"name": f.name, "convention": f.convention, "options": format_options(f), "syntax": f.description}
        for f in FORMATS.values()
    ]
    if as_json:
        print_json(rows)
        return
    console.print(table("output formats (name,key=value passes options)", ["name", "box convention", "options", "syntax"],
                        [[r["name"], escape(r["convention"]), ", ".join(r["options"]), escape(r["syntax"])] for r in rows]))


@app.command("text")
@handle_errors
def text(
    gt: Annotated[Path, typer.Argument(help="Items (Parquet or JSONL) with the reference answers.")],
    pred: Annotated[Path, typer.Argument(help="Predictions JSONL: {id, answer, ...} or {id, raw}.")],
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="Output format of {id, raw} lines (e.g. qwen2.5-vl).")] = None,
    metrics: Annotated[str, typer.Option("--metrics", help="Comma-separated: bleu, bleu1..bleu4, rougeL, meteor, cider, bertscore.")]
    = "bleu,rougeL,meteor,cider,bertscore",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Text metrics of the predicted answers (box markup removed) against the reference answers.

    Missing or unparsed predictions count as empty answers; the parse rate is reported beside.
    """
    from ..eval.data import load_samples
    from ..eval.text import BERTSCORE_ENCODER, text_metrics

    names = tuple(m.strip() for m in metrics.split(",") if m.strip())
    s = load_samples(gt, pred, ["answer"], fmt=fmt)
    refs = ["" if a is None else str(a) for a in s.column("answer")]
    preds = ["" if (a is None or miss) else str(a) for a, miss in zip(s.pred_answers, s.missing, strict=True)]
    scores = text_metrics(preds, refs, metrics=names)
    out = {"n": len(s), "missing": int(s.missing.sum()), "parse_rate": s.parse_rate, "metrics": scores}
    if "bertscore" in names:
        out["bertscore_encoder"] = BERTSCORE_ENCODER
    if as_json:
        print_json(out)
        return
    console.print(table(f"text metrics: n={out['n']}, missing {out['missing']}, parse rate {100 * s.parse_rate:.1f}%",
                        ["metric", "value"], [[k, f"{v:.4f}"] for k, v in scores.items()]))
    if "bertscore" in names:
        console.print(f"BERTScore encoder: {BERTSCORE_ENCODER}")


@app.command("parse")
@handle_errors
def parse_cmd(
    gt: Annotated[Path, typer.Argument(help="Items (Parquet or JSONL): id, width, height.")],
    pred: Annotated[Path, typer.Argument(help="Predictions JSONL with {id, raw} lines.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="Output format (name or name,key=value,...).")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write structured predictions JSONL.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Parse raw model outputs into answers and pixel boxes; show the parse rate and why outputs failed.

    ``--out`` writes ``{id, answer, boxes, raw_output}`` for parsed lines and keeps unparsed ones as
    ``{id, raw, parse_error}`` (so the suites still count them as unparsed). Structured lines pass
    through. Exit 0 ok, 2 bad input.
    """
    from ..eval.data import read_gt
    from ..eval.parse import get_format, parse_all
    from ..io import read_predictions, write_jsonl

    get_format(fmt)  # an unknown format or option fails before any reading
    items = read_gt(gt, [])
    size = dict(zip(items.column("id").to_pylist(),
                    zip(items.column("width").to_pylist(), items.column("height").to_pylist(), strict=True), strict=True))
    preds = read_predictions(pred)
    raw_rows = [i for i, r in enumerate(preds.raw) if r is not None and preds.ids[i] in size]
    unknown = [k for k in preds.ids if k not in size]
    parsed, summary = parse_all([preds.raw[i] for i in raw_rows], fmt,
                                [size[preds.ids[i]][0] for i in raw_rows], [size[preds.ids[i]][1] for i in raw_rows])
    result = {"n_raw": summary.n, "n_parsed": summary.n_parsed, "parse_rate": summary.parse_rate,
              "n_structured": sum(r is None for r in preds.raw), "unknown_ids": len(unknown), "reasons": summary.reasons}
    if out is not None:
        by_row = dict(zip(raw_rows, parsed, strict=True))
        rows = []
        for i, pid in enumerate(preds.ids):
            if i in by_row:
                p = by_row[i]
                rows.append({"id": pid, "answer": p.answer, "boxes": p.boxes.tolist(), "raw_output": preds.raw[i]} if p.ok
                            else {"id": pid, "raw": preds.raw[i], "parse_error": p.reason})
            elif preds.raw[i] is None:
                b = preds.boxes[preds.offsets[i]:preds.offsets[i + 1]].tolist()
                row = {"id": pid, "answer": preds.answers[i], "boxes": b}
                if preds.has_scores[i]:
                    row["scores"] = preds.scores[preds.offsets[i]:preds.offsets[i + 1]].tolist()
                rows.append(row)
            else:
                rows.append({"id": pid, "raw": preds.raw[i]})
        write_jsonl(rows, out)
    if as_json:
        print_json(result)
        return
    from rich.markup import escape

    console.print(table(f"{fmt}: {summary.n_parsed}/{summary.n} raw outputs parsed ({100 * summary.parse_rate:.1f}%), "
                        f"{result['n_structured']} structured, {len(unknown)} unknown ids",
                        ["failure reason", "count"], [[escape(k), v] for k, v in summary.reasons.items()]))
    if out is not None:
        console.print(f"wrote {out}")
