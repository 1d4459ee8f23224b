"""Benchmark: push 5,000 qa tasks with predictions (target < 60 s) and pull them (target < 30 s).

Usage::

    .venv/bin/python benchmarks/studio_push.py [--n 5000] [--url URL --token TOKEN --document-root DIR]

Without ``--url`` it starts its own Label Studio from the test template (built by the studio tests
in ``<studio venv>/witness-test-template``) on a free port, and stops it afterwards. Measures:
``push`` (5,000 new tasks, 8 candidate boxes each), ``repush`` (nothing changes), ``pull`` of the
same project (no annotations: a snapshot of tasks and predictions) and ``pull_annotated`` of a
second project whose 5,000 tasks each carry one annotation (imported inline).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def make_items(n: int, root: Path, n_images: int = 50, seed: int = 0):
    from PIL import Image

    from witness.schema import item_record, items_table, scene_record, scenes_table

    rng = np.random.default_rng(seed)
    W, H = 640, 480
    (root / "bench").mkdir(parents=True, exist_ok=True)
    scenes, objs = [], {}
    for k in range(n_images):
        p = root / "bench" / f"img{k}.png"
        Image.new("RGB", (W, H), tuple(int(c) for c in rng.integers(0, 255, 3))).save(p)
        xy = rng.uniform(0, 500, size=(8, 2))
        wh = rng.uniform(10, 130, size=(8, 2))
        boxes = np.concatenate([xy, np.minimum(xy + wh, [W, H])], axis=1).round(3)
        labels = [["car", "person", "bus", "sign"][j % 4] for j in range(8)]
        objs[f"img{k}"] = (str(p), boxes, labels)
        scenes.append(scene_record(f"img{k}", W, H, [{"id": f"o{j}", "label": labels[j], "box": boxes[j]} for j in range(8)],
                                   image=str(p)))
    items = []
    for i in range(n):
        iid = f"img{i % n_images}"
        path, boxes, labels = objs[iid]
        cars = [j for j in range(8) if labels[j] == "car"]
        items.append(item_record(f"q{i}", iid, W, H, f"How many cars are there? ({i})", str(len(cars)),
                                 boxes[cars].tolist(), ["car"] * len(cars), image=path, count=len(cars), qtype="counting"))
    return items_table(items), scenes_table(scenes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--url")
    ap.add_argument("--token", default=os.environ.get("LABEL_STUDIO_API_KEY"))
    ap.add_argument("--document-root")
    ap.add_argument("--chunk-size", type=int, default=1000)
    args = ap.parse_args()

    from witness.annotate.studio.client import connect
    from witness.annotate.studio.pull import pull_annotations
    from witness.annotate.studio.push import push_items

    tmp = Path(tempfile.mkdtemp(prefix="witness-bench-"))
    srv = None
    if args.url:
        url, token, root = args.url, args.token, Path(args.document_root or Path.cwd())
    else:
        from witness.annotate.studio.server import copy_data_dir, free_port, start_server

        venv = Path(os.environ.get("WITNESS_STUDIO_VENV", Path(__file__).resolve().parents[1] / ".studio-venv"))
        tpl = venv / "witness-test-template"
        data = copy_data_dir(tpl, tmp / "data") if tpl.exists() else tmp / "data"
        root = tmp / "media"
        token = "witness-test-token-0123456789"
        srv = start_server(venv, data, port=free_port(), document_root=root, username="admin@witness.test",
                           password="witness-admin-pw", token=token, timeout=600)
        url = srv.url
    out: dict = {"n": args.n}
    try:
        items, scenes = make_items(args.n, root)
        client = connect(url, token)
        name = f"bench-{int(time.time())}"
        t = time.perf_counter()
        rep = push_items(client, items, project=name, kind="qa", scenes=scenes, document_root=root,
                         chunk_size=args.chunk_size)
        out["push_s"] = round(time.perf_counter() - t, 2)
        out["added"] = rep.added
        t = time.perf_counter()
        rep2 = push_items(client, items, project=name, kind="qa", scenes=scenes, document_root=root)
        out["repush_s"] = round(time.perf_counter() - t, 2)
        out["repush_added"] = rep2.added
        t = time.perf_counter()
        table, prep = pull_annotations(client, name)
        out["pull_s"] = round(time.perf_counter() - t, 2)
        out["pull_tasks"] = prep["tasks"]

        # a second project whose tasks carry one annotation each (the predictions reused as results)
        from witness.annotate.studio.convert import MODEL_VERSION
        from witness.annotate.studio.push import build_tasks, image_urls

        urls, _ = image_urls(items, root)
        tasks, _ = build_tasks(items, "qa", urls, scenes=scenes)
        for tk in tasks:
            tk["annotations"] = [{"result": tk["predictions"][0]["result"], "lead_time": 5.0}]
        name2 = name + "-annotated"
        push_items(client, items.slice(0, 1), project=name2, kind="qa", scenes=scenes, document_root=root)
        pid2 = client.find_project(name2)["id"]
        t = time.perf_counter()
        for s in range(0, len(tasks) - 1, args.chunk_size):
            client.import_tasks(pid2, tasks[1 + s:1 + s + args.chunk_size])
        out["import_annotated_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        table2, prep2 = pull_annotations(client, name2)
        out["pull_annotated_s"] = round(time.perf_counter() - t, 2)
        out["pull_annotated_records"] = prep2["records"]
        out["model_version"] = MODEL_VERSION
    finally:
        if srv is not None:
            from witness.annotate.studio.server import stop_server

            stop_server(srv.data_dir)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
