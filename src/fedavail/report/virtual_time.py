"""Reports in virtual time, the device time a trace's clock gives each round (logged per round as `virtual_s`): how
long each algorithm takes to reach target accuracies (a table with paired intervals over seeds) and accuracy against
virtual time (a figure). Server-model rows of algorithms scored on their local copies are left out."""

import math

import numpy as np
import pandas as pd

from fedavail.report import BUILDERS
from fedavail.report import frame as tidy
from fedavail.report.claims import paired_interval
from fedavail.report.figures import _experiment_title, _panels, _tab10
from fedavail.report.render import TextTable
from fedavail.report.tables import title

HOUR = 3600.0


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame["algorithm"].map(tidy.is_server_row)]


def _hours(value: float) -> str:
    return "—" if value != value else f"{value / HOUR:.2f}"


def _algorithms(runs: pd.DataFrame) -> list[str]:
    return list(runs.sort_values("order", kind="stable").drop_duplicates("algorithm")["algorithm"])


def time_to_accuracy_cells(job: dict, frame: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, target and algorithm: the virtual seconds to the target over the seeds that reach it (mean,
    std), how many do, and the paired difference to the reference over the seeds where both do."""
    records = []
    for experiment in job["report"]["experiments"]:
        runs = _shown(frame[frame["experiment"] == experiment])
        algorithms = _algorithms(runs)
        reference = job["report"]["reference"] or algorithms[0]
        labels = dict(zip(runs["algorithm"], runs["label"]))
        for target in job["report"]["targets"]:
            times = tidy.time_to_target(runs, "test_acc", target).pivot(index="seed", columns="algorithm",
                                                                         values="value")
            for algorithm in algorithms:
                values = times[algorithm]
                paired = (values - times[reference]).dropna()
                interval = paired_interval(paired.to_numpy()) if algorithm != reference else None
                records.append({"experiment": experiment, "target": target, "algorithm": algorithm,
                                "label": labels[algorithm], "reference": reference, "seeds": len(values),
                                "reached": int(values.notna().sum()), "mean_s": values.mean(),
                                "std_s": values.std(ddof=0),
                                **{f"difference_{key}_s": getattr(interval, key) if interval else math.nan
                                   for key in ("mean", "low", "high")},
                                "pairs": interval.pairs if interval else 0})
    return pd.DataFrame.from_records(records)


@BUILDERS.add("time_to_accuracy")
def time_to_accuracy_table(job: dict, frame: pd.DataFrame) -> tuple:
    data = time_to_accuracy_cells(job, frame)
    targets = job["report"]["targets"]
    columns = ["experiment", "algorithm"]
    for target in targets:
        columns += [f"to {100 * target:g}% (h)", f"Δ to {100 * target:g}% (h) [95%]"]
    description = ("Virtual time (hours of device time: each round lasts as long as its slowest participant needs) "
                   "until the test accuracy first reaches each target: mean ± std over the seeds that reach it, "
                   "(k/n) when only k of n do; Δ: the paired difference to the reference over the seeds where both "
                   "reach it, with its 95% t interval.")
    table = TextTable(title(job), description, columns)
    for (experiment, algorithm), rows in data.groupby(["experiment", "algorithm"], sort=False):
        row = [experiment, rows["label"].iloc[0]]
        for target in targets:
            cell = rows[rows["target"] == target].iloc[0]
            reached = "" if cell["reached"] == cell["seeds"] else f" ({cell['reached']}/{cell['seeds']})"
            row.append(f"{_hours(cell['mean_s'])} ± {_hours(cell['std_s'])}{reached}" if cell["reached"] else "—")
            row.append("reference" if algorithm == cell["reference"] else
                       f"{cell['difference_mean_s'] / HOUR:+.2f} [{cell['difference_low_s'] / HOUR:+.2f}, "
                       f"{cell['difference_high_s'] / HOUR:+.2f}]" if cell["pairs"] else "—")
        table.rows.append(row)
    if data.empty or data["seeds"].eq(0).all() or "virtual_s" not in frame:
        table.footnotes.append("These runs logged no virtual time: give their trace a clock (docs/configuration.md, "
                               "\"Virtual clock\").")
    return table, data


@BUILDERS.add("accuracy_vs_time")
def accuracy_vs_time(job: dict, frame: pd.DataFrame):
    """Each seed's evaluated test accuracy against its virtual time, and the mean over seeds of both per round."""
    experiments = job["report"]["experiments"]
    fig, axes = _panels(len(experiments), job=job)
    colors, means = _tab10(frame["label"]), []
    evaluated = _shown(frame).dropna(subset=["test_acc"])
    if "virtual_s" not in evaluated:
        evaluated = evaluated.assign(virtual_s=np.nan)
    for ax, experiment in zip(axes[0], experiments):
        runs = evaluated[evaluated["experiment"] == experiment]
        for algorithm in _algorithms(runs):
            run = runs[runs["algorithm"] == algorithm]
            color, label = colors[run["label"].iloc[0]], run["label"].iloc[0]
            for _, seed in run.groupby("seed"):
                ax.plot(seed["virtual_s"] / HOUR, 100 * seed["test_acc"], color=color, lw=0.6, alpha=0.35)
            mean = run.groupby("round")[["virtual_s", "test_acc"]].mean().reset_index()
            ax.plot(mean["virtual_s"] / HOUR, 100 * mean["test_acc"], color=color, lw=1.8, label=label)
            means.append(mean.assign(experiment=experiment, algorithm=algorithm, label=label))
        ax.set(title=_experiment_title(frame, experiment), xlabel="virtual time (hours of device time)",
               ylabel="test accuracy (%)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, pd.concat(means, ignore_index=True) if means else pd.DataFrame()
