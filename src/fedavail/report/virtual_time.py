"""Reports in virtual time, the device time a trace's clock gives each round (logged per round as `virtual_s`): how
long each algorithm takes to reach target accuracies (a table: censored times, each algorithm against the reference by
a paired sign test, fedavail.report.censored) and accuracy against virtual time (a figure). Server-model rows of
algorithms scored on their local copies are left out."""

import math

import numpy as np
import pandas as pd

from fedavail.report import BUILDERS
from fedavail.report import frame as tidy
from fedavail.report.censored import ALPHA, sign_test, time_bounds
from fedavail.report.figures import experiment_title, label_colours, panels
from fedavail.report.render import TextTable
from fedavail.report.tables import title

HOUR = 3600.0


def _hours(value: float) -> str:
    return "—" if value != value else f"{value / HOUR:.2f}"


VERDICTS = {"below": "faster", "above": "slower", None: "undecided"}


def time_to_accuracy_cells(job: dict, frame: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, target and algorithm: how many seeds reach the target, the mean and std of their times, and
    the paired sign test of the algorithm's times minus the reference's, a run that never reaches the target censored
    at its final device time: pairs surely sooner, surely later, left open or equal, its p-values and the verdict
    (faster, slower or undecided at one-sided ALPHA)."""
    rows = []
    for experiment in job["report"]["experiments"]:
        runs = tidy.without_server_rows(frame[frame["experiment"] == experiment])
        algorithms = tidy.algorithms_in_order(runs)
        reference = job["report"]["reference"] or algorithms[0]
        labels = dict(zip(runs["algorithm"], runs["label"]))
        for target in job["report"]["targets"]:
            times = tidy.time_to_target(runs, "test_acc", target).dropna(subset=["value"])
            low, high = (bound.unstack("algorithm") for bound in time_bounds(
                times.set_index(["seed", "algorithm"])["value"], times.set_index(["seed", "algorithm"])["reached"]))
            for algorithm in algorithms:
                mine = times[times["algorithm"] == algorithm]
                observed = mine["value"][mine["reached"]]
                row = {"experiment": experiment, "target": target, "algorithm": algorithm,
                       "label": labels[algorithm], "reference": reference, "seeds": len(mine),
                       "reached": len(observed), "mean_s": observed.mean(), "std_s": observed.std(ddof=0),
                       "verdict": "reference"}
                if algorithm != reference and algorithm in low and reference in low:
                    paired = pd.concat([low[algorithm] - high[reference], high[algorithm] - low[reference]],
                                       axis=1).dropna()
                    test = sign_test(paired[0], paired[1])
                    row.update(later=test.above, sooner=test.below, open=test.open, ties=test.ties,
                               p_later=test.p_above, p_sooner=test.p_below, verdict=VERDICTS[test.decided()])
                rows.append(row)
    return pd.DataFrame.from_records(rows)


def _comparison(cell: pd.Series) -> str:
    if cell["verdict"] == "reference":
        return "reference"
    if math.isnan(cell.get("sooner", math.nan)):
        return "—"
    pairs = int(cell["sooner"] + cell["later"] + cell["open"] + cell["ties"])
    shown = f"{int(cell['sooner'])} sooner, {int(cell['later'])} later, {int(cell['open'])} open of {pairs}"
    p = min(cell["p_sooner"], cell["p_later"])
    return f"{cell['verdict']}: {shown} (p {p:.2g})" if cell["verdict"] != "undecided" else f"{shown} (p {p:.2g})"


@BUILDERS.add("time_to_accuracy")
def time_to_accuracy_table(job: dict, frame: pd.DataFrame) -> tuple:
    data = time_to_accuracy_cells(job, frame)
    targets = job["report"]["targets"]
    columns = ["experiment", "algorithm"]
    for target in targets:
        columns += [f"to {100 * target:g}% (h)", f"vs reference to {100 * target:g}%"]
    description = ("Virtual time (hours of device time: each round lasts as long as its slowest participant needs) "
                   "until the test accuracy first reaches each target: mean ± std over the seeds that reach it, with "
                   "(seeds reaching it / seeds). A run that never reaches the target is censored at its final device "
                   "time, not dropped. Against the reference, seed by seed: a pair is sooner or later only when no "
                   "censored time could reverse it, else open; an algorithm is faster (slower) when a sign test "
                   f"counting the open pairs against it gives one-sided p ≤ {ALPHA:g} (at least 6 seeds).")
    table = TextTable(title(job), description, columns)
    for (experiment, _), rows in data.groupby(["experiment", "algorithm"], sort=False):
        row = [experiment, rows["label"].iloc[0]]
        for target in targets:
            cell = rows[rows["target"] == target].iloc[0]
            reached = f" ({cell['reached']}/{cell['seeds']})"
            row.append((f"{_hours(cell['mean_s'])} ± {_hours(cell['std_s'])}" if cell["reached"] else "—") + reached)
            row.append(_comparison(cell))
        table.rows.append(row)
    if data.empty or data["seeds"].eq(0).all() or "virtual_s" not in frame:
        table.footnotes.append("These runs logged no virtual time: give their trace a clock (docs/configuration.md, "
                               "\"Virtual clock\").")
    return table, data


@BUILDERS.add("accuracy_vs_time")
def accuracy_vs_time(job: dict, frame: pd.DataFrame):
    """Each seed's evaluated test accuracy against its virtual time, and the mean over seeds of both per round."""
    experiments = job["report"]["experiments"]
    fig, axes = panels(len(experiments), job=job)
    colors, means = label_colours(frame["label"]), []
    evaluated = tidy.without_server_rows(frame).dropna(subset=["test_acc"])
    if "virtual_s" not in evaluated:
        evaluated = evaluated.assign(virtual_s=np.nan)
    for ax, experiment in zip(axes[0], experiments):
        runs = evaluated[evaluated["experiment"] == experiment]
        for algorithm in tidy.algorithms_in_order(runs):
            run = runs[runs["algorithm"] == algorithm]
            color, label = colors[run["label"].iloc[0]], run["label"].iloc[0]
            for _, seed in run.groupby("seed"):
                ax.plot(seed["virtual_s"] / HOUR, 100 * seed["test_acc"], color=color, lw=0.6, alpha=0.35)
            mean = run.groupby("round")[["virtual_s", "test_acc"]].mean().reset_index()
            ax.plot(mean["virtual_s"] / HOUR, 100 * mean["test_acc"], color=color, lw=1.8, label=label)
            means.append(mean.assign(experiment=experiment, algorithm=algorithm, label=label))
        ax.set(title=experiment_title(frame, experiment), xlabel="virtual time (hours of device time)",
               ylabel="test accuracy (%)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, pd.concat(means, ignore_index=True) if means else pd.DataFrame()
