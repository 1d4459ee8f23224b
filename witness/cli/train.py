"""`witness train` verbs: sft, ecpo, convlm (TRL + PEFT), tiny-model, smoke.

Every field of a recipe dataclass (:class:`witness.train.sft.SFTRecipe`, ...) is a flag of its verb,
with the field's help text, so the defaults live in one place (the paper's recipes).
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from ._common import console, handle_errors, print_json, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def _field_type(f: dataclasses.Field) -> Any:
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    base = t.replace(" ", "").split("|")
    optional = "None" in base
    py = _TYPES[[b for b in base if b != "None"][0]]
    return Optional[py] if optional else py


def _render(result: dict, as_json: bool, title: str) -> None:
    if as_json:
        print_json(result)
        return
    rows = [[k, v] for k, v in result.items() if k != "log_history"]
    console.print(table(title, ["key", "value"], rows))


def _recipe_verb(name: str, recipe_cls: type, runner_path: str, help_text: str) -> Callable:
    """Build a typer verb whose options are the recipe's fields."""

    def verb(**kwargs: Any) -> None:
        import contextlib
        import importlib
        import os
        import sys

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        data, model, out, as_json = kwargs.pop("data"), kwargs.pop("model"), kwargs.pop("out"), kwargs.pop("as_json")
        recipe = recipe_cls(**kwargs)
        mod, _, attr = runner_path.partition(":")
        runner = getattr(importlib.import_module(mod), attr)
        with contextlib.redirect_stdout(sys.stderr):  # trainer logs must not mix with --json
            result = runner(data, model, out, recipe).to_dict()
        result.pop("log_history", None)
        if int(os.environ.get("RANK", "0")) != 0:  # under torchrun / accelerate: one report, from rank 0
            return
        _render(result, as_json, f"witness train {name}")

    params = [
        inspect.Parameter("data", inspect.Parameter.KEYWORD_ONLY,
                          annotation=Annotated[Path, typer.Option("--data", help="Release directory (holds data/).", exists=True, file_okay=False)]),
        inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY,
                          annotation=Annotated[Path, typer.Option("--model", help="Local model directory (no hub).", exists=True, file_okay=False)]),
        inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY,
                          annotation=Annotated[Path, typer.Option("--out", help="Where the adapter is written.")]),
    ]
    for f in dataclasses.fields(recipe_cls):
        typ = _field_type(f)
        flag = "--" + f.name.replace("_", "-")
        decl = [flag] if typ is not bool and typ != Optional[bool] else [f"{flag}/--no-{f.name.replace('_', '-')}"]
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                        annotation=Annotated[typ, typer.Option(*decl, help=f.metadata.get("help", ""))]))
    params.append(inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False,
                                    annotation=Annotated[bool, typer.Option("--json", help="Print JSON.")]))
    verb.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    verb.__doc__ = help_text
    verb.__name__ = name.replace("-", "_")
    return handle_errors(verb)


def _register() -> None:
    from ..train.convlm import ConVLMRecipe
    from ..train.ecpo import ECPORecipe
    from ..train.sft import SFTRecipe

    app.command("sft", help="EtA-SFT (or --order standard) with a LoRA adapter: the paper's recipe by default.")(
        _recipe_verb("sft", SFTRecipe, "witness.train.sft:run_sft", "EtA-SFT with TRL's SFTTrainer."))
    app.command("ecpo", help="ECPO: GRPO with the consensus reward (or --reward grpo|recall baselines).")(
        _recipe_verb("ecpo", ECPORecipe, "witness.train.ecpo:run_ecpo", "ECPO with TRL's GRPOTrainer."))
    app.command("convlm", help="ConVLM: GRPO on equivalent pairs, r = r_acc + gamma r_con.")(
        _recipe_verb("convlm", ConVLMRecipe, "witness.train.convlm:run_convlm", "ConVLM with TRL's GRPOTrainer."))


_register()


@app.command("tiny-model")
@handle_errors
def tiny_model(
    family: Annotated[str, typer.Option("--family", help="qwen2-vl, qwen2.5-vl or qwen3-vl.")] = "qwen2.5-vl",
    out: Annotated[Path, typer.Option("--out", help="Directory to write the model, tokenizer and processor.")] = Path("tiny-model"),
    hidden: Annotated[int, typer.Option("--hidden", help="Hidden size of the language model.")] = 64,
    layers: Annotated[int, typer.Option("--layers", help="Language-model layers.")] = 2,
    max_image_tokens: Annotated[int, typer.Option("--max-image-tokens", help="Visual tokens per image at most.")] = 16,
    seed: Annotated[int, typer.Option("--seed", help="Initialisation seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Build a tiny random Qwen-VL model offline (locally built tokenizer and processor; no hub)."""
    import contextlib
    import sys

    from ..train.tiny import build_tiny_model

    with contextlib.redirect_stdout(sys.stderr):
        path = build_tiny_model(family, out, hidden=hidden, layers=layers, max_image_tokens=max_image_tokens, seed=seed)
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    _render({"family": family, "out": str(path), "bytes": size}, as_json, "witness train tiny-model")


@app.command("merge")
@handle_errors
def merge(
    model: Annotated[Path, typer.Option("--model", help="Base model directory.", exists=True, file_okay=False)],
    adapter: Annotated[Path, typer.Option("--adapter", help="LoRA adapter to merge.", exists=True, file_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Merged model directory (written atomically).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Merge a LoRA adapter into its base model (e.g. EtA-SFT before ECPO)."""
    import contextlib
    import os
    import sys

    from ..train.common import merge_adapter

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with contextlib.redirect_stdout(sys.stderr):
        path = merge_adapter(model, adapter, out)
    _render({"model": str(model), "adapter": str(adapter), "out": str(path)}, as_json, "witness train merge")


@app.command("smoke")
@handle_errors
def smoke(
    data: Annotated[Path, typer.Option("--data", help="Release directory.", exists=True, file_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Work directory.")] = Path("smoke-run"),
    steps: Annotated[int, typer.Option("--steps", help="SFT steps.")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """SMOKE RUN (tiny random model): a few SFT steps, then predictions on a few test items."""
    import contextlib
    import sys

    from ..train.smoke import run_smoke

    with contextlib.redirect_stdout(sys.stderr):
        result = run_smoke(data, out, steps=steps)
    _render(result, as_json, "witness train smoke (SMOKE RUN)")

