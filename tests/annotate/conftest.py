"""Fixtures of the rule and pair drafters: small scenes built through witness.schema."""

from __future__ import annotations

import numpy as np
import pytest

from witness.schema import scene_record, scenes_table

DEMO_CLASSES = ("car", "truck", "bus", "pedestrian", "cyclist")
COLORS = ("red", "white", "black", "blue", "silver", "yellow", "green")


def obj(oid: str, label: str, box, **attributes) -> dict:
    """One scene object; attributes as keyword arguments (all strings)."""
    return {"id": oid, "label": label, "box": list(box), "attributes": {k: str(v) for k, v in attributes.items()}}


def make_scenes(*scenes) -> "pa.Table":  # noqa: F821
    """scenes: (image_id, objects) tuples on a 640x480 image."""
    return scenes_table([scene_record(i, 640, 480, objs, source="test", split="train", image=f"/img/{i}.jpg") for i, objs in scenes])


def random_demo_scenes(n: int, seed: int = 0, *, attributes: bool = True) -> "pa.Table":  # noqa: F821
    """Demo-like scenes: 0-2 crosswalks, 1-12 objects with the demo attribute keys."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n):
        objs = []
        for c in range(int(rng.integers(0, 3))):
            y = float(rng.integers(250, 400))
            objs.append(obj(f"cw{c}", "crosswalk", [0, y, 640, y + 40]))
        for k in range(int(rng.integers(1, 13))):
            label = str(rng.choice(DEMO_CLASSES))
            x1, y1 = float(rng.integers(0, 560)), float(rng.integers(0, 400))
            w, h = float(rng.integers(10, 80)), float(rng.integers(10, 80))
            attrs = {}
            if attributes:
                attrs = {
                    "color": str(rng.choice(COLORS)),
                    "lane": str(int(rng.integers(1, 5))),
                    "direction": str(rng.choice(["approaching", "receding"])),
                    "motion": str(rng.choice(["moving", "waiting"])),
                    "area": str(rng.choice(["road", "crosswalk", "sidewalk"])),
                }
            objs.append(obj(f"o{k}", label, [x1, y1, x1 + w, y1 + h], **attrs))
        rows.append(scene_record(f"s{s:04d}", 640, 480, objs, source="demo", split="train"))
    return scenes_table(rows)


@pytest.fixture
def road_scene():
    """A crosswalk, three cars (two red), one truck, one pedestrian on the crosswalk, one on the sidewalk."""
    return make_scenes(
        (
            "road",
            [
                obj("cw", "crosswalk", [0, 300, 640, 360]),
                obj("c1", "car", [10, 100, 90, 160], color="red", lane=1, direction="approaching", motion="moving", area="road"),
                obj("c2", "car", [120, 100, 200, 160], color="red", lane=2, direction="approaching", motion="waiting", area="road"),
                obj("c3", "car", [220, 100, 300, 160], color="blue", lane=3, direction="receding", motion="moving", area="road"),
                obj("t1", "truck", [400, 50, 600, 200], color="white", lane=4, direction="receding", motion="moving", area="road"),
                obj("p1", "pedestrian", [300, 250, 320, 340], color="black", direction="approaching", motion="moving", area="crosswalk"),
                obj("p2", "pedestrian", [620, 200, 635, 260], color="green", direction="receding", motion="waiting", area="sidewalk"),
            ],
        ),
        ("other", [obj("b1", "bus", [0, 0, 200, 120]), obj("y1", "cyclist", [300, 300, 330, 360])]),
    )


@pytest.fixture
def count_scenes():
    """3 cars + 1 truck; 8 pedestrians (7+); a bus scene so that the vocabulary has absent classes."""
    cars = [obj(f"c{k}", "car", [10 + 100 * k, 10, 80 + 100 * k, 60]) for k in range(3)]
    peds = [obj(f"p{k}", "pedestrian", [5 + 70 * k, 200, 40 + 70 * k, 300]) for k in range(8)]
    return make_scenes(
        ("cars", cars + [obj("t", "truck", [400, 100, 600, 250])]),
        ("crowd", peds),
        ("busy", [obj("b", "bus", [0, 0, 300, 200])]),
    )


@pytest.fixture
def demo_scenes():
    return random_demo_scenes(60, seed=1)
