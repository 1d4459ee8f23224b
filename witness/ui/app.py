"""The witness browser: items with their boxes, audit disagreements, per-sample evaluation errors.

Run it with ``witness ui [PATH ...]`` (or ``streamlit run witness/ui/app.py -- PATH ...``). Each PATH
is a release directory or items file, a consensus table (``audit review --out``), or an eval report
JSON (its ``.samples.parquet`` is read beside it). Nothing is loaded whole: items are read with the
columns a page needs, and an image only when its item is shown.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _paths() -> list[Path]:
    args = sys.argv[1:]
    return [Path(a) for a in args if not a.startswith("-")]


def _item_files(p: Path) -> list[Path]:
    if p.is_dir():
        return sorted(p.glob("data/*.parquet")) or sorted(p.glob("*.parquet"))
    return [p]


def _kind(p: Path) -> str:
    if p.suffix == ".json":
        return "report"
    if p.is_dir():
        return "items"
    names = pq.ParquetFile(p).schema_arrow.names
    if "judgments" in names:
        return "consensus"
    if "question" in names:
        return "items"
    return "unknown"


def main() -> None:  # pragma: no cover - exercised through streamlit's AppTest
    import streamlit as st

    from witness.eval.report import read_report, samples_path
    from witness.ui.render import draw_boxes, failing_rows, load_image

    st.set_page_config(page_title="witness", layout="wide")
    st.title("witness")
    paths = _paths()
    if not paths:
        st.info("Pass a release directory, an items file, a consensus table or an eval report: `witness ui PATH ...`")
        return
    by_kind: dict[str, list[Path]] = {}
    for p in paths:
        by_kind.setdefault(_kind(p), []).append(p)
    items_files = [f for p in by_kind.get("items", []) for f in _item_files(p)]
    light_cols = ["id", "image_id", "question", "answer", "qtype", "category", "split", "boxes", "labels", "pair_id"]

    def light_items() -> pa.Table:
        tables = []
        for f in items_files:
            names = pq.ParquetFile(f).schema_arrow.names
            tables.append(pq.read_table(f, columns=[c for c in light_cols if c in names]))
        return pa.concat_tables(tables, promote_options="default") if tables else pa.table({"id": pa.array([], pa.string())})

    def image_of(item_id: str):
        for f in items_files:
            t = pq.read_table(f, columns=["id", "image"], filters=[("id", "=", item_id)])
            if t.num_rows:
                return load_image(t.column("image")[0].as_py())
        return None

    pages = [k for k in ("items", "consensus", "report") if k in by_kind]
    page = st.sidebar.radio("View", pages, format_func={"items": "Items", "consensus": "Audit disagreements", "report": "Evaluation errors"}.get)
    items = light_items()
    if page == "items":
        qtypes = sorted({q for q in items.column("qtype").to_pylist() if q}) if "qtype" in items.column_names else []
        chosen = st.sidebar.multiselect("Question types", qtypes, default=qtypes)
        rows = [r for r in items.to_pylist() if not qtypes or r.get("qtype") in chosen]
        st.caption(f"{len(rows)} items")
        if rows:
            k = st.number_input("Item", min_value=0, max_value=len(rows) - 1, value=0)
            r = rows[int(k)]
            st.subheader(r["question"])
            st.write(f"**Answer:** {r['answer']} · {r.get('qtype')} / {r.get('category')} · {len(r.get('boxes') or [])} evidence box(es)")
            img = image_of(r["id"])
            if img is not None:
                st.image(draw_boxes(img, [("reference", r.get("boxes") or [], r.get("labels"))]), width="stretch")
    elif page == "consensus":
        t = pq.read_table(by_kind["consensus"][0])
        dis = [r for r in t.to_pylist() if r["disagreement"] or not r["passed"]]
        st.caption(f"{t.num_rows} reviewed items, {sum(r['passed'] for r in t.to_pylist())} passed, {len(dis)} to look at")
        st.dataframe([{"item": r["item_id"], "passed": r["passed"], "reasons": "; ".join(r["reasons"] or [])} for r in dis])
        if dis:
            k = st.number_input("Disagreement", min_value=0, max_value=len(dis) - 1, value=0)
            r = dis[int(k)]
            st.json(r["judgments"])
            img = image_of(r["item_id"])
            if img is not None:
                match = [x for x in items.to_pylist() if x["id"] == r["item_id"]]
                boxes = match[0].get("boxes") if match else []
                st.image(draw_boxes(img, [("reference", boxes or [], None)]), width="stretch")
    elif page == "report":
        rep_path = by_kind["report"][0]
        rep = read_report(rep_path)
        st.subheader(f"{rep.get('model')} · {rep['suite']} · n = {rep['n']} · parse rate {100 * (rep.get('parse_rate') or 0):.1f}%")
        st.json(rep["metrics"])
        sp = samples_path(rep_path)
        if sp.exists():
            s = pq.read_table(sp)
            bad = failing_rows(s)
            st.caption(f"{len(bad)} of {s.num_rows} samples show an error")
            rows = s.take(pa.array(bad, pa.int64())).to_pylist() if len(bad) else []
            st.dataframe([{k: v for k, v in r.items() if k not in ("missed_boxes", "extra_boxes")} for r in rows[:500]])
            if rows:
                k = st.number_input("Sample", min_value=0, max_value=len(rows) - 1, value=0)
                r = rows[int(k)]
                img = image_of(r["id"])
                if img is not None:
                    match = [x for x in items.to_pylist() if x["id"] == r["id"]]
                    ref = match[0].get("boxes") if match else []
                    st.image(draw_boxes(img, [("reference", ref or [], None), ("missed", r.get("missed_boxes") or [], None),
                                              ("extra", r.get("extra_boxes") or [], None)]), width="stretch")
                    st.caption("green: reference evidence · orange: missed reference · red: extra prediction")


if __name__ == "__main__":  # pragma: no cover
    main()
