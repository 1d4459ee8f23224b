"""Model-output parsers: one known box per family, failures with reasons, smart_resize, fuzzing."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from witness.boxes import grid_to_xyxy, xyxy_to_grid
from witness.errors import InputError, UnknownNameError
from witness.eval.parse import FORMATS, OutputFormat, Parsed, format_options, get_format, parse
from witness.eval.qwen_resize import QWEN25_MAX_PIXELS, TRANSFORMERS_MAX_PIXELS, smart_resize

W, H = 640, 480
BOX = [64.0, 48.0, 320.0, 240.0]  # (0.1, 0.1, 0.5, 0.5) of a 640x480 image

# The same box in each family's own syntax, and how far the family's quantization may move it (px).
KNOWN = {
    "eta": ("<boxes>[[100, 100, 500, 500]]</boxes>\n<answer>1 car</answer>", "1 car", 0.0),
    "answer-then-ground": ("<answer>1 car</answer>\n<boxes>[[100, 100, 500, 500]]</boxes>", "1 car", 0.0),
    "json": ('{"answer": "1 car", "boxes": [[64, 48, 320, 240]]}', "1 car", 0.0),
    "qwen2-vl": (
        "There is <|object_ref_start|>1 car<|object_ref_end|><|box_start|>(100,100),(500,500)<|box_end|>.<|im_end|>",
        "There is 1 car.",
        0.0,
    ),
    # smart_resize(480, 640) = (476, 644): the box is (64.4, 47.6, 322, 238) in the resized input
    "qwen2.5-vl": ('1 car\n```json\n[{"bbox_2d": [64.4, 47.6, 322, 238], "label": "car"}]\n```', "1 car", 1e-9),
    "qwen3-vl": ('1 car\n```json\n[{"bbox_2d": [100, 100, 500, 500], "label": "car"}]\n```', "1 car", 0.0),
    "internvl": ("<ref>1 car</ref><box>[[100, 100, 500, 500]]</box>", "1 car", 0.0),
    "shikra": ("There is 1 car[0.100,0.100,0.500,0.500].", "There is 1 car.", 1e-9),
    # floor(64 / 0.64) = 100, ... ; centres (N + 0.5) * 0.64: within one bin (0.64 px)
    "florence2": ("</s><s>1 car<loc_100><loc_100><loc_500><loc_500></s>", "1 car", 640 / 1000),
    # 0.1 * 1024 = 102.4 -> 102 ; 0.5 * 1024 = 512: within one bin (0.625 px), y first
    "paligemma": ("<loc0102><loc0102><loc0512><loc0512> 1 car", "1 car", 640 / 1024),
    "gemini": ('1 car ```json\n[{"box_2d": [100, 100, 500, 500], "label": "car"}]\n```', "1 car", 0.0),
}


def test_every_family_is_registered_with_a_convention():
    assert set(KNOWN) <= set(FORMATS)
    for name in KNOWN:
        fmt = get_format(name)
        assert isinstance(fmt, OutputFormat) and fmt.convention and fmt.name == name


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_box_in_every_family(name):
    text, answer, tol = KNOWN[name]
    p = parse(text, name, width=W, height=H)
    assert p.ok, p.reason
    assert p.answer == answer
    assert p.boxes.shape == (1, 4)
    np.testing.assert_allclose(p.boxes[0], BOX, atol=tol + 1e-9)


def test_florence2_bin_centre_rule():
    p = parse("<loc_0><loc_0><loc_999><loc_999>", "florence2", width=1000, height=2000)
    np.testing.assert_allclose(p.boxes, [[0.5, 1.0, 999.5, 1999.0]])


def test_paligemma_is_y_first():
    p = parse("<loc0000><loc0512><loc1023><loc1023> bus ; <loc0256><loc0000><loc0512><loc0256> car", "paligemma",
              width=1024, height=2048)
    np.testing.assert_allclose(p.boxes, [[512, 0, 1023, 2046], [0, 512, 256, 1024]])
    assert p.answer == "bus ; car"


def test_gemini_is_y_first():
    p = parse('[{"box_2d": [0, 500, 1000, 1000]}]', "gemini", width=100, height=200)
    np.testing.assert_allclose(p.boxes, [[50, 0, 100, 200]])


def test_several_boxes_per_family():
    cases = {
        "qwen2-vl": "<|box_start|>(0,0),(100,100)<|box_end|> and <|box_start|>(500,500),(1000,1000)<|box_end|>",
        "internvl": "<ref>cars</ref><box>[[0, 0, 100, 100], [500, 500, 1000, 1000]]</box>",
        "shikra": "cars[0,0,0.1,0.1;0.5,0.5,1,1]",
        "florence2": "cars<loc_0><loc_0><loc_99><loc_99><loc_500><loc_500><loc_999><loc_999>",
        "qwen3-vl": '[{"bbox_2d": [0, 0, 100, 100]}, {"bbox_2d": [500, 500, 1000, 1000]}]',
        "gemini": '[{"box_2d": [0, 0, 100, 100]}, {"box_2d": [500, 500, 1000, 1000]}]',
    }
    for name, text in cases.items():
        p = parse(text, name, width=W, height=H)
        assert p.ok and p.boxes.shape == (2, 4), (name, p)
        assert p.boxes[0, 2] < p.boxes[1, 0], name


def test_qwen25_vl_min_max_pixels_change_the_frame():
    text = '[{"bbox_2d": [0, 0, 644, 476]}]'  # the whole resized input at the defaults
    p = parse(text, "qwen2.5-vl", width=W, height=H)
    np.testing.assert_allclose(p.boxes, [[0, 0, W, H]])
    # 1920x1080: (1092, 1932) at the checkpoints' max_pixels, (728, 1316) at transformers' class default
    full = parse('[{"bbox_2d": [0, 0, 1932, 1092]}]', "qwen2.5-vl", width=1920, height=1080)
    np.testing.assert_allclose(full.boxes, [[0, 0, 1920, 1080]])
    small = parse('[{"bbox_2d": [0, 0, 1316, 728]}]', "qwen2.5-vl", width=1920, height=1080,
                  max_pixels=TRANSFORMERS_MAX_PIXELS)
    np.testing.assert_allclose(small.boxes, [[0, 0, 1920, 1080]])
    outside = parse('[{"bbox_2d": [0, 0, 1932, 1092]}]', "qwen2.5-vl", width=1920, height=1080,
                    max_pixels=TRANSFORMERS_MAX_PIXELS)
    assert not outside.ok and "resized 1316x728" in outside.reason


def test_options_ride_in_the_format_name():
    text = '[{"bbox_2d": [0, 0, 1316, 728]}]'
    p = parse(text, "qwen2.5-vl,max_pixels=1003520", width=1920, height=1080)
    np.testing.assert_allclose(p.boxes, [[0, 0, 1920, 1080]])
    q = parse("[0.1,0.2,0.5,0.6]", "shikra, expand2square=true", width=640, height=480)
    np.testing.assert_allclose(q.boxes, [[64, 48, 320, 304]])
    assert format_options(get_format("qwen2.5-vl")) == ["factor", "max_pixels", "min_pixels"]
    assert format_options(get_format("eta")) == []


def test_option_errors():
    with pytest.raises(InputError, match=r"Expected an option of format 'qwen2.5-vl' among \['factor', 'max_pixels', 'min_pixels'\], got 'max_pixel'"):
        get_format("qwen2.5-vl,max_pixel=3")
    with pytest.raises(InputError, match=r"Expected format options as key=value, got 'max_pixels' \(format 'qwen2.5-vl,max_pixels'\)"):
        get_format("qwen2.5-vl,max_pixels")
    with pytest.raises(InputError, match=r"Expected an option of format 'gemini' among \[\], got 'max_pixels' \(parse\)"):
        parse("x", "gemini", width=W, height=H, max_pixels=10)
    with pytest.raises(UnknownNameError, match="Unknown format 'nope'"):
        get_format("nope,max_pixels=3")


def test_shikra_expand2square():
    p = parse("[0.1,0.2,0.5,0.6]", "shikra", width=640, height=480, expand2square=True)
    np.testing.assert_allclose(p.boxes, [[64, 48, 320, 304]])
    bad = parse("[0.1,0.0,0.5,0.6]", "shikra", width=640, height=480, expand2square=True)
    assert not bad.ok and "padding" in bad.reason


def test_no_markup_means_no_boxes_for_model_families():
    for name in ["qwen2-vl", "qwen2.5-vl", "qwen3-vl", "internvl", "shikra", "florence2", "paligemma", "gemini"]:
        p = parse("No, there is no car.", name, width=W, height=H)
        assert p.ok and p.answer == "No, there is no car." and p.boxes.shape == (0, 4), name


def test_empty_json_list_means_no_boxes():
    for name in ["qwen2.5-vl", "qwen3-vl", "gemini"]:
        p = parse("None.\n```json\n[]\n```", name, width=W, height=H)
        assert p.ok and p.answer == "None." and p.boxes.shape == (0, 4)


FAILURES = [
    ("json", "1 car", "no JSON object"),
    ("json", '{"answer": 3, "boxes": []}', "no string 'answer'"),
    ("json", '{"answer": "x", "boxes": [[1, 2, 3]]}', "'boxes' is not a list"),
    ("json", '{"answer": "x", "boxes": [[0, 0, 641, 10]]}', "outside the 640x480 image"),
    ("json", '{"answer": "x", "boxes": [[50, 0, 10, 10]]}', "inverted"),
    ("json", '```json\n{"answer": "x", "boxes": []\n```', "not valid JSON"),
    ("json", '```json\n{"answer": "x", "boxes": []}', "unterminated"),
    ("json", '```json\n{"answer": "x", "boxes": []}```\n```json\n{"answer": "y", "boxes": []}```', "more than one"),
    ("json", '{"answer": "x", "boxes": [[true, 0, 1, 1]]}', "'boxes' is not a list"),
    ("qwen2-vl", "<|box_start|>(100,100),(500,500)", "unterminated"),
    ("qwen2-vl", "<|box_start|>(100,100)<|box_end|>", "not (x1,y1),(x2,y2)"),
    ("qwen2-vl", "<|box_start|>(100,100),(500,1001)<|box_end|>", "outside the 0-1000 grid"),
    ("qwen2-vl", "<|box_start|>(600,100),(500,500)<|box_end|>", "inverted"),
    ("qwen2.5-vl", '[{"bbox_2d": [0, 0, 645, 10]}]', "outside the resized 644x476 input"),
    ("qwen2.5-vl", '[{"bbox_2d": [0, 0, 10]}]', "not a list of 4 numbers"),
    ("qwen2.5-vl", '[{"bbox_2d": [0, 0, 10, 10]}, {"label": "x"}]', "has no 'bbox_2d'"),
    ("qwen2.5-vl", '{"bbox_2d": [0, 0, 10, 10', "no valid JSON"),
    ("qwen2.5-vl", '[{"bbox_2d": [0, 0, 1, 1]}] and [{"bbox_2d": [0, 0, 2, 2]}]', "more than one JSON value"),
    ("qwen3-vl", '[{"bbox_2d": [0, 0, 1001, 10]}]', "outside the 0-1000 grid"),
    ("qwen3-vl", '[{"bbox_2d": [0, 0, 10, 10]}, {"bb', "cut off or malformed"),  # generation stopped
    ("gemini", '[{"box_2d": [0, 0, 10, 10]}, {"box_2d": [0, 0', "cut off or malformed"),
    ("qwen3-vl", '[{"bbox_2d": [-1, 0, 10, 10]}]', "outside the 0-1000 grid"),
    ("internvl", "<ref>car</ref><box>[[0, 0, 10, 10]]", "unterminated"),
    ("internvl", "<box>[[0, 0, 10]]</box>", "not a list of [x1, y1, x2, y2]"),
    ("internvl", "<box>car</box>", "not a JSON list"),
    ("internvl", "<box>[[0, 0, 1200, 10]]</box>", "outside the 0-1000 grid"),
    ("shikra", "car[0.1,0.1,1.5,0.5]", "outside [0, 1]"),
    ("shikra", "car[0.6,0.1,0.5,0.5]", "inverted"),
    ("florence2", "car<loc_1><loc_2><loc_3>", "not a multiple of 4"),
    ("florence2", "car<loc_1><loc_2><loc_3><loc_1000>", "outside bins 0-999"),
    ("florence2", "car<loc_9><loc_2><loc_3><loc_4>", "inverted"),
    ("florence2", "car<loc_x>", "malformed"),
    ("paligemma", "<loc0001><loc0002><loc0003> car", "not a multiple of 4"),
    ("paligemma", "<loc0001><loc0002><loc0003><loc1024> car", "outside bins 0-1023"),
    ("paligemma", "<loc12> car", "malformed"),
    ("paligemma", "<loc0900><loc0002><loc0003><loc0004> car", "inverted"),
    ("gemini", '[{"box_2d": [0, 0, 10, 1001]}]', "outside the 0-1000 grid"),
    ("gemini", '[{"box_2d": [10, 0, 5, 10]}]', "inverted"),
    ("eta", "<answer>x</answer>", "no <boxes> part"),
]


@pytest.mark.parametrize("name,text,reason", FAILURES)
def test_failures_carry_a_reason(name, text, reason):
    p = parse(text, name, width=W, height=H)
    assert not p.ok and p.answer is None and p.boxes.shape == (0, 4)
    assert reason in p.reason


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_bad_image_size_is_unparsed_not_raised(name):
    p = parse(KNOWN[name][0], name, width=0, height=H)
    assert not p.ok and p.reason


@pytest.mark.parametrize("name,template", [
    ("json", '{{"answer": "x", "boxes": [[0, 0, {}, 1]]}}'),
    ("qwen2-vl", "<|box_start|>(0,0),({},1)<|box_end|>"),
    ("qwen2.5-vl", '[{{"bbox_2d": [0, 0, {}, 1]}}]'),
    ("qwen3-vl", '[{{"bbox_2d": [0, 0, {}, 1]}}]'),
    ("gemini", '[{{"box_2d": [0, 0, 1, {}]}}]'),
    ("internvl", "<box>[[0, 0, {}, 1]]</box>"),
    ("shikra", "[0,0,{},1]"),
    ("florence2", "<loc_0><loc_0><loc_{}><loc_1>"),
    ("eta", "<boxes>[[0, 0, {}, 1]]</boxes><answer>x</answer>"),
])
def test_huge_numbers_are_unparsed(name, template):
    p = get_format(name).parse(template.format("1" + "0" * 400), width=W, height=H)
    assert not p.ok and p.reason


def test_parse_all_counts_reasons():
    from witness.eval.parse import parse_all

    texts = [KNOWN["qwen3-vl"][0], '[{"bbox_2d": [0, 0, 1001, 1]}]', '[{"bbox_2d": [0, 0, 1002, 1]}]', None]
    parsed, summary = parse_all(texts, "qwen3-vl", [W] * 4, [H] * 4)
    assert [p.ok for p in parsed] == [True, False, False, False]
    assert summary.n == 4 and summary.n_parsed == 1 and summary.parse_rate == 0.25
    assert summary.reasons == {"box [...] is outside the 0-1000 grid": 2, "no output": 1}
    with pytest.raises(InputError, match="Expected one width and height per output, got 4 outputs, 3 widths"):
        parse_all(texts, "qwen3-vl", [W] * 3, [H] * 4)
    assert math.isnan(parse_all([], "eta", [], [])[1].parse_rate)


def test_none_output_is_unparsed():
    assert parse(None, "qwen3-vl", width=W, height=H).reason == "no output"


def test_unknown_format_names_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"Unknown format 'nope'. Expected one of \[.*'qwen2.5-vl'.*\] or 'module:attr'"):
        get_format("nope")
    with pytest.raises(UnknownNameError, match="Unknown format 'witness.eval.parse:missing'"):
        get_format("witness.eval.parse:missing")


def test_module_attr_format():
    fmt = get_format("witness.eval.parse:parse_qwen3_vl")
    assert fmt.convention == "custom"
    p = parse(KNOWN["qwen3-vl"][0], "witness.eval.parse:parse_qwen3_vl", width=W, height=H)
    np.testing.assert_allclose(p.boxes, [BOX])


def test_a_crashing_plugin_is_counted_as_unparsed(monkeypatch):
    def boom(text, *, width, height, **_):
        raise RuntimeError("bug")

    monkeypatch.setitem(FORMATS, "boom", OutputFormat("boom", "custom", boom))
    assert parse("x", "boom", width=W, height=H).reason == "parser error: RuntimeError: bug"


# --------------------------------------------------------------------------------------------
# smart_resize
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hw,kwargs,expected",
    [
        ((480, 640), {}, (476, 644)),  # round(17.14) = 17, round(22.86) = 23
        ((1080, 1920), {}, (1092, 1932)),  # fits the checkpoints' max_pixels
        ((1080, 1920), {"max_pixels": TRANSFORMERS_MAX_PIXELS}, (728, 1316)),  # beta = sqrt(2073600/1003520)
        ((10, 10), {}, (56, 56)),  # below min_pixels: beta = 5.6, ceil(56/28) * 28
        ((70, 2800), {}, (56, 2800)),  # 70/28 = 2.5 rounds half to EVEN -> 2
        ((98, 2800), {}, (112, 2800)),  # 98/28 = 3.5 rounds half to even -> 4
        ((28, 5000), {}, (28, 5012)),
    ],
)
def test_smart_resize_hand_computed(hw, kwargs, expected):
    assert smart_resize(*hw, **kwargs) == expected


def test_smart_resize_refuses_bad_input():
    with pytest.raises(InputError, match="Expected an aspect ratio of at most 200, got 201.0"):
        smart_resize(10, 2010)
    with pytest.raises(InputError, match="Expected positive height, width"):
        smart_resize(0, 10)
    with pytest.raises(InputError, match="min_pixels <= max_pixels"):
        smart_resize(10, 10, min_pixels=100, max_pixels=10)


def _transformers_smart_resize():
    """transformers' own smart_resize, compiled from its source file (its module imports
    torchvision, which this environment does not have)."""
    try:
        import transformers
    except ImportError:
        return None
    src = Path(transformers.__file__).parent / "models" / "qwen2_vl" / "image_processing_qwen2_vl.py"
    if not src.exists():
        return None
    tree = ast.parse(src.read_text())
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "smart_resize"), None)
    if fn is None:
        return None
    ns: dict = {"math": math}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(src), "exec"), ns)
    return ns["smart_resize"]


_REF = _transformers_smart_resize()


@pytest.mark.skipif(_REF is None, reason="transformers' qwen2_vl image processor source not found")
@settings(max_examples=300, deadline=None)
@given(
    h=st.integers(1, 6000),
    w=st.integers(1, 6000),
    max_pixels=st.sampled_from([TRANSFORMERS_MAX_PIXELS, QWEN25_MAX_PIXELS, 256 * 28 * 28]),
)
def test_smart_resize_matches_transformers(h, w, max_pixels):
    if max(h, w) / min(h, w) > 200:
        with pytest.raises(InputError):
            smart_resize(h, w, max_pixels=max_pixels)
        return
    assert smart_resize(h, w, max_pixels=max_pixels) == _REF(h, w, factor=28, min_pixels=56 * 56, max_pixels=max_pixels)


# --------------------------------------------------------------------------------------------
# round trip and fuzzing
# --------------------------------------------------------------------------------------------


def _serialize(answer: str, grid: np.ndarray, order: str) -> str:
    """A witness EtA / answer-then-ground serializer written independently of witness.train."""
    rows = sorted(grid.tolist(), key=lambda b: (b[1], b[0]))
    boxes = "<boxes>[" + ", ".join("[" + ", ".join(str(int(v)) for v in b) + "]" for b in rows) + "]</boxes>"
    ans = f"<answer>{answer}</answer>"
    return f"{boxes}\n{ans}" if order == "eta" else f"{ans}\n{boxes}"


_corner = st.integers(0, 1000)


@st.composite
def _grid_boxes(draw):
    n = draw(st.integers(0, 8))
    rows = []
    for _ in range(n):
        x1, x2 = sorted((draw(_corner), draw(_corner)))
        y1, y2 = sorted((draw(_corner), draw(_corner)))
        rows.append([x1, y1, x2, y2])
    return np.asarray(rows, dtype=np.int64).reshape(-1, 4)


@settings(max_examples=200, deadline=None)
@given(
    grid=_grid_boxes(),
    answer=st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=30),
    order=st.sampled_from(["eta", "answer-then-ground"]),
    size=st.tuples(st.integers(1, 4000), st.integers(1, 4000)),
)
def test_witness_round_trip(grid, answer, order, size):
    w, h = size
    p = parse(_serialize(answer, grid, order), order, width=w, height=h)
    assert p.ok, p.reason
    assert p.answer == answer.strip()
    written = np.asarray(sorted(grid.tolist(), key=lambda b: (b[1], b[0])), dtype=np.int64).reshape(-1, 4)
    np.testing.assert_allclose(p.boxes, grid_to_xyxy(written, w, h))
    # and the grid read back is the grid written
    np.testing.assert_array_equal(xyxy_to_grid(p.boxes, w, h), written)


def _sane(p: Parsed, w: float, h: float) -> None:
    assert isinstance(p, Parsed)
    if not p.ok:
        assert p.reason and p.answer is None and p.boxes.shape == (0, 4)
        return
    assert isinstance(p.answer, str)
    b = p.boxes
    assert b.ndim == 2 and b.shape[1] == 4 and np.isfinite(b).all()
    assert (b >= 0).all() and (b[:, [0, 2]] <= w + 1e-9).all() and (b[:, [1, 3]] <= h + 1e-9).all()
    assert (b[:, 0] <= b[:, 2]).all() and (b[:, 1] <= b[:, 3]).all()


_ALPHABET = st.sampled_from(
    list("[](){},;.:-+eE0123456789 \n`\"abc<>|_/")
    + ["<|box_start|>", "<|box_end|>", "<loc_", "<loc0", "<box>", "</box>", "<ref>", "```json", "bbox_2d",
       "box_2d", "<boxes>", "</boxes>", "<answer>", "</answer>", '"answer"', '"boxes"', "1000", "1024", "NaN",
       "Infinity", "1e999", "true", "1" + "0" * 400]
)
_FUZZ = st.lists(_ALPHABET, max_size=60).map("".join) | st.text(max_size=200)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_FUZZ, name=st.sampled_from(sorted(KNOWN)))
def test_random_text_never_raises(text, name):
    # call the parser directly: parse() would hide an exception as "parser error"
    p = get_format(name).parse(text, width=W, height=H)
    _sane(p, W, H)


@st.composite
def _mutated(draw):
    name = draw(st.sampled_from(sorted(KNOWN)))
    text = KNOWN[name][0]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        piece = draw(_ALPHABET)
        if op == "insert":
            text = text[:i] + piece + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 5)):]
        elif op == "replace":
            text = text[:i] + piece + text[i + 1:]
        else:
            text = text[:i] + text[i:i + 20] + text[i:]
    return name, text


@settings(max_examples=400, deadline=None)
@given(case=_mutated())
def test_mutated_valid_outputs_never_raise(case):
    name, text = case
    p = get_format(name).parse(text, width=W, height=H)
    _sane(p, W, H)
