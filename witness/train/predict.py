"""Inference: a checkpoint (plus an optional LoRA adapter) to predictions JSONL for ``witness eval``.

Batched greedy generation through transformers (vLLM when installed and asked for), with the same
prompt as training (:func:`witness.train.data.build_prompt`). Each output line keeps the raw text
beside what the named output format parsed (pixels of the original image)::

    {"id": "q1", "raw": "<boxes>...</boxes>\\n<answer>2 cars</answer>", "format": "eta",
     "answer": "2 cars", "boxes": [[x1, y1, x2, y2], ...]}

An output that does not parse keeps only ``id``, ``raw``, ``format`` and ``parse_error``: the
evaluator's parser then counts it as unparsed (never as an empty prediction). The run is
resumable: ids already in the output file are skipped, and a torn last line (a crash mid-write)
is dropped before appending.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import orjson

from ..errors import InputError, require
from ..eval.parse import get_format, parse
from .serialize import ORDER_FORMAT

__all__ = ["PredictSummary", "existing_ids", "run_predict", "prediction_line"]


@dataclass(frozen=True)
class PredictSummary:
    """What a prediction run did."""

    out: str
    written: int
    skipped: int
    parsed: int
    seconds: float
    engine: str

    @property
    def parse_rate(self) -> float | None:
        return None if self.written == 0 else self.parsed / self.written

    def to_dict(self) -> dict:
        return {"out": self.out, "written": self.written, "skipped": self.skipped, "parsed": self.parsed,
                "parse_rate": self.parse_rate, "seconds": self.seconds, "engine": self.engine}


def existing_ids(path: str | os.PathLike) -> set[str]:
    """Ids already written to ``path`` (missing file: none). A torn last line is removed in place.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "p.jsonl"
    >>> _ = p.write_text('{"id": "a", "raw": "x"}\\n{"id": "b", "ra')
    >>> sorted(existing_ids(p)), p.read_text()
    (['a'], '{"id": "a", "raw": "x"}\\n')
    """
    path = Path(path)
    if not path.exists():
        return set()
    data = path.read_bytes()
    lines = data.split(b"\n")
    ids: set[str] = set()
    good_end = 0
    pos = 0
    for k, line in enumerate(lines):
        end = pos + len(line) + (1 if k < len(lines) - 1 else 0)
        if line.strip():
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                if k == len(lines) - 1 or all(not rest.strip() for rest in lines[k + 1 :]):
                    break  # a torn tail: drop it
                raise InputError(f"Expected JSON on every line, got a malformed line ({path} line {k + 1}). Fix or remove it.") from None
            ids.add(str(obj.get("id")))
        good_end = end
        pos = end
    if good_end < len(data):
        tail = data[:good_end]
        if tail and not tail.endswith(b"\n"):
            tail += b"\n"
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(tail)
        os.replace(tmp, path)
    return ids


def prediction_line(item_id: str, raw: str, fmt: str, width: float, height: float) -> dict:
    """One output line: the raw text and, where it parses, the answer and pixel boxes.

    >>> prediction_line("q1", "<boxes>[[0, 0, 500, 500]]</boxes>\\n<answer>1 car</answer>", "eta", 640, 480)["boxes"]
    [[0.0, 0.0, 320.0, 240.0]]
    >>> sorted(prediction_line("q2", "gibberish", "eta", 640, 480))
    ['format', 'id', 'parse_error', 'raw']
    """
    p = parse(raw, fmt, width=width, height=height)
    if not p.ok:
        return {"id": item_id, "raw": raw, "format": fmt, "parse_error": p.reason}
    return {"id": item_id, "raw": raw, "format": fmt, "answer": p.answer,
            "boxes": [[float(v) for v in b] for b in p.boxes.tolist()]}


def _recipe_of(adapter: str | os.PathLike | None) -> dict:
    """The training recipe recorded in the adapter's run card (``{}`` without one)."""
    from .common import read_run_card

    card = read_run_card(adapter) if adapter is not None else None
    recipe = (card or {}).get("recipe")
    return recipe if isinstance(recipe, dict) else {}


def _order_of(adapter: str | os.PathLike | None) -> str:
    order = _recipe_of(adapter).get("order")
    return order if order in ORDER_FORMAT else "eta"


def _adapters_for(model_path: str | os.PathLike, adapter: str | os.PathLike | None) -> list[str]:
    """The adapters to merge into ``model_path``, in order, to get the policy ``adapter`` was trained as.

    An ECPO / ConVLM run with ``--sft-adapter`` trained on ``--model`` with that SFT adapter merged
    in; when ``model_path`` is that run's own base model (its run card's ``base_model``), the SFT
    adapter is merged first, else the trained adapter would sit on a model it never saw. A merged
    checkpoint (``witness train merge``) passed as ``model_path`` needs nothing more.
    """
    if adapter is None:
        return []
    from .common import read_run_card

    card = read_run_card(adapter) or {}
    sft = _recipe_of(adapter).get("sft_adapter")
    base = card.get("base_model")
    if not sft or not base or Path(model_path).resolve() != Path(base).resolve():
        return [str(adapter)]
    if not (Path(sft) / "adapter_config.json").exists():
        raise InputError(
            f"Expected the SFT adapter {sft!r} that {str(adapter)!r} was trained on top of (its run card's "
            f"recipe.sft_adapter), got no adapter_config.json there. Merge it into the base with `witness train "
            "merge` and pass the merged model as --model."
        )
    return [str(sft), str(adapter)]


def _max_pixels_of(adapter: str | os.PathLike | None) -> int | None:
    """The pixel cap the adapter was trained with (its run card), so inference sees images as training did."""
    v = _recipe_of(adapter).get("max_pixels")
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _generate_transformers(model, processor, prompts: list[str], images: list, max_new_tokens: int) -> list[str]:
    torch = require("torch", "train")
    tok = processor.tokenizer
    old_side = tok.padding_side
    tok.padding_side = "left"
    try:
        inputs = processor(text=prompts, images=images, return_tensors="pt", padding=True)
    finally:
        tok.padding_side = old_side
    inputs = {k: (v.to(model.device) if hasattr(v, "to") else v) for k, v in inputs.items()}
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tok.pad_token_id)
    new = out[:, inputs["input_ids"].shape[1]:]
    return processor.batch_decode(new, skip_special_tokens=True)


def run_predict(
    data_dir: str | os.PathLike,
    model_path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    split: str = "test",
    adapter: str | os.PathLike | None = None,
    fmt: str | None = None,
    order: str | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    max_new_tokens: int = 640,
    max_pixels: int | None = None,
    engine: str = "auto",
    shard: tuple[int, int] | None = None,
    on_batch: Callable[[int], Any] | None = None,
) -> PredictSummary:
    """Generate predictions for ``split`` of a release and append them to ``out`` (JSONL).

    ``order`` (``eta`` / ``standard``) sets the prompt and, unless ``fmt`` is given, the parser
    (``eta`` / ``answer-then-ground``); by default it comes from the adapter's run card, else
    ``eta``. ``max_pixels`` (the image cap) likewise defaults to the run card's, else no cap.
    ``engine``: ``transformers``, ``vllm``, or ``auto`` (vLLM when importable and a GPU is present).
    ``shard=(k, n)`` predicts only the items whose position ``i`` in the split has ``i % n == k``
    (one process per GPU, each with its own output file; concatenate them after).
    ``on_batch(n)`` is called after each batch with the number of items written.
    """
    from .data import cap_image, load_split, user_message

    if batch_size < 1:
        raise InputError(f"Expected --batch-size >= 1, got {batch_size}.")
    if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
        raise InputError(f"Expected --shard K/N with 0 <= K < N, got {shard[0]}/{shard[1]}.")
    order = order or _order_of(adapter)
    if order not in ORDER_FORMAT:
        raise InputError(f"Expected an order in {list(ORDER_FORMAT)}, got {order!r} (--order). Use eta or standard.")
    fmt = fmt or ORDER_FORMAT[order]
    if max_pixels is None:
        max_pixels = _max_pixels_of(adapter)
    get_format(fmt)  # unknown names fail before any model loads
    t0 = time.time()
    ds = load_split(data_dir, split, limit=limit)
    done = existing_ids(out)
    mine = range(len(ds)) if shard is None else range(shard[0], len(ds), shard[1])
    ids = ds["id"]
    todo = [i for i in mine if ids[i] not in done]
    skipped = len(mine) - len(todo)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not todo:
        return PredictSummary(str(out), 0, skipped, 0, time.time() - t0, "none")
    use_vllm = engine == "vllm"
    if engine == "auto":
        import importlib.util

        torch = require("torch", "train")
        use_vllm = importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()
    elif engine not in ("transformers", "vllm"):
        raise InputError(f"Expected --engine auto, transformers or vllm, got {engine!r}.")
    written = parsed = 0
    adapters = _adapters_for(model_path, adapter)
    if use_vllm:
        if len(adapters) > 1:
            raise InputError(
                f"Expected one adapter for --engine vllm, got {adapters} ({adapter} was trained on top of an SFT "
                "adapter). Merge the SFT adapter with `witness train merge` and pass the merged model as --model."
            )
        gen = _vllm_generator(model_path, adapter, max_new_tokens, max_pixels)
    else:
        from .common import load_policy

        torch = require("torch", "train")
        model, processor = load_policy(model_path, adapter=adapters, max_pixels=max_pixels,
                                       bf16=bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported()))
        if torch.cuda.is_available():
            model = model.to("cuda")
        model.eval()

        def gen(prompts_msgs, images):
            texts = [processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in prompts_msgs]
            return _generate_transformers(model, processor, texts, images, max_new_tokens)

    with open(out, "ab") as fh:
        for start in range(0, len(todo), batch_size):
            rows = ds.select(todo[start : start + batch_size])
            msgs = [[user_message(q, order)] for q in rows["question"]]
            images = [cap_image(img, max_pixels) for img in rows["image"]]
            raws = gen(msgs, images)
            for item_id, raw, w, h in zip(rows["id"], raws, rows["width"], rows["height"], strict=True):
                line = prediction_line(item_id, raw, fmt, w, h)
                parsed += "answer" in line
                fh.write(orjson.dumps(line) + b"\n")
                written += 1
            fh.flush()
            os.fsync(fh.fileno())
            if on_batch is not None:
                on_batch(len(rows))
    return PredictSummary(str(out), written, skipped, parsed, time.time() - t0, "vllm" if use_vllm else "transformers")


def _vllm_generator(model_path, adapter, max_new_tokens: int, max_pixels: int | None):  # pragma: no cover - GPU only
    """Generation through vLLM (LoRA request for the adapter); needs a GPU and ``pip install vllm``."""
    vllm = require("vllm", "train")
    from vllm.lora.request import LoRARequest

    from .tiny import load_processor

    processor = load_processor(model_path, max_pixels=max_pixels)
    llm = vllm.LLM(model=str(model_path), enable_lora=adapter is not None, max_lora_rank=64,
                   limit_mm_per_prompt={"image": 1})
    params = vllm.SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
    lora = LoRARequest("adapter", 1, str(adapter)) if adapter is not None else None

    def gen(prompts_msgs, images):
        reqs = [{"prompt": processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False),
                 "multi_modal_data": {"image": img}} for m, img in zip(prompts_msgs, images, strict=True)]
        outs = llm.generate(reqs, params, lora_request=lora)
        return [o.outputs[0].text for o in outs]

    return gen
