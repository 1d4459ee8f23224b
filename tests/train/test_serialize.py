"""Serializers: EtA and answer-then-ground, read back exactly by the eval parser."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from witness.boxes import grid_to_xyxy, xyxy_to_grid
from witness.errors import InputError
from witness.eval.parse import parse
from witness.train.serialize import ORDER_FORMAT, grid_boxes, serialize


def test_eta_puts_boxes_first_sorted_by_y_then_x():
    text = serialize("2 cars", [[50, 40, 60, 50], [10, 40, 20, 50], [0, 0, 5, 5]], 100, 100)
    assert text == "<boxes>[[0, 0, 50, 50], [100, 400, 200, 500], [500, 400, 600, 500]]</boxes>\n<answer>2 cars</answer>"


def test_order_is_that_of_the_written_grid_integers():
    # pixel y1 10.0 < 10.4 but both round to grid y1 10: the grid x1 decides (100 before 500)
    text = serialize("2 cars", [[500, 10.0, 600, 20], [100, 10.4, 200, 20]], 1000, 1000)
    assert text.startswith("<boxes>[[100, 10, 200, 20], [500, 10, 600, 20]]</boxes>")


@settings(max_examples=60, deadline=None)
@given(boxes=st.lists(st.tuples(st.floats(0, 990), st.floats(0, 990)).map(lambda t: [t[0], t[1], t[0] + 5, t[1] + 5]),
                      max_size=10),
       w=st.integers(16, 4000), h=st.integers(16, 4000))
def test_grid_boxes_are_sorted_by_grid_y1_then_x1(boxes, w, h):
    px = np.asarray(boxes, dtype=float).reshape(-1, 4) * [w / 1000, h / 1000, w / 1000, h / 1000]
    g = grid_boxes(px, w, h).tolist()
    assert [(b[1], b[0]) for b in g] == sorted((b[1], b[0]) for b in g)


def test_standard_puts_answer_first():
    text = serialize("yes", [[0, 0, 50, 50]], 100, 100, order="standard")
    assert text.startswith("<answer>yes</answer>\n<boxes>")


def test_empty_boxes_mean_nothing_to_ground():
    p = parse(serialize("No.", [], 640, 480), "eta", width=640, height=480)
    assert p.ok and p.answer == "No." and p.boxes.shape == (0, 4)


def test_unknown_order_raises():
    with pytest.raises(InputError, match="Expected an order in"):
        serialize("a", [], 10, 10, order="backwards")


def test_bad_image_size_raises():
    with pytest.raises(InputError, match="positive image size"):
        grid_boxes([[0, 0, 1, 1]], 0, 10)


_box = st.tuples(
    st.floats(0, 0.9), st.floats(0, 0.9), st.floats(0.01, 0.1), st.floats(0.01, 0.1)
).map(lambda t: [t[0], t[1], min(1.0, t[0] + t[2]), min(1.0, t[1] + t[3])])


@settings(max_examples=60, deadline=None)
@given(boxes=st.lists(_box, max_size=8), w=st.integers(16, 4000), h=st.integers(16, 4000),
       order=st.sampled_from(["eta", "standard"]), answer=st.text(alphabet="abc 123.", max_size=12))
def test_round_trip_through_the_eval_parser(boxes, w, h, order, answer):
    px = np.asarray(boxes, dtype=float).reshape(-1, 4) * [w, h, w, h]
    text = serialize(answer, px, w, h, order=order)
    p = parse(text, ORDER_FORMAT[order], width=w, height=h)
    assert p.ok
    assert p.answer == answer.strip()
    expected = grid_to_xyxy(grid_boxes(px, w, h), w, h)
    np.testing.assert_allclose(p.boxes, expected.reshape(-1, 4))
    # exact on the grid: serializing the parsed boxes again gives the same integers
    again = sorted(map(tuple, xyxy_to_grid(p.boxes, w, h).reshape(-1, 4).tolist()))
    assert again == sorted(map(tuple, grid_boxes(px, w, h).reshape(-1, 4).tolist()))
