"""One real Label Studio server per test session, started from a pre-migrated data directory.

A fresh database migrates for ~100 s; it is migrated once into ``<studio venv>/witness-test-template``
(inside the ignored server virtualenv, so it goes with ``make clean``) and copied for each session,
which then starts in ~15 s. The server venv comes from ``WITNESS_STUDIO_VENV`` (the Makefile's test
target sets it), default ``.studio-venv`` at the repository root.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest

from witness.schema import item_record, items_table, scene_record, scenes_table

REPO = Path(__file__).resolve().parents[3]
ADMIN = "admin@witness.test"
ADMIN_PASSWORD = "witness-admin-pw"
TOKEN = "witness-test-token-0123456789"


def studio_venv() -> Path:
    return Path(os.environ.get("WITNESS_STUDIO_VENV", REPO / ".studio-venv")).absolute()


def _template(venv: Path) -> Path:
    """The migrated, stopped template data directory (built once, atomically)."""
    from witness.annotate.studio.server import free_port, start_server, stop_server

    tpl = venv / "witness-test-template"
    if (tpl / "label_studio.sqlite3").exists():
        return tpl
    build = venv / f".witness-test-template.{uuid.uuid4().hex[:8]}"
    root = build / "media"
    root.mkdir(parents=True)
    start_server(venv, build, port=free_port(), document_root=root, username=ADMIN, password=ADMIN_PASSWORD,
                 token=TOKEN, timeout=600)
    stop_server(build)
    shutil.rmtree(root, ignore_errors=True)
    try:
        build.rename(tpl)
    except OSError:  # another session won the race
        shutil.rmtree(build, ignore_errors=True)
    return tpl


@pytest.fixture(scope="session")
def studio(tmp_path_factory):
    """A server started by ``witness studio serve`` and stopped by ``witness studio stop``.

    A dict with url, token, admin, password, data_dir, venv, root (document root) and a client.
    """
    import json

    from typer.testing import CliRunner

    from witness.annotate.studio.client import StudioClient
    from witness.annotate.studio.server import copy_data_dir, find_studio_venv, free_port
    from witness.cli.main import app

    venv = studio_venv()
    try:
        find_studio_venv(venv)
    except Exception as exc:
        pytest.skip(f"no Label Studio virtualenv: {exc}")
    tpl = _template(venv)
    base = tmp_path_factory.mktemp("studio")
    data_dir = copy_data_dir(tpl, base / "data")
    root = base / "media"
    (root / "images").mkdir(parents=True)
    runner = CliRunner()
    res = runner.invoke(app, ["studio", "serve", "--port", str(free_port()), "--data-dir", str(data_dir),
                              "--document-root", str(root), "--username", ADMIN, "--password", ADMIN_PASSWORD,
                              "--token", TOKEN, "--venv", str(venv), "--timeout", "600", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    client = StudioClient(info["url"], TOKEN)
    try:
        yield {"url": info["url"], "token": TOKEN, "admin": ADMIN, "password": ADMIN_PASSWORD, "data_dir": data_dir,
               "venv": venv, "root": root, "client": client, "startup_s": info["startup_s"]}
    finally:
        client.close()
        res = runner.invoke(app, ["studio", "stop", "--data-dir", str(data_dir), "--json"])
        assert json.loads(res.stdout)["stopped"] is True


def write_png(path: Path, width: int, height: int, boxes=(), seed: int = 0) -> Path:
    """A small PNG: a gradient with the given boxes filled, so screenshots are not blank."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    arr = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                    np.full_like(x, 120)], axis=-1).astype(np.uint8)
    img = Image.fromarray(arr)
    draw = ImageDraw.Draw(img)
    for b in boxes:
        draw.rectangle([float(v) for v in b], fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


@pytest.fixture
def demo_items(studio):
    """Three images with scenes and five items (counting, existence with no evidence, a pair)."""
    root = studio["root"] / "images"
    tag = uuid.uuid4().hex[:6]
    W, H = 640, 480
    objs = {
        "img-a": [("car", [10.5, 20.25, 100.125, 200.75]), ("car", [300.0, 100.0, 400.3, 220.9]),
                  ("person", [500.0, 300.0, 550.5, 420.0])],
        "img-b": [("bus", [33.3, 44.4, 333.3, 244.4]), ("sign", [600.0, 10.0, 639.0, 60.0])],
        "img-c": [("car", [1.0, 2.0, 3.5, 4.5]), ("truck", [100.0, 100.0, 639.9, 479.9])],
    }
    scenes, paths = [], {}
    for k, (iid, ob) in enumerate(objs.items()):
        p = write_png(root / f"{tag}-{iid}.png", W, H, [b for _, b in ob], seed=k)
        paths[iid] = str(p)
        scenes.append(scene_record(iid, W, H, [{"id": f"{iid}-o{i}", "label": lab, "box": b} for i, (lab, b) in enumerate(ob)],
                                   image=str(p)))
    a, b, c = objs["img-a"], objs["img-b"], objs["img-c"]
    items = [
        item_record("q-count", "img-a", W, H, "How many cars are there?", "2", [a[0][1], a[1][1]], ["car", "car"],
                    image=paths["img-a"], count=2, qtype="counting", category="enumeration"),
        item_record("q-exist", "img-b", W, H, "Is there a bicycle?", "no", [], [], image=paths["img-b"],
                    qtype="existence", category="existence"),
        item_record("q-ident", "img-c", W, H, "What is the large vehicle?", "a truck", [c[1][1]], ["truck"],
                    image=paths["img-c"], qtype="identification", category="object_identification"),
        item_record("p1-1", "img-b", W, H, "Is there a bus?", "yes", [b[0][1]], ["bus"], image=paths["img-b"],
                    pair_id="p1", pair_role=1, qtype="existence"),
        item_record("p1-2", "img-b", W, H, "Is the image free of buses?", "no", [b[0][1]], ["bus"], image=paths["img-b"],
                    pair_id="p1", pair_role=2, qtype="existence"),
    ]
    return {"items": items_table(items), "scenes": scenes_table(scenes), "tag": tag, "paths": paths}
