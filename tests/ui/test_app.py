"""The Streamlit app, run headless with streamlit's AppTest on data the test builds."""

import sys
from pathlib import Path

import pyarrow as pa
import pytest
from PIL import Image

from witness.audit.review import consensus
from witness.io import write_table
from witness.schema import VERDICT_KEYS, annotation_record, annotations_table, item_record, items_table
from witness.ui.render import draw_boxes, failing_rows, load_image

APP = str(Path(__file__).resolve().parents[2] / "witness" / "ui" / "app.py")


@pytest.fixture
def items_file(tmp_path):
    img = tmp_path / "a.png"
    Image.new("RGB", (64, 48), (80, 80, 80)).save(img)
    t = items_table([item_record("q1", "a", 64, 48, "How many cars?", "1", [[4, 4, 20, 20]], ["car"], count=1,
                                 qtype="counting", category="enumeration", image=str(img))])
    return write_table(t, tmp_path / "items.parquet")


def test_render_helpers(items_file):
    img = load_image({"bytes": None, "path": str(items_file.parent / "a.png")})
    out = draw_boxes(img, [("missed", [[4, 4, 20, 20]], None)], width=1)
    assert out.getpixel((4, 10)) == (243, 156, 18) and img.getpixel((4, 10)) == (80, 80, 80)
    t = pa.table({"id": ["a", "b"], "missing": [False, True], "missed_boxes": [[], []]})
    assert failing_rows(t).tolist() == [1]


def test_app_shows_an_item(monkeypatch, items_file):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setattr(sys, "argv", ["app.py", str(items_file)])
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert at.subheader[0].value == "How many cars?"
    assert len(at.get("image")) == 1


def test_app_shows_disagreements(monkeypatch, tmp_path, items_file):
    from streamlit.testing.v1 import AppTest

    ok = {k: True for k in VERDICT_KEYS}
    rows = [annotation_record("q1", "r1", "reviewer", verdicts=ok, decision="accept"),
            annotation_record("q1", "r2", "reviewer", verdicts=ok | {"box_tight": False}, decision="discard")]
    cons = write_table(consensus(annotations_table(rows)).table, tmp_path / "consensus.parquet")
    monkeypatch.setattr(sys, "argv", ["app.py", str(items_file), str(cons)])
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.sidebar.radio[0].set_value("consensus").run()
    assert not at.exception
    assert "1 to look at" in at.caption[0].value
