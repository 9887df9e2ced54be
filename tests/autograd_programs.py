"""Five programs in the style of HIPS autograd's examples/, written once for either library.

Each program takes a ``Backend``: the NumPy it computes with (plain ``numpy`` for LeanPass,
``autograd.numpy`` for autograd), the SciPy stand-ins (``lp.stats`` / ``autograd.scipy.stats``,
``lp.special`` / ``autograd.scipy.special``) and ``value_and_grad``. That is the whole migration:
the program text is the same. ``tests/test_autograd_examples.py`` runs them on LeanPass and
compares with the numbers autograd computed; ``python tests/autograd_programs.py``, run where
``autograd`` is installed (``pip install autograd``), prints those numbers again.

The programs, after autograd's examples/ of the same names (written afresh): Gaussian process
regression (gaussian_process.py), black-box variational inference (black_box_svi.py), a
Gaussian mixture model (gmm.py), logistic regression (logistic_regression.py) and a recurrent
neural network (rnn.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as onp  # data and random numbers: plain NumPy on both sides


@dataclass
class Backend:
    np: Any  # numpy (LeanPass) or autograd.numpy
    stats: Any  # lp.stats or autograd.scipy.stats
    special: Any  # lp.special or autograd.scipy.special
    value_and_grad: Any
    linalg_solve: Any  # np.linalg.solve of that numpy


def _adam(value_and_grad: Any, f: Any, x: onp.ndarray, steps: int, lr: float) -> tuple[float, onp.ndarray]:
    """Adam with the usual constants; returns the last value and the final parameters."""
    m = onp.zeros_like(x)
    v = onp.zeros_like(x)
    value = 0.0
    for i in range(steps):
        value, g = value_and_grad(f)(x, i)
        g = onp.asarray(g)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g ** 2
        x = x - lr * (m / (1 - 0.9 ** (i + 1))) / (onp.sqrt(v / (1 - 0.999 ** (i + 1))) + 1e-8)
    return float(value), x


# ----- Gaussian process regression: the log marginal likelihood of an RBF kernel ------------------------
def gaussian_process(b: Backend) -> dict[str, Any]:
    np = b.np

    def rbf(params: Any, x: Any, xp: Any) -> Any:
        scale = np.exp(params[0])
        lengths = np.exp(params[1:])
        diffs = np.expand_dims(x / lengths, 1) - np.expand_dims(xp / lengths, 0)
        return scale * np.exp(-0.5 * np.sum(diffs ** 2, axis=2))

    def unpack(params: Any) -> tuple[Any, Any, Any]:
        return params[0], params[2:], np.exp(params[1]) + 0.0001

    def log_marginal_likelihood(params: Any, x: onp.ndarray, y: onp.ndarray) -> Any:
        mean, cov_params, noise = unpack(params)
        cov = rbf(cov_params, x, x) + noise * np.eye(len(y))
        return b.stats.multivariate_normal.logpdf(y, mean * np.ones(len(y)), cov)

    def predict(params: Any, x: onp.ndarray, y: onp.ndarray, xs: onp.ndarray) -> tuple[Any, Any]:
        mean, cov_params, noise = unpack(params)
        cov_y_y = rbf(cov_params, x, x) + noise * np.eye(len(y))
        cov_y_f = rbf(cov_params, x, xs)
        solved = b.linalg_solve(cov_y_y, cov_y_f)
        return mean + np.dot(solved.T, y - mean), rbf(cov_params, xs, xs) - np.dot(solved.T, cov_y_f)

    rs = onp.random.RandomState(0)
    inputs = onp.concatenate([onp.linspace(0, 3, 10), onp.linspace(6, 8, 10)])
    targets = (onp.cos(inputs) + rs.randn(20) * 0.1) / 2.0
    x = ((inputs - 4.0) / 2.0).reshape(20, 1)
    params = 0.1 * rs.randn(4)

    def objective(p: Any) -> Any:
        return -log_marginal_likelihood(p, x, targets)

    value, grad = b.value_and_grad(objective)(params)
    start = (float(value), onp.asarray(grad).tolist())
    for _ in range(40):
        value, grad = b.value_and_grad(objective)(params)
        params = params - 0.02 * onp.asarray(grad)
    mean, cov = predict(params, x, targets, onp.linspace(-2, 2, 5).reshape(5, 1))
    return {"start": start, "final loss": float(objective(params)), "final params": params.tolist(),
            "predicted mean": onp.asarray(mean).tolist(), "predicted var": onp.diag(onp.asarray(cov)).tolist()}


# ----- black-box variational inference of a two-dimensional funnel ------------------------------------
def black_box_svi(b: Backend) -> dict[str, Any]:
    np = b.np
    d, n = 2, 200

    def log_density(x: Any) -> Any:
        mu, log_sigma = x[:, 0], x[:, 1]
        return b.stats.norm.logpdf(log_sigma, 0, 1.35) + b.stats.norm.logpdf(mu, 0, np.exp(log_sigma))

    noise = onp.random.RandomState(0).randn(300, n, d)

    def objective(params: Any, t: int) -> Any:
        mean, log_std = params[:d], params[d:]
        samples = noise[t] * np.exp(log_std) + mean
        entropy = 0.5 * d * (1.0 + onp.log(2 * onp.pi)) + np.sum(log_std)
        return -(entropy + np.mean(log_density(samples)))

    init = -4 * onp.ones(2 * d)
    value, grad = b.value_and_grad(objective)(init, 0)
    last, params = _adam(b.value_and_grad, objective, init, 300, 0.1)
    return {"start": (float(value), onp.asarray(grad).tolist()), "final objective": last,
            "final params": params.tolist()}


# ----- a Gaussian mixture model fit by gradient ascent ---------------------------------------------------
def gaussian_mixture(b: Backend) -> dict[str, Any]:
    np = b.np
    rs = onp.random.RandomState(0)
    centres = onp.array([[2.0, 0.0], [-1.0, 1.5], [-1.0, -1.5]])
    data = onp.concatenate([c + 0.4 * rs.randn(40, 2) for c in centres])
    params = {"log proportions": rs.randn(3) * 0.1, "means": rs.randn(3, 2) * 0.5,
              "lower triangles": onp.zeros((3, 2, 2)) + onp.eye(2)}

    def log_likelihood(p: Any) -> Any:
        log_props = p["log proportions"] - b.special.logsumexp(p["log proportions"])
        per_cluster = []
        for k in range(3):
            root = p["lower triangles"][k]
            cov = np.dot(root.T, root)
            per_cluster.append(log_props[k] + b.stats.multivariate_normal.logpdf(data, p["means"][k], cov))
        return np.sum(b.special.logsumexp(np.stack(per_cluster), axis=0))

    def objective(p: Any) -> Any:
        return -log_likelihood(p)

    value, grad = b.value_and_grad(objective)(params)
    start = (float(value), {k: onp.asarray(v).tolist() for k, v in grad.items()})
    for _ in range(60):
        value, grad = b.value_and_grad(objective)(params)
        params = {k: params[k] - 0.003 * onp.asarray(grad[k]) for k in params}
    return {"start": start, "final loss": float(objective(params)), "final means": params["means"].tolist()}


# ----- logistic regression on the toy data of autograd's README ------------------------------------------
def logistic_regression(b: Backend) -> dict[str, Any]:
    np = b.np
    inputs = onp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = onp.array([True, True, False, True])

    def loss(w: Any) -> Any:
        preds = 0.5 * (np.tanh(np.dot(inputs, w)) + 1)
        return -np.sum(np.log(preds * targets + (1 - preds) * (1 - targets)))

    w = onp.zeros(3)
    start = float(loss(w))
    for _ in range(100):
        w = w - 0.01 * onp.asarray(b.value_and_grad(loss)(w)[1])
    return {"initial loss": start, "trained loss": float(loss(w)), "weights": w.tolist()}


# ----- a recurrent neural network over one-hot sequences -------------------------------------------------
def recurrent_net(b: Backend) -> dict[str, Any]:
    np = b.np
    rs = onp.random.RandomState(0)
    n_in, n_state, n_steps, n_seq = 5, 6, 7, 3
    params = {"init hiddens": rs.randn(1, n_state) * 0.1,
              "change": rs.randn(n_in + n_state + 1, n_state) * 0.5,
              "predict": rs.randn(n_state + 1, n_in) * 0.5}
    ids = rs.randint(0, n_in, size=(n_steps, n_seq))
    onehot = (ids[..., None] == onp.arange(n_in)).astype(float)  # (time, sequence, symbol)

    def with_bias(weights: Any, *parts: Any) -> Any:
        stacked = np.concatenate(parts + (onp.ones((parts[0].shape[0], 1)),), axis=1)
        return np.dot(stacked, weights)

    def log_likelihood(p: Any) -> Any:
        hiddens = p["init hiddens"] * onp.ones((n_seq, 1))
        total = 0.0
        for t in range(n_steps - 1):  # predict symbol t + 1 from the symbols up to t
            hiddens = np.tanh(with_bias(p["change"], onehot[t], hiddens))
            out = with_bias(p["predict"], hiddens)
            logprobs = out - b.special.logsumexp(out, axis=1, keepdims=True)
            total = total + np.sum(logprobs * onehot[t + 1])
        return total / ((n_steps - 1) * n_seq)

    value, grad = b.value_and_grad(log_likelihood)(params)
    start = (float(value), {k: onp.asarray(v).tolist() for k, v in grad.items()})
    for _ in range(30):
        grad = b.value_and_grad(log_likelihood)(params)[1]
        params = {k: params[k] + 0.5 * onp.asarray(grad[k]) for k in params}
    return {"start": start, "final log likelihood": float(log_likelihood(params))}


PROGRAMS = {"gaussian_process": gaussian_process, "black_box_svi": black_box_svi,
            "gaussian_mixture": gaussian_mixture, "logistic_regression": logistic_regression,
            "recurrent_net": recurrent_net}


def autograd_backend() -> Backend:
    import autograd
    import autograd.numpy as anp
    import autograd.scipy.special
    import autograd.scipy.stats
    import autograd.scipy.stats.multivariate_normal  # noqa: F401 (a submodule autograd loads on import)

    return Backend(anp, autograd.scipy.stats, autograd.scipy.special, autograd.value_and_grad, anp.linalg.solve)


if __name__ == "__main__":  # the reference numbers, with autograd
    import importlib.metadata
    import json
    import platform

    print(f"# autograd {importlib.metadata.version('autograd')}, numpy {onp.__version__}, "
          f"Python {platform.python_version()}")
    backend = autograd_backend()
    print(json.dumps({name: run(backend) for name, run in PROGRAMS.items()}, indent=1))
