"""The paper configs (config/fedswe.yaml, config/fast.yaml, config/shakespeare.yaml): valid, and their dry runs list
the expected jobs; and the exact toy examples of FedSWE Figs. 2 and 5 match their closed forms."""

import re
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fedavail.availability.traces import make_trace
from fedavail.plan import reports
from fedavail.plan.load import load_config
from fedavail.plan.plan import build_plan
from fedavail.report import toy

from workflow_helpers import REPO, copy_workflow, snakemake

# Jobs per rule of `snakemake -n` on each config (see each config's header for the grid).
EXPECTED = {
    "fedswe": {"download": 3, "prepare_paper_dataset": 3, "partition": 7 * 3, "trace": 33 * 3,
               # Table 2: 9 x 10, Tables 8/9: 4 x 7, §7.1: 4 x 12, Fig. 3: 16 x 1; three seeds
               "train": (90 + 28 + 48 + 16) * 3, "report_experiment": 33, "report_table": 6,
               "report_paper": 4, "report_figure": 10, "report_runs": 1, "all": 1},
    "fast": {"download": 3, "prepare_paper_dataset": 3, "partition": 9 * 3, "trace": 8 * 3,
             # Fashion-MNIST 4 x 3 + 12 x 14 + 3 x 7 (λ ablation), CIFAR-10 4 x 3 + 12 x 14, Shakespeare 3 + 3 x 14
             "train": (201 + 180 + 45) * 3, "report_experiment": 36, "report_table": 11, "report_paper": 9,
             "report_figure": 4, "report_runs": 1, "all": 1},
    "shakespeare": {"prepare_bundled_dataset": 1, "partition": 1, "trace": 2, "train": 4, "report_experiment": 2,
                    "report_table": 2, "report_paper": 1, "report_figure": 2, "report_runs": 1, "all": 1},
}


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)
            if m.group(1) != "total"}


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """The three dry runs, concurrently (each in its own copy of the workflow); their output and wall time."""
    def run(name):
        workdir = copy_workflow(tmp_path_factory.mktemp(name))
        started = time.perf_counter()
        result = snakemake(workdir, "-n", "--configfile", f"config/{name}.yaml", timeout=300)
        return name, result.stdout + result.stderr, time.perf_counter() - started

    with ThreadPoolExecutor(len(EXPECTED)) as pool:
        return {name: (output, seconds) for name, output, seconds in pool.map(run, EXPECTED)}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_paper_config_dry_run_lists_every_job(dry_runs, name):
    output, seconds = dry_runs[name]
    counts = job_counts(output)
    assert counts == EXPECTED[name], counts
    config = load_config([REPO / f"config/{name}.yaml"])
    assert counts["train"] == len(build_plan(config).runs())
    assert counts["report_experiment"] == len(config["experiments"])
    assert "This was a dry-run" in output
    print(f"{name}: {sum(counts.values())} jobs listed in {seconds:.1f} s")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_paper_config_reports_are_valid(name):
    config = load_config([REPO / f"config/{name}.yaml"])
    parsed = reports.parse_reports(config)
    assert set(parsed) == set(config["reports"])


def test_fedswe_config_follows_the_paper():
    config = load_config([REPO / "config/fedswe.yaml"])
    table2 = [config["experiments"][e] for e in config["reports"]["table2"]["experiments"]]
    assert len(table2) == 9 and all(len(e["algorithms"]) == 10 for e in table2)
    assert all(e["training"]["rounds"] == 2000 and e["training"]["local"]["schedule"] == "sqrt_decay" for e in table2)
    lrs = {a: s["lr"] for a, s in config["algorithms"].items()}
    assert lrs["fedswe_k100"] == lrs["fedavg_known"] == 0.1 and lrs["fedavg_active"] == lrs["fedau"] == 0.05
    periodic = config["experiments"]["cifar10_periodic_static"]["training"]
    assert periodic["rounds"] == 20000 and periodic["local"]["schedule"] == "constant"
    assert config["experiments"]["svhn_periodic_static"]["training"]["rounds"] == 10000
    ks = sorted(config["algorithms"][a]["k"] for a in config["reports"]["fig8_9_k_svhn"]["algorithms"])
    assert ks == [0, 1, 10, 100, 1000, 10000]


def test_bernoulli_sine_trace_of_fig3():
    """Fig. 3's availability p_i^t = p·[γ sin(0.1πt) + 1 − γ], the same for every client."""
    trace = make_trace({"model": "bernoulli", "p": 0.3, "dynamics": "sine", "gamma": 0.5, "period": 20}, 50, 400, 0)
    t = np.arange(400)
    expected = 0.3 * (0.5 * np.sin(0.1 * np.pi * t) + 0.5)
    np.testing.assert_allclose(trace.prob, np.repeat(expected[:, None], 50, axis=1), atol=1e-6)
    rate = trace.available.mean(axis=1)
    assert abs(rate[expected > 0.25].mean() - expected[expected > 0.25].mean()) < 0.03


# ---------------------------------------------------------------- exact toy examples


def fedavg_expected_iterates(p1: float, p2: float, u1: float, u2: float, weighting: str, lr: float, local_steps: int,
                             rounds: int) -> np.ndarray:
    """E x^t, t = 0..rounds, of FedAvg on Example 1 from x^0 = 0, by iterating the exact expected recursion
    (fedavail.report.toy's docstring)."""
    shrink = 1.0 - (1.0 - lr) ** local_steps
    mean = 0.5 * (u1 + u2)
    x = np.zeros(rounds + 1)
    for t in range(rounds):
        drift = (p1 * p2 * (mean - x[t]) + p1 * (1 - p2) * (u1 - x[t]) + p2 * (1 - p1) * (u2 - x[t])
                 if weighting == "active" else 0.5 * (p1 * (u1 - x[t]) + p2 * (u2 - x[t])))
        x[t + 1] = x[t] + shrink * drift
    return x


@pytest.mark.parametrize("weighting", ["active", "all"])
@pytest.mark.parametrize("p1, p2", [(0.3, 0.8), (0.9, 0.1), (0.5, 0.5), (1.0, 0.2)])
def test_example1_closed_form_is_the_limit_of_the_expected_recursion(weighting, p1, p2):
    closed = toy.fedavg_expected_output(p1, p2, 0.0, 100.0, weighting)
    iterates = fedavg_expected_iterates(p1, p2, 0.0, 100.0, weighting, lr=0.1, local_steps=10, rounds=2000)
    assert iterates[-1] == pytest.approx(float(closed), abs=1e-9)
    # η and s only change the speed, not the limit.
    slow = fedavg_expected_iterates(p1, p2, 0.0, 100.0, weighting, lr=0.01, local_steps=2, rounds=20000)
    assert slow[-1] == pytest.approx(float(closed), abs=1e-6)


def test_example1_bias():
    grid = np.linspace(0, 1, 11)
    for weighting in ("active", "all"):
        bias = toy.heterogeneity_bias(grid, 0.0, 100.0, weighting)
        assert np.isnan(bias[0, 0])  # nobody is ever available
        np.testing.assert_allclose(np.diag(bias)[1:], 0.0, atol=1e-9)  # p1 = p2: unbiased
        assert bias[0, 5] == pytest.approx(50.0) and bias[5, 0] == pytest.approx(50.0)  # one client never there
    # FedAvg over active clients, p1 = 0.9, p2 = 0.1: (0.09·50 + 0.81·0 + 0.01·100) / 0.91
    assert toy.fedavg_expected_output(0.9, 0.1) == pytest.approx(5.5 / 0.91)
    assert toy.fedavg_expected_output(0.9, 0.1, weighting="all") == pytest.approx(10.0)


@pytest.mark.parametrize("k, lr, steps", [(0, 0.001, 10), (1, 0.001, 10), (3.0, 0.001, 10), (0, 0.05, 10),
                                           (1, 0.05, 10), (100, 0.05, 10), (0, 0.1, 3), (3.0, 0.1, 3), (100, 0.1, 3)])
def test_fig5_alternating_clients_settle_on_the_closed_form_two_cycle(k, lr, steps):
    result = toy.fedswe_alternating(k, (100.0, -100.0), rounds=20000, lr=lr, local_steps=steps)
    bias = toy.alternating_steady_bias(k, (100.0, -100.0), lr, steps)
    tail = result["gradient"][-2:]
    assert sorted(tail) == pytest.approx([-bias, bias], rel=1e-6, abs=1e-9)
    assert result["consensus"][-1] == pytest.approx(bias**2, rel=1e-6, abs=1e-9)
    if k == 0:  # Proposition 14 / eq. (30): no mixing, |∇F| = |u1 − u2|/2 and consensus ((u1 − u2)/2)²
        assert bias == 100.0 and result["consensus"][-1] == pytest.approx(1e4)


def test_fig5_first_rounds_by_hand():
    # η = 0.5, s = 1: c = 0.5. Round 0 (client 1, τ = −1, echo 1): x† = 0 − 1·0.5·(0 − 100) = 50; k = 1: x¹ = 25.
    # Round 1 (client 2 starts from its stale x⁰ = 0, echo 2): x† = 0 − 2·0.5·(0 + 100) = −100; x² = (−100 + 25)/2.
    result = toy.fedswe_alternating(1, (100.0, -100.0), rounds=2, lr=0.5, local_steps=1)
    assert result["x"].tolist() == [25.0, -37.5]
    assert result["X"].tolist() == [[25.0, 0.0], [25.0, -37.5]]
