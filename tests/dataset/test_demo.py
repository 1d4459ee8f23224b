"""Demo scenes: deterministic, tight boxes, the attribute vocabulary the rule drafter relies on."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from witness.cli.main import app
from witness.dataset import demo as demo_mod
from witness.dataset._render import Camera, Layer
from witness.dataset.demo import (
    DEMO_COLORS,
    DEMO_LABELS,
    demo_image_dir,
    generate_demo_scenes,
    iter_demo_scenes,
    render_demo_scene,
)
from witness.errors import InputError
from witness.io import read_scenes

SEED = 11


@pytest.fixture(scope="module")
def scenes() -> list[tuple[Image.Image, list[dict]]]:
    return [render_demo_scene(SEED, i) for i in range(20)]


def test_same_seed_same_pixels_and_bytes(tmp_path: Path):
    a = generate_demo_scenes(2, 5, tmp_path / "a")
    b = generate_demo_scenes(2, 5, tmp_path / "b")
    for pa_, pb_ in zip(a.column("image").to_pylist(), b.column("image").to_pylist(), strict=True):
        assert hashlib.sha256(Path(pa_["path"]).read_bytes()).digest() == hashlib.sha256(Path(pb_["path"]).read_bytes()).digest()
    assert a.column("objects").to_pylist() == b.column("objects").to_pylist()
    c, _ = render_demo_scene(6, 0)
    assert c.tobytes() != Image.open(a.column("image")[0]["path"].as_py()).convert("RGB").tobytes()


def test_table_records(tmp_path: Path):
    t = generate_demo_scenes(3, SEED, tmp_path)
    rows = t.to_pylist()
    assert [r["image_id"] for r in rows] == [f"demo-{SEED}-0000{i}" for i in range(3)]
    for r in rows:
        p = Path(r["image"]["path"])
        assert p.is_absolute() and p.parent == tmp_path.resolve() and p.suffix == ".png"
        assert r["image"]["bytes"] is None and r["source"] == "demo"
        with Image.open(p) as im:
            assert im.format == "PNG" and im.size == (r["width"], r["height"]) == (960, 540)
        assert [o["id"] for o in r["objects"]] == [f"{r['image_id']}:{k}" for k in range(len(r["objects"]))]


def test_boxes_inside_images_and_vocabulary(scenes):
    allowed = {
        "color": set(DEMO_COLORS),
        "direction": {"approaching", "receding"},
        "motion": {"moving", "waiting"},
        "area": {"road", "crosswalk", "sidewalk"},
    }
    seen = {k: set() for k in allowed}
    for img, objs in scenes:
        assert objs and objs[0]["label"] == "crosswalk"
        for o in objs:
            x1, y1, x2, y2 = o["box"]
            assert 0 <= x1 < x2 <= img.width and 0 <= y1 < y2 <= img.height
            a = o["attributes"]
            if o["label"] == "crosswalk":
                assert a == {"area": "crosswalk"}
                continue
            assert o["label"] in DEMO_LABELS
            for k, v in a.items():
                if k == "lane":
                    assert v.isdigit() and 1 <= int(v) <= 4
                else:
                    assert v in allowed[k], (k, v)
                    seen[k].add(v)
            assert "motion" in a and "area" in a
            if o["label"] in ("car", "truck", "bus", "cyclist"):
                assert {"color", "lane", "direction"} <= set(a) and a["area"] == "road"
            else:
                assert "color" not in a and "lane" not in a
                if a["area"] == "crosswalk":
                    assert "direction" not in a
    assert seen == allowed  # every value occurs somewhere in twenty scenes


def test_densities_from_empty_to_crowded_with_small_objects(scenes):
    users = [sum(o["label"] != "crosswalk" for o in objs) for _, objs in scenes]
    assert min(users) == 0 and max(users) >= 30
    heights = [o["box"][3] - o["box"][1] for _, objs in scenes for o in objs if o["label"] != "crosswalk"]
    assert min(heights) < 16  # small, distant objects
    labels = {o["label"] for _, objs in scenes for o in objs}
    assert labels == set(DEMO_LABELS) | {"crosswalk"}
    assert any(len([o for o in objs if o["label"] == "crosswalk"]) == 2 for _, objs in scenes)


def test_far_objects_are_higher_and_smaller(scenes):
    cars = [(o["box"][3], o["box"][2] - o["box"][0]) for _, objs in scenes for o in objs if o["label"] == "car"]
    bottoms, widths = np.array(cars).T
    assert np.corrcoef(bottoms, widths)[0, 1] > 0.8


def test_waiting_vehicles_queue_at_the_crossings(scenes):
    waiting = [o for _, objs in scenes for o in objs if o["label"] in ("car", "truck", "bus") and o["attributes"]["motion"] == "waiting"]
    assert waiting


def _blank(color=(0, 255, 0)) -> Image.Image:
    return Image.new("RGB", (960, 540), color)


def _drawn_bbox(img: Image.Image, bg=(0, 255, 0)) -> tuple[int, int, int, int] | None:
    a = np.asarray(img).astype(int)
    shadow = np.array(demo_mod._SHADOW)
    mask = (a != np.array(bg)).any(axis=2) & (a != shadow).any(axis=2)
    ys, xs = np.nonzero(mask)
    return (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)


CAM = Camera(height=8.0, pitch=math.radians(15), yaw=math.atan2(8.0, 38.0), focal=700.0, cx=480.0, cy=270.0)


@pytest.mark.parametrize("kind", ["car", "truck", "bus", "cyclist", "pedestrian"])
@pytest.mark.parametrize("front_near", [True, False])
@pytest.mark.parametrize("d0", [14.0, 60.0])
def test_every_box_is_tight_around_what_is_drawn(kind, front_near, d0):
    length = {"car": 4.5, "truck": 8.0, "bus": 11.5, "cyclist": 1.8, "pedestrian": 0.6}[kind]
    width = {"car": 1.8, "truck": 2.45, "bus": 2.55, "cyclist": 1.4, "pedestrian": 0.6}[kind]
    height = {"car": 1.5, "truck": 3.5, "bus": 3.15, "cyclist": 1.9, "pedestrian": 1.75}[kind]
    o = demo_mod._Obj(kind, 5.0, 5.0 + width, d0, d0 + length, height, color="blue", front_near=front_near, walking=front_near)
    img = _blank()
    rng = np.random.default_rng(0)
    if kind in ("car", "truck", "bus"):
        box = demo_mod._draw_vehicle(img, CAM, o)
    elif kind == "cyclist":
        box = demo_mod._draw_cyclist(img, CAM, o, rng)
    else:
        box = demo_mod._draw_pedestrian(img, CAM, o, rng)
    assert tuple(box) == _drawn_bbox(img)


def test_layer_box_is_the_alpha_bbox():
    img = _blank()
    lay = Layer(CAM)
    lay.poly(np.array([[10, 20], [30, 20], [30, 40]]), (255, 0, 0))
    lay.line(np.array([[100, 100], [120, 130]]), (0, 0, 255), width=3)
    box = lay.paste(img)
    assert tuple(box) == _drawn_bbox(img)
    assert Layer(CAM).paste(img) is None


def test_generator_and_iterator_agree(tmp_path: Path):
    rows = list(iter_demo_scenes(2, 3, tmp_path / "it", start=4))
    assert [r["image_id"] for r in rows] == ["demo-3-00004", "demo-3-00005"]
    img, objs = render_demo_scene(3, 5)
    assert [o["box"] for o in rows[1]["objects"]] == [[float(v) for v in o["box"]] for o in objs]


@pytest.mark.parametrize("kwargs, match", [({"n": -1}, r"number of scenes >= 0, got -1"), ({"n": 1, "width": 640}, r"at least 960x540, got 640x540")])
def test_bad_arguments(tmp_path: Path, kwargs, match):
    with pytest.raises(InputError, match=match):
        list(iter_demo_scenes(seed=0, out_dir=tmp_path, **kwargs))


def test_image_dir_beside_the_scenes_file(tmp_path: Path):
    assert demo_image_dir(tmp_path / "s.parquet") == tmp_path / "s-images"


def test_cli_demo(tmp_path: Path):
    out = tmp_path / "scenes.parquet"
    res = CliRunner().invoke(app, ["dataset", "demo", "--n", "3", "--seed", "2", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["scenes"] == 3 and summary["objects"] == sum(summary["per_class"].values())
    assert sorted(p.name for p in (tmp_path / "scenes-images").iterdir()) == [f"demo-2-0000{i}.png" for i in range(3)]
    table, report = read_scenes(out)
    assert table.num_rows == 3 and report.clipped_boxes == 0
    res = CliRunner().invoke(app, ["dataset", "demo", "--n", "1", "--out", str(out)])
    assert res.exit_code == 0 and "scenes" in res.stdout


def test_cli_demo_bad_n_exits_2(tmp_path: Path):
    res = CliRunner().invoke(app, ["dataset", "demo", "--n", "0", "--out", str(tmp_path / "s.parquet")])
    assert res.exit_code == 2


def test_objects_are_not_hidden_behind_each_other(scenes):
    for _, objs in scenes:
        b = np.array([o["box"] for o in objs if o["label"] != "crosswalk"]).reshape(-1, 4)
        lt = np.maximum(b[:, None, :2], b[None, :, :2])
        rb = np.minimum(b[:, None, 2:], b[None, :, 2:])
        inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
        area = np.prod(b[:, 2:] - b[:, :2], axis=1)
        share = inter / np.minimum(area[:, None], area[None, :])
        np.fill_diagonal(share, 0)
        assert share.size == 0 or share.max() <= 0.4


@pytest.mark.slow
def test_three_hundred_scenes_render_fast(tmp_path: Path):
    """The demo pipeline's budget: 300 scenes well inside a minute of CPU (measured ~12 s)."""
    import time

    t0 = time.process_time()
    t = generate_demo_scenes(300, 0, tmp_path)
    cpu = time.process_time() - t0
    assert t.num_rows == 300 and cpu < 60, cpu
