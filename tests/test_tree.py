"""Pytrees: flatten / unflatten / map round trips, NamedTuple, None, registered classes, errors."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leanpass import Tensor, register_pytree, tree_flatten, tree_map, tree_unflatten
from leanpass.core.tree import tree_num_leaves


class Point(NamedTuple):
    x: Any
    y: Any


TREES = [
    1.0,
    np.arange(3.0),
    Tensor([1.0]),
    [],
    (),
    {},
    None,
    [1.0, 2.0],
    (1.0, [2.0, (3.0,)]),
    {"w": [1.0, 2.0], "b": 3.0},
    {"b": 1.0, "a": 2.0},  # insertion order is kept
    {"layers": [{"w": 1.0, "b": None}, {"w": 2.0, "b": 3.0}], "scale": (4.0, 5.0)},
    Point(1.0, [2.0, 3.0]),
    [Point(Point(1.0, 2.0), None), {"p": Point(3.0, 4.0)}],
    [None, 1.0, None],
]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    leaves, treedef = tree_flatten(tree)
    rebuilt = tree_unflatten(treedef, leaves)
    assert _same(rebuilt, tree)
    assert tree_flatten(rebuilt)[1] == treedef
    assert tree_num_leaves(treedef) == len(leaves)


def _same(a: Any, b: Any) -> bool:
    """Equal structure, types and leaves (leaves compared by identity)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b


def test_leaves_come_in_order() -> None:
    tree = {"w": [1.0, 2.0], "b": (3.0, {"c": 4.0}), "n": None, "p": Point(5.0, 6.0)}
    assert tree_flatten(tree)[0] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_none_is_an_empty_node_not_a_leaf() -> None:
    leaves, treedef = tree_flatten({"a": None, "b": 1.0})
    assert leaves == [1.0]
    assert tree_unflatten(treedef, [2.0]) == {"a": None, "b": 2.0}
    assert tree_map(lambda x: x * 10, [None, 1.0]) == [None, 10.0]


def test_arrays_and_tensors_are_leaves() -> None:
    a, t = np.ones((2, 2)), Tensor([1.0, 2.0])
    leaves, _ = tree_flatten([a, {"t": t}])
    assert leaves[0] is a and leaves[1] is t


def test_namedtuple_round_trip_keeps_the_class() -> None:
    p = Point(1.0, Point(2.0, 3.0))
    leaves, treedef = tree_flatten(p)
    assert leaves == [1.0, 2.0, 3.0]
    q = tree_unflatten(treedef, [4.0, 5.0, 6.0])
    assert type(q) is Point and type(q.y) is Point and q == Point(4.0, Point(5.0, 6.0))
    assert tree_map(lambda v: v + 1, p) == Point(2.0, Point(3.0, 4.0))


def test_tree_map_keeps_structure() -> None:
    tree = {"w": [1.0, 2.0], "b": (3.0,), "n": None}
    assert tree_map(lambda x: x * 2, tree) == {"w": [2.0, 4.0], "b": (6.0,), "n": None}


def test_tree_map_over_several_trees() -> None:
    params = {"w": np.array([1.0, 2.0]), "b": 0.5}
    grads = {"w": np.array([0.1, 0.2]), "b": 1.0}
    new = tree_map(lambda p, g: p - 0.5 * g, params, grads)
    np.testing.assert_allclose(new["w"], [0.95, 1.9])
    assert new["b"] == 0.0
    assert tree_map(lambda a, b, c: a + b + c, [1, 2], [10, 20], [100, 200]) == [111, 222]


@pytest.mark.parametrize(
    ("first", "other", "where"),
    [
        ([1.0, 2.0], (1.0, 2.0), r"at the root: a list of 2 vs a tuple of 2"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], r"at the root: a list of 2 vs a list of 3"),
        ({"a": 1.0}, {"b": 1.0}, r"at the root: a dict with keys \['a'\] vs a dict with keys \['b'\]"),
        ({"a": [1.0, (2.0,)]}, {"a": [1.0, 2.0]}, r"at \['a'\]\[1\]: a tuple of 1 vs a leaf"),
        ([1.0, None], [1.0, 2.0], r"at \[1\]: None vs a leaf"),
        (Point(1.0, 2.0), (1.0, 2.0), r"at the root: a Point of 2 vs a tuple of 2"),
        (
            {"a": 1.0, "b": 2.0},
            {"b": 2.0, "a": 1.0},
            r"at the root: the same dict keys in a different order \(\[.a., .b.\] vs \[.b., .a.\]\)",
        ),
    ],
)
def test_tree_map_with_mismatched_structures_says_where(first: Any, other: Any, where: str) -> None:
    with pytest.raises(ValueError, match=r"tree_map: the trees have different structures \(" + where):
        tree_map(lambda a, b: a, first, other)


def test_unflatten_with_the_wrong_number_of_leaves() -> None:
    _, treedef = tree_flatten({"a": [1.0, 2.0], "b": 3.0})
    with pytest.raises(ValueError, match=r"the structure has 3 leaves, but 2 were given"):
        tree_unflatten(treedef, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"the structure has 3 leaves, but 4 were given"):
        tree_unflatten(treedef, [1.0, 2.0, 3.0, 4.0])
    _, empty = tree_flatten(None)
    with pytest.raises(ValueError, match=r"has 0 leaves, but 1 were given"):
        tree_unflatten(empty, [1.0])


def test_treedefs_compare_by_structure() -> None:
    assert tree_flatten([1.0, {"a": 2.0}])[1] == tree_flatten([5.0, {"a": np.ones(3)}])[1]
    assert tree_flatten([1.0, {"a": 2.0}])[1] != tree_flatten([1.0, {"b": 2.0}])[1]
    assert tree_flatten((1.0,))[1] != tree_flatten([1.0])[1]


class Pair:
    def __init__(self, a: Any, b: Any, tag: str) -> None:
        self.a, self.b, self.tag = a, b, tag


register_pytree(Pair, lambda p: ([p.a, p.b], p.tag), lambda tag, ch: Pair(ch[0], ch[1], tag))


def test_registered_class_round_trip_keeps_its_metadata() -> None:
    leaves, treedef = tree_flatten([Pair(1.0, [2.0, 3.0], "x")])
    assert leaves == [1.0, 2.0, 3.0]
    (p,) = tree_unflatten(treedef, [4.0, 5.0, 6.0])
    assert type(p) is Pair and p.a == 4.0 and p.b == [5.0, 6.0] and p.tag == "x"
    assert tree_flatten(Pair(1.0, 2.0, "x"))[1] != tree_flatten(Pair(1.0, 2.0, "y"))[1]


# ----- random trees ------------------------------------------------------------------------------

leaves_st = st.one_of(st.floats(allow_nan=False), st.integers(), st.just("s"))
trees_st = st.recursive(
    st.one_of(leaves_st, st.none()),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text("abc", min_size=1, max_size=2), children, max_size=3),
        st.tuples(children, children).map(lambda t: Point(*t)),
    ),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None)
@given(tree=trees_st)
def test_random_trees_round_trip(tree: Any) -> None:
    leaves, treedef = tree_flatten(tree)
    assert tree_unflatten(treedef, leaves) == tree
    tagged = tree_unflatten(treedef, list(range(len(leaves))))
    assert tree_flatten(tagged)[0] == list(range(len(leaves)))
    assert tree_flatten(tagged)[1] == treedef
    assert tree_map(lambda x: x, tree) == tree


def test_a_models_structure_rebuilds_through_its_written_out_builder() -> None:
    # A walked frozen module's treedef gets a builder written out as one expression (tree._builder).
    from leanpass import nn

    model = nn.MLP([3, 4, 2], rng=0, dtype=np.float64)
    leaves, treedef = tree_flatten(model)
    for _ in range(2):  # the second call reuses the builder
        rebuilt = tree_unflatten(treedef, [Tensor(np.asarray(x) * 2) for x in leaves])
        assert type(rebuilt) is nn.MLP and type(rebuilt.layers) is tuple
        assert rebuilt.activation == model.activation
        np.testing.assert_array_equal(rebuilt.layers[1].bias.numpy(), leaves[3].numpy() * 2)
        assert tree_flatten(rebuilt)[1] == treedef
    with pytest.raises(ValueError, match="the structure has 4 leaves, but 3 were given"):
        tree_unflatten(treedef, leaves[:3])
    with pytest.raises(ValueError, match="the structure has 4 leaves, but 5 were given"):
        tree_unflatten(treedef, [*leaves, leaves[0]])


def test_a_structure_too_deep_to_write_out_still_rebuilds() -> None:
    from leanpass import nn

    deep: Any = np.zeros(2)
    for _ in range(300):  # deeper than Python's parser takes nested brackets
        deep = (deep,)
    layer = nn.Linear(2, 2, rng=0, dtype=np.float64).replace(weight=deep)
    leaves, treedef = tree_flatten(layer)
    rebuilt = tree_unflatten(treedef, leaves)
    inner = rebuilt.weight
    for _ in range(300):
        inner = inner[0]
    assert inner is leaves[0]


def test_a_treedef_is_a_leaf() -> None:
    # (an optimizer's state, a saved structure: held as data, not walked into)
    _, inner = tree_flatten({"w": [1.0, 2.0]})
    leaves, treedef = tree_flatten({"structure": inner, "x": 3.0})
    assert leaves == [inner, 3.0]
    assert tree_unflatten(treedef, leaves) == {"structure": inner, "x": 3.0}
    assert tree_map(lambda x: x, [inner]) == [inner]


def test_a_module_inside_a_container_flattens_from_its_remembered_flatten() -> None:
    # One flatten for every caller (lp.jit's signatures too): a frozen module anywhere in the tree
    # is flattened once; later flattens of a tree holding it take its leaves and structure as remembered.
    from leanpass import nn

    model = nn.MLP([3, 4, 2], rng=0, dtype=np.float64)
    leaves, treedef = tree_flatten((model, {"x": 1.0}))
    alone, model_def = tree_flatten(model)
    assert treedef.children[0] is model_def  # the structure remembered by the first flatten, not a new walk
    assert leaves == [*alone, 1.0]
    again, treedef_again = tree_flatten([model, model])
    assert again == alone + alone and treedef_again.children[1] is model_def
    assert tree_unflatten(treedef, leaves)[0].layers[0].weight is alone[0]
