"""The scalar examples of FedSWE §4 and §6.5.2, computed exactly: no training, no sampling.

Both use local objectives F_i(x) = (x − u_i)²/2 and s full gradient steps of size η, so a client that starts at x
ends at u_i + c(x − u_i) with c = (1 − η)^s, and its model delta is Δ_i = (1 − c)(u_i − x).

Example 1 / Fig. 2: two clients, stationary independent availability a_i^t ~ Bernoulli(p_i). Averaging over the four
availability outcomes (no participant leaves x unchanged), the expected FedAvg iterate obeys
    active (x ← x + mean_{A_t} Δ_i):  E x^{t+1} = E x^t + (1 − c)·[p1 p2 (ū − x) + p1(1−p2)(u1 − x) + p2(1−p1)(u2 − x)]
    all    (x ← x + ½ Σ_{A_t} Δ_i):   E x^{t+1} = E x^t + (1 − c)/2·[p1 (u1 − x) + p2 (u2 − x)]
whose fixed points x_out do not depend on η and s (fedavg_expected_output); x* = ū = (u1 + u2)/2, and Fig. 2 colours
|x_out − x*| (at most |u1 − u2|/2).

Fig. 5: FedSWE Algorithm 1 with client 1 available in even rounds only and client 2 in odd rounds only (Proposition
14, m = 2). The active client starts from its own copy X_i, G_i = (1 − c)(X_i − u_i), x_i† = X_i − η_g (t − τ_i) G_i,
the server sets x^{t+1} = (x_i† + k x^t)/(1 + k) and multicasts it to the active client only (τ_i ← t). With k = 0
the clients never mix: |∇F(x^t)| → |u1 − u2|/2 (eq. 30) and the consensus error (1/2)Σ(X_i − X̄)² → ((u1 − u2)/2)².
In general the iterates settle on a 2-cycle x = ū ± b (every echo t − τ_i = 2 once both clients have been active),
    b = |u1 − u2|/2 · g/(k + g),   g = η_g (1 − (1 − η)^s),   consensus → b²,
so with η = 0.001, s = 10 (the defaults; the paper does not state its η and s) k = 1 leaves |∇F| ≈ 0.99, the scale
of Fig. 5b, and the consensus error ≈ 0.97."""

import numpy as np


def fedavg_expected_output(p1, p2, u1: float = 0.0, u2: float = 100.0, weighting: str = "active"):
    """lim_t E x^t of FedAvg on Example 1 (closed form); NaN where no client is ever available."""
    p1, p2 = np.asarray(p1, dtype=float), np.asarray(p2, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        if weighting == "active":
            mean = 0.5 * (u1 + u2)
            out = (p1 * p2 * mean + p1 * (1 - p2) * u1 + p2 * (1 - p1) * u2) / (1 - (1 - p1) * (1 - p2))
        elif weighting == "all":
            out = (p1 * u1 + p2 * u2) / (p1 + p2)
        else:
            raise ValueError(f"weighting must be 'active' or 'all', got {weighting!r}")
    return np.where((p1 == 0) & (p2 == 0), np.nan, out)


def heterogeneity_bias(grid: np.ndarray, u1: float = 0.0, u2: float = 100.0, weighting: str = "active") -> np.ndarray:
    """|x_out − x*| on the grid p1 × p2 (rows p2, columns p1), Fig. 2."""
    p1, p2 = np.meshgrid(grid, grid)
    return np.abs(fedavg_expected_output(p1, p2, u1, u2, weighting) - 0.5 * (u1 + u2))


def fedswe_alternating(k: float, u=(100.0, -100.0), rounds: int = 1000, lr: float = 0.001, local_steps: int = 10,
                       global_lr: float = 1.0, x0: float = 0.0) -> dict[str, np.ndarray]:
    """FedSWE (Algorithm 1) with two clients available in alternate rounds (Fig. 5), exactly. Returns per round
    t = 0..rounds−1, after the round's update: x (the global model x^{t+1}), gradient ∇F(x^{t+1}) = x^{t+1} − ū, the
    clients' copies X (shape [rounds, 2]) and consensus (1/2)Σ_i (X_i − X̄)²."""
    u = np.asarray(u, dtype=float)
    shrink = 1.0 - (1.0 - lr) ** local_steps
    x, local, tau = float(x0), np.full(2, float(x0)), np.full(2, -1)
    xs, copies = np.empty(rounds), np.empty((rounds, 2))
    for t in range(rounds):
        i = t % 2  # client 1 (index 0) in even rounds, client 2 in odd rounds
        innovation = shrink * (local[i] - u[i])  # G_i = X_i − x_i^{t,s}
        echoed = local[i] - global_lr * (t - tau[i]) * innovation
        x = (echoed + k * x) / (1 + k)
        local[i], tau[i] = x, t
        xs[t], copies[t] = x, local
    consensus = ((copies - copies.mean(axis=1, keepdims=True)) ** 2).mean(axis=1)
    return {"round": np.arange(rounds), "x": xs, "gradient": xs - u.mean(), "X": copies, "consensus": consensus}


def alternating_steady_bias(k: float, u=(100.0, -100.0), lr: float = 0.001, local_steps: int = 10,
                            global_lr: float = 1.0) -> float:
    """The amplitude b of the 2-cycle x^t = ū ± b that `fedswe_alternating` settles on (closed form)."""
    g = global_lr * (1.0 - (1.0 - lr) ** local_steps)
    return 0.5 * abs(u[0] - u[1]) * g / (k + g)
