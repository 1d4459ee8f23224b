"""`witness eval {agc,aesp,pairs,grec,count,report}`: score predictions against released items.

Each suite verb: ``witness eval SUITE GT PRED [--format NAME] [--out REPORT.json] [--json]``.
GT is an item Parquet/JSONL file (only the columns the suite needs are read), PRED a predictions
JSONL file. ``--out`` writes the report and, beside it, ``REPORT.samples.parquet`` (per-sample
detail for the UI). Exit 0 ok, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ._common import console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

GT = Annotated[Path, typer.Argument(help="Items (Parquet or JSONL) with the reference answers and boxes.")]
PRED = Annotated[Path, typer.Argument(help="Predictions JSONL: {id, answer, boxes, scores?} or {id, raw}.")]
FMT = Annotated[Optional[str], typer.Option("--format", "-f", help="Output format of {id, raw} lines (e.g. eta).")]
OUT = Annotated[Optional[Path], typer.Option("--out", "-o", help="Write REPORT.json (and REPORT.samples.parquet beside it).")]
JSON = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
MODEL = Annotated[Optional[str], typer.Option("--model", help="Model name in the report (default: the --out file name, else the PRED file name).")]

_COUNT_KEYS = {"spc_support", "n_eval", "n_ambiguous", "n_skipped", "n_pairs", "n_incomplete", "n_target", "n_no_target", "n"}


def _show(key: str, v: Any) -> Any:
    if v is None:
        return None
    if key in _COUNT_KEYS or key.endswith("_mae") or isinstance(v, int):
        return v
    return f"{100.0 * v:.1f}"


def _finish(report: Any, *, out: Optional[Path], as_json: bool, model: str) -> None:
    from ..eval.report import write_report

    if out is not None:
        write_report(report, out, model=model)
    d = report.to_dict()
    d["model"] = model
    if as_json:
        print_json(d)
        return
    m = d["metrics"]
    console.print(
        table(
            f"{d['suite']} — {model}: n={d['n']}, parse rate {_show('x', d['parse_rate'])}%, missing {d['missing']}",
            ["metric", "value (%)"],
            [[k, _show(k, v)] for k, v in m.items()],
        )
    )
    for group, groups in d.get("by", {}).items():
        if not groups:
            continue
        keys = ["n"] + [k for k in m if any(k in g for g in groups.values())]
        names = list(groups)
        rows = [[k] + [_show(k, groups[g].get(k)) for g in names] for k in keys]
        console.print(table(f"by {group} (%)", ["metric"] + [g.replace("_", " ") for g in names], rows))
    if out is not None:
        console.print(f"wrote {out}")


def _samples(gt: Path, pred: Path, suite: str, fmt: Optional[str]):
    from ..eval.data import load_samples

    return load_samples(gt, pred, suite, fmt=fmt)


@app.command("agc")
@handle_errors
def agc(
    gt: GT,
    pred: PRED,
    fmt: FMT = None,
    out: OUT = None,
    as_json: JSON = False,
    model: MODEL = None,
    text_metrics: Annotated[bool, typer.Option("--text-metrics", help="Add text metrics of the answer span (witness.eval.text).")] = False,
) -> None:
    """AGC suite (RoadSceneVQA-G): GDA, CntAcc, SPC, P/R/F1, AP, GCA-s/-l."""
    from ..eval.agc import evaluate_agc

    s = _samples(gt, pred, "agc", fmt)
    _finish(evaluate_agc(s, text_metrics=text_metrics), out=out, as_json=as_json, model=model or (out or pred).stem)


@app.command("aesp")
@handle_errors
def aesp(
    gt: GT,
    pred: PRED,
    fmt: FMT = None,
    out: OUT = None,
    as_json: JSON = False,
    model: MODEL = None,
    llm_url: Annotated[Optional[str], typer.Option("--llm-url", help="OpenAI-compatible base URL (…/v1) of the answer extractor.")] = None,
    llm_model: Annotated[Optional[str], typer.Option("--llm-model", help="Extractor model name (AESP: Qwen3-14B).")] = None,
    llm_cache: Annotated[Optional[Path], typer.Option("--llm-cache", help="On-disk cache of extractor replies.")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
) -> None:
    """AESP suite: coverage support, ES overall/correct, joint success, accuracy, P/R/F1."""
    from ..errors import InputError
    from ..eval.aesp import evaluate_aesp

    llm = None
    if (llm_url is None) != (llm_model is None):
        raise InputError("Expected both --llm-url and --llm-model, got only one. Give both or neither.")
    if llm_url is not None:
        from ..llm import LLMClient, LLMConfig

        llm = LLMClient(LLMConfig(llm_url, llm_model, api_key_env=api_key_env, cache_dir=llm_cache))
    s = _samples(gt, pred, "aesp", fmt)
    with progress() as bar:
        task = bar.add_task("LLM answer extraction", total=None)
        rep = evaluate_aesp(s, llm=llm, progress=lambda k: bar.advance(task, k))
    _finish(rep, out=out, as_json=as_json, model=model or (out or pred).stem)


@app.command("pairs")
@handle_errors
def pairs(
    gt: GT,
    pred: PRED,
    fmt: FMT = None,
    out: OUT = None,
    as_json: JSON = False,
    model: MODEL = None,
    strict: Annotated[bool, typer.Option("--strict", help="Judge answers with the strict predicate.")] = False,
) -> None:
    """Pairs suite (ConVBench): consistency and robust accuracy per category and macro."""
    from ..eval.pairs import evaluate_pairs

    s = _samples(gt, pred, "pairs", fmt)
    _finish(evaluate_pairs(s, strict=strict), out=out, as_json=as_json, model=model or (out or pred).stem)


@app.command("grec")
@handle_errors
def grec(
    gt: GT,
    pred: PRED,
    fmt: FMT = None,
    out: OUT = None,
    as_json: JSON = False,
    model: MODEL = None,
    score_threshold: Annotated[float, typer.Option("--score-threshold", help="Drop predictions scoring below this.")] = 0.7,
) -> None:
    """GREC suite (gRefCOCO): Pr@F1=1, N-acc, T-acc."""
    from ..eval.grec import evaluate_grec

    s = _samples(gt, pred, "grec", fmt)
    _finish(evaluate_grec(s, score_threshold=score_threshold), out=out, as_json=as_json, model=model or (out or pred).stem)


@app.command("count")
@handle_errors
def count(gt: GT, pred: PRED, fmt: FMT = None, out: OUT = None, as_json: JSON = False, model: MODEL = None) -> None:
    """Counting suite (CARPK): count MAE, recall at IoU 0.5, SPC."""
    from ..eval.count import evaluate_count

    s = _samples(gt, pred, "count", fmt)
    _finish(evaluate_count(s), out=out, as_json=as_json, model=model or (out or pred).stem)


@app.command("report")
@handle_errors
def report(
    reports: Annotated[list[Path], typer.Argument(help="REPORT.json files written with --out.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the Markdown here (else print it).")] = None,
) -> None:
    """Several models side by side (Table IV layout, per-category breakdown) as Markdown."""
    from ..eval.report import read_report, render_markdown
    from ..io import atomic_path

    md = render_markdown([read_report(p) for p in reports])
    if out is None:
        typer.echo(md, nl=False)
        return
    with atomic_path(out, suffix=".md") as tmp:
        tmp.write_text(md, encoding="utf-8")
    console.print(f"wrote {out}")
