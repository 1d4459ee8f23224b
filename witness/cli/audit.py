"""``witness audit`` (also installed as ``audit``): agreement, consensus, sampling, adjudication,
the LLM judge and the release gate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import EXIT_CHECK_FAILED, console, err_console, fmt, handle_errors, print_json, progress, table

app = typer.Typer(
    name="audit",
    help="Audit grounded VQA annotations: kappa, consensus review, samples, adjudication, judge, gate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


def _split_list(value: Optional[str]) -> Optional[list[str]]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _categories(items_path: Optional[Path]) -> Optional[dict[str, str]]:
    if items_path is None:
        return None
    from ..io import read_table

    t = read_table(items_path, "item", columns=["id", "category"])
    return {i: c or "unknown" for i, c in zip(t.column("id").to_pylist(), t.column("category").to_pylist())}


def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


@app.command("kappa")
@handle_errors
def kappa_cmd(
    annotations: Annotated[Path, typer.Argument(help="Annotations (Parquet or JSONL).", exists=True, dir_okay=False)],
    field: Annotated[str, typer.Option("--field", help="Column or dotted path into a struct, e.g. verdicts.box_tight.")],
    raters: Annotated[Optional[str], typer.Option("--raters", help="Comma-separated raters (2: Cohen, 3+: Fleiss).")] = None,
    role: Annotated[Optional[str], typer.Option("--role", help="Only annotations of these roles (comma-separated).")] = None,
    weights: Annotated[Optional[str], typer.Option("--weights", help="linear or quadratic (Cohen, ordinal labels).")] = None,
    items: Annotated[Optional[Path], typer.Option("--items", help="Items file for the per-category breakdown.", exists=True)] = None,
    min_kappa: Annotated[Optional[float], typer.Option("--min", help="Exit 1 when kappa is below this.")] = None,
    n_boot: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples for the 95% interval.")] = 1000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Cohen's (2 raters) or Fleiss' (3+) kappa of one field, with a 95% bootstrap interval."""
    from ..audit.agreement import agreement
    from ..errors import InputError
    from ..io import read_annotations

    if weights not in (None, "linear", "quadratic"):
        raise InputError(f"Expected --weights linear or quadratic, got {weights!r}.")
    table_ = read_annotations(annotations)
    report = agreement(
        table_, field, raters=_split_list(raters), roles=_split_list(role), weights=weights,
        categories=_categories(items), n_boot=n_boot, seed=seed,
    )
    d = report.to_dict()
    if as_json:
        print_json(d)
    else:
        r = report.result
        ci = "—" if r.ci95 is None else f"[{r.ci95[0]:.3f}, {r.ci95[1]:.3f}]"
        rows = [[field, r.method, f"{r.kappa:.3f}", ci, f"{r.observed:.3f}", f"{r.expected:.3f}", r.n_items]]
        for cat, k in report.by.items():
            kci = "—" if k.ci95 is None else f"[{k.ci95[0]:.3f}, {k.ci95[1]:.3f}]"
            rows.append([f"  {cat}", k.method, f"{k.kappa:.3f}", kci, f"{k.observed:.3f}", f"{k.expected:.3f}", k.n_items])
        console.print(table(f"Agreement ({', '.join(report.raters)})", ["field / category", "method", "κ", "95% CI", "observed", "expected", "items"], rows))
        g = report.grounded
        if g is not None:
            console.print(table("Grounded agreement", ["rating pairs", "grounding κ", "count agreement", "box F1@0.5", "F1 = 1"],
                                [[g.n_pairs, f"{g.grounding_kappa:.3f}", _pct(g.count_agreement), _pct(g.box_f1), _pct(g.box_f1_perfect)]]))
        if report.n_dropped:
            err_console.print(f"{report.n_dropped} item(s) without a full set of ratings were left out.")
    if min_kappa is not None and not (report.result.kappa >= min_kappa):
        err_console.print(f"[red]kappa {report.result.kappa:.3f} is below the minimum {min_kappa}[/red]")
        raise typer.Exit(EXIT_CHECK_FAILED)


@app.command("review")
@handle_errors
def review_cmd(
    annotations: Annotated[Path, typer.Argument(help="Annotations with reviewer judgments.", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Consensus table (Parquet).")],
    items: Annotated[Optional[Path], typer.Option("--items", help="The reviewed items (answer and evidence).", exists=True)] = None,
    min_reviews: Annotated[int, typer.Option("--min-reviews")] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Consensus review: an item passes only when two reviewers pass all four checks."""
    from ..audit.review import consensus
    from ..io import read_annotations, read_table, write_table

    items_t = read_table(items, "item", columns=["id", "answer", "boxes"]) if items else None
    res = consensus(read_annotations(annotations), items_t, min_reviews=min_reviews)
    write_table(res.table, out)
    d = res.to_dict() | {"out": str(out)}
    if as_json:
        print_json(d)
        return
    console.print(table("Consensus review", ["items", "passed", "pass rate", "disagreements"],
                        [[res.n_items, res.n_passed, _pct(d["pass_rate"]), res.n_disagreements]]))
    if res.reasons:
        console.print(table("Reasons", ["reason", "items"], [[k, v] for k, v in sorted(res.reasons.items())]))
    dis = [r for r in res.table.to_pylist() if r["disagreement"]][:20]
    if dis:
        rows = []
        for r in dis:
            js = r["judgments"]
            rows.append([r["item_id"]] + [
                f"{j['reviewer']}: {j['decision']} " + "".join("✓" if j[k] else "✗" for k in ("box_tight", "category_correct", "question_natural", "answer_evidence_agree"))
                for j in js[:2]
            ])
        console.print(table("For adjudication (first 20)", ["item", "reviewer 1", "reviewer 2"], rows))
    console.print(f"Wrote {out}")


@app.command("sample")
@handle_errors
def sample_cmd(
    items: Annotated[Path, typer.Argument(help="Items (Parquet or JSONL).", exists=True)],
    n: Annotated[int, typer.Option("--n", help="Sample size.")],
    out: Annotated[Path, typer.Option("--out", help="The sample (Parquet); a blind copy goes beside it.")],
    stratify: Annotated[str, typer.Option("--stratify", help="Comma-separated columns.")] = "split,category",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Stratified random sample for blind re-adjudication (proportional, largest remainder)."""
    from ..audit.sample import blind, stratified_sample
    from ..io import read_table, write_table

    columns = _split_list(stratify) or []
    # Choose on the light columns; then read only the chosen rows (a release embeds its images).
    light = read_table(items, "item", columns=list(dict.fromkeys(["id", *columns])))
    res = stratified_sample(light, n, stratify=columns, seed=seed)
    chosen = read_table(items, "item", ids=res.table.column("id").to_pylist())
    write_table(chosen, out)
    blind_path = out.with_name(out.stem + ".blind.parquet")
    write_table(blind(chosen), blind_path)
    d = res.to_dict() | {"out": str(out), "blind": str(blind_path)}
    if as_json:
        print_json(d)
        return
    console.print(table(f"Sample of {res.table.num_rows}", ["stratum", "population", "drawn"],
                        [[k, p, dr] for k, (p, dr) in res.allocation.items()]))
    console.print(f"Wrote {out} and the blind copy {blind_path} (answers and evidence removed).")


@app.command("adjudicate")
@handle_errors
def adjudicate_cmd(
    released: Annotated[Path, typer.Argument(help="Released items (Parquet file or release directory).", exists=True)],
    adjudications: Annotated[Path, typer.Argument(help="Adjudicators' annotations.", exists=True)],
    adjudicators: Annotated[Optional[str], typer.Option("--adjudicators", help="A,B (default: the two most active).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Confirmation rates, count-box agreement and inter-adjudicator kappa, as the paper reports."""
    from ..audit.adjudicate import adjudicate
    from ..io import read_annotations, read_table

    rel = read_table(released, "item", columns=["id", "answer", "boxes", "qtype"])
    rep = adjudicate(rel, read_annotations(adjudications), adjudicators=_split_list(adjudicators))
    if as_json:
        print_json(rep.to_dict())
        return
    console.print(table(
        f"Blind re-adjudication ({', '.join(rep.adjudicators)})",
        ["items", "answers confirmed", "evidence confirmed", "count-box agreement", "κ answers", "κ evidence", "disputed"],
        [[rep.n_items, _pct(rep.answer_confirmed), _pct(rep.evidence_confirmed),
          f"{_pct(rep.count_box_agreement)} of {rep.n_counting}", fmt(rep.kappa_answer), fmt(rep.kappa_evidence), len(rep.disputed)]],
    ))


@app.command("judge")
@handle_errors
def judge_cmd(
    items: Annotated[Path, typer.Argument(help="Items to audit, with images (Parquet or release directory).", exists=True)],
    model: Annotated[str, typer.Option("--model", help="Judge model name on the server.")],
    base_url: Annotated[str, typer.Option("--base-url", help="OpenAI-compatible URL ending in /v1.")],
    out: Annotated[Path, typer.Option("--out", help="Judgments (Parquet).")],
    api_key_env: Annotated[str, typer.Option("--api-key-env", help="Environment variable holding the key.")] = "OPENAI_API_KEY",
    calibrate: Annotated[bool, typer.Option("--calibrate", help="Also judge corrupted copies; report detection rates.")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency")] = 8,
    cache: Annotated[Optional[Path], typer.Option("--cache", help="On-disk cache directory.")] = None,
    max_side: Annotated[int, typer.Option("--max-side")] = 1024,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Judge only the first N items.")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """An MLLM judge checks answers, evidence and count-box agreement; --calibrate measures it."""
    from ..audit.judge import judge
    from ..io import read_table, write_table
    from ..llm import LLMClient, LLMConfig

    t = read_table(items, "item")
    if limit is not None:
        t = t.slice(0, limit)
    client = LLMClient(LLMConfig(base_url, model, api_key_env=api_key_env, concurrency=concurrency, cache_dir=cache))
    with progress() as bar:
        task = bar.add_task("judging", total=t.num_rows * (5 if calibrate else 1))
        rep = judge(t, client, calibrate=calibrate, seed=seed, max_side=max_side, progress=lambda k: bar.advance(task, k))
    write_table(rep.table, out)
    if as_json:
        print_json(rep.to_dict() | {"out": str(out)})
        return
    console.print(table(f"Judge audit of {rep.n_items} items", ["answer correct", "evidence correct", "count matches", "all correct", "errors"],
                        [[_pct(rep.rates["answer_correct"]), _pct(rep.rates["evidence_correct"]), _pct(rep.rates["count_matches"]),
                          _pct(rep.rates["all_correct"]), rep.errors]]))
    if rep.detection:
        console.print(table("Calibration: detection of corrupted evidence", ["corruption", "copies", "judged", "detected"],
                            [[k, v["n"], v["judged"], _pct(v["detection_rate"])] for k, v in rep.detection.items()]))
        console.print("The audit is a floor: a judge that misses corruptions also misses real errors.")
    console.print(f"Wrote {out}")


@app.command("gate")
@handle_errors
def gate_cmd(
    items: Annotated[Path, typer.Argument(help="Annotated items (Parquet or JSONL).", exists=True)],
    annotations: Annotated[Path, typer.Option("--annotations", help="Reviewer (and pair) annotations.", exists=True)],
    out: Annotated[Path, typer.Option("--out", help="Release directory (written only if the gate passes).")],
    min_kappa: Annotated[float, typer.Option("--min-kappa")] = 0.8,
    kappa_field: Annotated[str, typer.Option("--kappa-field", help="Reviewer field whose kappa gates.")] = "decision",
    test_fraction: Annotated[float, typer.Option("--test-fraction")] = 0.15,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Admit items that pass review and schema checks; refuse (exit 1, no release) a failing dataset."""
    from ..audit.gate import gate, render_gate_markdown
    from ..errors import GateError
    from ..io import read_annotations, read_table

    try:
        rep = gate(read_table(items, "item"), read_annotations(annotations), out, min_kappa=min_kappa,
                   kappa_field=kappa_field, test_fraction=test_fraction, seed=seed)
    except GateError as exc:
        report = getattr(exc, "report", None)
        if report is not None:
            if as_json:
                print_json(report.to_dict())
            else:
                console.print(render_gate_markdown(report))
        raise
    if as_json:
        print_json(rep.to_dict())
        return
    console.print(render_gate_markdown(rep))
    console.print(f"Released {rep.n_admitted} items into {out}; the gate report is {out / 'gate' / 'report.md'}.")

