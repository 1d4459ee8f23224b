"""`witness eval predict`: checkpoint to predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.command("predict")
@handle_errors
def predict(
    data: Annotated[Path, typer.Option("--data", help="Release directory (holds data/).", exists=True, file_okay=False)],
    model: Annotated[Path, typer.Option("--model", help="Local base model directory.", exists=True, file_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Predictions JSONL (appended; ids already there are skipped).")],
    split: Annotated[str, typer.Option("--split", help="Release split.")] = "test",
    adapter: Annotated[Optional[Path], typer.Option("--adapter", help="LoRA adapter directory.", exists=True, file_okay=False)] = None,
    fmt: Annotated[Optional[str], typer.Option("--format", help="Output format to parse (default: from the adapter's order, eta).")] = None,
    order: Annotated[Optional[str], typer.Option("--order", help="Prompt order: eta or standard (default: the adapter's).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Predict only the first N items.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Items per generation batch.")] = 8,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Token cap per output.")] = 640,
    max_pixels: Annotated[Optional[int], typer.Option("--max-pixels", help="Pixel cap per image (default: the adapter's training cap, else none).")] = None,
    engine: Annotated[str, typer.Option("--engine", help="auto (vLLM when installed and on a GPU), transformers or vllm.")] = "auto",
    shard: Annotated[Optional[str], typer.Option("--shard", help="K/N: predict only items i with i % N == K (one process per GPU).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Generate predictions (raw text beside the parsed answer and pixel boxes) for `witness eval`."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    shard_kn = None
    if shard is not None:
        try:
            k, n = (int(v) for v in shard.split("/"))
        except ValueError:
            from ..errors import InputError

            raise InputError(f"Expected --shard K/N (two integers), got {shard!r}. Example: --shard 0/8.") from None
        shard_kn = (k, n)
    import contextlib
    import sys

    from ..train.predict import run_predict

    with progress() as bar, contextlib.redirect_stdout(sys.stderr):
        task = bar.add_task("predict", total=limit)
        summary = run_predict(data, model, out, split=split, adapter=adapter, fmt=fmt, order=order, limit=limit,
                              batch_size=batch_size, max_new_tokens=max_new_tokens, max_pixels=max_pixels,
                              engine=engine, shard=shard_kn, on_batch=lambda n: bar.advance(task, n))
    result = summary.to_dict()
    if as_json:
        print_json(result)
    else:
        console.print(table("witness eval predict", ["key", "value"], [[k, v] for k, v in result.items()]))
