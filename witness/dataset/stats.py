"""Dataset statistics (Tables II and III of RoadSceneVQA-G) and plots of a release or items file.

Definitions (RoadSceneVQA-G, section III-B, Table II), per split:

* ``items``: questions; ``no_grd_pct``: % with no evidence box; ``grd_pct``: % with at least one;
* ``multi_box_pct``: % of *grounded* questions with at least two boxes;
* ``avg_box``: mean number of evidence boxes per *grounded* question;
* ``median_area_pct``: median box area as % of its image area (the paper's "median image-area
  coverage"); ``seven_plus_pct``: % of questions with seven or more boxes; ``max_boxes``;
* ``ref_spc``: say-point consistency of the *reference* answers, % of the ``ref_spc_support`` items
  whose answer states a count ``ν(a*)`` (:func:`witness.eval.answers.stated_counts`) with
  ``ν(a*) = |B*|`` (the paper reports about 92% for its references).

``multi_box_pct``, ``avg_box`` and ``median_area_pct`` are ``None`` where undefined (no grounded
question, no box), never 0. Table III is the per-``category`` count (and ``qtypes`` per
``qtype``); percentages are of the split's items.

Only the light columns are read (never the image bytes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..io import atomic_path, read_table
from ..schema import CATEGORIES, QTYPES, flat_boxes

__all__ = [
    "STATS_COLUMNS",
    "SplitStats",
    "Stats",
    "split_stats",
    "dataset_stats",
    "read_stats_columns",
    "write_plots",
]

#: The item columns statistics and plots read.
STATS_COLUMNS = ["split", "image_id", "width", "height", "answer", "boxes", "count", "qtype", "category"]
_SPLIT_ORDER = {"train": 0, "validation": 1, "dev": 2, "test": 3}
UNSPLIT = "unsplit"


@dataclass(frozen=True)
class SplitStats:
    """Table II row (and Table III counts) of one split. Percentages are 0–100."""

    name: str
    items: int
    images: int
    boxes: int
    no_grd_pct: float | None
    grd_pct: float | None
    multi_box_pct: float | None
    avg_box: float | None
    max_boxes: int
    seven_plus_pct: float | None
    median_area_pct: float | None
    ref_spc: float | None = None
    ref_spc_support: int = 0
    qtypes: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Stats:
    """Statistics of every split and of all of them together (``total``, named ``all``)."""

    splits: tuple[SplitStats, ...]
    total: SplitStats

    def to_dict(self) -> dict:
        return {"splits": {s.name: s.to_dict() for s in self.splits}, "all": self.total.to_dict()}

    def table_ii(self) -> tuple[list[str], list[list]]:
        """Columns and rows of Table II (one row per split, then ``all``)."""
        cols = ["Split", "Items", "No-Grd. %", "Grd. %", "Multi-Box %", "Avg. Box", "Boxes", "Images", "Ref. SPC %"]
        rows = [
            [s.name, s.items, s.no_grd_pct, s.grd_pct, s.multi_box_pct, s.avg_box, s.boxes, s.images, s.ref_spc]
            for s in (*self.splits, self.total)
        ]
        return cols, rows

    def table_iii(self) -> tuple[list[str], list[list]]:
        """Columns and rows of Table III: % of items per category (and count) for each split."""
        names = [s.name for s in self.splits]
        keys = [c for c in CATEGORIES] + sorted({k for s in self.splits for k in s.categories} - set(CATEGORIES))
        rows = []
        for k in keys:
            if not any(s.categories.get(k) for s in self.splits):
                continue
            rows.append([k] + [_pct(s.categories.get(k, 0), s.items) for s in self.splits])
        return ["Category", *names], rows

    def markdown(self) -> str:
        """Tables II and III as Markdown (for the dataset card)."""
        cols, rows = self.table_ii()
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        out += ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in rows]
        c3, r3 = self.table_iii()
        if r3:
            out += ["", "Capability categories (% of items, as Table III):", ""]
            out += ["| " + " | ".join(c3) + " |", "|" + "---|" * len(c3)]
            out += ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in r3]
        return "\n".join(out)


def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def _pct(num: float, den: float) -> float | None:
    return None if den == 0 else round(100.0 * num / den, 2)


def _counts(values: list, vocab: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        key = "none" if v is None else v
        out[key] = out.get(key, 0) + 1
    order = {k: i for i, k in enumerate(vocab)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def _n_boxes(table: pa.Table) -> np.ndarray:
    col = table.column("boxes")
    return pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _area_pct(table: pa.Table) -> np.ndarray:
    xyxy, offsets = flat_boxes(table.column("boxes"))
    if len(xyxy) == 0:
        return np.zeros(0)
    rows = np.repeat(np.arange(table.num_rows), np.diff(offsets))
    w = table.column("width").to_numpy(zero_copy_only=False).astype(np.float64)[rows]
    h = table.column("height").to_numpy(zero_copy_only=False).astype(np.float64)[rows]
    area = np.clip(xyxy[:, 2] - xyxy[:, 0], 0, None) * np.clip(xyxy[:, 3] - xyxy[:, 1], 0, None)
    return 100.0 * area / (w * h)


def _stated(table: pa.Table) -> np.ndarray:
    """``ν(answer)`` per row, -1 where the answer states no count (witness.eval.answers)."""
    from ..eval.answers import stated_counts

    return stated_counts(table.column("answer"))


def split_stats(table: pa.Table, name: str) -> SplitStats:
    """Table II / III statistics of one items table (columns :data:`STATS_COLUMNS`).

    >>> from witness.schema import item_record, items_table
    >>> t = items_table([
    ...     item_record("q1", "a", 100, 100, "Cars?", "2", [[0, 0, 10, 10], [20, 20, 30, 30]], ["car", "car"],
    ...                 count=2, qtype="counting", category="enumeration"),
    ...     item_record("q2", "a", 100, 100, "Any bus?", "yes", [[0, 0, 50, 50]], ["bus"], qtype="existence"),
    ...     item_record("q3", "b", 100, 100, "Is it day?", "yes"),
    ...     item_record("q4", "b", 100, 100, "Any cat?", "no", qtype="existence")])
    >>> s = split_stats(t, "train")
    >>> s.no_grd_pct, s.grd_pct, s.multi_box_pct, s.avg_box, s.median_area_pct
    (50.0, 50.0, 50.0, 1.5, 1.0)
    >>> s.qtypes
    {'existence': 2, 'counting': 1, 'none': 1}
    """
    n = table.num_rows
    nb = _n_boxes(table)
    grounded = nb > 0
    n_grd = int(grounded.sum())
    area = _area_pct(table)
    nu = _stated(table)
    says = nu >= 0
    return SplitStats(
        name=name,
        items=n,
        images=len(set(table.column("image_id").to_pylist())),
        boxes=int(nb.sum()),
        no_grd_pct=_pct(n - n_grd, n),
        grd_pct=_pct(n_grd, n),
        multi_box_pct=_pct(int((nb >= 2).sum()), n_grd),
        avg_box=None if n_grd == 0 else round(float(nb[grounded].mean()), 4),
        max_boxes=int(nb.max()) if n else 0,
        seven_plus_pct=_pct(int((nb >= 7).sum()), n),
        median_area_pct=None if len(area) == 0 else round(float(np.median(area)), 4),
        ref_spc=_pct(int((nu[says] == nb[says]).sum()), int(says.sum())),
        ref_spc_support=int(says.sum()),
        qtypes=_counts(table.column("qtype").to_pylist(), QTYPES),
        categories=_counts(table.column("category").to_pylist(), CATEGORIES),
    )


def read_stats_columns(path: str | os.PathLike) -> pa.Table:
    """Read the :data:`STATS_COLUMNS` of a release directory (its ``data/*.parquet``), a directory of
    Parquet files, or one items file (Parquet or JSONL). Image bytes are never read.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"Expected a release directory or items file, got a path that does not exist ({path}).")
    if path.is_dir() and (path / "data").is_dir():
        files = sorted((path / "data").glob("*.parquet"))
        if not files:
            raise InputError(f"Expected Parquet files in {path / 'data'}, found none. Run `witness dataset release`.")
        return pa.concat_tables([read_table(f, "item", columns=STATS_COLUMNS) for f in files])
    return read_table(path, "item", columns=STATS_COLUMNS)


def _split_key(name: str) -> tuple[int, str]:
    return (_SPLIT_ORDER.get(name, len(_SPLIT_ORDER)), name)


def _by_split(table: pa.Table) -> dict[str, pa.Table]:
    split = pc.fill_null(table.column("split"), UNSPLIT)
    names = sorted(set(split.to_pylist()), key=_split_key)
    return {s: table.filter(pc.equal(split, s)) for s in names}


def dataset_stats(path: str | os.PathLike) -> Stats:
    """Statistics of a release directory (or items file), per ``split`` column value and in total.

    Items without a split are grouped as ``unsplit``.
    """
    table = read_stats_columns(path)
    parts = _by_split(table)
    return Stats(
        splits=tuple(split_stats(t, s) for s, t in parts.items()),
        total=split_stats(table, "all"),
    )


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def _save(fig, path: Path) -> Path:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    return path


def write_plots(path: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """Write four PNG plots of a release (or items file) into ``out_dir``; return their paths.

    * ``boxes_per_question.png``: % of each split's questions with k evidence boxes;
    * ``count_vs_boxes.png``: the count stated by the answer, ``ν(a*)``, against the number of
      evidence boxes, for answers that state one (points on the diagonal agree; marker area grows
      with the number of items);
    * ``box_area.png``: box area as % of the image, log-spaced bins on a log axis;
    * ``box_centers.png``: heat map of evidence box centres in normalized image coordinates.

    Uses matplotlib's object API (``Figure`` with the Agg canvas), never ``pyplot`` state.
    """
    from matplotlib.figure import Figure

    table = read_stats_columns(path)
    parts = _by_split(table)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    nb_all = _n_boxes(table)
    top = int(min(max(nb_all.max() if len(nb_all) else 0, 1), 30))
    bins = np.arange(-0.5, top + 1.5)
    for s, t in parts.items():
        nb = np.minimum(_n_boxes(t), top)
        hist, _ = np.histogram(nb, bins=bins)
        ax.step(np.arange(top + 1), 100.0 * hist / max(len(nb), 1), where="mid", label=f"{s} (n={len(nb)})")
    ax.set_xlabel(f"evidence boxes per question (last bin: ≥ {top})" if nb_all.max(initial=0) > top else "evidence boxes per question")
    ax.set_ylabel("% of questions")
    ax.set_title("Boxes per question")
    ax.legend()
    written.append(_save(fig, out / "boxes_per_question.png"))

    fig = Figure(figsize=(5, 5))
    ax = fig.subplots()
    nu = _stated(table)
    has = nu >= 0
    cnt, nb = nu[has], nb_all[has]
    if len(cnt):
        pairs, freq = np.unique(np.stack([cnt, nb], axis=1), axis=0, return_counts=True)
        ax.scatter(pairs[:, 0], pairs[:, 1], s=20 + 180 * freq / freq.max(), alpha=0.6)
        hi = int(max(cnt.max(), nb.max(), 1))
        ax.plot([0, hi], [0, hi], color="grey", lw=1, ls="--")
        ax.set_title(f"Stated count vs evidence boxes: {int((cnt == nb).sum())} of {len(cnt)} agree")
    else:
        ax.set_title("Stated count vs evidence boxes (no answer states a count)")
    ax.set_xlabel("count stated by the answer, ν(a*)")
    ax.set_ylabel("evidence boxes |B*|")
    written.append(_save(fig, out / "count_vs_boxes.png"))

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    all_area = _area_pct(table)
    all_area = all_area[all_area > 0]
    lo = max(float(all_area.min()), 1e-4) if len(all_area) else 1e-2
    edges = np.logspace(np.log10(lo), np.log10(100.0), 40)  # one set of bins for every split
    for s, t in parts.items():
        area = _area_pct(t)
        area = area[area > 0]
        if len(area):
            ax.hist(area, bins=edges, histtype="step", label=f"{s} (median {np.median(area):.2f}%)")
    ax.set_xscale("log")
    ax.set_xlabel("box area, % of the image (log)")
    ax.set_ylabel("boxes")
    ax.set_title("Evidence box size")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    written.append(_save(fig, out / "box_area.png"))

    fig = Figure(figsize=(5, 4))
    ax = fig.subplots()
    xyxy, offsets = flat_boxes(table.column("boxes"))
    rows = np.repeat(np.arange(table.num_rows), np.diff(offsets))
    w = table.column("width").to_numpy(zero_copy_only=False).astype(np.float64)[rows]
    h = table.column("height").to_numpy(zero_copy_only=False).astype(np.float64)[rows]
    cx = (xyxy[:, 0] + xyxy[:, 2]) / 2 / w if len(xyxy) else np.zeros(0)
    cy = (xyxy[:, 1] + xyxy[:, 3]) / 2 / h if len(xyxy) else np.zeros(0)
    heat, _, _ = np.histogram2d(cy, cx, bins=40, range=[[0, 1], [0, 1]])
    im = ax.imshow(heat, extent=(0, 1, 1, 0), cmap="magma", aspect="auto")
    fig.colorbar(im, ax=ax, label="box centres")
    ax.set_xlabel("x / width")
    ax.set_ylabel("y / height")
    ax.set_title(f"Evidence box centres ({len(xyxy)} boxes)")
    written.append(_save(fig, out / "box_centers.png"))
    return written
