"""Benchmark: demo scene rendering and the importers.

    .venv/bin/python benchmarks/importers_demo.py [--n 300] [--images 2000]

Prints, for the demo: seconds per scene for rendering alone, for PNG encoding alone, and for the
whole ``generate_demo_scenes`` (render + PNG + table + validation); for the importers: seconds to
import a synthetic COCO / YOLO / VOC dataset of ``--images`` images (small PNGs written first,
not timed) with ten boxes each.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from witness.dataset.demo import generate_demo_scenes, render_demo_scene
from witness.dataset.importers import import_coco, import_voc, import_yolo


def bench_demo(n: int) -> None:
    t0 = time.perf_counter()
    imgs = [render_demo_scene(0, i) for i in range(min(n, 50))]
    t_render = (time.perf_counter() - t0) / len(imgs)
    t0 = time.perf_counter()
    sizes = []
    for img, _ in imgs:
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        sizes.append(buf.tell())
    t_png = (time.perf_counter() - t0) / len(imgs)
    n_obj = [len(o) for _, o in imgs]
    print(f"demo render: {t_render * 1000:.1f} ms/scene, PNG (level 1): {t_png * 1000:.1f} ms/scene, "
          f"{np.mean(sizes) / 1024:.0f} KiB/scene, objects/scene mean {np.mean(n_obj):.1f} max {max(n_obj)}")
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        t = generate_demo_scenes(n, 0, d)
        dt = time.perf_counter() - t0
    n_objects = sum(len(o) for o in t.column("objects").to_pylist())
    print(f"generate_demo_scenes({n}): {dt:.1f} s total, {dt / n * 1000:.1f} ms/scene, {n_objects} objects")


def bench_importers(n_images: int) -> None:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "img").mkdir()
        (root / "voc" / "Annotations").mkdir(parents=True)
        (root / "yolo" / "labels").mkdir(parents=True)
        img = Image.new("RGB", (640, 480), (80, 80, 80))
        images, anns = [], []
        for i in range(n_images):
            name = f"{i:06d}.png"
            img.save(root / "img" / name, compress_level=1)
            images.append({"id": i, "file_name": name, "width": 640, "height": 480})
            xy = rng.uniform(0, 370, size=(10, 2))
            wh = rng.uniform(5, 100, size=(10, 2))
            objs = []
            for k in range(10):
                b = [float(xy[k, 0]), float(xy[k, 1]), float(min(wh[k, 0], 639 - xy[k, 0])), float(min(wh[k, 1], 479 - xy[k, 1]))]
                anns.append({"id": len(anns), "image_id": i, "category_id": k % 3, "bbox": b, "iscrowd": 0, "area": b[2] * b[3]})
                objs.append(b)
            xml = "".join(
                f"<object><name>c{k % 3}</name><difficult>0</difficult><bndbox><xmin>{int(b[0]) + 1}</xmin><ymin>{int(b[1]) + 1}</ymin>"
                f"<xmax>{int(b[0] + b[2])}</xmax><ymax>{int(b[1] + b[3])}</ymax></bndbox></object>"
                for k, b in enumerate(objs)
            )
            (root / "voc" / "Annotations" / f"{i:06d}.xml").write_text(f"<annotation><filename>{name}</filename>{xml}</annotation>")
            (root / "yolo" / "labels" / f"{i:06d}.txt").write_text(
                "".join(f"{k % 3} {(b[0] + b[2] / 2) / 640} {(b[1] + b[3] / 2) / 480} {b[2] / 640} {b[3] / 480}\n" for k, b in enumerate(objs))
            )
        (root / "coco.json").write_text(json.dumps({"images": images, "annotations": anns, "categories": [{"id": k, "name": f"c{k}"} for k in range(3)]}))
        (root / "yolo" / "data.yaml").write_text("names: [c0, c1, c2]\n")
        (root / "yolo" / "images").symlink_to(root / "img")
        for name, fn in (
            ("coco", lambda: import_coco(root / "coco.json", images=root / "img")),
            ("voc", lambda: import_voc(root / "voc", images=root / "img")),
            ("yolo", lambda: import_yolo(root / "yolo")),
        ):
            t0 = time.perf_counter()
            r = fn()
            dt = time.perf_counter() - t0
            print(f"import {name}: {n_images} images, {r.n_objects} boxes in {dt:.2f} s ({dt / n_images * 1000:.2f} ms/image)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--images", type=int, default=2000)
    args = ap.parse_args()
    bench_demo(args.n)
    bench_importers(args.images)
