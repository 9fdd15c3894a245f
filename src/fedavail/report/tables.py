"""The table kinds, each a groupby or pivot of the report's view of the tidy frame (fedavail.report.frame.view),
returned with its numbers in long form (the CSV: one row per cell, which fedavail.report.compare matches)."""

import numpy as np
import pandas as pd

from fedavail.report import BUILDERS
from fedavail.report import frame as tidy
from fedavail.report.render import Cell, Section, TextTable, rank_marks

DATASET_LABELS = {"svhn": "SVHN", "cifar10": "CIFAR-10", "cinic10": "CINIC-10", "mnist5k": "MNIST-5k",
                  "fashion_mnist": "Fashion-MNIST", "digits": "digits", "shakespeare": "Shakespeare",
                  "shakespeare_leaf": "Shakespeare (LEAF)", "shakespeare_leaf_json": "Shakespeare (LEAF JSON)"}
_SYMBOLS = {"gamma": "γ", "alpha": "α", "k": "k", "p": "p"}
GROUPS = {1: "not aided by memory or known statistics", 2: "aided by memory or known statistics"}


def attribute_label(attribute: str, value) -> str:
    if attribute == "dataset":
        return DATASET_LABELS.get(value, str(value))
    if attribute in ("dynamics", "experiment", "distribution", "scheme", "trace_model", "inner"):
        return str(value)
    shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    return f"{_SYMBOLS.get(attribute, attribute)} = {shown}"


def title(job: dict) -> str:
    return job["report"].get("title") or job["name"]


def cells(frame: pd.DataFrame, values: pd.DataFrame, scale: float = 100.0) -> pd.DataFrame:
    """mean ± std over seeds per (experiment, algorithm, metric), beside the settings of its runs."""
    stats = tidy.over_seeds(values, ["experiment", "algorithm", "metric"], scale)
    described = tidy.describe_runs(frame).rename(columns={"num_clients": "clients"})
    return stats.merge(described, on=["experiment", "algorithm"], how="left")


def mean_std_text(mean: float, std: float, decimals: int, diverged: str) -> str:
    """`diverged`: "seed s at round r; ..." for a cell with diverged runs, else empty."""
    if mean != mean:
        return f"diverged ({diverged}) †" if diverged else "—"
    return f"{mean:.{decimals}f} ± {std:.{decimals}f}" + (" †" if diverged else "")


def diverged_notes(table: pd.DataFrame) -> list[str]:
    seen = table[table["diverged"] != ""].drop_duplicates(["experiment", "label", "diverged"]) if len(table) else table
    return [f"† diverged (non-finite model or exploding loss), kept and marked: {r.experiment} / {r.label}: "
            f"{r.diverged}." for r in seen.sort_values(["experiment", "label"]).itertuples()]


def _grouped_rows(table: TextTable, table_cells: pd.DataFrame, by: list[str], keys: list[tuple], text, prefix: str = "",
                  marks: dict | None = None) -> None:
    """Per group present, a Section (`prefix` + group name), then a row per algorithm of the group in order: its label
    and, per key of `keys` (values of columns `by`), Cell(text(cell), marks[key]'s mark for it) or "n/a" if no cell."""
    lookup, marks = table_cells.set_index(["algorithm", *by]), marks or {}
    ordered = table_cells.drop_duplicates("algorithm").sort_values(["group", "order"], kind="stable")
    for group, part in ordered.groupby("group", sort=True):
        table.rows.append(Section(prefix + GROUPS[group]))
        for algorithm, label in zip(part["algorithm"], part["label"]):
            table.rows.append([label, *(Cell(text(lookup.loc[(algorithm, *key)]), marks.get(key, {}).get(algorithm))
                                        if (algorithm, *key) in lookup.index else "n/a" for key in keys)])


@BUILDERS.add("fedswe_table", "sweep")
def accuracy_table(job: dict, frame: pd.DataFrame) -> tuple:
    """fedswe_table: row blocks by `blocks`, columns by `columns`; sweep: columns by `parameter`."""
    s = job["report"]
    column_attr, block_attr = (s["parameter"], None) if s["kind"] == "sweep" else (s["columns"], s["blocks"])
    values = pd.concat([tidy.window_mean(frame, m, s["last_n"]).assign(metric=m) for m in ("train_acc", "test_acc")])
    table_cells = cells(frame, values).assign(column=lambda c: c[column_attr],
                                              block=lambda c: c[block_attr].fillna("") if block_attr else "")
    keys = [(c, m) for c in dict.fromkeys(table_cells["column"]) for m in ("train_acc", "test_acc")]
    headers = [f"{attribute_label(column_attr, c)} {m.removesuffix('_acc')}" for c, m in keys]
    description = (f"Accuracy (%) as mean ± std over seeds of each run's average over its last {s['last_n']} rounds. "
                   "Bold: best of the algorithms not aided by memory or known statistics in each column; underlined: "
                   "second best; server-model rows are unranked. Algorithms aided by memory or known statistics are "
                   "listed below them, unranked.")
    table = TextTable(title(job), description, ["algorithm", *headers])
    for block, in_block in table_cells.groupby("block", sort=False):
        eligible = tidy.without_server_rows(in_block[in_block["group"] == 1])
        marks = {key: rank_marks(dict(zip(part["algorithm"], part["mean"])), s["decimals"])
                 for key, part in eligible.groupby(["column", "metric"], sort=False)}
        _grouped_rows(table, in_block, ["column", "metric"], keys,
                      lambda c: mean_std_text(c["mean"], c["std"], s["decimals"], c["diverged"]),
                      f"{attribute_label(block_attr, block)}: " if block_attr else "", marks)
    table.footnotes += diverged_notes(table_cells)
    return table, table_cells.drop(columns=["finite", "order"])


def _targets(job: dict, frame: pd.DataFrame, experiment: str) -> tuple[list[float], str]:
    s = job["report"]
    given = s["targets"].get(experiment) if isinstance(s.get("targets"), dict) else s.get("targets")
    if given is not None:
        return [float(t) for t in given], "given"
    finals = tidy.over_seeds(tidy.window_mean(frame[frame["experiment"] == experiment], "test_acc"), ["algorithm"])
    if not np.isfinite(finals["mean"]).any():
        return [], "no finite accuracy"
    best = finals["mean"].max()
    base = np.floor(best * 10 + 1e-9) / 10 or best
    return [round(f * base, 6) for f in s["fractions"]], (
        f"fractions {', '.join(f'{f:g}' for f in s['fractions'])} of the best final test accuracy "
        f"{100 * best:.1f}% rounded down to {100 * base:g}%")


@BUILDERS.add("rounds_to_target")
def rounds_to_target_table(job: dict, frame: pd.DataFrame) -> tuple:
    every = job["report"]["sample_every"]
    curve = tidy.sampled(frame, "test_acc", every).groupby(["experiment", "algorithm", "round"], sort=False)[
        "value"].mean().reset_index()
    parts, headers, notes, columns = [], [], [], []
    for experiment in job["report"]["experiments"]:
        targets, how = _targets(job, frame, experiment)
        notes.append(f"{experiment}: targets {', '.join(f'{100 * t:g}%' for t in targets) or 'none'} ({how}).")
        runs = frame[frame["experiment"] == experiment].drop_duplicates(tidy.RUN)
        for target in targets:
            columns.append((experiment, f"rounds_to_{100 * target:g}"))
            headers.append(f"{attribute_label('dataset', runs['dataset'].iloc[0])} {100 * target:g}%")
            reached = tidy.first_reaching(curve[curve["experiment"] == experiment], target, ["algorithm"])
            parts.append(runs.assign(value=runs["algorithm"].map(reached), metric=columns[-1][1], target=target))
    values = pd.concat(parts, ignore_index=True) if parts else frame.iloc[0:0].assign(value=[], metric=[])
    targets = values.drop_duplicates(["experiment", "metric"])[["experiment", "metric", "target"]]
    table_cells = cells(frame, values, 1.0).merge(targets, on=["experiment", "metric"])
    description = (f"First round at which the test accuracy, averaged over seeds and sampled every {every} "
                   "rounds, reaches each target; — when it never does.")
    table = TextTable(title(job), description, ["algorithm", *headers])
    _grouped_rows(table, table_cells, ["experiment", "metric"], columns,
                  lambda c: ("—" if c["mean"] != c["mean"] else f"{int(c['mean'])}") + (" †" if c["diverged"] else ""))
    table.footnotes += notes + diverged_notes(table_cells)
    return table, table_cells.assign(std=np.nan).drop(columns=["finite", "order"])


@BUILDERS.add("fast_table")
def fast_table(job: dict, frame: pd.DataFrame) -> tuple:
    """A ± B pools the last `last` evaluated test accuracies of every seed; Ratio is a mean over seeds."""
    s = job["report"]
    accuracy = tidy.last_values(frame, "test_acc", s["last"]).assign(metric="test_acc")
    ratio = tidy.arbitrary_ratio(frame).assign(metric="ratio")
    table_cells = cells(frame, pd.concat([accuracy, ratio], ignore_index=True))
    seeds = frame.groupby(["experiment", "algorithm"])["seed"].nunique()
    table_cells["seeds"] = [seeds[(e, a)] for e, a in zip(table_cells["experiment"], table_cells["algorithm"])]
    algorithms = tidy.algorithms_in_order(table_cells)
    label = dict(zip(table_cells["algorithm"], table_cells["label"]))
    ratios = table_cells[table_cells["metric"] == "ratio"]
    with_ratio = set(ratios.loc[np.isfinite(ratios["mean"]), "algorithm"])
    headers = [h for a in algorithms for h in [label[a]] + ([f"{label[a]} Ratio"] if a in with_ratio else [])]
    description = (f"Test accuracy (%) A ± B: mean and standard deviation of the last {s['last']} test accuracies of "
                   "every seed. Ratio = rounds with arbitrary participation / total rounds (%), for algorithms with "
                   "snapshot rounds.")
    table = TextTable(title(job), description, ["experiment", *headers])
    lookup = table_cells.set_index(["experiment", "algorithm", "metric"])
    for experiment in s["experiments"]:
        a = frame[frame["experiment"] == experiment].iloc[0]
        name = [attribute_label("dataset", a["dataset"]), attribute_label("alpha", a["alpha"]) if pd.notna(
            a["alpha"]) else "", str(a["dynamics"] or "")]
        row = [" ".join(x for x in name if x)]
        for algorithm in algorithms:
            if (experiment, algorithm, "test_acc") not in lookup.index:
                row += ["n/a"] * (2 if algorithm in with_ratio else 1)
                continue
            acc = lookup.loc[(experiment, algorithm, "test_acc")]
            row.append(Cell(mean_std_text(acc["mean"], acc["std"], s["decimals"], acc["diverged"])))
            if algorithm in with_ratio:
                value = lookup.loc[(experiment, algorithm, "ratio"), "mean"]
                row.append("—" if value != value else f"{value:.1f}%")
        table.rows.append(row)
    table.footnotes += diverged_notes(table_cells)
    return table, table_cells.drop(columns=["finite", "order"])


@BUILDERS.add("memory")
def memory_table(job: dict, frame: pd.DataFrame) -> tuple:
    """State memory per algorithm (summary.json state_bytes), with the model dimension, peak memory and wall time."""
    runs = frame.drop_duplicates(tidy.RUN)
    means = runs.groupby(["experiment", "algorithm"], sort=False)[
        ["state_bytes", "dimension", "peak_memory_bytes", "wall_seconds"]].mean()
    table_cells = tidy.describe_runs(frame)[["experiment", "algorithm", "identity", "label", "diverged"]].merge(
        means.reset_index(), on=["experiment", "algorithm"])
    table_cells["model_copies"] = table_cells["state_bytes"] / (4 * table_cells["dimension"])
    table_cells["seeds"] = runs.groupby(["experiment", "algorithm"], sort=False).size().to_numpy()
    description = ("Bytes of algorithm state at the end of training (every tensor the algorithm keeps: server model, "
                   "per-client tables, counters), in MiB and in float32 model copies (state / 4d); peak process "
                   "memory and wall time are means over seeds.")
    table = TextTable(title(job), description, ["algorithm", "state (MiB)", "model copies", "d",
                                                "peak memory (MiB)", "wall time (s)"])
    for experiment, part in table_cells.groupby("experiment", sort=False):
        table.rows.append(Section(experiment))
        table.rows += [[r.label + (" †" if r.diverged else ""), f"{r.state_bytes / 2**20:.3f}",
                        f"{r.model_copies:.1f}", f"{r.dimension:.0f}", f"{r.peak_memory_bytes / 2**20:.0f}",
                        f"{r.wall_seconds:.1f}"] for r in part.itertuples()]
    table.footnotes += diverged_notes(table_cells)
    return table, table_cells


@BUILDERS.add("experiment")
def experiment_table(job: dict, frame: pd.DataFrame) -> tuple:
    """Fractions in the CSV, percent in the Markdown."""
    last_n = job["report"]["last_n"]
    values = pd.concat([tidy.window_mean(frame, m, last_n).assign(metric=m) for m in ("test_acc", "train_acc")])
    by_metric = {m: part.set_index("algorithm") for m, part in cells(frame, values, 1.0).groupby("metric")}
    test = by_metric["test_acc"].sort_values("order", kind="stable")
    data = test[["mean", "std"]].add_prefix("test_acc_").assign(
        train_acc_mean=by_metric["train_acc"]["mean"], seeds=test["seeds"], diverged_at=test["diverged"]).reset_index()
    description = f"Test accuracy (%) of the global model, mean ± std over seeds of the last-{last_n}-round average."
    table = TextTable(job["name"], description, ["algorithm", "test accuracy", "train accuracy", "seeds", "note"])
    for r in data.itertuples():
        note = f"† diverged: {r.diverged_at}" if r.diverged_at else ""
        if r.test_acc_mean == r.test_acc_mean:
            test = mean_std_text(100 * r.test_acc_mean, 100 * r.test_acc_std, 2, r.diverged_at)
            train = f"{100 * r.train_acc_mean:.2f}"
        else:  # no run of this algorithm was evaluated in its last rounds
            test = train = f"diverged ({r.diverged_at})" if note else "—"
        table.rows.append([r.algorithm, test, train, str(r.seeds), note])
    return table, data

