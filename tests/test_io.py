"""Reading and writing records: round trips, line-numbered errors, atomic writes, predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from witness.errors import InputError, SchemaError
from witness.io import (
    atomic_dir,
    atomic_path,
    iter_batches,
    iter_jsonl,
    read_annotations,
    read_items,
    read_predictions,
    read_scenes,
    read_table,
    write_jsonl,
    write_table,
)
from witness.schema import (
    annotation_record,
    annotations_table,
    item_record,
    items_table,
    scene_record,
)


def _items(n: int = 5) -> list[dict]:
    return [
        item_record(f"q{k}", f"img{k % 2}", 100, 80, "How many cars?", str(k % 3),
                    [[k, 1, k + 5, 6]] * (k % 3), ["car"] * (k % 3), count=k % 3, qtype="counting",
                    category="enumeration", image=f"img{k % 2}.png", provenance={"drafted_by": "rules"})
        for k in range(n)
    ]


def test_parquet_round_trip(tmp_path: Path) -> None:
    t = items_table(_items())
    write_table(t, tmp_path / "items.parquet")
    back, rep = read_items(tmp_path / "items.parquet")
    assert back.equals(t) and rep.n_records == 5
    assert read_table(tmp_path / "items.parquet", "item", columns=["id", "boxes"]).column_names == ["id", "boxes"]


def test_jsonl_round_trip(tmp_path: Path) -> None:
    rows = _items()
    write_jsonl(rows, tmp_path / "items.jsonl")
    back, _ = read_items(tmp_path / "items.jsonl")
    assert back.to_pylist() == items_table(rows).to_pylist()


def test_scenes_round_trip_with_attribute_maps(tmp_path: Path) -> None:
    s = [scene_record("a", 10, 10, [{"id": "o", "label": "car", "box": [1, 1, 5, 5], "attributes": {"color": "red"}}])]
    write_jsonl(s, tmp_path / "scenes.jsonl")
    t, _ = read_scenes(tmp_path / "scenes.jsonl")
    assert t.column("objects").to_pylist()[0][0]["attributes"] == [("color", "red")]
    write_table(t, tmp_path / "scenes.parquet")
    assert read_scenes(tmp_path / "scenes.parquet")[0].equals(t)


def test_annotations_round_trip(tmp_path: Path) -> None:
    t = annotations_table([annotation_record("q1", "ann", "reviewer", verdicts={"box_tight": False}, decision="correct")])
    write_table(t, tmp_path / "ann.parquet")
    assert read_annotations(tmp_path / "ann.parquet").equals(t)


def test_directory_of_parquet_files(tmp_path: Path) -> None:
    rows = _items(6)
    write_table(items_table(rows[:3]), tmp_path / "d" / "a.parquet")
    write_table(items_table(rows[3:]), tmp_path / "d" / "b.parquet")
    assert read_table(tmp_path / "d", "item").num_rows == 6
    (tmp_path / "e").mkdir()
    with pytest.raises(InputError, match=r"Expected Parquet files in the directory, found none"):
        read_table(tmp_path / "e", "item")


def test_iter_batches_streams(tmp_path: Path) -> None:
    write_table(items_table(_items(10)), tmp_path / "items.parquet")
    sizes = [b.num_rows for b in iter_batches(tmp_path / "items.parquet", columns=["id"], batch_size=4)]
    assert sizes == [4, 4, 2]


def test_read_table_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"Expected a item file, got a path that does not exist"):
        read_table(tmp_path / "nope.parquet", "item")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(InputError, match=r"Expected item records, got an empty file"):
        read_table(tmp_path / "empty.jsonl", "item")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match=r"Expected a Parquet or JSONL file, got unreadable data"):
        read_table(tmp_path / "junk.parquet", "item")
    write_table(pa.table({"question": ["q"]}), tmp_path / "noid.parquet")
    with pytest.raises(SchemaError, match=r"Expected column 'id' in the item file"):
        read_table(tmp_path / "noid.parquet", "item")
    (tmp_path / "badtype.jsonl").write_text('{"id": "a", "width": "wide"}\n')
    with pytest.raises(SchemaError, match=r"Expected item records, got values that do not fit the schema"):
        read_table(tmp_path / "badtype.jsonl", "item")


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": "a"}\n\n{"id": "b"}\n{"id": oops}\n')
    with pytest.raises(InputError, match=r"Expected one JSON object per line, got malformed JSON \(.*x.jsonl line 4\)"):
        list(iter_jsonl(p))
    p.write_text('{"id": "a"}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"Expected a JSON object, got list \(.*x.jsonl line 2\)"):
        list(iter_jsonl(p))
    p.write_text('{"id": "a"}\n\n{"id": "b"}\n')
    assert [n for n, _ in iter_jsonl(p)] == [1, 3]


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "items.jsonl"
    write_jsonl([{"id": "old"}], target)
    before = target.read_bytes()

    def rows():
        yield {"id": "new1"}
        raise RuntimeError("crash while writing")

    with pytest.raises(RuntimeError, match="crash while writing"):
        write_jsonl(rows(), target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.jsonl"]  # no temporary left


def test_write_table_failure_keeps_old_parquet(tmp_path: Path) -> None:
    target = tmp_path / "items.parquet"
    write_table(items_table(_items(2)), target)
    before = target.read_bytes()
    with pytest.raises(Exception):  # noqa: B017 - whatever pyarrow raises for a non-table
        write_table("not a table", target)  # type: ignore[arg-type]
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.parquet"]


def test_atomic_path_and_dir(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "a.txt") as tmp:
        tmp.write_text("new")
        assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "a.txt").read_text() == "new"
    d = tmp_path / "rel"
    with atomic_dir(d) as tmp:
        (tmp / "x").write_text("1")
    with pytest.raises(KeyError):
        with atomic_dir(d) as tmp:
            (tmp / "x").write_text("2")
            raise KeyError("boom")
    assert (d / "x").read_text() == "1"
    with atomic_dir(d) as tmp:
        (tmp / "y").write_text("3")
    assert sorted(p.name for p in d.iterdir()) == ["y"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "rel"]


# ------------------------------------------------------------------------------ predictions


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "pred.jsonl"
    p.write_text(text)
    return p


def test_read_predictions_columnar(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        '{"id": "a", "answer": "2", "boxes": [[0, 0, 1, 1], [2, 2, 3, 3]], "scores": [0.9, 0.4]}\n'
        '{"id": "b", "answer": "no", "boxes": []}\n'
        "\n"
        '{"id": 7, "raw": "<answer>x</answer>"}\n',
    )
    pr = read_predictions(p)
    assert len(pr) == 3 and pr.ids == ["a", "b", "7"]
    assert pr.offsets.tolist() == [0, 2, 2, 2]
    np.testing.assert_allclose(pr.scores, [0.9, 0.4])
    assert pr.has_scores.tolist() == [True, False, False]
    assert pr.raw == [None, None, "<answer>x</answer>"] and pr.answers[2] is None
    assert pr.line_numbers.tolist() == [1, 2, 4]
    assert pr.index() == {"a": 0, "b": 1, "7": 2}
    pr2 = read_predictions(_write(tmp_path, '{"id": "a", "boxes": [[0, 0, 1, 1]]}\n'))
    assert pr2.scores.tolist() == [1.0] and pr2.boxes.shape == (1, 4)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"answer": "x"}\n', r"Expected an 'id' in every prediction, got none \(.*pred.jsonl line 1\)"),
        ('{"id": "a"}\n{"id": "a"}\n', r"Expected one prediction per id, got 'a' again \(.*line 2; first on line 1\)"),
        ('{"id": "a", "boxes": [[1, 2, 3]]}\n', r"Expected 'boxes' as a list of \[x1, y1, x2, y2\], got .*line 1, id 'a'"),
        ('{"id": "a", "boxes": "0 0 1 1"}\n', r"Expected 'boxes' as a list of \[x1, y1, x2, y2\]"),
        ('{"id": "a", "boxes": [[0, 0, 1, 1]], "scores": [0.1, 0.2]}\n', r"Expected one score per box \(1\), got \[0.1, 0.2\]"),
        ('{"id": "a", "boxes": [["x", 0, 1, 1]]}\n', r"Expected numeric box coordinates, got \['x', 0, 1, 1\]"),
        ('{"id": "a", "boxes": [[5, 0, 1, 1]]}\n', r"Expected a finite box with x1 <= x2 and y1 <= y2, got \[5, 0, 1, 1\] \(.*line 1, id 'a'\)"),
        ('{"id": "a", "boxes": [[0, 0, 1e999, 1]]}\n', r"malformed JSON \(.*line 1\): number is infinity"),  # orjson refuses inf/NaN
        ("\n\n", r"Expected predictions, got an empty file"),
        ('{"id": "a"}\n{"id": "b", oops}\n', r"malformed JSON \(.*pred.jsonl line 2\)"),
    ],
)
def test_read_predictions_errors(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        read_predictions(_write(tmp_path, text))


def test_read_predictions_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"Expected a predictions JSONL file, got a path that does not exist"):
        read_predictions(tmp_path / "none.jsonl")


# ------------------------------------------------------------------------------ properties

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(_TEXT, st.lists(st.integers(0, 50), min_size=0, max_size=3), st.none() | st.integers(-3, 3)),
        min_size=1,
        max_size=5,
    )
)
def test_parquet_and_jsonl_round_trip_random_items(tmp_path: Path, specs) -> None:
    rows = [
        item_record(f"q{k}", "img", 100, 100, q or "?", "ans", [[x, x, x + 10, x + 10] for x in xs],
                    ["car"] * len(xs), count=c, source=q)
        for k, (q, xs, c) in enumerate(specs)
    ]
    t = items_table(rows)
    write_table(t, tmp_path / "r.parquet")
    write_jsonl(rows, tmp_path / "r.jsonl")
    assert read_table(tmp_path / "r.parquet", "item").equals(t)
    assert read_table(tmp_path / "r.jsonl", "item").to_pylist() == t.to_pylist()


def test_read_table_ids_keeps_only_listed_rows_in_file_order(tmp_path):
    from witness.io import read_table as _read_table
    from witness.io import write_jsonl as _write_jsonl
    from witness.io import write_table as _write_table
    from witness.schema import item_record as _item, items_table as _items

    rows = [_item(f"q{i}", "im", 10, 10, "q?", "a") for i in range(600)]
    pq_path = _write_table(_items(rows), tmp_path / "items.parquet", row_group_size=100)
    got = _read_table(pq_path, "item", ids=["q599", "q3", "nope"])
    assert got.column("id").to_pylist() == ["q3", "q599"]
    light = _read_table(pq_path, "item", columns=["question"], ids=["q7"])
    assert light.column_names == ["question"] and light.num_rows == 1
    jl = _write_jsonl(rows[:5], tmp_path / "items.jsonl")
    assert _read_table(jl, "item", ids={"q1"}).column("id").to_pylist() == ["q1"]
