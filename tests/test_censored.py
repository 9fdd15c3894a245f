"""Censored times to a target accuracy (fedavail.report.censored): a run that never reaches the target is censored at
its final device time, never dropped; the paired sign test by hand; by simulation, at no true difference and with
censoring, "faster" in at most 5% of comparisons, and its power with a true one; a crafted case where the method's
survivors are faster but two of its five seeds never reach the target is not called faster, in the time_to_accuracy
table nor in a claim on time_to_target."""

import numpy as np
import pandas as pd
import pytest

from fedavail.report import claims
from fedavail.report import frame as tidy
from fedavail.report.censored import ALPHA, binomial_tail, sign_test, time_bounds
from fedavail.report.virtual_time import time_to_accuracy_cells, time_to_accuracy_table
from test_report import ALGS, ROUNDS, _job, config_with, write_run

HOUR = 3600.0


def test_binomial_tail_by_hand():
    assert binomial_tail(5, 5) == 1 / 32 and binomial_tail(3, 5) == 0.5 and binomial_tail(0, 4) == 1.0
    assert binomial_tail(6, 6) == 1 / 64 < ALPHA < binomial_tail(5, 5)  # deciding takes six pairs


def test_a_pair_counts_on_a_side_only_when_censoring_cannot_reverse_it():
    # (method, its reached?) against (reference, reached?), seconds
    pairs = [((100, True), (200, True)),  # sooner
             ((300, True), (200, True)),  # later
             ((150, True), (200, False)),  # the reference never got there by 200 s: the method is surely sooner
             ((250, True), (200, False)),  # the reference might have got there at 201 s or 1000 s: open
             ((100, False), (200, True)),  # the method might have got there at 101 s or later: open
             ((300, False), (200, True)),  # surely later
             ((300, False), (400, False)),  # both censored: open
             ((200, True), (200, True))]  # equal: left out
    (method, method_reached), (reference, reference_reached) = (np.array(side).T for side in zip(*pairs))
    method_low, method_high = time_bounds(pd.Series(method, dtype=float), pd.Series(method_reached.astype(bool)))
    reference_low, reference_high = time_bounds(pd.Series(reference, dtype=float),
                                                pd.Series(reference_reached.astype(bool)))
    test = sign_test(method_low - reference_high, method_high - reference_low)
    assert (test.below, test.above, test.open, test.ties) == (2, 2, 3, 1)
    assert test.pairs == 8 and test.p_below == binomial_tail(2, 7) and test.decided() is None


def simulated_faster(rng, seeds, effect, runs=2000):
    """The share of simulated comparisons in which the method is called faster than the reference: log-normal times
    to the target (the method's scaled by exp(-effect)), each run censored at an independent final device time that
    cuts off about a third of the runs, both methods alike."""
    faster = 0
    for _ in range(runs):
        latent = rng.lognormal(0.0, 0.5, (2, seeds)) * np.exp([[-effect], [0.0]])
        final = rng.uniform(0.6, 2.2, (2, seeds))
        reached = latent <= final
        low, high = time_bounds(pd.Series(np.where(reached, latent, final).ravel()), pd.Series(reached.ravel()))
        low, high = low.to_numpy().reshape(2, seeds), high.to_numpy().reshape(2, seeds)
        faster += sign_test(low[0] - high[1], high[0] - low[1]).decided() == "below"
    return faster / runs


@pytest.mark.parametrize("seeds", [5, 8, 12])
def test_with_no_difference_and_censoring_at_most_five_percent_are_called_faster(seeds):
    assert simulated_faster(np.random.default_rng(seeds), seeds, effect=0.0) <= 0.05


def test_a_large_true_difference_is_called_faster_most_of_the_time_at_twelve_seeds():
    assert simulated_faster(np.random.default_rng(1), 12, effect=1.0, runs=500) > 0.8


# The crafted case: at 5 seeds the reference ("avg") reaches 80% after 3.0-3.3 h; the method ("all") after 1.8-2.0 h
# in seeds 0-2, and never in seeds 3 and 4, whose runs end at 4.0 and 4.2 h. Over the three seeds where both reach it
# the method is 1.2 h faster with a tight interval; with the censored seeds it is not faster.
REFERENCE_HOURS = [3.0, 3.2, 2.9, 3.1, 3.3]
METHOD_HOURS = [1.8, 2.0, 1.9, None, None]
FINAL_HOURS = [4.0, 4.2, 4.0, 4.0, 4.2]


def _write_crafted(root):
    dirs = []
    for algorithm, hours in (("avg", REFERENCE_HOURS), ("all", METHOD_HOURS)):
        for seed, (reach, final) in enumerate(zip(hours, FINAL_HOURS)):
            per_round = final * HOUR / ROUNDS
            reached_at = ROUNDS if reach is None else round(reach * HOUR / per_round) - 1

            def test(t, at=reached_at):
                return 0.9 if t >= at else 0.5

            dirs.append(write_run(root, "e", algorithm, seed, test, eval_every=1,
                                  extra={"virtual_s": lambda t, step=per_round: (t + 1) * step}))
    return dirs


def _crafted_job(root, report):
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg", "all"])}, ALGS, {"r": report},
                         seeds=range(5))
    return _job(config, "r", _write_crafted(root))


def test_time_to_target_censors_a_run_that_never_reaches_it_at_its_final_time(tmp_path):
    _, frame = _crafted_job(tmp_path, {"kind": "time_to_accuracy", "experiments": ["e"], "targets": [0.8]})
    times = tidy.time_to_target(frame[frame["algorithm"] == "all"], "test_acc", 0.8).set_index("seed")
    assert times["reached"].tolist() == [True, True, True, False, False]
    np.testing.assert_allclose(times["value"] / HOUR, [1.8, 2.0, 1.9, 4.0, 4.2], atol=0.05)  # to the round


def test_the_crafted_case_is_not_called_faster_in_the_table(tmp_path):
    report = {"kind": "time_to_accuracy", "experiments": ["e"], "targets": [0.8], "reference": "avg"}
    job, frame = _crafted_job(tmp_path, report)
    cell = time_to_accuracy_cells(job, frame).set_index("algorithm").loc["all"]
    # seeds 0-2 surely sooner; seeds 3 and 4 end at 4.0 and 4.2 h without the target the reference reached by 3.3 h
    assert (cell["sooner"], cell["later"], cell["open"], cell["reached"], cell["seeds"]) == (3, 2, 0, 3, 5)
    assert cell["verdict"] == "undecided" and cell["p_sooner"] == 0.5
    survivors = (np.array(METHOD_HOURS[:3]) - REFERENCE_HOURS[:3])  # what dropping the censored seeds compares
    assert survivors.max() < 0 and abs(cell["mean_s"] / HOUR - np.mean(METHOD_HOURS[:3])) < 0.05
    table, _ = time_to_accuracy_table(job, frame)
    row = next(r for r in table.rows if r[3] != "reference")
    assert row[2].endswith("(3/5)") and row[3].startswith("3 sooner, 2 later, 0 open of 5") and "faster" not in row[3]


def test_the_crafted_case_does_not_hold_as_a_claim_on_time_to_target(tmp_path):
    cells = [{"cell": "e/avg", "metric": "time_to_target", "target": 0.8},
             {"cell": "e/all", "metric": "time_to_target", "target": 0.8}]
    report = {"kind": "claims", "claims": [{"claim": "all reaches 80% sooner", "source": "crafted",
                                            "check": {"greater": cells}}]}
    job, frame = _crafted_job(tmp_path, report)
    table, rows = claims.claims_table(job, frame)
    row = rows.iloc[0]
    assert row["verdict"] == claims.NOT_RESOLVED and "sign test" in row["reason"]
    assert "3 of 5 seeds reach it" in row["numbers"] and "3 above 0, 2 below, 0 open of 5" in row["intervals"]
