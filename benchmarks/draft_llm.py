"""Benchmark `witness draft llm`: 500 scenes against a loopback OpenAI-compatible server that answers
every request in 200 ms, at concurrency 16.

Ideal wall time = 500 x 0.2 s / 16 = 6.25 s; the target is within 1.3x (8.125 s). The measured time
covers the whole `draft_llm` call: building 500 prompts (image data URLs), the requests, writing each
answer to the on-disk cache, validating the replies and the Items table. A second run measures the
re-run from the cache (no request sent).

Usage: .venv/bin/python benchmarks/draft_llm.py [--scenes 500] [--concurrency 16] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import tempfile
import time
from pathlib import Path

from PIL import Image

from witness.annotate.llm_drafts import DraftConfig, draft_llm
from witness.llm import LLMClient, LLMConfig
from witness.schema import scene_record, scenes_table
from witness.testing import Delay, OpenAIServer, completion


def _scenes(root: Path, n: int):
    rows = []
    for i in range(n):
        path = root / f"img{i:04d}.png"
        Image.new("RGB", (640, 480), (i % 255, 80, 120)).save(path)
        objs = [{"id": f"s{i}-o{k}", "label": "car" if k % 2 else "person", "box": [10 + 60 * k, 20, 60 + 60 * k, 90],
                 "attributes": {"color": "red"} if k == 1 else {}} for k in range(1, 6)]
        rows.append(scene_record(f"s{i}", 640, 480, objs, image=str(path)))
    return scenes_table(rows)


def _reply(req: dict) -> str:
    s = re.search(r'"id": "([^"]+)-o1"', req["messages"][1]["content"][0]["text"]).group(1)
    return json.dumps({"drafts": [
        {"qtype": "counting", "question": "How many cars are there?", "answer": "3", "evidence": [f"{s}-o1", f"{s}-o3", f"{s}-o5"], "targets": ["car"], "category": None, "relation": None},
        {"qtype": "existence", "question": "Is there a bus?", "answer": "no", "evidence": [], "targets": ["bus"], "category": None, "relation": None},
        {"qtype": "attribute", "question": "What colour is the leftmost car?", "answer": "red", "evidence": [f"{s}-o1"], "targets": ["car"], "category": None, "relation": None},
    ]})


_COUNTER = None
_DELAY = 0.2


def _handler(req: dict):
    with _COUNTER.get_lock():
        _COUNTER.value += 1
    return Delay(_DELAY, completion(_reply(req), prompt_tokens=900, completion_tokens=120))


def _serve(port_q, stop, counter, delay: float) -> None:
    """The loopback server runs in its own process, as a real server would (no shared GIL)."""
    global _COUNTER, _DELAY
    _COUNTER, _DELAY = counter, delay
    with OpenAIServer(_handler) as srv:
        port_q.put(srv.port)
        stop.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--warm", action="store_true", help="import and warm the client before timing")
    args = ap.parse_args()
    ideal = args.scenes * args.delay / args.concurrency
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scenes = _scenes(root, args.scenes)
        ctx = mp.get_context("spawn")
        port_q, stop, counter = ctx.Queue(), ctx.Event(), ctx.Value("i", 0)
        proc = ctx.Process(target=_serve, args=(port_q, stop, counter, args.delay), daemon=True)
        proc.start()
        try:
            base_url = f"http://127.0.0.1:{port_q.get(timeout=60)}/v1"
            cfg = LLMConfig(base_url, "bench-model", concurrency=args.concurrency, cache_dir=root / "cache", api_key_env="BENCH_KEY")
            if args.warm:  # pay the one-time imports (openai: ~1-2 s) before timing
                warm_cfg = LLMConfig(base_url, "warm-model", concurrency=args.concurrency, api_key_env="BENCH_KEY")
                draft_llm(scenes.slice(0, 2), LLMClient(warm_cfg), DraftConfig(qtypes=("counting",)))
            t0, c0 = time.perf_counter(), time.process_time()
            res = draft_llm(scenes, LLMClient(cfg), DraftConfig(qtypes=("counting", "existence", "attribute")))
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            t1 = time.perf_counter()
            res2 = draft_llm(scenes, LLMClient(cfg), DraftConfig(qtypes=("counting", "existence", "attribute")))
            rerun = time.perf_counter() - t1
            sent = counter.value - (2 if args.warm else 0)
        finally:
            stop.set()
            proc.join(timeout=10)
    s = res.summary
    print(f"scenes={args.scenes} concurrency={args.concurrency} delay={args.delay}s warm={args.warm}")
    print(f"requests sent={sent} accepted={s.accepted} rejected={s.rejected} failed={s.failed}")
    print(f"wall={wall:.2f}s ideal={ideal:.2f}s ratio={wall / max(ideal, 1e-9):.3f} (target <= 1.3): {'PASS' if wall <= 1.3 * ideal else 'FAIL'}")
    print(f"client CPU time during the run: {cpu:.2f}s ({cpu / wall:.0%} of wall)")
    print(f"re-run from cache: {rerun:.2f}s, requests={res2.summary.requests}, cached={res2.summary.cached}, accepted={res2.summary.accepted}")


if __name__ == "__main__":
    main()
