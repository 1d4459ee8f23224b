"""Benchmark: model-output parsers (outputs/s per format) and text metrics (seconds per corpus).

Usage::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/parsers.py [--n 2000] [--text-n 500] [--no-text]

Each parser reads ``n`` synthetic outputs of its family with 5 boxes each on a 640x480 image; the
text metrics score ``text-n`` short answers against references. Numbers go to stdout as a table.
"""

from __future__ import annotations

import argparse
import random
import time

from witness.eval.parse import get_format
from witness.eval.qwen_resize import smart_resize


def _outputs(name: str, rng: random.Random, n_boxes: int = 5) -> str:
    boxes = []
    for _ in range(n_boxes):
        x1, y1 = rng.randint(0, 400), rng.randint(0, 400)
        boxes.append((x1, y1, x1 + rng.randint(1, 500), y1 + rng.randint(1, 500)))
    g = [(a, b, c, d) for a, b, c, d in boxes]
    if name in ("eta", "answer-then-ground"):
        inner = ", ".join(f"[{a}, {b}, {c}, {d}]" for a, b, c, d in g)
        return f"<boxes>[{inner}]</boxes>\n<answer>5 cars</answer>"
    if name == "json":
        inner = ", ".join(f"[{a * 0.64:.1f}, {b * 0.48:.1f}, {c * 0.64:.1f}, {d * 0.48:.1f}]" for a, b, c, d in g)
        return f'{{"answer": "5 cars", "boxes": [{inner}]}}'
    if name == "qwen2-vl":
        return "5 cars: " + " ".join(
            f"<|object_ref_start|>car<|object_ref_end|><|box_start|>({a},{b}),({c},{d})<|box_end|>" for a, b, c, d in g)
    if name in ("qwen2.5-vl", "qwen3-vl"):
        scale = (0.644, 0.476) if name == "qwen2.5-vl" else (1, 1)
        inner = ", ".join(f'{{"bbox_2d": [{a * scale[0]:.0f}, {b * scale[1]:.0f}, {c * scale[0]:.0f}, {d * scale[1]:.0f}], "label": "car"}}'
                          for a, b, c, d in g)
        return f"5 cars\n```json\n[{inner}]\n```"
    if name == "gemini":
        inner = ", ".join(f'{{"box_2d": [{b}, {a}, {d}, {c}], "label": "car"}}' for a, b, c, d in g)
        return f"5 cars\n```json\n[{inner}]\n```"
    if name == "internvl":
        inner = ", ".join(f"[{a}, {b}, {c}, {d}]" for a, b, c, d in g)
        return f"<ref>5 cars</ref><box>[{inner}]</box>"
    if name == "shikra":
        inner = ";".join(f"{a / 1000:.3f},{b / 1000:.3f},{c / 1000:.3f},{d / 1000:.3f}" for a, b, c, d in g)
        return f"There are 5 cars[{inner}]."
    if name == "florence2":
        return "5 cars" + "".join(f"<loc_{min(a, 999)}><loc_{min(b, 999)}><loc_{min(c, 999)}><loc_{min(d, 999)}>" for a, b, c, d in g)
    if name == "paligemma":
        return " ; ".join(f"<loc{b:04d}><loc{a:04d}><loc{d:04d}><loc{c:04d}> car" for a, b, c, d in g)
    raise KeyError(name)


NAMES = ["eta", "answer-then-ground", "json", "qwen2-vl", "qwen2.5-vl", "qwen3-vl", "internvl", "shikra",
         "florence2", "paligemma", "gemini"]


def bench_parsers(n: int) -> None:
    rng = random.Random(0)
    print(f"{'format':<20} {'outputs/s':>12} {'parse rate':>11}")
    for name in NAMES:
        fmt = get_format(name)
        texts = [_outputs(name, rng) for _ in range(n)]
        t = time.perf_counter()
        ok = sum(fmt.parse(x, width=640, height=480).ok for x in texts)
        dt = time.perf_counter() - t
        print(f"{name:<20} {n / dt:>12,.0f} {ok / n:>11.3f}")
    t = time.perf_counter()
    for i in range(20000):
        smart_resize(100 + i % 3000, 100 + (7 * i) % 3000)
    print(f"{'smart_resize':<20} {20000 / (time.perf_counter() - t):>12,.0f} calls/s")


def bench_text(n: int) -> None:
    from witness.eval.text import BERTSCORE_ENCODER, text_metrics

    rng = random.Random(1)
    words = "car bus truck red blue two three parked left right near the a on at stop road".split()
    preds = [" ".join(rng.choices(words, k=rng.randint(1, 8))) for _ in range(n)]
    refs = [" ".join(rng.choices(words, k=rng.randint(1, 8))) for _ in range(n)]
    print(f"\ntext metrics on {n} pairs (BERTScore encoder: {BERTSCORE_ENCODER})")
    for metrics in [("bleu", "rougeL", "cider"), ("meteor",), ("bertscore",)]:
        t = time.perf_counter()
        r = text_metrics(preds, refs, metrics=metrics)
        dt = time.perf_counter() - t
        print(f"{'+'.join(metrics):<20} {dt:>8.2f} s   " + "  ".join(f"{k}={v:.4f}" for k, v in r.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--text-n", type=int, default=500)
    ap.add_argument("--no-text", action="store_true")
    args = ap.parse_args()
    bench_parsers(args.n)
    if not args.no_text:
        bench_text(args.text_n)


if __name__ == "__main__":
    main()
