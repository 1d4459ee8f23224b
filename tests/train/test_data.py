"""Release Parquet to TRL rows."""

from __future__ import annotations

import pytest
from PIL import Image

from witness.errors import InputError
from witness.eval.parse import parse
from witness.train.data import (
    build_prompt,
    cap_image,
    load_split,
    pair_rows,
    split_files,
    to_grpo,
    to_sft,
)


def test_missing_split_names_the_pattern(tmp_path):
    with pytest.raises(InputError, match=r"data/train-\*\.parquet"):
        split_files(tmp_path, "train")


def test_sft_rows_carry_image_and_a_parseable_target(tiny_release):
    ds = load_split(tiny_release, "train")
    rows = to_sft(ds, order="eta", max_pixels=1000)
    assert set(rows.column_names) == {"id", "images", "messages"}
    ex = rows[0]
    img = ex["images"][0]
    assert img.size[0] * img.size[1] <= 1000
    target = ex["messages"][1]["content"][0]["text"]
    item = ds[0]
    p = parse(target, "eta", width=item["width"], height=item["height"])
    assert p.ok and p.answer == item["answer"] and len(p.boxes) == len(item["boxes"])
    assert ex["messages"][0]["content"][1]["text"] == build_prompt(item["question"], "eta")


def test_grpo_rows_keep_reference_columns(tiny_release):
    rows = to_grpo(load_split(tiny_release, "train", limit=3))
    assert {"prompt", "image", "id", "answer", "boxes", "width", "height", "pair_id", "pair_role"} <= set(rows.column_names)
    assert len(rows) == 3


def test_pairs_are_adjacent_role_1_then_2(tiny_release):
    ds = pair_rows(load_split(tiny_release, "train"), seed=3)
    roles = ds["pair_role"]
    ids = ds["pair_id"]
    assert roles == [1, 2] * (len(ds) // 2)
    assert all(ids[i] == ids[i + 1] for i in range(0, len(ds), 2))


def test_no_pairs_raises(tiny_release):
    ds = load_split(tiny_release, "train").filter(lambda ex: ex["pair_id"] is None)
    with pytest.raises(InputError, match="logically equivalent pairs"):
        pair_rows(ds)


def test_bad_order_raises(tiny_release):
    with pytest.raises(InputError, match="Expected an order"):
        to_sft(load_split(tiny_release, "train", limit=1), order="sideways")


def test_cap_image_keeps_aspect():
    assert cap_image(Image.new("RGB", (400, 100)), 10_000).size == (200, 50)
    assert cap_image(Image.new("L", (10, 10)), None).mode == "RGB"


def test_release_without_item_columns_raises(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"id": ["a"]}), tmp_path / "data" / "train-00000-of-00001.parquet")
    with pytest.raises(InputError, match="Expected item columns"):
        load_split(tmp_path, "train")


def test_image_without_bytes_or_path_raises():
    with pytest.raises(InputError, match="bytes or a path"):
        cap_image({"bytes": None, "path": None}, 100)


def test_build_prompt_rejects_unknown_order():
    with pytest.raises(InputError, match="Expected an order"):
        build_prompt("How many cars?", "backwards")
