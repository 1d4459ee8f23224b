"""Small synthetic annotations built through the schema."""

from datetime import datetime, timezone

import pytest

from witness.schema import VERDICT_KEYS, annotation_record, annotations_table, item_record, items_table

ALL_OK = {k: True for k in VERDICT_KEYS}


def reviews(item_id, *judgments):
    """Reviewer annotations: each judgment is (reviewer, decision, failing_check_or_None)."""
    out = []
    for who, decision, failing in judgments:
        v = dict(ALL_OK)
        if failing:
            v[failing] = False
        out.append(annotation_record(item_id, who, "reviewer", verdicts=v, decision=decision,
                                     created_at=datetime(2026, 1, 1, tzinfo=timezone.utc)))
    return out


@pytest.fixture
def png(tmp_path):
    from PIL import Image

    path = tmp_path / "img.png"
    Image.new("RGB", (100, 80), (90, 90, 90)).save(path)
    return str(path)


@pytest.fixture
def small_items(png):
    return items_table([
        item_record("q1", "img", 100, 80, "How many cars are there?", "2", [[0, 0, 10, 10], [20, 20, 30, 30]], ["car", "car"],
                    count=2, qtype="counting", category="enumeration", image=png),
        item_record("q2", "img", 100, 80, "Is there a bus?", "no", qtype="existence", category="existence", image=png),
        item_record("q3", "img", 100, 80, "Is there a car?", "yes", [[0, 0, 10, 10]], ["car"], qtype="existence",
                    category="existence", image=png),
    ])


@pytest.fixture
def passing_annotations():
    rows = []
    for q in ("q1", "q2", "q3"):
        rows += reviews(q, ("r1", "accept", None), ("r2", "accept", None))
    return annotations_table(rows)
