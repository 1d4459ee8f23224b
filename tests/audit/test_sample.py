"""Stratified sampling: the allocation rule and determinism."""

import pytest

from witness.audit.sample import allocate, blind, stratified_sample
from witness.errors import InputError
from witness.schema import item_record, items_table


def _items(n):
    cats = ["existence", "enumeration", "attribute_recognition"]
    return items_table([
        item_record(f"q{i}", f"im{i}", 10, 10, "q?", "2", [[0, 0, 1, 1], [2, 2, 3, 3]], ["a", "a"], count=2,
                    qtype="counting", category=cats[i % 3] if i < 90 else "existence", split="test" if i % 4 == 0 else "train")
        for i in range(n)
    ])


def test_largest_remainder():
    assert allocate([50, 30, 20], 10).tolist() == [5, 3, 2]
    assert allocate([5, 3, 2], 3).tolist() == [1, 1, 1]  # quotas 1.5, .9, .6: floors 1,0,0; remainders .5, .9, .6
    assert allocate([4, 4], 100).tolist() == [4, 4]
    assert allocate([7, 2, 1], 5).sum() == 5


def test_sample_is_stratified_deterministic_and_sized():
    t = _items(100)
    a = stratified_sample(t, 20, stratify=["split", "category"], seed=3)
    b = stratified_sample(t, 20, stratify=["split", "category"], seed=3)
    c = stratified_sample(t, 20, stratify=["split", "category"], seed=4)
    assert a.table.num_rows == 20
    assert a.table.column("id").to_pylist() == b.table.column("id").to_pylist()
    assert a.table.column("id").to_pylist() != c.table.column("id").to_pylist()
    assert sum(d for _, d in a.allocation.values()) == 20
    for stratum, (pop, drawn) in a.allocation.items():
        assert abs(drawn - 20 * pop / 100) < 1


def test_blind_hides_labels():
    b = blind(_items(3))
    assert b.column("answer").to_pylist() == ["", "", ""]
    assert b.column("boxes").to_pylist() == [[], [], []]
    assert b.column("count").to_pylist() == [None] * 3
    assert b.column("question").to_pylist() == ["q?"] * 3


def test_errors():
    with pytest.raises(InputError, match="--stratify"):
        stratified_sample(_items(3), 2, stratify=["nope"])
    with pytest.raises(InputError, match="n >= 1"):
        stratified_sample(_items(3), 0)
