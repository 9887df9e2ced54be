"""lp.jit: results bit for bit equal to the function's own, over training steps, control flow,
randomness, donation, errors, threads, and every op of functional.OPS under jit(grad(...))."""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
import op_samples
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import leanpass as lp
from leanpass import functional as F
from leanpass import losses, nn, optim
from leanpass.transforms.jit import ConcretizationError

# Every op's sample inputs, from the tables beside the tests: ``SAMPLES[key](rng)`` gives the op's
# arguments, where the op is ``key`` up to a ``/`` (``"getitem/mask"``).
SAMPLES = op_samples.every_sample()
op_of = op_samples.op_of


def same(a, b) -> bool:
    """Bit for bit: equal leaves (nan where nan), dtypes and types, in the same structure."""
    la, ta = lp.tree_flatten(a)
    lb, tb = lp.tree_flatten(b)
    if ta != tb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if type(x) is not type(y):
            return False
        if type(x) is lp.Tensor:
            x, y = x._data, y._data
        if isinstance(x, (np.ndarray, np.generic)):
            if np.asarray(x).dtype != np.asarray(y).dtype or not np.array_equal(x, y, equal_nan=True):
                return False
        elif x != y:
            return False
    return True


def data(dtype, n=16, d=8, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(dtype), rng.integers(0, classes, n)


def make_step(opt, use_rng=False):
    def loss_fn(model, xb, yb, rng):
        return losses.cross_entropy(model(xb, rng=rng) if use_rng else model(xb), yb)

    def step(model, state, xb, yb, rng=None):
        loss, grads = lp.value_and_grad(loss_fn)(model, xb, yb, rng)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    return step


def run_both(step, model, opt, batches, jit_kwargs=None, rngs=None):
    """Run ``step`` eagerly and jitted over ``batches``; assert every output equal bit for bit."""
    jitted = lp.jit(step, **(jit_kwargs or {}))
    me, se = model, opt.init(model)
    mj, sj = model, opt.init(model)
    for i, (xb, yb) in enumerate(batches):
        extra_e = (rngs[0],) if rngs else ()
        extra_j = (rngs[1],) if rngs else ()
        me, se, le = step(me, se, xb, yb, *extra_e)
        mj, sj, lj = jitted(mj, sj, xb, yb, *extra_j)
        assert same(le, lj), f"loss differs at step {i}: {le} vs {lj}"
        assert same(me, mj), f"parameters differ at step {i}"
        assert same(se, sj), f"optimizer state differs at step {i}"
    return jitted


OPTIMIZERS = {
    "sgd": lambda: optim.sgd(0.1),
    "momentum": lambda: optim.sgd(0.05, momentum=0.9),
    "nesterov": lambda: optim.sgd(0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda: optim.adam(1e-2),
    "adamw": lambda: optim.adamw(1e-2, weight_decay=0.1),
    "adam-cosine": lambda: optim.adam(optim.cosine_decay(1e-2, 5, alpha=0.1)),
    "adam-warmup": lambda: optim.adam(optim.warmup_cosine(1e-2, 2, 4)),
    "sgd-exponential": lambda: optim.sgd(optim.exponential_decay(0.1, 0.5, 3)),
    "sgd-constant": lambda: optim.sgd(optim.constant_schedule(0.1)),
    "clip-adam": lambda: optim.chain(optim.clip_by_global_norm(0.5), optim.adam(1e-2)),
    "clip-loose": lambda: optim.chain(optim.clip_by_global_norm(1e6), optim.sgd(0.1)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mlp_steps_equal_eager_bit_for_bit(name, dtype):
    opt = OPTIMIZERS[name]()
    model = nn.MLP([8, 16, 4], rng=0, dtype=dtype)
    batches = [data(dtype, seed=s) for s in range(7)]  # the decay schedules run past their end
    jitted = run_both(make_step(opt), model, opt, batches)
    assert jitted.trace_count <= 3  # (the warm-up's and the decay's end each flip one branch)


def test_clipping_that_switches_on_and_off():
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.1))
    model = nn.MLP([8, 16, 4], rng=0, dtype=np.float64)
    batches = [data(np.float64, seed=s) for s in range(3)]
    batches += [(x * 50, y) for x, y in batches] + batches  # large inputs: large gradients, clipped
    run_both(make_step(opt), model, opt, batches)


def test_layernorm_embedding_dropout_model():
    class Net(nn.Module):
        pass

    emb = nn.Embedding(10, 8, rng=0, dtype=np.float32)
    net = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16, rng=1), nn.relu, nn.Dropout(0.3), nn.Linear(16, 4, rng=2))
    model = {"emb": emb, "net": net}
    opt = optim.adam(1e-2)

    def loss_fn(m, tokens, yb, rng):
        h = m["emb"](tokens).mean(axis=1)
        return losses.cross_entropy(m["net"](h, rng=rng), yb)

    def step(m, s, tokens, yb, rng):
        loss, grads = lp.value_and_grad(loss_fn)(m, tokens, yb, rng)
        updates, s = opt.update(grads, s, m)
        return optim.apply_updates(m, updates), s, loss

    r = np.random.default_rng(5)
    batches = [(r.integers(0, 10, (6, 3)), r.integers(0, 4, 6)) for _ in range(4)]
    rngs = (np.random.default_rng(7), np.random.default_rng(7))
    jitted = run_both(step, model, opt, batches, rngs=rngs)
    assert jitted.trace_count == 1
    assert rngs[0].random() == rngs[1].random()  # both generators advanced alike


def test_donated_arguments_get_the_update():
    opt = optim.adam(1e-2)
    step = make_step(opt)
    model = nn.MLP([8, 16, 4], rng=0, dtype=np.float32)
    batches = [data(np.float32, seed=s) for s in range(4)]
    jitted = run_both(step, model, opt, batches, {"donate_argnums": (0, 1)})
    m, s = model, opt.init(model)
    m, s, _ = jitted(m, s, *batches[0])
    before = [p._data for p in lp.tree_flatten(m)[0]]
    m2, s2, _ = jitted(m, s, *batches[1])
    after = [p._data for p in lp.tree_flatten(m2)[0]]
    assert all(a is b for a, b in zip(before, after))  # the new values were written into the donated arrays
    mu_before = s.slots[1][0]
    assert s2.slots[1][0] is mu_before


def test_retrace_on_new_shapes_and_dtypes():
    f = lp.jit(lambda x, w: lp.grad(lambda w: ((x @ w) ** 2).mean())(w))
    w = np.ones((3, 2))
    for n in (5, 5, 2, 5, 2):
        x = np.arange(3.0 * n).reshape(n, 3)
        assert same(f(x, w), lp.grad(lambda w, x=x: ((x @ w) ** 2).mean())(w))
    assert f.trace_count == 2
    f(np.ones((2, 3), np.float32), w.astype(np.float32))
    assert f.trace_count == 3


def test_python_numbers_are_traced_static_arguments_are_not():
    f = lp.jit(lambda x, lr, n: x * lr + n, static_argnums=(2,))
    x = np.arange(3.0, dtype=np.float32)
    for lr in (0.5, 0.25, 3.0):
        out = f(x, lr, 2)
        assert out.dtype == np.float32 and same(out, x * lr + 2)
    assert f.trace_count == 1
    assert same(f(x, 1.5, 7), x * 1.5 + 7)
    assert f.trace_count == 2


def test_powers_replay_the_operator_eager_ran():
    # ndarray ** number takes shortcuts that np.power does not (on NumPy 1.x: a square for ** 2, a
    # sqrt for ** 0.5, a reciprocal for ** -1), so jit replays the operator itself, in place too
    x = np.random.default_rng(0).uniform(0.1, 3.0, 1000)

    def f(x, inplace):
        out = [x ** p for p in (2, 0.5, -1, 1, 0, 3, 2.0, -0.5)] + [2.0 ** x, x ** x]
        y = x * 1.0
        if inplace:
            y **= 2
            y **= 0.5
        return [*out, y]

    for dtype in (np.float64, np.float32):
        for inplace in (False, True):
            jitted = lp.jit(f, static_argnums=1)
            for scale in (1.0, 0.7):  # the trace, then a replay
                xs = (x * scale).astype(dtype)
                assert same(jitted(xs, inplace), f(xs, inplace)), (dtype, inplace)


def test_branches_that_flip_between_calls():
    def f(x):
        s = (x * x).sum()
        if s > 10:  # a Python branch on a traced value
            return x / s
        return x * 2.0

    jitted = lp.jit(f)
    for scale in (1.0, 5.0, 1.0, 5.0, 0.1, 4.0):
        x = np.array([1.0, 2.0, 0.5]) * scale
        assert same(jitted(x), f(x))
    assert jitted.trace_count == 2  # one program per side of the branch, both kept


def test_float_and_item_are_rechecked():
    def f(x):
        n = int(x.sum() > 0) + 1  # a value used as a Python number
        return x * float(x.max()) * n

    jitted = lp.jit(f)
    for x in (np.array([1.0, 2.0]), np.array([3.0, -9.0]), np.array([1.0, 2.0])):
        assert same(jitted(x), f(x))


def test_strict_raises_on_values_leaving_the_trace():
    def f(x):
        return x * 2.0 if float(x.sum()) > 0 else x

    with pytest.raises(ConcretizationError, match=r"strict=True.*float\(\) of a traced value"):
        lp.jit(f, strict=True)(np.ones(3))
    with pytest.raises(TypeError, match="np.asarray"):
        lp.jit(lambda x: np.asarray(x) + 1, strict=True)(np.ones(3))


def test_value_dependent_shapes_are_checked():
    f = lp.jit(lambda x: (x[x > 0] ** 2).sum() + np.nonzero(x)[0].size)
    for x in (np.array([1.0, -2.0, 3.0]), np.array([1.0, 2.0, 3.0]), np.array([-1.0, -2.0, 0.0])):
        assert same(f(x), (x[x > 0] ** 2).sum() + np.nonzero(x)[0].size)


def test_generator_arguments_draw_at_every_call():
    def f(x, rng):
        return x * rng.standard_normal(x.shape) + rng.random()

    jitted = lp.jit(f)
    r1, r2 = np.random.default_rng(3), np.random.default_rng(3)
    x = np.ones(4)
    outs = []
    for _ in range(4):
        a, b = f(x, r1), jitted(x, r2)
        assert same(a, b)
        outs.append(b)
    assert not np.array_equal(outs[0], outs[1])  # new numbers each call
    assert jitted.trace_count == 1


def test_generator_draws_are_undone_when_a_guard_fails():
    def f(x, rng):
        noise = rng.random(x.shape)
        return x + noise if x.sum() > 0 else x - noise

    jitted = lp.jit(f)
    r1, r2 = np.random.default_rng(0), np.random.default_rng(0)
    for x in (np.ones(3), -np.ones(3), np.ones(3), -np.ones(3)):
        assert same(f(x, r1), jitted(x, r2))


def test_a_generator_in_the_closure_is_refused():
    rng = np.random.default_rng(0)

    def f(x):
        return x * rng.random(x.shape)

    with pytest.raises(TypeError, match="np.random.Generator from outside.*rng.*Pass the generator as an argument"):
        lp.jit(f)


def test_a_generator_held_by_an_object_the_function_calls_is_refused():
    class Noisy:
        def __init__(self):
            self.rng = np.random.default_rng(0)

        def __call__(self, x):
            return x + self.rng.standard_normal(x.shape)

        def method(self, x):
            return x * self.rng.random(x.shape)

    noisy = Noisy()
    for f, name in ((noisy, "self.rng"), (noisy.method, "self.rng"), (lambda x: noisy(x), "noisy.rng")):
        with pytest.raises(TypeError, match=rf"random numbers from {name}, which is not an argument.*as an argument"):
            lp.jit(f)(np.zeros(2))
    # a generator the function holds but does not draw from, or one passed as an argument, is fine
    quiet = lp.jit(lambda x, rng: x * 2 + rng.random(2) + 0 * noisy.rng.bit_generator.state["state"]["inc"])
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    assert same(quiet(np.ones(2), a), np.ones(2) * 2 + b.random(2))
    assert same(quiet(np.ones(2), a), np.ones(2) * 2 + b.random(2))


def test_exceptions_surface_alike_at_every_call():
    model = nn.MLP([4, 3], rng=0, dtype=np.float64)
    f = lp.jit(lambda m, x, y: losses.cross_entropy(m(x), y))
    x = np.ones((2, 4))
    f(model, x, np.array([0, 1]))  # traced with good labels
    for bad in (np.array([0, 7]), np.array([-1, 0])):  # then replayed with labels out of range
        with pytest.raises(ValueError) as eager:
            losses.cross_entropy(model(x), bad)
        for _ in range(2):
            with pytest.raises(ValueError) as jitted:
                f(model, x, bad)
            assert str(jitted.value) == str(eager.value)
    g = lp.jit(lambda x: x @ np.ones((5, 2)))
    for _ in range(2):
        with pytest.raises(ValueError, match="inner dimensions do not match"):
            g(lp.Tensor(np.ones((2, 3))))


def test_side_effects_happen_while_tracing_only():
    seen = []

    def f(x):
        seen.append(1)
        return x + 1

    jitted = lp.jit(f)
    for _ in range(3):
        jitted(np.ones(2))
    assert seen == [1]


def test_a_traced_value_that_escapes_raises():
    kept = []

    def f(x):
        y = x * 2.0
        kept.append(y)
        return y

    lp.jit(f)(np.ones(2))
    with pytest.raises(RuntimeError, match="escaped its jitted function"):
        kept[0] + 1


def test_threads_calling_one_jitted_function():
    opt = optim.adam(1e-2)
    step = lp.jit(make_step(opt))
    model = nn.MLP([8, 16, 4], rng=0, dtype=np.float64)
    expected = {}
    results = {}
    for seed in range(4):
        m, s = model, opt.init(model)
        for _ in range(3):
            m, s, _ = make_step(opt)(m, s, *data(np.float64, seed=seed))
        expected[seed] = m

    def work(seed):
        m, s = model, opt.init(model)
        for _ in range(3):
            m, s, _ = step(m, s, *data(np.float64, seed=seed))
        results[seed] = m

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(same(results[s], expected[s]) for s in range(4))


def test_grad_of_a_jitted_function_runs_it_eagerly():
    f = lp.jit(lambda x: (lp.sin(x) * x).sum())
    x = np.array([0.3, 1.2])
    assert same(lp.grad(f)(x), lp.grad(lambda x: (lp.sin(x) * x).sum())(x))


def test_jit_checks_its_arguments():
    with pytest.raises(TypeError, match="expected a function"):
        lp.jit(3)
    with pytest.raises(ValueError, match="both static and donated"):
        lp.jit(lambda x: x, static_argnums=0, donate_argnums=0)
    with pytest.raises(TypeError, match="static argument 1 must be hashable"):
        lp.jit(lambda x, s: x, static_argnums=1)(np.ones(1), [1])
    with pytest.raises(TypeError, match="part of a graph"):
        lp.jit(lambda x: x * 2)(lp.Tensor([1.0], requires_grad=True))


def test_argnums_out_of_range_are_refused():
    with pytest.raises(ValueError, match=r"static_argnums=\(2,\) names argument 2, but <lambda> takes 2 positional"):
        lp.jit(lambda a, b: a, static_argnums=2)
    with pytest.raises(ValueError, match=r"donate_argnums=\(0, -3\) names argument -3"):
        lp.jit(lambda a, b: a, donate_argnums=(0, -3))
    g = lp.jit(lambda *a: a[0] * 2, donate_argnums=1)  # no fixed signature: checked at each call
    with pytest.raises(ValueError, match=r"donate_argnums=\(1,\), but the function was called with 1 positional"):
        g(np.ones(2))
    assert same(g(np.ones(2), np.ones(2)), np.ones(2) * 2)
    with pytest.raises(ValueError, match="cache_size must be an int >= 1"):
        lp.jit(lambda x: x, cache_size=0)


def test_a_donated_array_used_twice_is_refused():
    def step(w, v):
        return w - 0.25 * lp.grad(lambda w: ((w * v) ** 2).sum())(w), ((w * v) ** 2).sum()

    f = lp.jit(step, donate_argnums=0)
    f(np.ones(2), np.full(2, 2.0))  # traced with two arrays
    a = np.array([1.0, 1.5])
    for v in (a, a[::-1], a.reshape(1, 2)[0]):
        with pytest.raises(ValueError, match=r"args\[0\] and args\[1\] share memory.*donate_argnums"):
            f(a, v)
    assert np.array_equal(a, [1.0, 1.5])  # (refused before anything was written)
    halves = np.array([1.0, 1.5, 2.0, 2.0])
    assert same(f(halves[:2], halves[2:]), step(np.array([1.0, 1.5]), np.full(2, 2.0)))  # disjoint: fine

    def tied(p):
        return (p["a"] * 2).sum() + (p["b"] * 3).sum(), {"a": p["a"] * 2, "b": p["b"] + 1}

    g = lp.jit(tied, donate_argnums=0)
    g({"a": lp.Tensor(np.ones(2)), "b": lp.Tensor(np.ones(2))})
    for _ in range(2):  # one Tensor at both places (tied weights) is one input, donated once
        w, v = lp.Tensor(np.ones(2)), lp.Tensor(np.ones(2))
        assert same(g({"a": w, "b": w}), tied({"a": v, "b": v}))  # (10, as without jit)
    w = lp.Tensor(np.ones(2))  # donated at one place, not donated at another: refused
    h = lp.jit(lambda p, q: tied(p)[0] + q.sum(), donate_argnums=0)
    with pytest.raises(ValueError, match=r"args\[0\]\['b'\] and args\[1\] are one Tensor \(tied weights\), "
                                         "and donate_argnums donates only one of them"):
        h({"a": lp.Tensor(np.ones(2)), "b": w}, w)
    assert np.array_equal(w.numpy(), np.ones(2))


def test_arguments_that_alias_replay_as_without_jit():
    """A program traced for separate arrays, called with one array twice: a function that writes into
    an argument sees the other change, as without jit (here a branch on it goes the other way)."""
    def f(a, b):
        first = 1.0 if b else 0.0
        a *= 0  # in place: b is a too when they alias
        return a + (first + (1.0 if b else 0.0))

    jitted = lp.jit(f)
    assert same(jitted(np.array(1.0), np.array(3.0)), f(np.array(1.0), np.array(3.0)))  # 2.0
    x, y = np.array(3.0), np.array(3.0)
    expected = f(y, y)
    assert float(expected) == 1.0  # b is 0 at its second test
    assert same(jitted(x, x), expected)
    assert same(jitted(np.array(1.0), np.array(3.0)), f(np.array(1.0), np.array(3.0)))
    assert same(jitted(x, x), f(y, y))  # (x is 0 now: both tests fail)


# ----- every op of functional.OPS under jit(grad(...)) ---------------------------------------------
def test_every_op_has_sample_inputs():
    missing = sorted(set(F.OPS) - {op_of(k) for k in SAMPLES})
    assert not missing, f"ops without sample inputs in tests/op_samples.py: {missing}"


def layouts(a):
    """``a``'s values in five memory layouts (NumPy's loops and BLAS add up in layout order)."""
    return {
        "C": a.copy(),
        "transposed": a.T.copy().T,
        "reversed": a[::-1].copy()[::-1] if a.ndim else a,
        "reversed-transposed": a.T[::-1].copy()[::-1].T if a.ndim else a,
        "gapped": np.repeat(a, 2, axis=-1)[..., ::2] if a.ndim else a,
    }


def _op_loss(key, args, layout="C"):
    """``(f, diff_arrays)``: f of the float arrays among ``args``, a weighted sum of the op's output
    (the weights a constant of ``f`` in the given memory layout)."""
    name = op_of(key)
    diff = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    out = lp.apply(F.OPS[name], name, *args)
    weights = layouts(np.random.default_rng(1).standard_normal(out.shape).astype(out.dtype))[layout]

    def f(*xs):
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        return (lp.apply(F.OPS[name], name, *full) * weights).sum()

    return f, [args[i] for i in diff]


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(SAMPLES)), seed=st.integers(0, 2**16), layout=st.sampled_from(sorted(layouts(
    np.zeros(1)))))
def test_every_op_under_jit_of_grad(key, seed, layout):
    args = SAMPLES[key](np.random.default_rng(seed))
    f, xs = _op_loss(key, args, layout)
    if not xs:
        return
    argnums = tuple(range(len(xs)))
    eager = lp.grad(f, argnums=argnums)
    jitted = lp.jit(lp.grad(f, argnums=argnums))
    assert same(jitted(*xs), eager(*xs)), key
    # a replay with new values of the same shapes
    again = SAMPLES[key](np.random.default_rng(seed + 1))
    ys = [again[i] for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if all(np.shape(a) == np.shape(b) for a, b in zip(xs, ys)):
        assert same(jitted(*ys), eager(*ys)), key


BINARY = ["+", "-", "*", "/", "**", "maximum", "minimum", "logaddexp"]
UNARY = ["exp", "sin", "cos", "tanh", "sigmoid", "softplus", "square", "neg", "relu", "gelu", "abs", "log", "sqrt",
         "identity", "sum", "mean", "max", "min", "logsumexp", "softmax", "log_softmax", "var", "std"]
POSITIVE = {"log", "sqrt", "/", "**"}  # (the first input of ** and the second of /)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_ops_under_jit_of_grad_over_shapes(data):
    """Elementwise ops over broadcast shapes (0-d included), reductions and softmaxes over any shape."""
    name = data.draw(st.sampled_from(BINARY + UNARY))
    if name in BINARY:
        shapes = list(data.draw(mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3)).input_shapes)
    else:
        min_dims = 1 if name in ("softmax", "log_softmax") else 0
        shapes = [data.draw(array_shapes(min_dims=min_dims, max_dims=3, min_side=1, max_side=3))]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    args = []
    for i, shape in enumerate(shapes):
        positive = name in POSITIVE and (i == 0) == (name != "/")
        args.append(np.asarray(rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)))
    f, xs = _op_loss(name, args)
    argnums = tuple(range(len(xs)))
    jitted = lp.jit(lp.grad(f, argnums=argnums))
    for scale in (1.0, 1.25):
        ys = [x * scale for x in xs]
        assert same(jitted(*ys), lp.grad(f, argnums=argnums)(*ys)), (name, shapes)


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_each_op_replays_under_jit_of_grad(key):
    args = SAMPLES[key](np.random.default_rng(0))
    f, xs = _op_loss(key, args)
    if not xs:
        return
    argnums = tuple(range(len(xs)))
    eager = lp.grad(f, argnums=argnums)
    jitted = lp.jit(lp.grad(f, argnums=argnums))
    for scale in (1.0, 0.75):
        ys = [x * scale for x in xs]
        assert same(jitted(*ys), eager(*ys)), key
    assert jitted.trace_count == 1, key  # no value of the op's code left the trace (to be checked at each call)


def test_digits_example_with_and_without_jit_are_identical():
    import io

    from leanpass.examples import digits

    a = digits.train(epochs=1, hidden=(32,), output=None, stream=io.StringIO(), jit=True)
    b = digits.train(epochs=1, hidden=(32,), output=None, stream=io.StringIO(), jit=False)
    assert a["history"] == b["history"]
    assert same(a["model"], b["model"])


def test_the_layout_of_array_arguments_is_part_of_the_signature():
    def f(x):
        flat = x.reshape(-1)  # a view of a contiguous x, a copy of a transposed one
        return np.exp(flat) + x.sum()

    jitted = lp.jit(f)
    a = np.arange(6.0).reshape(2, 3) / 10
    for x in (a, a.T.copy().T, a + 1, (a + 1).T.copy().T):
        assert same(jitted(x), f(x))
        assert same(x, x)  # (inputs are never written)
    assert jitted.trace_count == 2


CONSTANT_USES = {
    "einsum": lambda x, a: np.einsum("ij,jk->ik", x, a),
    "sums": lambda x, a: [(a * x[0, 0]).sum(), (a * x[0, 0]).sum(0), np.mean(a * x[0, 0], axis=1)],
    "matmul": lambda x, a: x @ a,
    "tensordot": lambda x, a: np.tensordot(x, a, 1),
    "transposed matmul": lambda x, a: a.T @ x.T,
    "grad": lambda x, a: lp.grad(lambda x: (lp.tanh(x @ a) ** 2).sum())(x),
}


@pytest.mark.parametrize("use", sorted(CONSTANT_USES))
@pytest.mark.parametrize("layout", sorted(layouts(np.zeros(1))))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_constants_keep_their_memory_layout(use, layout, dtype):
    """A closure's array is a constant of the program, kept in its own layout: NumPy's loops (and
    BLAS's kernels, which differ between CPUs) add up in an order that follows the layout."""
    rng = np.random.default_rng(3)
    a = layouts(rng.standard_normal((60, 37)).astype(dtype))[layout]
    fn = CONSTANT_USES[use]
    jitted = lp.jit(lambda x: fn(x, a))
    for _ in range(2):  # the trace, then a replay with new values
        x = rng.standard_normal((5, 60)).astype(dtype)
        assert same(jitted(x), fn(x, a)), (use, layout)
    returned = lp.jit(lambda x: (x * 2, a))(x)[1]
    assert returned.strides == a.strides and np.array_equal(returned, a)


def test_powers_replay_numpys_operator():
    """``x ** 2`` is NumPy's operator, which before NumPy 2 takes np.square (np.sqrt for 0.5,
    np.reciprocal for -1, ...) rather than np.power: the replay makes the same call."""
    def f(x, y):
        z = x * 1.0
        z **= 2
        y **= 0.5  # (in place, in an argument)
        return [z, y, x ** -1, x ** 1, x ** 0, x ** 0.5, x ** 2.0, x ** 3, 2.0 ** x, np.float32(1.5) ** x]

    rng = np.random.default_rng(6)
    for dtype in (np.float32, np.float64):
        jitted = lp.jit(f)
        for _ in range(3):
            x = rng.uniform(0.5, 2.0, 50).astype(dtype)
            a, b = x.copy(), x.copy()
            assert same(jitted(x, a), f(x, b)) and same(a, b)


def _max_jvp(x, t):
    return lp.jvp(lambda x: lp.max(x, axis=0), (x,), (t,))


def _scalar(x):
    return (lp.tanh(x) ** 2).sum() * lp.max(x)


UNDER_JIT = {  # name: (function, its arguments from a generator)
    "jacfwd": (lp.jacfwd(lambda x: lp.tanh(x) * lp.max(x)), lambda r: (r.standard_normal(3),)),
    "jacrev": (lp.jacrev(lambda x: lp.tanh(x) * lp.max(x)), lambda r: (r.standard_normal(3),)),
    "hessian": (lp.hessian(_scalar), lambda r: (r.standard_normal(3),)),
    "hvp": (lp.hvp(_scalar), lambda r: (r.standard_normal(3), r.standard_normal(3))),
    "vmap": (lp.vmap(lambda x: lp.tanh(x) * lp.max(x)), lambda r: (r.standard_normal((4, 3)),)),
    "vmap of grad": (lp.vmap(lp.grad(_scalar)), lambda r: (r.standard_normal((4, 3)),)),
    "jvp of max": (_max_jvp, lambda r: (r.standard_normal((4, 3)), r.standard_normal((4, 3)))),
    "vjp with a cotangent": (lambda x, c: lp.vjp(lambda x: lp.tanh(x) * lp.max(x), x)[1](c),
                             lambda r: (r.standard_normal(3), r.standard_normal(3))),
}


UNDER_JIT.update({  # and functions that take a traced array where a plain one is usual
    "Tensor of an argument": (lambda x: (lp.Tensor(x) * 2.0, lp.Tensor(x, dtype=np.float32)),
                              lambda r: (r.standard_normal(3),)),
    "take_along_axis": (lambda x, i: lp.take_along_axis(x, i, 1), lambda r: (r.standard_normal((3, 4)),
                                                                           r.integers(0, 4, (3, 2)))),
    "grad of take_along_axis": (lp.grad(lambda x, i: (lp.take_along_axis(x, i, 1) ** 2).sum()),
                                lambda r: (r.standard_normal((3, 4)), r.integers(0, 4, (3, 2)))),
    "select": (lambda x, c: lp.select([c], [lp.Tensor(x) * 2.0], x), lambda r: (r.standard_normal(4),
                                                                              r.random(4) > 0.5)),
    "quantile": (lambda x, q: lp.quantile(x, q), lambda r: (r.standard_normal(7), r.random(2))),
})


@pytest.mark.parametrize("name", sorted(UNDER_JIT))
def test_transforms_under_jit_trace_once(name):
    """LeanPass's transforms and functions keep jit's stand-ins on the trace (none is turned into a
    constant that jit must check at each call): new values replay the program, with eager's bits."""
    f, make = UNDER_JIT[name]
    jitted = lp.jit(f)
    rng = np.random.default_rng(4)
    for _ in range(3):
        args = make(rng)
        assert same(jitted(*args), f(*args)), name
    assert jitted.trace_count == 1, name


def test_vmap_of_a_jitted_function_batches_it():
    def f(x, w):
        return (lp.tanh(x @ w) ** 2).sum()

    rng = np.random.default_rng(5)
    xs, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    for g in (f, lp.grad(f), lp.grad(f, argnums=1)):
        jitted = lp.jit(g)
        assert same(lp.vmap(jitted, in_axes=(0, None))(xs, w), lp.vmap(g, in_axes=(0, None))(xs, w))
        assert same(jitted(xs[0], w), g(xs[0], w))  # traced for one example, then vmapped again
        assert same(lp.vmap(jitted, in_axes=(0, None))(xs * 2, w), lp.vmap(g, in_axes=(0, None))(xs * 2, w))
        assert same(lp.vmap(lp.vmap(jitted, in_axes=(0, None)), in_axes=(None, 1))(xs, np.stack([w, -w], 1)),
                    lp.vmap(lp.vmap(g, in_axes=(0, None)), in_axes=(None, 1))(xs, np.stack([w, -w], 1)))
    scale = lp.jit(lambda x, k: x * k, static_argnums=1)
    assert same(lp.vmap(scale, in_axes=(0, None))(xs, 3), xs * 3)

    def per_example(x):  # a jitted function made inside vmap, its closure batched
        times = lp.jit(lambda y: y * x)
        return times(np.ones(3)) + times(np.full(3, 2.0))

    assert same(lp.vmap(per_example)(xs), lp.vmap(lambda x: np.ones(3) * x + np.full(3, 2.0) * x)(xs))
    compiled = lp.jit(lp.vmap(f, in_axes=(0, None)))  # and jit of vmap
    for k in (1.0, 2.0, 3.0):
        assert same(compiled(xs * k, w), lp.vmap(f, in_axes=(0, None))(xs * k, w))
    assert compiled.trace_count == 1


def test_debug_nans_sees_inside_a_jitted_function():
    def norm(x):
        return lp.sqrt((x * x).sum())

    jg = lp.jit(lp.grad(norm))
    jg(np.ones(3))
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(jg(np.zeros(3))).all()  # a NaN, as without jit
        with lp.debug_nans(), pytest.raises(FloatingPointError, match="debug_nans: the VJP of op"):
            jg(np.zeros(3))
        with lp.debug_nans():
            assert same(jg(np.ones(3)), lp.grad(norm)(np.ones(3)))
    assert same(jg(np.full(3, 2.0)), lp.grad(norm)(np.full(3, 2.0)))
    assert jg.trace_count == 1  # (compiled again once the block has ended)


def test_the_program_cache_is_bounded_and_retracing_warns():
    f = lp.jit(lambda x: x * 2, cache_size=3)
    with pytest.warns(RuntimeWarning, match=r"traced for 8 different argument signatures \(the last change: "
                                            r"args\[0\], shape \(7,\) then \(8,\)\).*pad or bucket"):
        for n in range(1, 12):
            assert same(f(np.ones(n)), np.full(n, 2.0))
    assert f.trace_count == 11
    f(np.ones(9))  # kept: 9, 10, 11; 9 is now the most recently used
    assert f.trace_count == 11
    f(np.ones(1))  # traced again; 10 goes
    f(np.ones(9))
    assert f.trace_count == 12
    f(np.ones(10))
    assert f.trace_count == 13
    g = lp.jit(lambda x, k: x * k, static_argnums=1)
    with pytest.warns(RuntimeWarning, match=r"the last change: static argument 1, 7 then 8"):
        for k in range(1, 10):
            g(np.ones(2), k)


def test_arguments_holding_other_objects_are_refused():
    class Box:
        def __init__(self, w):
            self.w = w

    with pytest.raises(TypeError, match="holds a Box.*register_pytree.*static_argnums"):
        lp.jit(lambda b: b.w * 2)(Box(np.ones(2)))


def test_a_jitted_function_inside_another_is_traced_into_it():
    inner = lp.jit(lambda x: lp.grad(lambda y: (y * y * x).sum())(x))
    outer = lp.jit(lambda x: inner(x) * 2.0 + inner(x + 1.0))
    x = np.array([0.5, -1.5])
    for v in (x, x * 3):
        expected = (lp.grad(lambda y, v=v: (y * y * v).sum())(v) * 2.0
                    + lp.grad(lambda y, v=v: (y * y * (v + 1.0)).sum())(v + 1.0))
        assert same(outer(v), expected)
    assert inner.trace_count == 0 and outer.trace_count == 1


# ----- the traceable schedules, clipping and bias correction compute what they computed before ----
def test_schedules_give_the_values_of_their_math_formulas():
    import math

    for init, steps, alpha in ((1e-2, 50, 0.1), (3e-3, 7, 0.0)):
        s = optim.cosine_decay(init, steps, alpha)
        for step in range(steps + 5):
            frac = min(step, steps) / steps
            assert s(step) == init * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * frac)) + alpha)
            assert type(s(step)) is float
    w = optim.warmup_cosine(1.0, 10, 100)
    assert [w(k) for k in (0, 5, 10)] == [0.0, 0.5, 1.0]


def test_adam_and_clipping_equal_their_reference_formulas():
    import math

    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32)]
    opt = optim.adam(0.1)
    state = opt.init(grads)
    m = [np.zeros_like(g) for g in grads]
    v = [np.zeros_like(g) for g in grads]
    for t in range(1, 6):
        updates, state = opt.update(grads, state)
        m = [0.9 * a + (1 - 0.9) * g for a, g in zip(m, grads)]
        v = [0.999 * a + (1 - 0.999) * (g * g) for a, g in zip(v, grads)]
        step_size = 0.1 / (1.0 - 0.9**t)
        root = math.sqrt(1.0 - 0.999**t)
        ref = [a * -step_size / (np.sqrt(b) / root + 1e-8) for a, b in zip(m, v)]
        assert all(np.array_equal(u, r) for u, r in zip(updates, ref))
    clip = optim.clip_by_global_norm(1.0)
    norm = math.sqrt(sum(float(np.vdot(a, a)) for a in grads))
    clipped, _ = clip.update(grads, ())
    assert all(np.array_equal(c, a * a.dtype.type(1.0 / norm)) for c, a in zip(clipped, grads))
    assert optim.global_norm(grads) == norm


def test_a_training_step_replays_through_its_written_out_check():
    # The step returns a new model: rebuilt with its flatten remembered (core.tree), so the next
    # step's arguments pass the written-out signature check without a walk over them.
    x, y = data(np.float64)

    def step(model, xb, yb):
        grads = lp.grad(lambda m: losses.cross_entropy(m(xb), yb))(model)
        return lp.tree_map(lambda p, g: p - 0.1 * g, model, grads)

    jstep = lp.jit(step)
    model = eager = nn.MLP([8, 6, 4], rng=0, dtype=np.float64)
    for _ in range(3):
        model, eager = jstep({"m": model}["m"], x, y), step(eager, x, y)
        assert same(model, eager)
        assert "_tree_flatten_cache" in vars(model)
        assert jstep._fast is not None and jstep._fast[0]((model, x, y), {}) is not None
    assert jstep.trace_count == 1


def test_outputs_rebuild_their_structure_and_frozen_modules_remember_a_walks_flatten():
    # The output's structure is written out with the Tensors' rebuilding: each outermost frozen module
    # remembers the flatten a walk gives (leaves, structure); one holding a list remembers nothing.
    x = np.linspace(-1.0, 1.0, 6)

    class Pair(NamedTuple):
        a: object
        b: object

    def f(model, w):
        lin = model.layers[0].replace(weight=model.layers[0].weight * w[0])
        listy = model.layers[1].replace(weight=[model.layers[1].weight, w])  # a list: not frozen
        return {"m": [model, lin], "p": Pair(listy, None), "w": (w * 2, lp.exp(lp.Tensor(w)))}

    jf = lp.jit(f)
    for k in range(3):
        model = nn.MLP([6, 4, 2], rng=k, dtype=np.float64)
        w = x + k
        out, eager = jf(model, w), f(model, w)
        assert same(out, eager)
        assert type(out["p"]) is Pair and out["p"].b is None
        for m in (out["m"][0], out["m"][1]):
            walked_leaves, walked_def = lp.tree_flatten(m.replace())  # (a copy remembers nothing: a walk)
            _, leaves, treedef = vars(m)["_tree_flatten_cache"]
            assert treedef == walked_def and len(leaves) == len(walked_leaves)
            assert all(a is b for a, b in zip(leaves, lp.tree_flatten(m)[0]))
            assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(leaves, walked_leaves))
        assert "_tree_flatten_cache" not in vars(out["p"].a)
    assert jf.trace_count == 1


@pytest.mark.parametrize("make", [lambda: nn.Linear(3, 2, rng=0), lambda: nn.MLP([3, 4, 2], rng=0),
                                  lambda: nn.LayerNorm(3), lambda: nn.Conv2d(1, 2, 3, rng=0),
                                  lambda: nn.Sequential(nn.Linear(3, 2, rng=0), nn.Flatten())])
def test_a_modules_unflatten_says_what_it_builds(make):
    # core.tree writes an unflatten carrying ``cls`` and ``fields`` out inline (jit's outputs): the
    # description must build what the unflatten builds, and jit's output equal eager's.
    from leanpass.core import tree

    module = make()
    leaves, treedef = lp.tree_flatten(module)
    unflatten = tree._REGISTRY[type(module)][1]
    children, meta = tree._REGISTRY[type(module)][0](module)
    children = list(children)
    built = unflatten(meta, children)
    assert hasattr(unflatten, "fields") or type(module) is nn.Sequential  # (a class of its own: not written out)
    if hasattr(unflatten, "fields"):
        assert unflatten.cls is type(module)
        described = {f: children[j] if where == "ch" else meta[j] for f, where, j in unflatten.fields}
        assert list(described) == list(vars(built)) and all(described[k] is v for k, v in vars(built).items())
    jf = lp.jit(lambda m, s: lp.tree_map(lambda t: t * s, m))
    for s in (2.0, 3.0):
        out = jf(module, s)
        assert same(out, lp.tree_map(lambda t, s=s: t * s, module))
        assert [k for k in vars(out) if k != "_tree_flatten_cache"] == list(vars(built))


def test_an_output_tensor_is_built_as_any_leaf_tensor():
    # The build writes out _const: every slot as _const sets it, for a constant and a transform's input.
    from leanpass.core.tensor import _const, _next_seq

    def f(w, p):
        return lp.Tensor(w) * 2, p  # (a parameter passed through: a new leaf of its marks)

    jf = lp.jit(f)
    for k in range(2):
        plain, marked = jf(np.arange(3.0) + k, lp.Tensor(np.ones(2) * k, requires_grad=True))
        assert marked._marks
        for t, ref in ((plain, _const(plain._data)), (marked, _const(marked._data, marked._marks, _next_seq()))):
            assert type(t) is lp.Tensor
            for slot in lp.Tensor.__slots__:
                if slot not in ("__weakref__", "_seq"):
                    assert hasattr(t, slot) == hasattr(ref, slot)
                    assert getattr(t, slot, None) is getattr(ref, slot, None)
            assert (t._seq > 0) == (ref._seq > 0)


def test_an_output_too_deep_to_write_out_still_rebuilds():
    def f(w):
        deep = w * 2
        for _ in range(300):  # deeper than Python's parser takes nested brackets
            deep = (deep,)
        return nn.Linear(2, 2, rng=0, dtype=np.float64).replace(weight=deep), w + 1

    jf = lp.jit(f)
    for k in range(2):
        w = np.arange(2.0) + k
        assert same(jf(w), f(w))


def test_a_treedef_argument_is_a_leaf_compared_by_value():
    def rebuild(td, xs):
        return lp.tree_unflatten(td, [2 * x for x in xs])

    jitted = lp.jit(rebuild)
    xs = [np.arange(3.0), np.ones(2)]
    for tree in ({"a": 0, "b": 0}, {"a": 0, "b": 0}, [0, 0]):
        td = lp.tree_flatten(tree)[1]
        assert same(jitted(td, xs), rebuild(td, xs))
    assert jitted.trace_count == 2  # (an equal structure is the same signature)


def test_a_step_with_an_optimizer_state_replays_through_its_written_out_check():
    # An optimizer's state is a registered pytree (not a frozen module): the written-out check calls its
    # flatten and tests the structure it gives, so the step as users write it (model and state in and
    # out) skips the general signature path. A state of another structure fails the check.
    x, y = data(np.float64)
    opt = optim.sgd(0.1, momentum=0.9)

    def step(model, state, xb, yb):
        loss, grads = lp.value_and_grad(lambda m: losses.cross_entropy(m(xb), yb))(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    jstep = lp.jit(step)
    model = eager = nn.MLP([8, 6, 4], rng=0, dtype=np.float64)
    state = e_state = opt.init(model)
    for _ in range(3):
        model, state, loss = jstep(model, state, x, y)
        eager, e_state, e_loss = step(eager, e_state, x, y)
        assert same(model, eager) and same(state, e_state) and loss.item() == e_loss.item()
        assert jstep._fast is not None and jstep._fast[0]((model, state, x, y), {}) is not None
    assert jstep.trace_count == 1
    other = opt.init(nn.MLP([8, 5, 4], rng=0, dtype=np.float64))  # the state of a model of other shapes
    assert jstep._fast[0]((model, other, x, y), {}) is None
    wider = opt.init({"w": np.zeros(3)})  # and of another structure
    assert jstep._fast[0]((model, wider, x, y), {}) is None
    with pytest.raises(ValueError, match="the state was made for"):  # (the general path: eager's error)
        jstep(model, wider, x, y)
