"""The Parquet release: split by image, embedded images, card, manifest, atomicity, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from witness.cli.main import app
from witness.dataset.release import (
    assign_splits,
    release,
    release_schema,
    sha256_file,
    verify_manifest,
)
from witness.errors import InputError, SchemaError
from witness.io import write_jsonl, write_table
from witness.schema import item_record, items_table


def _images(root: Path, n: int, size=(40, 30)) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n):
        p = root / f"img{k:03d}.png"
        Image.new("RGB", size, (k * 13 % 256, 80, 160)).save(p)
        paths.append(p)
    return paths


def _items(paths: list[Path], per_image: int = 3, *, prefix: str = "q", split=None, w=40, h=30) -> list[dict]:
    rows = []
    for k, p in enumerate(paths):
        for j in range(per_image):
            nb = j % 3  # 0, 1, 2 boxes
            boxes = [[1 + 5 * b, 1, 4 + 5 * b, 9] for b in range(nb)]
            rows.append(
                item_record(
                    f"{prefix}{k}_{j}", p.stem, w, h, "How many cars?", str(nb), boxes, ["car"] * nb,
                    image=str(p), count=nb, qtype="counting", category="enumeration",
                    split=split(k) if callable(split) else split,
                )
            )
    return rows


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    paths = _images(tmp_path / "images", 20)
    out = tmp_path / "items.parquet"
    write_table(items_table(_items(paths)), out)
    return out


def _load(out: Path, tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    return datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))


def test_release_loads_with_datasets_and_decodes_images(items_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    report = release([items_file], out, test_fraction=0.25, seed=3)
    assert report.items == {"train": 45, "test": 15}
    assert report.images == {"train": 15, "test": 5}
    assert sorted(p.name for p in (out / "data").iterdir()) == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00001.parquet",
    ]
    ds = _load(out, tmp_path)
    assert set(ds) == {"train", "test"}
    assert ds["train"].num_rows == 45 and ds["test"].num_rows == 15
    row = ds["test"][0]
    assert isinstance(row["image"], Image.Image) and row["image"].size == (40, 30)
    assert row["split"] == "test"
    original = Image.open(tmp_path / "images" / f"{row['image_id']}.png").convert("RGB")
    assert row["image"].convert("RGB").tobytes() == original.tobytes()


def test_parquet_file_alone_carries_features(items_file: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "release"
    release([items_file], out, test_fraction=0.25)
    f = out / "data" / "train-00000-of-00001.parquet"
    assert b"huggingface" in pq.read_schema(f).metadata
    ds = datasets.load_dataset("parquet", data_files={"train": str(f)}, cache_dir=str(tmp_path / "c"))
    assert isinstance(ds["train"].features["image"], datasets.Image)
    assert isinstance(ds["train"][0]["image"], Image.Image)


def test_card_header_lists_splits_features_license(items_file: Path, tmp_path: Path) -> None:
    import yaml

    out = tmp_path / "release"
    release([items_file], out, test_fraction=0.25, card_extra={"license": "cc-by-4.0"})
    text = (out / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["license"] == "cc-by-4.0"
    assert "visual-question-answering" in header["task_categories"]
    assert header["configs"][0]["data_files"] == [
        {"split": "train", "path": "data/train-*"},
        {"split": "test", "path": "data/test-*"},
    ]
    feats = {f["name"]: f for f in header["dataset_info"]["features"]}
    assert feats["image"]["dtype"] == "image"
    assert {s["name"]: s["num_examples"] for s in header["dataset_info"]["splits"]} == {"train": 45, "test": 15}
    assert "| train | 45 |" in text  # the statistics table in the body


def test_split_by_image_no_leakage_and_deterministic(items_file: Path, tmp_path: Path) -> None:
    a = release([items_file], tmp_path / "a", test_fraction=0.3, seed=7)
    b = release([items_file], tmp_path / "b", test_fraction=0.3, seed=7)
    release([items_file], tmp_path / "c", test_fraction=0.3, seed=8)
    train = set(pq.read_table(tmp_path / "a/data/train-00000-of-00001.parquet", columns=["image_id"]).column(0).to_pylist())
    test = set(pq.read_table(tmp_path / "a/data/test-00000-of-00001.parquet", columns=["image_id"]).column(0).to_pylist())
    assert train and test and not (train & test)
    assert len(train | test) == 20
    assert [f.sha256 for f in a.files] == [f.sha256 for f in b.files]  # byte-for-byte deterministic
    test_c = set(pq.read_table(tmp_path / "c/data/test-00000-of-00001.parquet", columns=["image_id"]).column(0).to_pylist())
    assert test_c != test


def test_assign_splits_counts_by_largest_remainder() -> None:
    imgs = [f"i{k}" for k in range(10)]
    got = assign_splits(imgs, [None] * 10, {"train": 0.5, "validation": 0.25, "test": 0.25}, seed=0)
    # exact sizes 5, 2.5, 2.5: the leftover image goes to the first tied split in split order
    assert (got.count("train"), got.count("validation"), got.count("test")) == (5, 3, 2)
    got = assign_splits(imgs, [None] * 10, {"train": 0.66, "test": 0.34}, seed=0)
    assert (got.count("train"), got.count("test")) == (7, 3)  # 6.6, 3.4 -> largest remainder to train


def test_given_splits_are_honoured(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 6)
    rows = _items(paths, split=lambda k: "validation" if k < 2 else None)
    write_table(items_table(rows), tmp_path / "items.parquet")
    report = release([tmp_path / "items.parquet"], tmp_path / "out", test_fraction=0.5, seed=0)
    assert report.images == {"train": 2, "validation": 2, "test": 2}
    vids = pq.read_table(tmp_path / "out/data/validation-00000-of-00001.parquet", columns=["image_id"]).column(0)
    assert set(vids.to_pylist()) == {"img000", "img001"}


def test_image_in_two_splits_is_named(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 2)
    rows = _items(paths, split="train")
    rows[1]["split"] = "test"
    write_table(items_table(rows), tmp_path / "items.parquet")
    with pytest.raises(SchemaError, match=r"image 'img000' in splits 'train' and 'test'"):
        release([tmp_path / "items.parquet"], tmp_path / "out")


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 2)
    write_table(items_table(_items(paths)), tmp_path / "a.parquet")
    write_jsonl(_items(paths[:1]), tmp_path / "b.jsonl")
    with pytest.raises(SchemaError, match=r"unique item ids across input files, got 'q0_0'"):
        release([tmp_path / "a.parquet", tmp_path / "b.jsonl"], tmp_path / "out")


def test_jsonl_and_parquet_inputs_combine(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 4)
    write_table(items_table(_items(paths[:2])), tmp_path / "a.parquet")
    write_jsonl(_items(paths[2:], prefix="j"), tmp_path / "b.jsonl")
    report = release([tmp_path / "a.parquet", tmp_path / "b.jsonl"], tmp_path / "out", test_fraction=0.0)
    assert report.items == {"train": 12}


def test_relative_image_paths_resolve_beside_items_file(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 2)
    rows = _items(paths)
    for r in rows:
        r["image"]["path"] = "images/" + Path(r["image"]["path"]).name
    write_table(items_table(rows), tmp_path / "items.parquet")
    report = release([tmp_path / "items.parquet"], tmp_path / "out", test_fraction=0.0)
    assert report.items == {"train": 6}


def test_rerelease_keeps_embedded_bytes_and_splits(items_file: Path, tmp_path: Path) -> None:
    first = release([items_file], tmp_path / "r1", test_fraction=0.25, seed=1)
    files = sorted((tmp_path / "r1" / "data").glob("*.parquet"))
    second = release(files, tmp_path / "r2", test_fraction=0.9, seed=99)  # splits come from the rows
    assert second.items == first.items
    t = pq.read_table(tmp_path / "r2/data/test-00000-of-00001.parquet", columns=["image"])
    assert t.column("image").combine_chunks().field("bytes").null_count == 0


def test_manifest_hashes_match(items_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    report = release([items_file], out, test_fraction=0.25)
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {f["path"]: f for f in manifest["files"]}
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(listed) == on_disk == {f.path for f in report.files}
    for path, f in listed.items():
        assert f["sha256"] == sha256_file(out / path)
        assert f["bytes"] == (out / path).stat().st_size
    assert manifest["splits"]["test"]["items"] == 15
    assert verify_manifest(out) == []
    with open(out / "stats.json", "a") as fh:
        fh.write(" ")
    assert verify_manifest(out) == [f"stats.json: {listed['stats.json']['bytes'] + 1} bytes, manifest says {listed['stats.json']['bytes']}"]


def test_verify_manifest_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="Expected a release with manifest.json"):
        verify_manifest(tmp_path)


def test_sharding_by_size(items_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    report = release([items_file], out, test_fraction=0.0, max_shard_bytes=1, batch_size=16)
    names = sorted(p.name for p in (out / "data").iterdir())
    assert len(names) == 4 and names[0] == "train-00000-of-00004.parquet"
    assert sum(pq.read_metadata(out / "data" / n).num_rows for n in names) == report.items["train"] == 60
    assert len(_load(out, tmp_path)["train"]) == 60


def test_failure_in_last_batch_leaves_old_release(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 20)
    write_table(items_table(_items(paths)), tmp_path / "items.parquet")
    out = tmp_path / "release"
    release([tmp_path / "items.parquet"], out, test_fraction=0.25)
    before = {p.relative_to(out).as_posix(): sha256_file(p) for p in out.rglob("*") if p.is_file()}
    paths[-1].unlink()  # the last image: read in the last batch, after earlier batches were written
    with pytest.raises(InputError, match=r"Expected a readable image file, got '.*img019.png' \(item 'q19_0'"):
        release([tmp_path / "items.parquet"], out, test_fraction=0.5, batch_size=8)
    after = {p.relative_to(out).as_posix(): sha256_file(p) for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["images", "items.parquet", "release"]  # no temp dir


def test_unreadable_image(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 2)
    paths[0].write_bytes(b"not a png")
    write_table(items_table(_items(paths)), tmp_path / "items.parquet")
    with pytest.raises(InputError, match=r"Expected an image file Pillow can read, got unreadable data .*item 'q0_0'"):
        release([tmp_path / "items.parquet"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_image_reference(tmp_path: Path) -> None:
    rows = [item_record("q1", "a", 40, 30, "Any car?", "no")]
    write_table(items_table(rows), tmp_path / "items.parquet")
    with pytest.raises(InputError, match=r"Expected an image path or bytes, got none \(item 'q1'"):
        release([tmp_path / "items.parquet"], tmp_path / "out")


def test_image_size_must_match_item(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 1, size=(50, 30))
    write_table(items_table(_items(paths)), tmp_path / "items.parquet")
    with pytest.raises(SchemaError, match=r"Expected a 40x30 image \(the item's width x height\), got 50x30"):
        release([tmp_path / "items.parquet"], tmp_path / "out")


def test_invalid_items_are_refused_before_writing(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 1)
    rows = _items(paths)
    rows[1]["boxes"] = [[30, 1, 20, 9]]
    write_table(items_table(rows), tmp_path / "items.parquet")
    with pytest.raises(SchemaError, match=r"x1 < x2 .*item 'q0_1'"):
        release([tmp_path / "items.parquet"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"test_fraction": 1.0}, r"Expected a test fraction in \[0, 1\), got 1.0"),
        ({"splits": {"train": 0.5, "test": 0.2}}, r"Expected split fractions that sum to 1"),
        ({"splits": {"train": 1.5, "test": -0.5}}, r"Expected a non-negative split fraction, got test=-0.5"),
        ({"splits": {"my split": 1.0}}, r"Expected a split name of letters, digits and underscores, got 'my split'"),
    ],
)
def test_bad_split_arguments(items_file: Path, tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        release([items_file], tmp_path / "out", **kwargs)


def test_missing_and_empty_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="Expected at least one items file"):
        release([], tmp_path / "out")
    with pytest.raises(InputError, match=r"Expected an items file, got a path that does not exist"):
        release([tmp_path / "nope.parquet"], tmp_path / "out")


def test_release_schema_metadata() -> None:
    meta = json.loads(release_schema().metadata[b"huggingface"])
    assert meta["info"]["features"]["image"] == {"_type": "Image"}


def test_cli_release_and_stats(items_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "release"
    res = runner.invoke(app, ["dataset", "release", str(items_file), "--out", str(out), "--test-fraction", "0.25", "--seed", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["items"] == {"train": 45, "test": 15}
    res = runner.invoke(app, ["dataset", "release", str(items_file), "--out", str(out), "--test-fraction", "0.25"])
    assert res.exit_code == 0 and "train" in res.stdout
    res = runner.invoke(app, ["dataset", "stats", str(out), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["all"]["items"] == 60
    assert sorted(Path(p).name for p in got["plots"]) == [
        "box_area.png", "box_centers.png", "boxes_per_question.png", "count_vs_boxes.png",
    ]
    assert (out / "stats" / "box_area.png").stat().st_size > 0
    res = runner.invoke(app, ["dataset", "stats", str(out), "--plots", str(tmp_path / "p")])
    assert res.exit_code == 0 and "Table II" in res.stdout
    assert (tmp_path / "p" / "box_centers.png").exists()


def test_cli_bad_input_exits_2(items_file: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["dataset", "release", str(items_file), "--out", str(tmp_path / "o"), "--test-fraction", "2"])
    assert res.exit_code == 2
    assert "Expected a test fraction" in res.stderr


def test_cli_verify(items_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "release"
    release([items_file], out)
    res = runner.invoke(app, ["dataset", "verify", str(out)])
    assert res.exit_code == 0 and "every file matches" in res.stdout
    (out / "README.md").write_text("tampered")
    res = runner.invoke(app, ["dataset", "verify", str(out), "--json"])
    assert res.exit_code == 1
    assert json.loads(res.stdout)["problems"][0].startswith("README.md: ")
    res = runner.invoke(app, ["dataset", "verify", str(tmp_path / "images")])
    assert res.exit_code == 2 and "Expected a release with manifest.json" in res.stderr


def test_progress_callback(items_file: Path, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    release([items_file], tmp_path / "out", batch_size=25, on_progress=lambda d, t: seen.append((d, t)))
    assert seen == [(25, 60), (50, 60), (60, 60)]


def test_cli_stats_of_an_items_file(tmp_path: Path) -> None:
    p = tmp_path / "items.jsonl"
    write_jsonl(_items(_images(tmp_path / "images", 2)), p)
    runner = CliRunner()
    res = runner.invoke(app, ["dataset", "stats", str(p), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["splits"]["unsplit"]["items"] == 6
    assert (tmp_path / "items_stats" / "box_area.png").exists()
    res = runner.invoke(app, ["dataset", "stats", str(p), "--no-plots", "--json"])
    assert json.loads(res.stdout)["plots"] == []


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=100)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.sampled_from([None, None, None, "train", "test", "validation"])), min_size=1, max_size=40),
    st.floats(0.0, 0.95),
    st.integers(0, 3),
)
def test_assign_splits_properties(rows, test_fraction: float, seed: int) -> None:
    images = [f"i{k}" for k, _ in rows]
    given_splits = [s for _, s in rows]
    fractions = {"train": 1 - test_fraction, "test": test_fraction}
    try:
        got = assign_splits(images, given_splits, fractions, seed=seed)
    except SchemaError as exc:  # only when one image carries two different splits
        assert "Expected each image in one split" in str(exc)
        carried: dict[str, set] = {}
        for img, s in zip(images, given_splits, strict=True):
            if s is not None:
                carried.setdefault(img, set()).add(s)
        assert any(len(v) > 1 for v in carried.values())
        return
    per_image: dict[str, set] = {}
    for img, s in zip(images, got, strict=True):
        per_image.setdefault(img, set()).add(s)
    assert all(len(v) == 1 for v in per_image.values())  # no image in two splits
    for s_given, s_got in zip(given_splits, got, strict=True):
        assert s_given is None or s_given == s_got  # given splits are honoured
    assert got == assign_splits(images, given_splits, fractions, seed=seed)  # deterministic
    free = {img for img in images} - {img for img, s in zip(images, given_splits, strict=True) if s is not None}
    n_test = sum(1 for img in free if per_image[img] == {"test"})
    assert abs(n_test - test_fraction * len(free)) <= 1


def test_bad_split_name_on_an_item_and_bad_sizes(tmp_path: Path) -> None:
    paths = _images(tmp_path / "images", 1)
    write_table(items_table(_items(paths, split="my split")), tmp_path / "items.parquet")
    with pytest.raises(SchemaError, match=r"Expected a split name of letters, digits and underscores, got 'my split' \(item 'q0_0'"):
        release([tmp_path / "items.parquet"], tmp_path / "out")
    with pytest.raises(InputError, match=r"Expected a positive batch size and shard size, got 0, 1"):
        release([tmp_path / "items.parquet"], tmp_path / "out", batch_size=0, max_shard_bytes=1)


def test_extra_files_are_hashed_and_linked(items_file: Path, tmp_path: Path) -> None:
    import json as _json

    out = tmp_path / "rel"
    release([items_file], out, extra_files={"gate/report.md": b"# ok\n"}, card_links={"Gate report": "gate/report.md"})
    assert (out / "gate" / "report.md").read_bytes() == b"# ok\n"
    assert "[Gate report](gate/report.md)" in (out / "README.md").read_text()
    manifest = _json.loads((out / "manifest.json").read_text())
    assert "gate/report.md" in {f["path"] for f in manifest["files"]}
    with pytest.raises(InputError, match="inside the release"):
        release([items_file], tmp_path / "rel2", extra_files={"../escape.txt": b"x"})
    assert not (tmp_path / "rel2").exists() and not (tmp_path / "escape.txt").exists()
