"""The claims report on crafted runs: paired statistics over seeds (holds, fails, not resolved), every check kind, a
still-rising curve, too few seeds, the published numbers beside ours, validation before any job; and, by
simulation, the verdict machinery's error rate with no effect and its power with one. Whether the papers' claims hold
on our data is the report's finding and is never asserted here."""

import json

import numpy as np
import pandas as pd
import pytest
from test_report import ALGS, ROUNDS, config_with, constant, write_run

from fedavail.plan import captions, reports
from fedavail.plan.checks import parse_checked_reports
from fedavail.plan.errors import ConfigError
from fedavail.plan.plan import build_plan
from fedavail.plan.specs import as_json
from fedavail.report import build, claims
from fedavail.report import frame as tidy

FAST = {"algorithm": "fast", "base": "fedavg", "schedule": "adaptive", "lam": 1, "lr": 0.05}
SEEDS = (0, 1, 2, 3, 4)
# What a seed does to every algorithm (its partition, trace and initial model), then each cell's own noise.
SEED_EFFECT = np.array([0.00, 0.02, -0.01, 0.03, -0.02])
VALUES = {
    ("uniform", "avg"): 0.90 + SEED_EFFECT,
    ("gamma", "avg"): 0.60 + SEED_EFFECT + [0.01, -0.01, 0.00, 0.005, -0.005],
    ("gamma", "ada"): 0.80 + SEED_EFFECT + [0.00, 0.01, -0.01, 0.005, 0.00],
    ("gamma", "swe"): 0.70 + SEED_EFFECT + [0.02, -0.03, 0.01, -0.02, 0.03],  # server model; local mean + 0.1
    ("gamma", "all"): 0.70 + SEED_EFFECT,
}


def _config(report, seeds=SEEDS):
    experiments = {"uniform": ("svhn", "stationary", None, 0.1, ["avg"]),
                   "gamma": ("svhn", "sine", 0.3, 0.1, ["avg", "ada", "swe", "all"])}
    return config_with(experiments, {**ALGS, "ada": FAST}, {"c": report}, seeds=seeds)


def _write(tmp_path, seeds=SEEDS, diverged=(), rising=()):
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
            test = constant(per_seed[seed])
            if (experiment, algorithm) in rising:  # still climbing 0.3 points a round at the end
                test = lambda t, end=per_seed[seed]: end - 0.003 * (ROUNDS - 1 - t)  # noqa: E731
            dirs.append(write_run(tmp_path, experiment, algorithm, seed, test, extra=extra,
                                  diverged_at=50 if (experiment, algorithm, seed) in diverged else None,
                                  entry=FAST if algorithm == "ada" else ALGS[algorithm]))
    return dirs


def _claim(check, words="a claim", **more):
    return {"claim": words, "source": "FedSWE Table 2", "check": check, **more}


def _verdicts(tmp_path, checks, seeds=SEEDS, diverged=(), rising=(), **settings):
    report = {"kind": "claims", "claims": [c if "check" in c else _claim(c, f"claim {i}")
                                           for i, c in enumerate(checks)], **settings}
    config = _config(report, seeds)
    job = json.loads(as_json(build_plan(config).report_job("c")))
    dirs = [tmp_path / d for d in reports.run_dirs(job)]
    _write(tmp_path, seeds, diverged, rising)
    table, frame = claims.claims_table(job, tidy.view(job, tidy.load(job, dirs)))
    return frame, table


def test_paired_differences_hold_fail_or_stay_within_noise(tmp_path):
    frame, table = _verdicts(tmp_path, [
        {"greater": ["gamma/ada", "gamma/avg"]},  # +20 points on every seed
        {"greater": ["gamma/avg", "uniform/avg"]},  # −30 points, paired across experiments by seed
        {"greater": ["gamma/all", "gamma/swe"]},  # −10 points against the local mean
        {"greater": [{"cell": "gamma/swe", "model": "global"}, "gamma/all"]},  # +0.2 ± 2.5 points: within noise
    ])
    assert frame["verdict"].tolist() == ["holds", "fails", "fails", "not resolved"]
    assert frame["differences"].str.split(";").str[0].astype(float).tolist() == pytest.approx(
        [0.201, -0.3, -0.102, 0.002])
    assert frame["pairs"].tolist() == ["5"] * 4
    assert frame["reason"][3] == "the interval contains the bound"
    # The std over seeds of each cell (2.4 points, mostly the seed effect) is far wider than the paired interval.
    assert "80.5 ± 2.4 (5 seeds, 100 rounds)" in frame["numbers"][0]
    assert "A − B = +20.1 points [+18.6, +21.6], n = 5" in frame["intervals"][0]
    assert [row[-1] for row in table.rows] == ["holds", "fails", "fails", "not resolved: the interval contains the "
                                                                           "bound"]


def test_a_claim_that_holds_by_construction_is_shown_and_not_counted_as_decided(tmp_path):
    share = {"cell": "gamma/ada", "metric": "snapshot_share"}
    why = "q rises only when the accuracy signal falls"
    frame, table = _verdicts(tmp_path, [_claim({"below": [share, 0.1]}, "few snapshots", by_construction=why),
                                        {"greater": ["gamma/avg", "uniform/avg"]}])
    assert frame["verdict"].tolist() == ["holds", "fails"]
    assert frame["by_construction"].tolist() == [why, ""]
    assert table.rows[0][-1] == f"holds (by construction: {why})"
    assert table.footnotes[-2:] == ["Decided: 1 of 1 claims (fails 1).",
                                    "Not counted: 1 claim that holds by construction (holds)."]
    with pytest.raises(ValueError, match=r"claims\[0\]\.by_construction: a non-empty string"):
        _verdicts(tmp_path / "bad", [_claim({"below": [share, 0.1]}, by_construction=" ")])


def test_non_inferiority_is_judged_against_its_margin(tmp_path):
    swe = {"cell": "gamma/swe", "model": "global"}
    frame, _ = _verdicts(tmp_path, [
        {"non_inferior": {"method": swe, "reference": "gamma/all", "margin": 0.05}},
        {"non_inferior": {"method": swe, "reference": "gamma/all", "margin": 0.01}},
        {"non_inferior": {"method": "gamma/avg", "reference": "gamma/ada"}},  # default margin: 1 point
    ])
    assert frame["verdict"].tolist() == ["holds", "not resolved", "fails"]
    assert "(margin 5.0 points)" in frame["intervals"][0] and "(margin 1.0 points)" in frame["intervals"][2]


def test_recovers_gap_below_above_decreasing_peak_and_all_of(tmp_path):
    gap = {"method": "gamma/ada", "low": "gamma/avg", "high": "uniform/avg"}
    share = {"cell": "gamma/ada", "metric": "snapshot_share"}
    frame, _ = _verdicts(tmp_path, [
        {"recovers_gap": {**gap, "fraction": 0.5}},  # recovers (80 − 60) / (90 − 60) = 67% of the gap
        {"recovers_gap": {**gap, "fraction": 0.9}},
        {"below": [share, 0.1]},  # 5% snapshot rounds
        {"above": [share, 0.1]},
        {"decreasing": ["uniform/avg", "gamma/ada", "gamma/avg"]},
        {"decreasing": ["uniform/avg", "gamma/avg", "gamma/ada"]},
        {"greater": [{"cell": "gamma/all", "metric": "consensus_error"},
                     {"cell": "gamma/swe", "metric": "consensus_error"}]},  # 10 vs 1, 2, 3, 4, 5
        {"peak": {"sweep": ["gamma/avg", "gamma/ada", "gamma/all"], "at": ["gamma/ada"]}},
        {"peak": {"sweep": ["gamma/avg", "gamma/ada", "gamma/all"], "at": ["gamma/avg", "gamma/all"]}},
        {"all_of": [{"greater": ["gamma/ada", "gamma/avg"]}, {"below": [share, 0.1]}]},
        {"all_of": [{"greater": ["gamma/ada", "gamma/avg"]}, {"greater": ["gamma/avg", "gamma/ada"]}]},
    ])
    assert frame["verdict"].tolist() == ["holds", "fails", "holds", "fails", "holds", "fails", "holds", "holds",
                                         "fails", "holds", "fails"]
    assert "67% of the gap recovered" in frame["intervals"][0]
    assert float(frame["differences"][2]) == pytest.approx(0.05)
    assert "max(A, C) − B" in frame["intervals"][8]


def test_two_cells_within_the_equivalence_margin_show_no_difference(tmp_path):
    swe = {"cell": "gamma/swe", "model": "global"}  # gamma/all − swe: −0.2 ± 2.5 points, 90% interval ±2.4
    checks = [{"greater": [swe, "gamma/all"]},
              {"equivalent": ["gamma/all", swe]},
              {"equivalent": ["gamma/ada", "gamma/avg"]},  # +20 points on every seed
              {"all_of": [{"greater": ["gamma/ada", "gamma/avg"]}, {"greater": [swe, "gamma/all"]}]},
              {"greater": [{"cell": "gamma/all", "metric": "consensus_error"},
                           {"cell": "gamma/all", "metric": "consensus_error"}]}]  # not an accuracy: no band
    frame, table = _verdicts(tmp_path, checks, equivalence_margin=0.05)
    assert frame["verdict"].tolist() == ["no difference", "holds", "fails", "no difference", "not resolved"]
    assert frame["reason"][0] == "within ±5.0 points" and table.rows[0][-1] == "no difference: within ±5.0 points"
    assert "(90%: [" in frame["intervals"][0]
    assert table.footnotes[-1] == "Decided: 4 of 5 claims (holds 1, fails 1, no difference 2, not resolved 1)."
    frame, _ = _verdicts(tmp_path / "narrow", checks[:2])  # the default band, ±0.5 points, is narrower than the noise
    assert frame["verdict"].tolist() == ["not resolved", "not resolved"]
    assert frame["reason"][1] == "the interval is neither inside nor beyond the band"


def test_a_cell_is_named_by_the_model_it_was_scored_on(tmp_path):
    frame, _ = _verdicts(tmp_path, [{"greater": [{"cell": "gamma/swe", "model": "local_mean"},
                                                 {"cell": "gamma/avg", "model": "local_mean"}]},
                                    {"greater": [{"cell": "gamma/swe", "model": "global"}, "gamma/avg"]}])
    assert "A = FedSWE (k = 100), mean of local copies @ gamma: 80.6" in frame["numbers"][0]
    assert "B = FedAvg over active, server model (it keeps no local copies) @ gamma" in frame["numbers"][0]
    assert "A = FedSWE (k = 100), server model @ gamma: 70.6" in frame["numbers"][1]


def test_fewer_than_three_seeds_give_no_verdict(tmp_path):
    frame, table = _verdicts(tmp_path, [{"greater": ["gamma/ada", "gamma/avg"]}], seeds=(0, 1))
    assert frame["verdict"].tolist() == ["not resolved"] and frame["reason"][0] == "needs ≥ 3 seeds"
    assert table.rows[0][-1] == "not resolved: needs ≥ 3 seeds"


def test_a_cell_still_improving_at_the_end_leaves_the_claim_not_resolved(tmp_path):
    frame, table = _verdicts(tmp_path, [{"greater": ["gamma/ada", "gamma/avg"]},
                                        {"greater": ["gamma/all", "gamma/avg"]},
                                        {"greater": [{"cell": "gamma/all", "metric": "consensus_error"},
                                                     {"cell": "gamma/swe", "metric": "consensus_error"}]}],
                             rising=[("gamma", "ada")])
    assert frame["verdict"].tolist() == ["not resolved", "holds", "holds"]
    assert frame["reason"][0].startswith("still improving at round 100 (A: +")
    assert table.rows[0][-1].startswith("not resolved: still improving at round 100")


def test_a_diverged_seed_leaves_the_claim_not_resolved_and_names_it(tmp_path):
    frame, _ = _verdicts(tmp_path, [{"greater": ["gamma/ada", "gamma/avg"]},
                                    {"below": [{"cell": "gamma/avg", "metric": "snapshot_share"}, 0.1]}],
                         diverged=[("gamma", "ada", 1)])
    assert frame["verdict"].tolist() == ["not resolved", "not resolved"]
    assert frame["reason"][0] == "no value for seed 1 of A"


def test_the_papers_own_difference_is_shown_where_it_publishes_the_cells(tmp_path):
    swe_vs_avg = {"greater": [{"cell": "gamma/swe", "model": "global"}, "gamma/avg"]}
    frame, _ = _verdicts(tmp_path, [
        swe_vs_avg,  # the cells are SVHN, sine, γ = 0.3, α = 0.1: Table 2 publishes both
        _claim(swe_vs_avg, paper={"dataset": "cifar10", "dynamics": "stationary"}),
        {"greater": ["gamma/ada", "gamma/avg"]},  # FAST on SVHN: not published
    ])
    assert frame["paper"][0] == ("FedSWE Table 2 (svhn, sine): 85.8 ± 0.8 vs 82.0 ± 1.3, difference +3.8 points, "
                                 "beyond its larger std")
    assert frame["paper"][1].startswith("FedSWE Table 2 (cifar10, stationary): ")
    assert frame["paper"][2] == "—"


def test_the_report_writes_its_table_and_reads_only_the_cells_it_names(tmp_path, monkeypatch):
    report = {"kind": "claims", "title": "Claims", "claims": [_claim({"greater": ["gamma/ada", "gamma/avg"]},
                                                                     "adaptive FAST beats FedAvg")]}
    config = _config(report)
    parsed = reports.parse_report("c", report, config)
    assert reports.report_outputs("c", parsed) == {"md": "results/reports/c/table.md",
                                                   "tex": "results/reports/c/table.tex",
                                                   "csv": "results/reports/c/table.csv"}
    job = json.loads(as_json(build_plan(config).report_job("c")))
    assert reports.run_dirs(job) == [f"results/runs/gamma/{a}/seed{s}" for a in ("ada", "avg") for s in SEEDS]
    assert "95% Student-t confidence interval" in captions.caption(job)
    _write(tmp_path)
    monkeypatch.chdir(tmp_path)
    outputs = {k: tmp_path / v for k, v in reports.report_outputs("c", parsed).items()}
    build.make_report(job, reports.run_dirs(job), outputs)
    markdown = outputs["md"].read_text()
    assert "| claim | source | our numbers | paired differences [95% CI] | paper | verdict |" in markdown
    assert "| adaptive FAST beats FedAvg | FedSWE Table 2 |" in markdown
    assert markdown.rstrip().endswith("| holds |\n\nDecided: 1 of 1 claims (holds 1).")
    assert pd.read_csv(outputs["csv"])["verdict"].tolist() == ["holds"]
    assert outputs["tex"].read_text().count(r"\toprule") == 1


@pytest.mark.parametrize("report, message", [
    ({"claims": []}, "non-empty list"),
    ({"claims": [_claim({"greater": ["nope/avg", "gamma/avg"]})]}, "experiment 'nope'"),
    ({"claims": [_claim({"greater": ["uniform/ada", "gamma/avg"]})]}, "does not run algorithm 'ada'"),
    ({"claims": [_claim({"greater": ["gamma/ada"]})]}, r"claims\[0\].check.greater: two cells"),
    ({"claims": [_claim({"equivalent": ["gamma/ada", "gamma/avg", "gamma/all"]})]}, "equivalent: two cells"),
    ({"claims": [_claim({"equivalent": ["gamma/ada", "gamma/avg"]})], "equivalence_margin": 0}, "equivalence_margin"),
    ({"claims": [_claim({"bigger": ["gamma/ada", "gamma/avg"]})]}, "one of"),
    ({"claims": [_claim({"greater": ["gamma-ada", "gamma/avg"]})]}, "not '<experiment>/<algorithm>'"),
    ({"claims": [_claim({"below": [{"cell": "gamma/ada", "metric": "loss"}, 0.1]})]}, "metric"),
    ({"claims": [_claim({"recovers_gap": {"method": "gamma/ada", "low": "gamma/avg", "high": "uniform/avg"}})]},
     "'fraction' is required"),
    ({"claims": [_claim({"non_inferior": {"method": "gamma/ada", "reference": "gamma/avg", "margin": -1}})]},
     "margin: >= 0"),
    ({"claims": [_claim({"peak": {"sweep": ["gamma/ada", "gamma/avg"], "at": ["gamma/all"]}})]},
     r"at\[0\]: 'gamma/all' is not a cell of the sweep"),
    ({"claims": [_claim({"greater": ["gamma/ada", "gamma/avg"]}, paper={"dataset": "svhn"})]},
     "'dynamics' is required"),
    ({"claims": [{"claim": "x", "check": {"greater": ["gamma/ada", "gamma/avg"]}}]}, "'source' is required"),
    ({"claims": [_claim({"greater": ["gamma/ada", "gamma/avg"]})], "experiments": ["gamma"]}, "do not list"),
    ({"claims": [_claim({"greater": ["gamma/ada", "gamma/avg"]})], "plateau_window": 0.9}, "plateau_window"),
])
def test_invalid_claims_are_rejected_before_any_job(report, message):
    report = {"kind": "claims", **report}
    config = _config(report)
    with pytest.raises(ConfigError, match=message):
        parse_checked_reports(config)


# ---------------------------------------------------------------- the verdict rule by simulation

DRAWS = 4000


def _verdict_rates(effect: float, seeds: int, seed_share: float = 0.75, draws: int = DRAWS) -> dict:
    """Verdicts of `greater: [a, b]` on `draws` crafted pairs of cells. Each cell's values over seeds have standard
    deviation 1: a seed effect shared by both cells (share `seed_share` of the variance: the same partition, trace
    and initial model) plus the cell's own noise; a's mean is `effect` above b's."""
    rng = np.random.default_rng(seeds)
    shared = rng.normal(0, np.sqrt(seed_share), (draws, seeds))
    own = rng.normal(0, np.sqrt(1 - seed_share), (2, draws, seeds))
    a, b = effect + shared + own[0], shared + own[1]
    verdicts = [claims.judge(claims.paired_interval(x - y))[0] for x, y in zip(a, b)]
    return {v: verdicts.count(v) / draws for v in (claims.HOLDS, claims.FAILS, claims.NOT_RESOLVED)}


@pytest.mark.parametrize("seeds", [3, 5, 10])
def test_with_no_effect_at_most_five_percent_of_comparisons_get_a_verdict(seeds):
    rates = _verdict_rates(0.0, seeds)
    monte_carlo = 3 * np.sqrt(0.05 * 0.95 / DRAWS)
    assert rates[claims.HOLDS] + rates[claims.FAILS] <= 0.05 + monte_carlo
    assert rates[claims.HOLDS] <= 0.025 + monte_carlo and rates[claims.FAILS] <= 0.025 + monte_carlo


def test_an_effect_of_one_and_a_half_standard_deviations_holds_at_five_seeds():
    rates = _verdict_rates(1.5, 5)
    assert rates[claims.HOLDS] >= 0.80 and rates[claims.FAILS] == 0


def _equivalence_rates(effect: float, seeds: int, spread: float, draws: int = DRAWS) -> float:
    """Share of `draws` sets of paired differences (mean `effect`, standard deviation `spread`, both in units of the
    margin) whose two-cell comparison shows no difference within ±1."""
    rng = np.random.default_rng(seeds)
    differences = rng.normal(effect, spread, (draws, seeds))
    verdicts = [claims.judge_equivalence(claims.paired_interval(d), claims.paired_interval(d, 0.90), 1.0)[0]
                for d in differences]
    return verdicts.count(claims.HOLDS) / draws


@pytest.mark.parametrize("seeds", [3, 5, 10])
@pytest.mark.parametrize("effect", [-1.0, 1.0])
def test_a_true_difference_at_the_margin_is_called_no_difference_at_most_five_percent_of_the_time(effect, seeds):
    monte_carlo = 3 * np.sqrt(0.05 * 0.95 / DRAWS)
    assert _equivalence_rates(effect, seeds, spread=0.5) <= 0.05 + monte_carlo


@pytest.mark.parametrize("seeds, spread, power", [(5, 0.5, 0.93), (5, 1.0, 0.27), (10, 1.0, 0.77)])
def test_the_power_to_find_no_difference_when_there_is_none(seeds, spread, power):
    # At effect 0 the two one-sided tests find the tie in 95% of draws when the paired differences' standard deviation
    # is half the margin (five seeds), in 30% when it equals the margin (80% with ten seeds): a margin of 0.5 points
    # needs per-seed differences steady to about a quarter of a point.
    assert _equivalence_rates(0.0, seeds, spread) >= power


def test_the_interval_is_students_t_on_the_paired_differences():
    interval = claims.paired_interval([1.0, 2.0, 3.0])  # mean 2, sd 1: 2 ± 4.303 / √3
    assert (interval.mean, interval.pairs) == (2.0, 3)
    assert interval.low == pytest.approx(2 - 4.302653 / np.sqrt(3)) and interval.high == pytest.approx(
        2 + 4.302653 / np.sqrt(3))
    assert claims.judge(claims.paired_interval([1.0, 2.0])) == (claims.NOT_RESOLVED, "needs ≥ 3 seeds")
