"""Table II / III statistics against hand-computed numbers, and the plots."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from PIL import Image

from witness.dataset.stats import (
    STATS_COLUMNS,
    dataset_stats,
    read_stats_columns,
    split_stats,
    write_plots,
)
from witness.errors import InputError
from witness.io import write_jsonl, write_table
from witness.schema import item_record, items_table


def _box(k: int) -> list[float]:
    return [float(k), 0.0, float(k) + 10.0, 10.0]  # 10 x 10 = 100 px on a 100 x 100 image: 1 %


def _rows() -> list[dict]:
    """train: 5 items (2 no-box, boxes 1, 2, 7) on 3 images; test: 2 items (boxes 0, 3); 1 unsplit."""
    r = []

    def add(i, img, nb, split, qtype="counting", category="enumeration", answer="a"):
        count = nb if qtype == "counting" else None
        r.append(
            item_record(i, img, 100, 100, "q?", answer, [_box(k) for k in range(nb)], ["car"] * nb,
                        count=count, qtype=qtype, category=category, split=split)
        )

    add("t1", "a", 0, "train", "existence", "existence")
    add("t2", "a", 0, "train", "scene", "scene_inference")
    add("t3", "b", 1, "train", "existence", "existence", answer="Yes, one car.")
    add("t4", "b", 2, "train", answer="2 cars")
    add("t5", "c", 7, "train", answer="six")  # says 6, points at 7
    add("s1", "d", 0, "test", "existence", "existence", answer="no")
    add("s2", "d", 3, "test", answer="Three.")
    add("u1", "e", 1, None, "attribute", "attribute_recognition")
    return r


@pytest.fixture
def items_path(tmp_path: Path) -> Path:
    p = tmp_path / "items.parquet"
    write_table(items_table(_rows()), p)
    return p


def test_table_ii_hand_computed(items_path: Path) -> None:
    stats = dataset_stats(items_path)
    by = {s.name: s for s in stats.splits}
    assert list(by) == ["train", "test", "unsplit"]
    tr = by["train"]
    assert (tr.items, tr.images, tr.boxes) == (5, 3, 10)
    assert tr.no_grd_pct == 40.0 and tr.grd_pct == 60.0
    assert tr.multi_box_pct == pytest.approx(100 * 2 / 3, abs=0.01)  # 2 of 3 grounded have >= 2 boxes
    assert tr.avg_box == pytest.approx(10 / 3, abs=1e-4)
    assert tr.max_boxes == 7 and tr.seven_plus_pct == 20.0
    assert tr.median_area_pct == pytest.approx(1.0)
    assert tr.qtypes == {"existence": 2, "counting": 2, "scene": 1}
    assert tr.categories == {"existence": 2, "enumeration": 2, "scene_inference": 1}
    assert tr.ref_spc == pytest.approx(66.67) and tr.ref_spc_support == 3  # "one", "2" agree; "six" != 7
    te = by["test"]
    assert (te.items, te.no_grd_pct, te.grd_pct, te.multi_box_pct, te.avg_box) == (2, 50.0, 50.0, 100.0, 3.0)
    assert (te.ref_spc, te.ref_spc_support) == (100.0, 1)
    assert stats.total.items == 8 and stats.total.boxes == 14 and stats.total.images == 5


def test_undefined_values_are_none_not_zero() -> None:
    t = items_table([item_record("q", "i", 10, 10, "Day?", "yes")])
    s = split_stats(t, "x")
    assert s.multi_box_pct is None and s.avg_box is None and s.median_area_pct is None
    assert s.ref_spc is None and s.ref_spc_support == 0
    assert s.no_grd_pct == 100.0
    empty = split_stats(t.slice(0, 0), "empty")
    assert empty.items == 0 and empty.no_grd_pct is None and empty.max_boxes == 0


def test_tables_and_markdown(items_path: Path) -> None:
    stats = dataset_stats(items_path)
    cols, rows = stats.table_ii()
    assert cols[:6] == ["Split", "Items", "No-Grd. %", "Grd. %", "Multi-Box %", "Avg. Box"]
    assert rows[-1][0] == "all"
    c3, r3 = stats.table_iii()
    assert c3 == ["Category", "train", "test", "unsplit"]
    assert r3[0] == ["existence", 40.0, 50.0, 0.0]
    md = stats.markdown()
    assert "| train | 5 | 40.00 | 60.00 | 66.67 | 3.33 | 10 | 3 | 66.67 |" in md
    assert "| unsplit | 1 | 0.00 | 100.00 | 0.00 | 1.00 | 1 | 1 | — |" in md
    d = stats.to_dict()
    assert d["splits"]["test"]["avg_box"] == 3.0 and d["all"]["items"] == 8
    assert not any(isinstance(v, float) and math.isnan(v) for v in d["all"].values())


def test_reads_only_light_columns(items_path: Path, tmp_path: Path) -> None:
    t = read_stats_columns(items_path)
    assert t.column_names == STATS_COLUMNS
    j = tmp_path / "items.jsonl"
    write_jsonl(_rows(), j)
    assert dataset_stats(j).total.items == 8


def test_release_directory(tmp_path: Path) -> None:
    from witness.dataset.release import release

    img = tmp_path / "a.png"
    Image.new("RGB", (100, 100)).save(img)
    rows = [r | {"image": {"bytes": None, "path": str(img)}, "image_id": "a", "split": "train"} for r in _rows()]
    write_table(items_table(rows), tmp_path / "items.parquet")
    release([tmp_path / "items.parquet"], tmp_path / "out")
    stats = dataset_stats(tmp_path / "out")
    assert [s.name for s in stats.splits] == ["train"] and stats.total.items == 8


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="Expected a release directory or items file, got a path that does not exist"):
        dataset_stats(tmp_path / "nope")
    (tmp_path / "rel" / "data").mkdir(parents=True)
    with pytest.raises(InputError, match=r"Expected Parquet files in .*data, found none"):
        dataset_stats(tmp_path / "rel")


def test_plots_are_pngs(items_path: Path, tmp_path: Path) -> None:
    written = write_plots(items_path, tmp_path / "plots")
    assert [p.name for p in written] == [
        "boxes_per_question.png", "count_vs_boxes.png", "box_area.png", "box_centers.png",
    ]
    for p in written:
        with Image.open(p) as im:
            assert im.format == "PNG" and im.size[0] > 100
    assert sorted(x.name for x in (tmp_path / "plots").iterdir()) == sorted(p.name for p in written)  # no temp files


def test_plots_without_boxes_or_counts(tmp_path: Path) -> None:
    p = tmp_path / "items.parquet"
    write_table(items_table([item_record("q", "i", 10, 10, "Day?", "yes")]), p)
    assert len(write_plots(p, tmp_path / "plots")) == 4

