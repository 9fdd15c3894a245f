"""The claims report on crafted runs: a claim that must hold, one that must fail, one within the seeds' noise, every
check kind, the model a cell scores, and validation before any job. Whether the papers' claims hold on our data is
the report's finding and is never asserted here."""

import json

import pandas as pd
import pytest

import fedavail.config as fc
from fedavail.plan import captions, reports
from fedavail.report import build, claims
from fedavail.report import frame as tidy

from test_report import ALGS, config_with, constant, write_run

FAST = {"algorithm": "fast", "base": "fedavg", "schedule": "adaptive", "lam": 1, "lr": 0.05}
# Final test accuracy per seed (0, 1) of each (experiment, algorithm).
VALUES = {
    ("uniform", "avg"): (0.90, 0.90), ("gamma", "avg"): (0.60, 0.62), ("gamma", "ada"): (0.80, 0.82),
    ("gamma", "swe"): (0.70, 0.74), ("gamma", "all"): (0.71, 0.71),
}


def _config(report, seeds=(0, 1)):
    experiments = {"uniform": ("svhn", "stationary", None, 0.1, ["avg"]),
                   "gamma": ("svhn", "sine", 0.3, 0.1, ["avg", "ada", "swe", "all"])}
    return config_with(experiments, {**ALGS, "ada": FAST}, {"c": report}, seeds=seeds)


def _write(tmp_path, seeds=(0, 1), diverged=()):
    dirs = []
    for (experiment, algorithm), per_seed in VALUES.items():
        for seed in seeds:
            extra = {}
            if algorithm == "ada":
                extra["snapshot"] = lambda t: int(t % 20 == 0)  # 5% of the rounds
            if algorithm == "swe":
                extra["test_acc_local_mean"] = constant(per_seed[seed] + 0.1)
                extra["consensus_error"] = constant(1.0 + seed)
            if algorithm == "all":
                extra["consensus_error"] = constant(10.0)
            dirs.append(write_run(tmp_path, experiment, algorithm, seed, constant(per_seed[seed]), extra=extra,
                                  diverged_at=50 if (experiment, algorithm, seed) in diverged else None))
    return dirs


def _claim(check, words="a claim"):
    return {"claim": words, "source": "FedSWE Table 2", "check": check}


def _verdicts(tmp_path, checks, seeds=(0, 1), diverged=(), **settings):
    report = {"kind": "claims", "claims": [_claim(c, f"claim {i}") for i, c in enumerate(checks)], **settings}
    config = _config(report, seeds)
    job = json.loads(fc.as_json(reports.report_job(config, "c")))
    dirs = [tmp_path / d for d in reports.run_dirs(job)]
    _write(tmp_path, seeds, diverged)
    table, frame = claims.claims_table(job, tidy.view(job, tidy.load(job, dirs)))
    return frame, table


def test_a_claim_that_holds_one_that_fails_and_one_within_noise(tmp_path):
    frame, table = _verdicts(tmp_path, [
        {"greater": ["gamma/ada", "gamma/avg"]},  # 81 ± 1 vs 61 ± 1
        {"greater": ["gamma/avg", "uniform/avg"]},  # 61 ± 1 vs 90 ± 0
        {"greater": ["gamma/all", "gamma/swe"]},  # 71 ± 0 vs 82 ± 2 (local mean): fails
        {"greater": [{"cell": "gamma/swe", "model": "global"}, "gamma/all"]},  # 72 ± 2 vs 71 ± 0: within noise
    ])
    assert frame["verdict"].tolist() == ["holds", "fails", "fails", "not resolved"]
    assert frame["differences"].astype(float).tolist() == pytest.approx([0.20, -0.29, -0.11, 0.01])
    assert frame["spreads"].astype(float).tolist() == pytest.approx([0.01, 0.01, 0.02, 0.02])
    numbers = frame["numbers"][0]
    assert "81.0 ± 1.0 (2 seeds, 100 rounds)" in numbers and "A − B = +20.0 points (spread 1.0)" in numbers
    assert [row[3] for row in table.rows] == ["holds", "fails", "fails", "not resolved"]


def test_recovers_gap_below_above_decreasing_and_all_of(tmp_path):
    gap = {"method": "gamma/ada", "low": "gamma/avg", "high": "uniform/avg"}
    frame, _ = _verdicts(tmp_path, [
        {"recovers_gap": {**gap, "fraction": 0.5}},  # recovers (81 − 61) / (90 − 61) = 69% of the gap
        {"recovers_gap": {**gap, "fraction": 0.9}},
        {"below": [{"cell": "gamma/ada", "metric": "snapshot_share"}, 0.1]},  # 5% snapshot rounds
        {"above": [{"cell": "gamma/ada", "metric": "snapshot_share"}, 0.1]},
        {"decreasing": ["uniform/avg", "gamma/ada", "gamma/avg"]},
        {"decreasing": ["uniform/avg", "gamma/avg", "gamma/ada"]},
        {"greater": [{"cell": "gamma/all", "metric": "consensus_error"},
                     {"cell": "gamma/swe", "metric": "consensus_error"}]},  # 10 vs 1.5 ± 0.5
        {"all_of": [{"greater": ["gamma/ada", "gamma/avg"]},
                    {"below": [{"cell": "gamma/ada", "metric": "snapshot_share"}, 0.1]}]},
        {"all_of": [{"greater": ["gamma/ada", "gamma/avg"]}, {"greater": ["gamma/avg", "gamma/ada"]}]},
    ])
    assert frame["verdict"].tolist() == ["holds", "fails", "holds", "fails", "holds", "fails", "holds", "holds",
                                         "fails"]
    assert "69% of it recovered" in frame["numbers"][0]
    assert float(frame["differences"][2]) == pytest.approx(0.05)


def test_a_single_seed_gives_a_signed_verdict_marked_as_such(tmp_path):
    frame, table = _verdicts(tmp_path, [{"greater": ["gamma/ada", "gamma/avg"]},
                                        {"greater": ["gamma/avg", "gamma/ada"]}], seeds=(0,))
    assert frame["verdict"].tolist() == ["holds", "fails"] and frame["single_seed"].all()
    assert [row[3] for row in table.rows] == ["holds (1 seed)", "fails (1 seed)"]
    assert "spread" not in frame["numbers"][0] and "(1 seed, 100 rounds)" in frame["numbers"][0]


def test_a_diverged_seed_or_a_missing_metric_leaves_the_claim_not_resolved(tmp_path):
    frame, _ = _verdicts(tmp_path, [{"greater": ["gamma/ada", "gamma/avg"]},
                                    {"below": [{"cell": "gamma/avg", "metric": "snapshot_share"}, 0.1]}],
                         diverged=[("gamma", "ada", 1)], last_n=20)
    assert frame["verdict"].tolist() == ["not resolved", "not resolved"]


def test_the_report_writes_its_table_and_reads_only_the_cells_it_names(tmp_path, monkeypatch):
    report = {"kind": "claims", "title": "Claims", "claims": [_claim({"greater": ["gamma/ada", "gamma/avg"]},
                                                                     "adaptive FAST beats FedAvg")]}
    config = _config(report)
    parsed = reports.parse_report("c", report, config)
    assert reports.report_outputs("c", parsed) == {"md": "results/reports/c/table.md",
                                                   "tex": "results/reports/c/table.tex",
                                                   "csv": "results/reports/c/table.csv"}
    job = json.loads(fc.as_json(reports.report_job(config, "c")))
    assert reports.run_dirs(job) == [f"results/runs/gamma/{a}/seed{s}" for a in ("ada", "avg") for s in (0, 1)]
    assert "holds, fails, or not resolved" in captions.caption(job)
    _write(tmp_path)
    monkeypatch.chdir(tmp_path)
    outputs = {k: tmp_path / v for k, v in reports.report_outputs("c", parsed).items()}
    build.make_report(job, reports.run_dirs(job), outputs)
    markdown = outputs["md"].read_text()
    assert "| claim | source | our numbers | verdict |" in markdown
    assert "| adaptive FAST beats FedAvg | FedSWE Table 2 |" in markdown and markdown.rstrip().endswith("|")
    assert pd.read_csv(outputs["csv"])["verdict"].tolist() == ["holds"]
    assert outputs["tex"].read_text().count(r"\toprule") == 1


@pytest.mark.parametrize("report, message", [
    ({"claims": []}, "non-empty list"),
    ({"claims": [_claim({"greater": ["nope/avg", "gamma/avg"]})]}, "experiment 'nope'"),
    ({"claims": [_claim({"greater": ["uniform/ada", "gamma/avg"]})]}, "does not run algorithm 'ada'"),
    ({"claims": [_claim({"greater": ["gamma/ada"]})]}, r"claims\[0\].check.greater: two cells"),
    ({"claims": [_claim({"bigger": ["gamma/ada", "gamma/avg"]})]}, "one of"),
    ({"claims": [_claim({"greater": ["gamma-ada", "gamma/avg"]})]}, "not '<experiment>/<algorithm>'"),
    ({"claims": [_claim({"below": [{"cell": "gamma/ada", "metric": "loss"}, 0.1]})]}, "metric"),
    ({"claims": [_claim({"recovers_gap": {"method": "gamma/ada", "low": "gamma/avg", "high": "uniform/avg"}})]},
     "'fraction' is required"),
    ({"claims": [{"claim": "x", "check": {"greater": ["gamma/ada", "gamma/avg"]}}]}, "'source' is required"),
    ({"claims": [_claim({"greater": ["gamma/ada", "gamma/avg"]})], "experiments": ["gamma"]}, "do not list"),
])
def test_invalid_claims_are_rejected_before_any_job(report, message):
    report = {"kind": "claims", **report}
    config = _config(report)
    with pytest.raises(fc.ConfigError, match=message):
        fc.check_reports(config)
