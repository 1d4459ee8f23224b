"""Importers: tiny datasets of each format built in tmp_path, every box checked in pixels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from witness.boxes import xyxy_to_normalized
from witness.cli.main import app
from witness.dataset.importers import (
    IMPORTERS,
    ImportResult,
    get_importer,
    import_coco,
    import_dataset,
    import_kitti,
    import_labelstudio,
    import_voc,
    import_yolo,
    yolo_to_xyxy,
)
from witness.errors import InputError, SchemaError, UnknownNameError
from witness.io import read_scenes
from witness.schema import SCENE_SCHEMA


def _img(path: Path, w: int, h: int, fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (w, h), (90, 90, 90)).save(path, format=fmt)
    return path


def _objects(result: ImportResult, image_id: str) -> list[dict]:
    rows = result.table.to_pylist()
    row = next(r for r in rows if r["image_id"] == image_id)
    for o in row["objects"]:
        o["attributes"] = dict(o["attributes"])
    return row["objects"]


def _boxes(result: ImportResult, image_id: str) -> list[list[float]]:
    return [o["box"] for o in _objects(result, image_id)]


# ------------------------------------------------------------------------------------------------
# COCO
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def coco(tmp_path: Path) -> Path:
    root = tmp_path / "coco"
    _img(root / "val" / "a.jpg", 200, 100)
    _img(root / "val" / "b.png", 64, 48)
    data = {
        "images": [
            {"id": 1, "file_name": "a.jpg", "width": 200, "height": 100},
            {"id": 2, "file_name": "b.png", "width": 64, "height": 48},
        ],
        "categories": [{"id": 3, "name": "car"}, {"id": 7, "name": "person"}],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 3, "bbox": [10, 20, 30, 40], "iscrowd": 0, "area": 1200.0},
            {"id": 11, "image_id": 1, "category_id": 7, "bbox": [150.5, 0.25, 49.5, 99.75], "iscrowd": 1, "area": 12.5},
        ],
    }
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "instances.json").write_text(json.dumps(data))
    return root


def _coco_json(root: Path) -> Path:
    return root / "annotations" / "instances.json"


def _coco_edit(root: Path, fn) -> Path:
    p = _coco_json(root)
    data = json.loads(p.read_text())
    fn(data)
    p.write_text(json.dumps(data))
    return p


def test_coco_boxes_labels_attributes(coco: Path):
    r = import_coco(_coco_json(coco), images=coco / "val")
    assert r.table.schema.equals(SCENE_SCHEMA, check_metadata=False)
    assert r.table.column("image_id").to_pylist() == ["1", "2"]
    objs = _objects(r, "1")
    assert [o["label"] for o in objs] == ["car", "person"]
    assert objs[0]["box"] == [10.0, 20.0, 40.0, 60.0]
    assert objs[1]["box"] == [150.5, 0.25, 200.0, 100.0]
    assert objs[0]["attributes"] == {"iscrowd": "0", "area": "1200"}
    assert objs[1]["attributes"] == {"iscrowd": "1", "area": "12.5"}
    assert [o["id"] for o in objs] == ["1:0", "1:1"]
    assert _objects(r, "2") == []  # an image without annotations is a scene with no objects
    row = r.table.to_pylist()[0]
    assert row["source"] == "coco" and row["image"]["bytes"] is None
    assert row["image"]["path"] == str((coco / "val" / "a.jpg").resolve())
    assert (row["width"], row["height"]) == (200, 100)
    assert r.warnings == {}


def test_coco_overshoot_within_one_pixel_is_clipped_and_counted(coco: Path):
    _coco_edit(coco, lambda d: d["annotations"].append({"id": 12, "image_id": 2, "category_id": 3, "bbox": [-0.5, 40, 64.5, 8.8]}))
    r = import_coco(_coco_json(coco), images=coco / "val")
    assert _boxes(r, "2") == [[0.0, 40.0, 64.0, 48.0]]
    assert r.warnings == {"clipped_boxes": 1}


def test_coco_default_image_root_is_the_json_folder(tmp_path: Path):
    _img(tmp_path / "x.png", 10, 10)
    (tmp_path / "i.json").write_text(json.dumps({"images": [{"id": "x", "file_name": "x.png"}], "annotations": [], "categories": []}))
    assert import_coco(tmp_path / "i.json").n_scenes == 1


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d["annotations"].append({"id": 12, "image_id": 1, "category_id": 99, "bbox": [0, 0, 1, 1]}), r"category_id .*got 99 .*annotations\[2\]"),
        (lambda d: d["annotations"].append({"id": 12, "image_id": 5, "category_id": 3, "bbox": [0, 0, 1, 1]}), r"listed image, got image_id 5"),
        (lambda d: d["annotations"].append({"id": 12, "image_id": 1, "category_id": 3, "bbox": [190, 0, 20, 10]}), r"inside the 200x100 image.*annotations\[2\], id 12, field 'bbox'"),
        (lambda d: d["annotations"].append({"id": 12, "image_id": 1, "category_id": 3, "bbox": [1, 2, 3]}), r"bbox \[x, y, w, h\] of 4 numbers"),
        (lambda d: d["annotations"].append({"id": 12, "image_id": 1, "category_id": 3, "bbox": [5, 5, -3, 2]}), r"x1 <= x2"),
        (lambda d: d["images"].append({"id": 1, "file_name": "b.png"}), r"unique image ids, got 1 twice"),
        (lambda d: d["images"].append({"id": 9, "file_name": "missing.jpg"}), r"image file, got a path that does not exist .*missing.jpg"),
        (lambda d: d["images"][0].update(width=201), r"size 201x100 stated in the JSON, got 200x100"),
        (lambda d: d["categories"].append({"id": 8}), r"category with 'id' and 'name'"),
        (lambda d: d.pop("images"), r"'images' list"),
    ],
)
def test_coco_bad_input(coco: Path, edit, match):
    p = _coco_edit(coco, edit)
    with pytest.raises(InputError, match=match):
        import_coco(p, images=coco / "val")


def test_coco_malformed_json(tmp_path: Path):
    p = tmp_path / "bad.json"
    p.write_text('{"images": [')
    with pytest.raises(InputError, match=r"malformed JSON .*bad.json"):
        import_coco(p)


def test_coco_unreadable_image(coco: Path):
    (coco / "val" / "a.jpg").write_bytes(b"not an image")
    with pytest.raises(InputError, match=r"readable image, got unreadable data .*a.jpg"):
        import_coco(_coco_json(coco), images=coco / "val")


def test_coco_zero_size_box_is_skipped_and_counted(coco: Path):
    _coco_edit(coco, lambda d: d["annotations"].append({"id": 12, "image_id": 2, "category_id": 3, "bbox": [5, 5, 0, 3]}))
    r = import_coco(_coco_json(coco), images=coco / "val")
    assert _boxes(r, "2") == [] and r.warnings == {"degenerate_boxes_skipped": 1}


# ------------------------------------------------------------------------------------------------
# VOC
# ------------------------------------------------------------------------------------------------


def _voc_xml(filename: str, objects: list[tuple], size: tuple[int, int] | None = None) -> str:
    objs = "".join(
        f"<object><name>{n}</name><pose>Left</pose><truncated>{t}</truncated><difficult>{d}</difficult>"
        f"<bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}</ymin><xmax>{b[2]}</xmax><ymax>{b[3]}</ymax></bndbox></object>"
        for n, b, t, d in objects
    )
    sz = f"<size><width>{size[0]}</width><height>{size[1]}</height><depth>3</depth></size>" if size else ""
    return f"<annotation><folder>VOC</folder><filename>{filename}</filename>{sz}{objs}</annotation>"


@pytest.fixture
def voc(tmp_path: Path) -> Path:
    root = tmp_path / "voc"
    (root / "Annotations").mkdir(parents=True)
    _img(root / "JPEGImages" / "00001.jpg", 800, 800)
    _img(root / "JPEGImages" / "00002.jpg", 100, 50)
    (root / "Annotations" / "00001.xml").write_text(
        _voc_xml("00001.jpg", [("airplane", (1, 1, 10, 20), 0, 0), ("ship", (700, 650, 800, 800), 1, 1)], (800, 800))
    )
    (root / "Annotations" / "00002.xml").write_text(_voc_xml("00002.jpg", [("vehicle", (0, 5, 100, 50), 0, 0)]))
    return root


def test_voc_one_based_inclusive_to_continuous(voc: Path):
    r = import_voc(voc)
    assert r.table.column("image_id").to_pylist() == ["00001", "00002"]
    objs = _objects(r, "00001")
    assert [o["box"] for o in objs] == [[0.0, 0.0, 10.0, 20.0], [699.0, 649.0, 800.0, 800.0]]
    assert objs[1]["attributes"] == {"difficult": "1", "truncated": "1", "pose": "Left"}
    assert [o["label"] for o in objs] == ["airplane", "ship"]
    # xmin = 0 (a 0-based writer) overshoots by one pixel: clipped and counted
    assert _boxes(r, "00002") == [[0.0, 4.0, 100.0, 50.0]]
    assert r.warnings == {"clipped_boxes": 1}
    assert r.table.column("source").to_pylist() == ["voc", "voc"]


def test_voc_falls_back_to_the_xml_stem(voc: Path):
    (voc / "Annotations" / "00002.xml").write_text(_voc_xml("renamed.jpg", [("vehicle", (2, 2, 5, 5), 0, 0)]))
    assert _boxes(import_voc(voc), "00002") == [[1.0, 1.0, 5.0, 5.0]]


@pytest.mark.parametrize(
    "xml, match",
    [
        ("<annotation><filename>00002.jpg", r"malformed XML .*00002.xml"),
        (_voc_xml("00002.jpg", [("vehicle", (1, 1, 102, 10), 0, 0)]), r"inside the 100x50 image.*00002.xml object\[0\] 'vehicle', field 'bndbox'"),
        (_voc_xml("00002.jpg", [("vehicle", (1, "a", 10, 10), 0, 0)]), r"number in <ymin>, got 'a' .*field 'bndbox.ymin'"),
        ("<annotation><filename>00002.jpg</filename><object><name>x</name></object></annotation>", r"<bndbox>, got none"),
        ("<annotation><filename>00002.jpg</filename><object><bndbox/></object></annotation>", r"object <name>, got none"),
        (_voc_xml("00002.jpg", [], (640, 480)), r"size 640x480 stated in the XML, got 100x50"),
    ],
)
def test_voc_bad_input(voc: Path, xml: str, match: str):
    (voc / "Annotations" / "00002.xml").write_text(xml)
    with pytest.raises(InputError, match=match):
        import_voc(voc)


def test_voc_missing_image_and_folder(voc: Path, tmp_path: Path):
    (voc / "JPEGImages" / "00002.jpg").unlink()
    with pytest.raises(InputError, match=r"image file, got a path that does not exist .*00002"):
        import_voc(voc)
    with pytest.raises(InputError, match=r"Annotations/ folder"):
        import_voc(tmp_path / "nowhere")


# ------------------------------------------------------------------------------------------------
# KITTI
# ------------------------------------------------------------------------------------------------


def _kitti_line(t: str, box, trunc="0.00", occ="0", alpha="-1.57") -> str:
    return f"{t} {trunc} {occ} {alpha} {box[0]} {box[1]} {box[2]} {box[3]} 1.50 1.60 3.90 1.0 2.0 30.0 -1.55"


@pytest.fixture
def kitti(tmp_path: Path) -> Path:
    root = tmp_path / "kitti"
    _img(root / "image_2" / "000000.png", 1242, 375)
    _img(root / "image_2" / "000001.jpg", 1920, 1080)  # Rope3D ships JPEGs
    _img(root / "image_2" / "000002.png", 100, 100)  # no label file
    (root / "label_2").mkdir(parents=True)
    (root / "label_2" / "000000.txt").write_text(
        _kitti_line("Car", (712.40, 143.00, 810.73, 307.92), "0.10", "1", "-1.5") + "\n"
        + _kitti_line("DontCare", (0, 0, 10, 10), "-1", "-1", "-10") + "\n\n"
        + _kitti_line("Pedestrian", (1000, 150.5, 1050.25, 300), "0.00", "2", "0.33") + " 0.98\n"
    )
    (root / "label_2" / "000001.txt").write_text(_kitti_line("bus", (0, 0, 1920, 1080)) + "\n")
    return root


def test_kitti_boxes_attributes_dontcare(kitti: Path):
    r = import_kitti(kitti)
    assert r.table.column("image_id").to_pylist() == ["000000", "000001"]
    objs = _objects(r, "000000")
    assert [o["label"] for o in objs] == ["Car", "Pedestrian"]
    np.testing.assert_allclose([o["box"] for o in objs], [[712.40, 143.00, 810.73, 307.92], [1000, 150.5, 1050.25, 300]], rtol=0, atol=1e-4)
    assert objs[0]["attributes"] == {"truncated": "0.1", "occluded": "1", "alpha": "-1.5"}
    assert objs[1]["attributes"] == {"truncated": "0", "occluded": "2", "alpha": "0.33"}
    assert [o["id"] for o in objs] == ["000000:0", "000000:1"]
    assert _boxes(r, "000001") == [[0.0, 0.0, 1920.0, 1080.0]]
    assert r.warnings == {"dontcare_skipped": 1, "images_without_labels": 1}


@pytest.mark.parametrize(
    "text, match",
    [
        ("Car 0 0 0 1 2 3\n", r"15 or 16 fields .*got 7 .*000001.txt line 1"),
        (_kitti_line("Car", ("x", 1, 2, 3)) + "\n", r"numbers in fields 2-8, got .*line 1, field 'bbox'"),
        ("\n" + _kitti_line("Car", (10, 10, 1925, 20)) + "\n", r"inside the 1920x1080 image.*000001.txt line 2 'Car', field 'bbox'"),
        (_kitti_line("Car", (50, 10, 40, 20)) + "\n", r"x1 <= x2"),
    ],
)
def test_kitti_bad_input(kitti: Path, text: str, match: str):
    (kitti / "label_2" / "000001.txt").write_text(text)
    with pytest.raises(InputError, match=match):
        import_kitti(kitti)


def test_kitti_missing_image(kitti: Path):
    (kitti / "label_2" / "000009.txt").write_text("")
    with pytest.raises(InputError, match=r"image 000009.png/.jpg .*000009.txt, field 'image'"):
        import_kitti(kitti)


# ------------------------------------------------------------------------------------------------
# YOLO
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def yolo(tmp_path: Path) -> Path:
    root = tmp_path / "yolo"
    root.mkdir()
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nval: images/val\nnames:\n  0: car\n  1: person\n")
    _img(root / "images" / "train" / "a.jpg", 640, 480)
    _img(root / "images" / "val" / "b.png", 100, 200)
    _img(root / "images" / "val" / "empty.png", 30, 30)
    (root / "labels" / "train").mkdir(parents=True)
    (root / "labels" / "val").mkdir(parents=True)
    (root / "labels" / "train" / "a.txt").write_text("0 0.5 0.5 0.25 0.5\n1 0.1 0.2 0.2 0.4\n")
    (root / "labels" / "val" / "b.txt").write_text("1 0.5 0.5 1.0 1.0\n\n")
    return root


def test_yolo_split_layout(yolo: Path):
    r = import_yolo(yolo)
    assert r.table.column("image_id").to_pylist() == ["train/a", "val/b", "val/empty"]
    assert r.table.column("split").to_pylist() == ["train", "val", "val"]
    objs = _objects(r, "train/a")
    assert [o["label"] for o in objs] == ["car", "person"]
    np.testing.assert_allclose([o["box"] for o in objs], [[240, 120, 400, 360], [0, 0, 128, 192]], atol=1e-4)
    assert _boxes(r, "val/b") == [[0.0, 0.0, 100.0, 200.0]]
    assert _boxes(r, "val/empty") == []
    assert objs[0]["id"] == "train/a:0"


def test_yolo_flat_layout_with_list_names(tmp_path: Path):
    (tmp_path / "data.yaml").write_text("names: [bike, bus]\n")
    _img(tmp_path / "images" / "x.png", 200, 100)
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "x.txt").write_text("1 0.25 0.75 0.5 0.5\n")
    r = import_yolo(tmp_path)
    assert r.table.column("split").to_pylist() == [None]
    assert _objects(r, "x")[0]["label"] == "bus" and _boxes(r, "x") == [[0.0, 50.0, 100.0, 100.0]]


def test_yolo_to_xyxy_round_trip():
    b = yolo_to_xyxy([[0.3, 0.6, 0.2, 0.1]], 1000, 500)
    np.testing.assert_allclose(b, [[200, 275, 400, 325]])


@pytest.mark.parametrize(
    "text, match",
    [
        ("5 0.5 0.5 0.1 0.1\n", r"class id in \[0, 1\], got 5 .*b.txt line 1, field 'class'"),
        ("1 0.5 0.5 0.1\n", r"5 fields 'class cx cy w h', got 4"),
        ("1 0.5 0.5 0.1 0.1 0.2 0.2\n", r"Segmentation labels"),
        ("1 a 0.5 0.1 0.1\n", r"numbers 'class cx cy w h'"),
        ("1 0.9 0.5 0.4 0.2\n", r"inside the 100x200 image.*b.txt line 1 'person'"),
    ],
)
def test_yolo_bad_input(yolo: Path, text: str, match: str):
    (yolo / "labels" / "val" / "b.txt").write_text(text)
    with pytest.raises(InputError, match=match):
        import_yolo(yolo)


@pytest.mark.parametrize(
    "yaml_text, match",
    [("names: [a, b\n", r"malformed YAML"), ("nc: 2\n", r"'names' as a list or a dict"), ("names: {a: car}\n", r"integer class ids")],
)
def test_yolo_bad_yaml(yolo: Path, yaml_text: str, match: str):
    (yolo / "data.yaml").write_text(yaml_text)
    with pytest.raises(InputError, match=match):
        import_yolo(yolo)


def test_yolo_missing_yaml(tmp_path: Path):
    with pytest.raises(InputError, match=r"data.yaml with 'names'"):
        import_yolo(tmp_path)


# ------------------------------------------------------------------------------------------------
# Label Studio
# ------------------------------------------------------------------------------------------------


def _rect(x, y, w, h, labels=("car",), ow=800, oh=600, rotation=0):
    return {
        "from_name": "evidence", "to_name": "image", "type": "rectanglelabels", "original_width": ow,
        "original_height": oh, "image_rotation": 0,
        "value": {"x": x, "y": y, "width": w, "height": h, "rotation": rotation, "rectanglelabels": list(labels)},
    }


@pytest.fixture
def studio(tmp_path: Path) -> Path:
    root = tmp_path / "ls"
    _img(root / "media" / "scenes" / "a.png", 800, 600)
    _img(root / "media" / "b.jpg", 400, 200)
    tasks = [
        {
            "id": 1, "data": {"image": "/data/local-files/?d=scenes/a.png", "image_id": "scene-a"},
            "annotations": [
                {"id": 5, "was_cancelled": True, "result": [_rect(0, 0, 1, 1)]},
                {"id": 6, "result": [_rect(13.75, 55, 25, 20), {"from_name": "answer", "type": "textarea", "value": {"text": ["Two cars.\n"]}},
                                     _rect(50, 0, 50, 100, ("truck", "bus"))]},
                {"id": 7, "result": []},
            ],
        },
        {"id": 2, "data": {"image": "http://localhost:8080/data/upload/3/0a1b2c3d-b.jpg"}, "annotations": []},
    ]
    (root / "export.json").write_text(json.dumps(tasks))
    return root


def test_labelstudio_percent_to_pixels(studio: Path):
    r = import_labelstudio(studio / "export.json", images=studio / "media")
    assert r.table.column("image_id").to_pylist() == ["scene-a", "b"]
    objs = _objects(r, "scene-a")
    assert [o["label"] for o in objs] == ["car", "truck"]
    assert [o["box"] for o in objs] == [[110.0, 330.0, 310.0, 450.0], [400.0, 0.0, 800.0, 600.0]]
    assert _boxes(r, "b") == []
    assert r.warnings == {"extra_annotations_ignored": 1, "extra_labels_ignored": 1}
    assert r.table.column("image")[1]["path"].as_py() == str((studio / "media" / "b.jpg").resolve())


def test_labelstudio_json_min(tmp_path: Path):
    _img(tmp_path / "a.png", 800, 600)
    (tmp_path / "min.json").write_text(json.dumps([
        {"image": "/data/local-files/?d=a.png", "id": 1,
         "evidence": [{"x": 10, "y": 10, "width": 25, "height": 20, "rotation": 0, "rectanglelabels": ["bus"],
                       "original_width": 800, "original_height": 600}]}
    ]))
    r = import_labelstudio(tmp_path / "min.json")
    assert _boxes(r, "a") == [[80.0, 60.0, 280.0, 180.0]]


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda t: t[0]["annotations"][1]["result"].append(_rect(90, 0, 20, 10)), r"inside the 800x600 image.*task\[0\] id 1 region\[2\] 'car'"),
        (lambda t: t[0]["annotations"][1]["result"].append(_rect(1, 1, 2, 2, ow=1024)), r"original size 1024x600 to match the image header, got 800x600"),
        (lambda t: t[0]["annotations"][1]["result"].append(_rect(1, 1, 2, 2, rotation=30)), r"axis-aligned rectangle, got rotation 30"),
        (lambda t: t[0]["annotations"][1]["result"].append(_rect(1, 1, 2, 2, labels=())), r"label on the rectangle"),
        (lambda t: t[1]["data"].update(image="/data/local-files/?d=nope.png"), r"image file, got a path that does not exist .*nope.png.*task\[1\] id 2, field 'data.image'"),
        (lambda t: t[1].update(data={"text": "hello"}), r"image reference in the task data"),
        (lambda t: t[1]["data"].update(image_id="scene-a"), r"unique image ids, got 'scene-a' twice"),
        (lambda t: t.append(7), r"task object, got int"),
    ],
)
def test_labelstudio_bad_input(studio: Path, edit, match):
    p = studio / "export.json"
    tasks = json.loads(p.read_text())
    edit(tasks)
    p.write_text(json.dumps(tasks))
    with pytest.raises(InputError, match=match):
        import_labelstudio(p, images=studio / "media")


# ------------------------------------------------------------------------------------------------
# Registry and CLI
# ------------------------------------------------------------------------------------------------


def test_registry_is_a_plain_dict():
    assert sorted(IMPORTERS) == ["coco", "kitti", "labelstudio", "voc", "yolo"]
    assert get_importer("witness.dataset.importers:import_voc") is import_voc


def test_unknown_importer_lists_the_known_ones(tmp_path: Path):
    with pytest.raises(UnknownNameError, match=r"Unknown importer 'csv'. Expected one of \['coco', 'kitti', 'labelstudio', 'voc', 'yolo'\]"):
        import_dataset("csv", tmp_path)
    with pytest.raises(UnknownNameError, match=r"Unknown importer 'no.such:thing'"):
        get_importer("no.such:thing")


def test_import_dataset_checks_paths(tmp_path: Path):
    with pytest.raises(InputError, match=r"coco dataset at SRC, got a path that does not exist"):
        import_dataset("coco", tmp_path / "nope.json")
    with pytest.raises(InputError, match=r"image folder for --images"):
        import_dataset("coco", tmp_path, images=tmp_path / "nope")


def test_validation_errors_are_schema_errors_too():
    assert issubclass(InputError, ValueError) and issubclass(SchemaError, ValueError)


def test_cli_import_writes_scenes_and_summary(voc: Path, tmp_path: Path):
    out = tmp_path / "scenes.parquet"
    res = CliRunner().invoke(app, ["dataset", "import", "voc", str(voc), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["scenes"] == 2 and summary["objects"] == 3
    assert summary["per_class"] == {"airplane": 1, "ship": 1, "vehicle": 1}
    assert summary["warnings"] == {"clipped_boxes": 1}
    table, _ = read_scenes(out)
    assert table.num_rows == 2
    res = CliRunner().invoke(app, ["dataset", "import", "voc", str(voc), "--out", str(out)])
    assert res.exit_code == 0 and "airplane" in res.stdout and "clipped_boxes" in res.stdout


def test_cli_import_bad_input_exits_2_with_one_line(kitti: Path, tmp_path: Path):
    (kitti / "label_2" / "000001.txt").write_text("Car 0 0\n")
    out = tmp_path / "s.parquet"
    res = CliRunner().invoke(app, ["dataset", "import", "kitti", str(kitti), "--out", str(out)])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: Expected 15 or 16 fields") and "000001.txt line 1" in lines[0]
    assert not out.exists()


def test_cli_import_unknown_format_exits_2(tmp_path: Path):
    res = CliRunner().invoke(app, ["dataset", "import", "csv", str(tmp_path), "--out", str(tmp_path / "s.parquet")])
    assert res.exit_code == 2 and "Unknown importer 'csv'" in res.stderr


# ------------------------------------------------------------------------------------------------
# The remaining documented error paths
# ------------------------------------------------------------------------------------------------


def test_kitti_non_finite_and_undecodable(kitti: Path):
    (kitti / "label_2" / "000001.txt").write_text(_kitti_line("Car", ("nan", 1, 2, 3)) + "\n")
    with pytest.raises(InputError, match=r"finite box coordinates, got \[nan, 1.0, 2.0, 3.0\] .*000001.txt line 1 'Car'"):
        import_kitti(kitti)
    (kitti / "label_2" / "000001.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match=r"text label file, got undecodable bytes .*000001.txt"):
        import_kitti(kitti)


def test_empty_folders(tmp_path: Path):
    (tmp_path / "Annotations").mkdir()
    (tmp_path / "JPEGImages").mkdir()
    with pytest.raises(InputError, match=r"VOC XML files, got none"):
        import_voc(tmp_path)
    (tmp_path / "label_2").mkdir()
    (tmp_path / "image_2").mkdir()
    with pytest.raises(InputError, match=r"KITTI label files, got none"):
        import_kitti(tmp_path)
    (tmp_path / "data.yaml").write_text("names: [a]\n")
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    with pytest.raises(InputError, match=r"images in .*images or its split folders, got none"):
        import_yolo(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps({"images": [], "annotations": [], "categories": []}))
    with pytest.raises(InputError, match=r"at least one image in the coco data, got none"):
        import_coco(tmp_path / "c.json")


def test_voc_bad_size(voc: Path):
    (voc / "Annotations" / "00002.xml").write_text(
        "<annotation><filename>00002.jpg</filename><size><width>abc</width><height>50</height></size></annotation>"
    )
    with pytest.raises(InputError, match=r"integer size, got width 'abc' height '50' .*field 'size'"):
        import_voc(voc)


@pytest.mark.parametrize(
    "content, match",
    [
        ('"just a string"', r"list of Label Studio tasks, got str"),
        (json.dumps([{"id": 3, "data": {"image": "a.png"}, "annotations": [{"result": {"x": 1}}]}]), r"result list, got dict .*task\[0\]"),
        (
            json.dumps([{"id": 3, "data": {"image": "a.png"}, "annotations": [{"result": [
                {"type": "rectanglelabels", "value": {"x": "left", "y": 1, "width": 2, "height": 2, "rectanglelabels": ["car"]}}]}]}]),
            r"numbers x, y, width, height, got .*region\[0\], field 'value'",
        ),
    ],
)
def test_labelstudio_malformed_export(tmp_path: Path, content: str, match: str):
    _img(tmp_path / "a.png", 80, 60)
    (tmp_path / "e.json").write_text(content)
    with pytest.raises(InputError, match=match):
        import_labelstudio(tmp_path / "e.json")


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------

_unit = st.floats(0.0, 1.0, allow_nan=False)


@given(cx=_unit, cy=_unit, w=_unit, h=_unit, W=st.integers(1, 4000), H=st.integers(1, 4000))
def test_yolo_conversion_round_trips(cx, cy, w, h, W, H):
    b = yolo_to_xyxy([[cx, cy, w, h]], W, H)
    n = xyxy_to_normalized(b, W, H)[0]
    np.testing.assert_allclose([(n[0] + n[2]) / 2, (n[1] + n[3]) / 2, n[2] - n[0], n[3] - n[1]], [cx, cy, w, h], atol=1e-9)


_line = st.lists(
    st.one_of(st.sampled_from(["Car", "DontCare", "0", "1", "-1", "nan", "1e400", "x", "0.5", "12.5", "700"]), st.text(max_size=4)),
    max_size=17,
).map(" ".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line, max_size=4))
def test_random_label_text_never_crashes(kitti: Path, lines: list[str]):
    (kitti / "label_2" / "000001.txt").write_text("\n".join(lines))
    try:
        r = import_kitti(kitti)
    except InputError:
        return
    assert r.n_scenes == 2


def test_labelstudio_percent_encoded_local_path_and_plain_path(tmp_path: Path):
    _img(tmp_path / "root" / "my scenes" / "a b.png", 100, 50)
    _img(tmp_path / "c.png", 10, 10)
    (tmp_path / "e.json").write_text(json.dumps([
        {"id": 1, "data": {"image": "/data/local-files/?d=my%20scenes/a%20b.png"}, "annotations": []},
        {"id": 2, "data": {"image": str(tmp_path / "c.png")}, "annotations": []},
    ]))
    r = import_labelstudio(tmp_path / "e.json", images=tmp_path / "root")
    assert r.table.column("image_id").to_pylist() == ["a b", "c"]
    assert r.table.column("width").to_pylist() == [100, 10]


# ------------------------------------------------------------------------------------------------
# Label Studio: several tasks on one image (witness's own qa projects)
# ------------------------------------------------------------------------------------------------


def _qa_export(tmp_path: Path) -> tuple[Path, list[dict]]:
    """Two qa tasks (one per question) on one scene, built by witness's own task builder; the
    annotations are the pre-annotations as submitted."""
    from witness.annotate.studio.convert import qa_task
    from witness.schema import item_record

    _img(tmp_path / "root" / "scenes" / "s1.png", 800, 600)
    url = "/data/local-files/?d=scenes/s1.png"
    cands = {"boxes": [[80, 60, 280, 180], [400, 300, 500, 420], [10, 10, 30, 50]], "labels": ["car", "car", "pedestrian"]}
    q1 = item_record("q1", "s1", 800, 600, "How many cars?", "2", [[80, 60, 280, 180], [400, 300, 500, 420]], ["car", "car"])
    q2 = item_record("q2", "s1", 800, 600, "Is there a pedestrian?", "yes", [[10, 10, 30, 50]], ["pedestrian"])
    tasks = []
    for k, it in enumerate((q1, q2), start=1):
        t = qa_task(it, url, cands)
        tasks.append({"id": k, "data": t["data"], "annotations": [{"id": 10 + k, "result": t["predictions"][0]["result"]}]})
    return tmp_path / "root", tasks


def test_labelstudio_tasks_of_one_image_merge_into_one_scene(tmp_path: Path):
    root, tasks = _qa_export(tmp_path)
    (tmp_path / "e.json").write_text(json.dumps(tasks))
    r = import_labelstudio(tmp_path / "e.json", images=root)
    assert r.table.column("image_id").to_pylist() == ["s1"]
    objs = _objects(r, "s1")
    assert [o["label"] for o in objs] == ["car", "car", "pedestrian"]
    np.testing.assert_allclose([o["box"] for o in objs], [[80, 60, 280, 180], [400, 300, 500, 420], [10, 10, 30, 50]], atol=1e-3)
    assert [o["id"] for o in objs] == ["s1:0", "s1:1", "s1:2"]
    assert r.warnings == {"tasks_merged": 1, "duplicate_objects_merged": 3}


def test_labelstudio_merge_keeps_edits_and_multiplicity(tmp_path: Path):
    root, tasks = _qa_export(tmp_path)
    # the second annotator moved the pedestrian: a different box is a different object
    ped = next(r for r in tasks[1]["annotations"][0]["result"] if r["type"] == "rectanglelabels" and r["value"]["rectanglelabels"] == ["pedestrian"])
    ped["value"]["x"] += 1.0
    # two identical boxes in one task stay two (not one, not four) after the merge
    twin = _rect(50, 50, 10, 10)
    tasks[0]["annotations"][0]["result"] += [twin, twin]
    tasks[1]["annotations"][0]["result"] += [twin, twin, twin]
    (tmp_path / "e.json").write_text(json.dumps(tasks))
    r = import_labelstudio(tmp_path / "e.json", images=root)
    labels = [o["label"] for o in _objects(r, "s1")]
    assert labels.count("pedestrian") == 2
    assert _boxes(r, "s1").count([400.0, 300.0, 480.0, 360.0]) == 3
    assert r.warnings == {"tasks_merged": 1, "duplicate_objects_merged": 4}


def test_labelstudio_one_id_on_two_images_is_still_an_error(tmp_path: Path):
    root, tasks = _qa_export(tmp_path)
    _img(root / "other" / "s1.png", 800, 600)
    tasks[1]["data"]["image"] = "/data/local-files/?d=other/s1.png"
    (tmp_path / "e.json").write_text(json.dumps(tasks))
    with pytest.raises(InputError, match=r"unique image ids, got 's1' twice for two images .*task\[0\] id 1.*task\[1\] id 2"):
        import_labelstudio(tmp_path / "e.json", images=root)


_ls_leaf = st.none() | st.booleans() | st.integers(-5, 200) | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    ["a.png", "/data/local-files/?d=a.png", "car", "x", "", "640"])
_ls_value = st.recursive(_ls_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
    ["x", "y", "width", "height", "rectanglelabels", "original_width", "rotation", "value", "type", "result", "annotations",
     "data", "image"]), c, max_size=5), max_leaves=20)
_ls_rect = st.fixed_dictionaries({
    "type": st.just("rectanglelabels"),
    "value": st.dictionaries(st.sampled_from(["x", "y", "width", "height", "rectanglelabels", "rotation"]),
                             _ls_leaf | st.lists(_ls_leaf, max_size=2), max_size=6) | _ls_value,
    "original_width": _ls_leaf, "original_height": _ls_leaf})
_ls_task = st.fixed_dictionaries({
    "id": st.integers(0, 3),
    "data": st.just({"image": "/data/local-files/?d=a.png"}) | _ls_value,
    "annotations": st.lists(st.fixed_dictionaries({"result": st.lists(_ls_rect | _ls_value, max_size=3)}), max_size=2) | _ls_value})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=st.lists(_ls_task | _ls_value, max_size=3))
def test_random_labelstudio_export_never_crashes(tmp_path: Path, tasks):
    """Malformed exports (wrong types anywhere) raise InputError, never TypeError / ValueError."""
    _img(tmp_path / "a.png", 80, 60)
    (tmp_path / "e.json").write_text(json.dumps(tasks))
    try:
        import_labelstudio(tmp_path / "e.json", images=tmp_path)
    except InputError:
        pass


def test_labelstudio_malformed_region_fields_name_the_field(tmp_path: Path):
    _img(tmp_path / "a.png", 800, 600)

    def run(region: dict, task_extra: dict | None = None):
        task = {"id": 1, "data": {"image": "/data/local-files/?d=a.png"}, "annotations": [{"result": [region]}], **(task_extra or {})}
        (tmp_path / "e.json").write_text(json.dumps([task]))
        return import_labelstudio(tmp_path / "e.json", images=tmp_path)

    with pytest.raises(InputError, match=r"numbers original_width, original_height and rotation, got 'wide'"):
        run(_rect(1, 1, 2, 2, ow="wide"))
    with pytest.raises(InputError, match=r"list of label names, got 7 .*field 'rectanglelabels'"):
        run({**_rect(1, 1, 2, 2), "value": {**_rect(1, 1, 2, 2)["value"], "rectanglelabels": 7}})
    with pytest.raises(InputError, match=r"region value object, got list .*field 'result.value'"):
        run({**_rect(1, 1, 2, 2), "value": [1, 2]})
    with pytest.raises(InputError, match=r"annotations list, got int .*field 'annotations'"):
        run(_rect(1, 1, 2, 2), {"annotations": 3})
    # a single label name written as a string is that label, not its first letter
    objs = run({**_rect(10, 10, 25, 20), "value": {**_rect(10, 10, 25, 20)["value"], "rectanglelabels": "bus"}}).table.column("objects")[0]
    assert [o["label"].as_py() for o in objs] == ["bus"]
