"""Benchmark: `witness.dataset.release` against the `datasets` way of writing the same items.

Builds N synthetic items over M small PNG images (written once), then, each in its own subprocess
so that its peak RSS is its own:

* **witness**: ``release([items.parquet], out)`` — streamed, images embedded, card, manifest, stats;
* **peer**: ``datasets.Dataset.from_list(rows, features=hf_features())``, the ``push_to_hub`` embedding
  step (``map(embed_table_storage)``) and ``to_parquet`` — the same items, images embedded.

Prints items/s, wall seconds, peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and output size
for both, and the ratios. Usage::

    .venv/bin/python benchmarks/release.py --items 35000 --images 5000 [--no-peer] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def build(work: Path, n_items: int, n_images: int, size: tuple[int, int]) -> Path:
    """Write ``n_images`` PNGs and ``n_items`` items (0–8 boxes each) as items.parquet."""
    import numpy as np
    from PIL import Image

    from witness.io import write_table
    from witness.schema import item_record, items_table

    rng = np.random.default_rng(0)
    img_dir = work / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    w, h = size
    for k in range(n_images):
        p = img_dir / f"img{k:06d}.png"
        if not p.exists():
            base = np.linspace(0, 255, w, dtype=np.uint8)[None, :, None].repeat(h, 0).repeat(3, 2)
            noise = rng.integers(0, 24, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(base // 2 + noise).save(p)
    rows = []
    qtypes = ["existence", "counting", "attribute", "spatial"]
    cats = {"existence": "existence", "counting": "enumeration", "attribute": "attribute_recognition", "spatial": "spatial_reasoning"}
    for i in range(n_items):
        k = i % n_images
        nb = int(rng.choice([0, 0, 1, 1, 2, 3, 5, 8]))
        x = rng.uniform(0, w - 12, nb)
        y = rng.uniform(0, h - 12, nb)
        boxes = [[float(a), float(b), float(a) + 10.0, float(b) + 10.0] for a, b in zip(x, y, strict=True)]
        q = qtypes[i % 4]
        rows.append(
            item_record(
                f"q{i:07d}", f"img{k:06d}", w, h, f"Question {i}?", str(nb), boxes, ["car"] * nb,
                image=str(img_dir / f"img{k:06d}.png"), count=nb if q == "counting" else None,
                qtype=q, category=cats[q], source="bench",
            )
        )
    out = work / "items.parquet"
    write_table(items_table(rows), out)
    return out


def run_witness(items: str, out: str) -> dict:
    from witness.dataset.release import release

    t = time.perf_counter()
    r = release([items], out, test_fraction=0.15, seed=0)
    dt = time.perf_counter() - t
    n = sum(r.items.values())
    size = sum(f.bytes for f in r.files)
    return {"items": n, "seconds": dt, "items_per_s": n / dt, "peak_rss_mib": _rss_mib(), "bytes": size}


def run_peer(items: str, out: str) -> dict:
    import datasets
    import pyarrow.parquet as pq
    from datasets.table import embed_table_storage

    from witness.schema import hf_features

    t = time.perf_counter()
    rows = pq.read_table(items).to_pylist()
    ds = datasets.Dataset.from_list(rows, features=hf_features())
    ds = ds.with_format("arrow").map(embed_table_storage, batched=True, batch_size=1000, keep_in_memory=True)
    ds = ds.with_format(None)
    Path(out).mkdir(parents=True, exist_ok=True)
    ds.to_parquet(str(Path(out) / "train-00000-of-00001.parquet"))
    dt = time.perf_counter() - t
    size = sum(p.stat().st_size for p in Path(out).glob("*.parquet"))
    return {"items": len(ds), "seconds": dt, "items_per_s": len(ds) / dt, "peak_rss_mib": _rss_mib(), "bytes": size}


def _child(kind: str, items: Path, out: Path, cache: Path) -> dict:
    env = dict(os.environ, HF_DATASETS_CACHE=str(cache), HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    code = (
        "import json, sys; sys.path.insert(0, %r); import release as b; "
        "print(json.dumps(b.run_%s(%r, %r)))" % (str(Path(__file__).parent), kind, str(items), str(out))
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=35_000)
    ap.add_argument("--images", type=int, default=5_000)
    ap.add_argument("--size", default="96x64", help="image size WxH")
    ap.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one)")
    ap.add_argument("--no-peer", action="store_true", help="skip the datasets comparison")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    work = args.work or Path(tempfile.mkdtemp(prefix="witness-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    items = build(work, args.items, args.images, (w, h))
    result = {"n_items": args.items, "n_images": args.images, "image_size": args.size, "build_s": time.perf_counter() - t}
    img_bytes = sum(p.stat().st_size for p in (work / "images").glob("*.png"))
    result["mean_png_bytes"] = img_bytes / args.images
    result["witness"] = _child("witness", items, work / "out-witness", work / "hf-cache")
    if not args.no_peer:
        result["peer"] = _child("peer", items, work / "out-peer", work / "hf-cache")
        result["ratio_items_per_s"] = result["witness"]["items_per_s"] / result["peer"]["items_per_s"]
        result["ratio_peak_rss"] = result["witness"]["peak_rss_mib"] / result["peer"]["peak_rss_mib"]
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.items} items over {args.images} images ({args.size}, mean PNG {result['mean_png_bytes'] / 1024:.1f} KiB)")
    for k in ("witness", "peer"):
        if k in result:
            r = result[k]
            print(
                f"{k:8s} {r['seconds']:7.1f} s  {r['items_per_s']:8.0f} items/s  peak RSS {r['peak_rss_mib']:7.0f} MiB"
                f"  output {r['bytes'] / 2**20:7.1f} MiB"
            )
    if "peer" in result:
        print(f"witness/peer: speed x{result['ratio_items_per_s']:.2f}, peak RSS x{result['ratio_peak_rss']:.2f}")


if __name__ == "__main__":
    main()
