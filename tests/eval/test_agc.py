"""AGC suite: hand-worked cases, every key against a per-sample reference implementation, the
accumulating class, alignment rules and bad input (GT and predictions)."""

from __future__ import annotations

import numpy as np
import pytest

from witness.boxes import match_greedy_giou, match_max_cardinality, match_max_iou
from witness.errors import InputError, SchemaError, UnknownNameError
from witness.eval.agc import AGC, AGC_KEYS, evaluate_agc, match_boxes_flat, overlapping_pairs
from witness.eval.answers import match_lenient, match_strict, stated_count
from witness.eval.data import load_samples, samples_from_records
from witness.io import read_predictions, read_predictions_fast
from witness.schema import item_record

from .conftest import random_case


def _hand_case():
    items = [
        # 3 references; 2 predicted (one hit, one miss), the answer says 2: SPC ok, counts differ
        item_record("a", "i1", 100, 100, "How many cars?", "3 cars",
                    [[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], ["car"] * 3, qtype="counting", category="enumeration"),
        # no reference box; prediction grounds nothing and says no: GDA ok, F1(∅, ∅) = 1
        item_record("b", "i1", 100, 100, "Is there a bus?", "No", qtype="existence", category="existence"),
        # one reference; prediction exact; answer "white" vs "White van": strict no (ref not in pred), lenient yes (containment)
        item_record("c", "i2", 100, 100, "What colour is the van?", "white van", [[10, 10, 60, 60]], ["van"],
                    qtype="attribute", category="attribute_recognition"),
        # missing prediction
        item_record("d", "i2", 100, 100, "Is there a van?", "yes", [[10, 10, 60, 60]], ["van"], qtype="existence", category="existence"),
    ]
    preds = [
        {"id": "a", "answer": "two cars", "boxes": [[0, 0, 10, 10], [70, 70, 80, 80]]},
        {"id": "b", "answer": "No.", "boxes": []},
        {"id": "c", "answer": "White", "boxes": [[10, 10, 60, 60]]},
    ]
    return items, preds


def test_agc_hand_worked():
    items, preds = _hand_case()
    r = evaluate_agc(samples_from_records(items, preds))
    m = r.metrics
    assert set(AGC_KEYS) <= set(m)
    assert (r.n, r.missing, r.parse_rate) == (4, 1, 1.0)
    # |B̂| = 2, 0, 1, 0 ; |B*| = 3, 0, 1, 1
    assert m["gda"] == pytest.approx(3 / 4)
    assert m["cnt_acc"] == pytest.approx(2 / 4)
    assert m["cnt_mae"] == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert m["spc"] == 1.0 and m["spc_support"] == 1  # only "two cars" states a count
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 5)
    assert m["f1"] == pytest.approx(2 * 2 / (3 + 5))
    assert np.isnan(m["recall_4_6"]) and np.isnan(m["recall_7plus"])
    # F1 per sample: a 2/5 < .5, b 1, c 1, d 0 ; answers: b strict+lenient ok, c lenient only
    assert m["gca_s"] == pytest.approx(1 / 4)
    assert m["gca_l"] == pytest.approx(2 / 4)
    assert r.by["category"]["existence"]["n"] == 2
    assert r.by["category"]["existence"]["gda"] == pytest.approx(1 / 2)
    assert list(r.by["qtype"]) == ["existence", "counting", "attribute"]  # vocabulary order


def test_agc_recall_buckets():
    boxes = [[i * 10, 0, i * 10 + 8, 8] for i in range(8)]
    items = [item_record("m", "i", 100, 100, "Q?", "5", boxes[:5], ["x"] * 5),
             item_record("l", "i", 100, 100, "Q?", "8", boxes, ["x"] * 8)]
    preds = [{"id": "m", "answer": "5", "boxes": boxes[:4]}, {"id": "l", "answer": "8", "boxes": boxes[:2]}]
    m = evaluate_agc(samples_from_records(items, preds)).metrics
    assert m["recall_4_6"] == pytest.approx(4 / 5)
    assert m["recall_7plus"] == pytest.approx(2 / 8)


def _reference_agc(items, preds):
    """Per-sample loop over witness.boxes and witness.eval.answers: an independent implementation."""
    pmap = {p["id"]: p for p in preds}
    g = c = mae = 0
    spc_n = spc_ok = tp_all = np_all = nr_all = gs = gl = 0
    for it in items:
        p = pmap.get(it["id"], {})
        pb, rb = np.asarray(p.get("boxes") or np.zeros((0, 4))), np.asarray(it["boxes"] or np.zeros((0, 4)))
        ans = p.get("answer") or ""
        m = match_max_iou(pb, rb)
        g += (len(pb) > 0) == (len(rb) > 0)
        c += len(pb) == len(rb)
        mae += abs(len(pb) - len(rb))
        nu = stated_count(ans)
        if nu is not None:
            spc_n += 1
            spc_ok += nu == len(pb)
        tp_all += m.tp
        np_all += len(pb)
        nr_all += len(rb)
        gs += match_strict(ans, it["answer"]) and m.f1 >= 0.5
        gl += match_lenient(ans, it["answer"]) and m.f1 >= 0.5
    n = len(items)
    return {"gda": g / n, "cnt_acc": c / n, "cnt_mae": mae / n, "spc": spc_ok / spc_n, "spc_support": spc_n,
            "precision": tp_all / np_all, "recall": tp_all / nr_all, "f1": 2 * tp_all / (np_all + nr_all),
            "gca_s": gs / n, "gca_l": gl / n}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agc_equals_per_sample_reference(seed):
    items, preds = _random_with_missing(seed)
    m = evaluate_agc(samples_from_records(items, preds)).metrics
    ref = _reference_agc(items, preds)
    for k, v in ref.items():
        assert m[k] == pytest.approx(v, abs=1e-12), k


def _random_with_missing(seed, n=120):
    rng = np.random.default_rng(seed)
    items, preds = random_case(rng, n)
    return items, [p for k, p in enumerate(preds) if k % 17 != 5]


@pytest.mark.parametrize("method, ref_fn", [("max_iou", match_max_iou), ("max_cardinality", match_max_cardinality),
                                            ("greedy_giou", match_greedy_giou)])
def test_flat_matching_equals_boxes_matchers(method, ref_fn):
    rng = np.random.default_rng(3)
    pred, ref = [], []
    for _ in range(200):  # crowded samples: many non-trivial (solver) cases
        k = int(rng.integers(0, 7))
        xy = rng.uniform(0, 30, (k, 2))
        r = np.c_[xy, xy + rng.uniform(5, 20, (k, 2))]
        p = r + rng.normal(0, 3, r.shape)
        p[:, 2:] = np.maximum(p[:, 2:], p[:, :2] + 0.5)
        pred.append(p[: int(rng.integers(0, k + 1))])
        ref.append(r)
    po = np.r_[0, np.cumsum([len(p) for p in pred])]
    ro = np.r_[0, np.cumsum([len(r) for r in ref])]
    flat = match_boxes_flat(np.concatenate(pred), po, np.concatenate(ref), ro, method=method)
    for i, (p, r) in enumerate(zip(pred, ref, strict=False)):
        want = ref_fn(p, r)
        assert flat.tp[i] == want.tp
        assert np.flatnonzero(flat.pred_matched[po[i]:po[i + 1]]).tolist() == sorted(want.pred_idx.tolist())
        assert np.flatnonzero(flat.ref_matched[ro[i]:ro[i + 1]]).tolist() == sorted(want.ref_idx.tolist())


def test_max_iou_with_exact_ties_equals_the_solver():
    # duplicated boxes make equal IoUs and equal diagonal sums: those samples go to the solver
    rng = np.random.default_rng(8)
    pred, ref = [], []
    for _ in range(300):
        k = int(rng.integers(1, 4))
        xy = rng.integers(0, 20, (k, 2)).astype(float)
        r = np.c_[xy, xy + rng.integers(4, 12, (k, 2))]
        p = np.r_[r, r[:1]] if rng.random() < 0.5 else r.copy()
        if rng.random() < 0.5:
            r = np.r_[r, r[:1]]
        pred.append(p)
        ref.append(r)
    po = np.r_[0, np.cumsum([len(p) for p in pred])]
    ro = np.r_[0, np.cumsum([len(r) for r in ref])]
    flat = match_boxes_flat(np.concatenate(pred), po, np.concatenate(ref), ro, method="max_iou")
    for i, (p, r) in enumerate(zip(pred, ref, strict=True)):
        want = match_max_iou(p, r)
        assert flat.tp[i] == want.tp
        assert np.flatnonzero(flat.pred_matched[po[i]:po[i + 1]]).tolist() == sorted(want.pred_idx.tolist())


def test_overlapping_pairs_chunks_agree():
    rng = np.random.default_rng(9)
    items, preds = random_case(rng, 60)
    s = samples_from_records(items, preds)
    a = overlapping_pairs(s.pred_boxes, s.pred_offsets, s.ref_boxes, s.ref_offsets)
    b = overlapping_pairs(s.pred_boxes, s.pred_offsets, s.ref_boxes, s.ref_offsets, chunk_pairs=7)
    for x, y in zip(a, b, strict=False):
        assert np.array_equal(x, y)


def test_accumulating_agc_equals_functional():
    items, preds = _random_with_missing(4, n=90)
    acc = AGC()
    for k in range(0, 90, 30):
        ids = {it["id"] for it in items[k : k + 30]}
        acc.update(items[k : k + 30], [p for p in preds if p["id"] in ids])
    whole = evaluate_agc(samples_from_records(items, preds)).metrics
    got = acc.compute()
    for key in AGC_KEYS:
        assert got[key] == pytest.approx(whole[key], abs=1e-12, nan_ok=True), key
    acc.reset()
    with pytest.raises(InputError, match="Expected at least one update"):
        acc.compute()


def test_accumulating_agc_rejects_an_id_twice():
    items, preds = _hand_case()
    acc = AGC()
    acc.update(items[:1], preds[:1])
    acc.update(items[:1], preds[:1])
    with pytest.raises(SchemaError, match="unique item ids across updates"):
        acc.compute()


# ---------------------------------------------------------------------------------------- data


def test_raw_predictions_are_parsed_with_the_item_size(suite_files):
    items, _ = _hand_case()
    preds = [{"id": "c", "raw": "<boxes>[[100, 100, 600, 600]]</boxes>\n<answer>white van</answer>"},
             {"id": "a", "raw": "I think three cars"}]
    gt, pred = suite_files(items, preds)
    s = load_samples(gt, pred, "agc", fmt="eta")
    assert s.pred_boxes.tolist() == [[10.0, 10.0, 60.0, 60.0]]
    assert s.parse_rate == pytest.approx(1 / 2)
    assert s.missing.sum() == 2
    with pytest.raises(InputError, match="Expected --format for raw model outputs"):
        load_samples(gt, pred, "agc")
    with pytest.raises(UnknownNameError, match=r"Unknown format 'nope'. Expected one of \[.*'eta'"):
        load_samples(gt, pred, "agc", fmt="nope")


def test_fast_reader_equals_io_reader(tmp_path):
    rng = np.random.default_rng(2)
    _, preds = random_case(rng, 50)
    preds[3].pop("scores")
    preds[4] = {"id": "q4", "raw": "text"}
    from witness.io import write_jsonl

    p = write_jsonl(preds, tmp_path / "p.jsonl")
    a, b = read_predictions_fast(p), read_predictions(p)
    assert a.ids == b.ids and a.answers == b.answers and a.raw == b.raw
    for f in ("boxes", "scores", "offsets", "has_scores", "line_numbers"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


@pytest.mark.parametrize(
    "lines, match",
    [
        ('{"id": "a", "boxes": []}\n{"id": "b", "boxes": [[0, 0, 1\n', r"malformed JSON \(.*line 2\)"),
        ('{"id": "a", "boxes": [[0, 0, NaN, 1]]}\n', r"malformed JSON \(.*line 1\)"),
        ('{"id": "a", "boxes": [[5, 0, 1, 1]]}\n', r"x1 <= x2 and y1 <= y2, got \[5, 0, 1, 1\] \(.*line 1"),
        ('{"id": "a", "boxes": [[0, 0, 1]]}\n', r"Expected 'boxes' as a list of \[x1, y1, x2, y2\]"),
        ('{"id": "a"}\n\n{"id": "a"}\n', r"one prediction per id, got 'a' again \(.*line 3; first on line 1\)"),
        ('{"id": "a", "boxes": [[0, 0, 1, 1]], "scores": [0.1, 0.2]}\n', r"one score per box"),
        # used to escape as a ValueError / TypeError traceback (exit 1, no line)
        ('{"id": "a", "boxes": [[0, 0, 1, 1]], "scores": ["high"]}\n', r"numeric scores, got \['high'\] \(.*line 1, id 'a'\)"),
        ('{"id": "a", "boxes": [[0, 0, 1, 1]], "scores": [null]}\n', r"numeric scores, got \[None\] \(.*line 1"),
        ("", r"empty file"),
        ('{"id": "zz", "boxes": []}\n{"id": "yy"}\n', r"unknown id\(s\) \['zz', 'yy'\]"),
    ],
)
def test_bad_predictions(suite_files, lines, match):
    items, _ = _hand_case()
    gt, pred = suite_files(items, [])
    pred.write_text(lines)
    with pytest.raises(InputError, match=match):
        load_samples(gt, pred, "agc")


def test_non_finite_scores_are_refused():
    from witness.eval.data import align
    from witness.io import Predictions
    from witness.schema import items_table

    items, _ = _hand_case()
    preds = Predictions(["a"], ["1"], [None], np.array([[0, 0, 1, 1.]]), np.array([np.nan]), np.array([0, 1]),
                        np.array([True]), np.array([7]))
    with pytest.raises(InputError, match=r"finite scores, got nan \(predictions line 7, id 'a'\)"):
        align(items_table(items), preds)


def test_bad_reference_boxes(tmp_path):
    from witness.io import write_jsonl

    base = {"image_id": "i", "width": 10, "height": 10, "question": "Q?", "answer": "1", "labels": ["x"]}
    gt = write_jsonl([{"id": "a", **base, "boxes": [[0, 0, 5, 5]]}, {"id": "b", **base, "boxes": [[6, 0, 2, 5]]}],
                     tmp_path / "items.jsonl")
    pred = write_jsonl([{"id": "a"}], tmp_path / "p.jsonl")
    with pytest.raises(SchemaError, match=r"x1 < x2 and y1 < y2, got \[6.0, 0.0, 2.0, 5.0\] \(item 'b', .*row 1"):
        load_samples(gt, pred, "agc")
    from witness.io import write_table
    from witness.schema import items_table

    nan_gt = write_table(items_table([item_record("a", "i", 10, 10, "Q?", "1", [[0, 0, float("nan"), 5]], ["x"])]),
                         tmp_path / "nan.parquet")
    with pytest.raises(SchemaError, match=r"finite reference box with x1 < x2 and y1 < y2, got \[0.0, 0.0, nan, 5.0\] \(item .a."):
        load_samples(nan_gt, pred, "agc")


def test_duplicate_and_empty_and_missing_gt(tmp_path, suite_files):
    from witness.io import write_jsonl

    base = {"image_id": "i", "width": 10, "height": 10, "question": "Q?", "answer": "1", "boxes": []}
    gt = write_jsonl([{"id": "a", **base}, {"id": "a", **base}], tmp_path / "dup.jsonl")
    pred = write_jsonl([{"id": "a"}], tmp_path / "p.jsonl")
    with pytest.raises(SchemaError, match=r"unique item ids, got 'a' twice .*row 1"):
        load_samples(gt, pred, "agc")
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        load_samples(empty, pred, "agc")
    with pytest.raises(InputError, match="does not exist"):
        load_samples(tmp_path / "nope.parquet", pred, "agc")


def test_gt_without_a_needed_column_is_named(tmp_path):
    from witness.io import write_jsonl

    gt = write_jsonl([{"id": "a", "image_id": "i", "width": 10, "height": 10, "question": "Q?", "answer": "1"}],
                     tmp_path / "items.jsonl")
    pred = write_jsonl([{"id": "a"}], tmp_path / "p.jsonl")
    with pytest.raises(SchemaError, match=r"item column\(s\) \['boxes'\] that agc needs"):
        load_samples(gt, pred, "agc")


def test_gt_reads_only_needed_columns_without_images(suite_files):
    items, preds = _hand_case()
    gt, pred = suite_files(items, preds)
    s = load_samples(gt, pred, "agc")
    assert "image" not in s.columns and set(s.columns) == {"answer", "qtype", "category"}


def test_answer_verdicts_and_nu_by_distinct_values_equal_elementwise():
    """Strict/lenient verdicts and ν read once per distinct value equal the scalar functions."""
    import pyarrow as pa

    from witness.eval.agc import _answer_verdicts, _encode
    from witness.eval.answers import stated_counts

    preds = ["Yes", "yes", None, "2 cars", "two cars", "No.", "", "I count 3 cars.", "Yes", None] * 7
    refs = ["yes", "yes", "no", "2", "2 cars", None, "", "3", "no", "yes"] * 7
    p, r = _encode(pa.array(preds, pa.string())), _encode(pa.array(refs, pa.string()))
    ok_s, ok_l = _answer_verdicts(p, r)
    assert ok_s.tolist() == [match_strict(a, b) for a, b in zip(preds, refs, strict=True)]
    assert ok_l.tolist() == [match_lenient(a, b) for a, b in zip(preds, refs, strict=True)]
    nu = np.append(stated_counts(p[0]), np.int64(-1))[p[1]]
    assert nu.tolist() == stated_counts(preds).tolist()
    many = [f"{i} cars" for i in range(3000)]  # sparse key space: the np.unique path
    ok_s, ok_l = _answer_verdicts(_encode(many), _encode(many[::-1]))
    assert ok_s.tolist() == [match_strict(a, b) for a, b in zip(many, many[::-1], strict=True)]
