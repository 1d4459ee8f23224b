"""`witness draft llm`: draft grounded questions (or logically equivalent pairs) with any
OpenAI-compatible server (OpenAI, vLLM, Ollama, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import EXIT_CHECK_FAILED, console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


def _split_types(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out.extend(t.strip() for t in v.split(",") if t.strip())
    return tuple(out)


@app.command("llm")
@handle_errors
def llm(
    scenes: Annotated[Path, typer.Argument(help="Scenes file (Parquet or JSONL).", exists=True, dir_okay=True, readable=True)],
    model: Annotated[str, typer.Option("--model", help="Model name on the server (e.g. gpt-4.1, Qwen/Qwen2.5-VL-7B-Instruct, qwen2.5vl:7b).")],
    base_url: Annotated[str, typer.Option("--base-url", help="OpenAI-compatible base URL ending in /v1.")],
    out: Annotated[Path, typer.Option("--out", help="Drafts file (Parquet); rejects go to <stem>.rejects.jsonl beside it.")],
    api_key_env: Annotated[str, typer.Option("--api-key-env", help="Environment variable holding the API key (never logged or written).")] = "OPENAI_API_KEY",
    types: Annotated[Optional[list[str]], typer.Option("--types", help="Question types, comma-separated or repeated (default: all LLM types; with --pairs: existence, counting, comparison, spatial, attribute, reasoning).")] = None,
    pairs: Annotated[bool, typer.Option("--pairs", help="Draft logically equivalent question pairs (ConVLM proposer) instead of single questions.")] = False,
    per_type: Annotated[int, typer.Option("--per-type", help="Questions per type per scene.", min=1)] = 1,
    n_pairs: Annotated[int, typer.Option("--n-pairs", help="Pairs per scene with --pairs.", min=1)] = 3,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests in flight at once.", min=1)] = 8,
    max_side: Annotated[int, typer.Option("--max-side", help="Downscale images so the longer side is at most this many pixels.", min=32)] = 1024,
    cache: Annotated[Optional[Path], typer.Option("--cache", help="Cache directory (default: <out stem>.llm-cache beside --out).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache replies (a re-run sends every request again).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request attempt.", min=0.001)] = 60.0,
    max_retries: Annotated[int, typer.Option("--max-retries", help="Retries on 429, 5xx and timeouts.", min=0)] = 5,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature.")] = 0.0,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Completion token limit.")] = None,
    structured: Annotated[bool, typer.Option("--structured/--no-structured", help="Ask for JSON-schema structured output (falls back to text if refused).")] = True,
    price_prompt: Annotated[float, typer.Option("--price-prompt", help="Price per 1K prompt tokens, for the cost estimate.")] = 0.0,
    price_completion: Annotated[float, typer.Option("--price-completion", help="Price per 1K completion tokens.")] = 0.0,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Draft only the first N scenes.", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Draft grounded questions for every scene with an LLM; refused drafts go to the rejects file.

    Exit 0 when every request was answered, 1 when some failed after retries (re-run: answered
    requests come from the cache), 2 on bad input.
    """
    from ..annotate.llm_drafts import LLM_QTYPES, PAIR_QTYPES, DraftConfig, draft_llm, write_drafts
    from ..io import read_scenes
    from ..llm import LLMClient, LLMConfig

    config = DraftConfig(qtypes=_split_types(types) or (PAIR_QTYPES if pairs else LLM_QTYPES), per_type=per_type, pairs=pairs, n_pairs=n_pairs,
                         max_side=max_side, structured=structured)
    cache_dir = None if no_cache else (cache or out.with_name(out.stem + ".llm-cache"))
    llm_config = LLMConfig(base_url, model, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries,
                           concurrency=concurrency, cache_dir=cache_dir, temperature=temperature, max_tokens=max_tokens,
                           price_prompt_per_1k=price_prompt, price_completion_per_1k=price_completion)
    scenes_table, _ = read_scenes(scenes)
    if limit is not None:
        scenes_table = scenes_table.slice(0, limit)
    client = LLMClient(llm_config)
    with progress() as bar:
        task = bar.add_task("drafting", total=len(scenes_table))
        result = draft_llm(scenes_table, client, config, progress=lambda n: bar.advance(task, n))
    drafts_path, rejects_file = write_drafts(result, out)
    s = result.summary
    summary = {**s.as_dict(), "out": str(drafts_path), "rejects_file": str(rejects_file),
               "cache": None if cache_dir is None else str(cache_dir)}
    if as_json:
        print_json(summary)
    else:
        rows = [[k, summary[k]] for k in ("model", "scenes", "requests", "cached", "failed", "retries", "accepted",
                                          "verified", "unverified", "rejected", "prompt_tokens", "completion_tokens",
                                          "cost", "seconds")]
        rows += [[f"rejected: {reason}", n] for reason, n in s.reasons.items()]
        rows += [["drafts", summary["out"]], ["rejects", summary["rejects_file"]]]
        console.print(table(f"witness draft llm ({'pairs' if pairs else 'questions'})", ["", "value"], rows))
    if s.failed:
        raise typer.Exit(EXIT_CHECK_FAILED)
