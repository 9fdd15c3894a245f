"""Per-experiment tables (mean ± std over seeds of the last-N-round test accuracy) and accuracy curves."""

import json
from pathlib import Path

import numpy as np
import pandas as pd

from fedavail.io import atomic_path, write_text


def load_runs(run_dirs: list[Path]) -> tuple[pd.DataFrame, list[dict]]:
    """All runs' per-round metrics in one frame (with algorithm and seed columns), and their summaries."""
    frames, summaries = [], []
    for run_dir in run_dirs:
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
        metrics = pd.read_parquet(Path(run_dir) / "metrics.parquet")
        metrics["algorithm"] = summary["algorithm_id"]
        metrics["seed"] = summary["seed"]
        frames.append(metrics)
        summaries.append(summary)
    return pd.concat(frames, ignore_index=True), summaries


def final_accuracy(metrics: pd.DataFrame, last_n: int, rounds: int, column: str = "test_acc") -> float:
    """Mean of `column` over the evaluated rounds among the last `last_n` of the run."""
    tail = metrics[metrics["round"] >= rounds - last_n][column].dropna()
    return float(tail.mean()) if len(tail) else float("nan")


def summary_table(metrics: pd.DataFrame, summaries: list[dict], algorithms: list[str], last_n: int,
                  rounds: int) -> pd.DataFrame:
    diverged = {(s["algorithm_id"], s["seed"]): s["diverged_at"] for s in summaries}
    rows = []
    for algorithm in algorithms:
        runs = metrics[metrics["algorithm"] == algorithm]
        per_seed = {seed: final_accuracy(run, last_n, rounds) for seed, run in runs.groupby("seed")}
        train = [final_accuracy(run, last_n, rounds, "train_acc") for _, run in runs.groupby("seed")]
        values = np.array(list(per_seed.values()), dtype=float)
        diverged_seeds = sorted(seed for (alg, seed), at in diverged.items() if alg == algorithm and at is not None)
        rows.append({
            "algorithm": algorithm,
            "test_acc_mean": np.nanmean(values) if np.isfinite(values).any() else np.nan,
            "test_acc_std": np.nanstd(values, ddof=0) if np.isfinite(values).any() else np.nan,
            "train_acc_mean": np.nanmean(train) if np.isfinite(train).any() else np.nan,
            "seeds": len(values),
            "diverged_seeds": ",".join(map(str, diverged_seeds)),
        })
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, title: str, last_n: int) -> str:
    lines = [f"# {title}", "",
             f"Test accuracy (%) of the global model, mean ± std over seeds of the last-{last_n}-round average.", "",
             "| algorithm | test accuracy | train accuracy | seeds | note |", "|---|---|---|---|---|"]
    for row in table.itertuples():
        note = f"diverged (seeds {row.diverged_seeds})" if row.diverged_seeds else ""
        lines.append(f"| {row.algorithm} | {100 * row.test_acc_mean:.2f} ± {100 * row.test_acc_std:.2f} | "
                     f"{100 * row.train_acc_mean:.2f} | {row.seeds} | {note} |")
    return "\n".join(lines) + "\n"


def accuracy_figure(metrics: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    evaluated = metrics.dropna(subset=["test_acc"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(data=evaluated, x="round", y="test_acc", hue="algorithm", errorbar="sd", ax=ax)
    ax.set(xlabel="round", ylabel="test accuracy", title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)


def experiment_report(spec: dict, run_dirs: list[Path], table_md: Path, table_csv: Path, figure: Path) -> None:
    metrics, summaries = load_runs(run_dirs)
    algorithms = list(spec["algorithms"])
    table = summary_table(metrics, summaries, algorithms, spec["last_n"], spec["rounds"])
    with atomic_path(table_csv) as tmp:
        table.to_csv(tmp, index=False)
    write_text(table_md, markdown(table, spec["experiment"], spec["last_n"]))
    accuracy_figure(metrics, figure, spec["experiment"])


# ---------------------------------------------------------------- cross-experiment tables (config `reports:`)
#
# Each builder takes the report job's spec (fedavail.report.spec.job_spec) and the loaded runs and returns the table
# to print, its numbers in long form (the CSV) and, for the paper-table kinds, the cells to compare with the
# published values (fedavail.report.compare).

DATASET_LABELS = {"svhn": "SVHN", "cifar10": "CIFAR-10", "cinic10": "CINIC-10", "mnist5k": "MNIST-5k",
                  "fashion_mnist": "Fashion-MNIST", "digits": "digits", "shakespeare": "Shakespeare",
                  "shakespeare_leaf": "Shakespeare (LEAF)", "shakespeare_leaf_json": "Shakespeare (LEAF JSON)"}
_SYMBOLS = {"gamma": "γ", "alpha": "α", "k": "k", "p": "p"}


def attribute_label(attribute: str, value) -> str:
    if attribute == "dataset":
        return DATASET_LABELS.get(value, str(value))
    if attribute in ("dynamics", "experiment", "distribution", "scheme", "trace_model", "inner"):
        return str(value)
    shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    return f"{_SYMBOLS.get(attribute, attribute)} = {shown}"


class Report:
    """The job spec with the lookups every builder needs."""

    def __init__(self, spec: dict):
        from fedavail.report import labels as lab

        self.spec, self.settings = spec, spec["report"]
        self._lab = lab
        # The spec travels as JSON with sorted keys: restore the config's order of experiments and algorithms.
        self.experiments = {}
        for name in self.settings.get("experiments") or spec["experiments"]:
            info = dict(spec["experiments"][name])
            order = info.get("algorithm_order") or list(info["algorithms"])
            info["algorithms"] = {a: info["algorithms"][a] for a in order}
            self.experiments[name] = info
        order = self.settings.get("algorithms")
        seen = list(order) if order else []
        for info in self.experiments.values():
            seen += [a for a in info["algorithms"] if a not in seen]
        self.algorithms = [a for a in seen if any(a in i["algorithms"] for i in self.experiments.values())]

    def identity(self, experiment: str, algorithm: str) -> str:
        return self._lab.canonical(self.experiments[experiment]["algorithms"][algorithm])

    def any_identity(self, algorithm: str) -> str:
        for experiment, info in self.experiments.items():
            if algorithm in info["algorithms"]:
                return self.identity(experiment, algorithm)
        return algorithm

    def label(self, algorithm: str) -> str:
        return self.settings.get("labels", {}).get(algorithm) or self._lab.display(self.any_identity(algorithm))

    def group(self, algorithm: str) -> int:
        aided = self.settings.get("memory_aided")
        if aided is not None:
            return 2 if algorithm in aided else 1
        return self._lab.group(self.any_identity(algorithm))

    def ordered(self) -> list[str]:
        return sorted(self.algorithms, key=lambda a: (self.group(a), self.algorithms.index(a)))

    def attributes(self, experiment: str) -> dict:
        return self.experiments[experiment]["attributes"]

    def rounds(self, experiment: str) -> int:
        return int(self.experiments[experiment]["training"]["rounds"])

    def title(self) -> str:
        return self.settings.get("title") or self.spec["name"]


def _cell_record(report: Report, experiment: str, algorithm: str, metric: str, mean, std, seeds: int,
                 diverged: list) -> dict:
    attributes = report.attributes(experiment)
    return {"experiment": experiment, "algorithm": algorithm, "identity": report.identity(experiment, algorithm),
            "label": report.label(algorithm), "group": report.group(algorithm), "dataset": attributes["dataset"],
            "dynamics": attributes["dynamics"], "alpha": attributes["alpha"], "gamma": attributes["gamma"],
            "metric": metric, "mean": mean, "std": std, "seeds": seeds, "rounds": report.rounds(experiment),
            "clients": attributes["num_clients"],
            "diverged": "; ".join(f"seed {s} at round {r}" for s, r in diverged)}


def _seed_stats(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if not len(finite):
        return float("nan"), float("nan")
    return float(finite.mean()), float(finite.std(ddof=0))


def _diverged_note(records: list[dict]) -> list[str]:
    seen = sorted({(r["experiment"], r["label"], r["diverged"]) for r in records if r["diverged"]})
    return [f"† diverged (NaN/inf), kept and marked: {e} / {label}: {what}." for e, label, what in seen]


def _mean_std_text(mean: float, std: float, decimals: int, diverged: bool) -> str:
    mark = " †" if diverged else ""
    if mean != mean:
        return "diverged †" if diverged else "—"
    return f"{mean:.{decimals}f} ± {std:.{decimals}f}{mark}"


def accuracy_table(spec: dict, runs) -> tuple:
    """FedSWE Table 2 (kind fedswe_table: row blocks by `blocks`, columns by `columns`) and Tables 8/9 (kind sweep:
    columns by `parameter`): train and test accuracy, mean ± std over seeds of each run's last-N-round average."""
    from fedavail.report.render import Cell, Section, TextTable, rank_marks
    from fedavail.report.runs import window_mean
    from fedavail.report.scored_model import is_server_row

    report = Report(spec)
    settings = report.settings
    sweep = settings["kind"] == "sweep"
    column_attr = settings["parameter"] if sweep else settings["columns"]
    block_attr = None if sweep else settings["blocks"]
    last_n, decimals = settings["last_n"], settings["decimals"]
    records = []
    for experiment, info in report.experiments.items():
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            diverged = runs.diverged(experiment, algorithm)
            for metric in ("train_acc", "test_acc"):
                values = [window_mean(r, metric, last_n, report.rounds(experiment)) for _, r in run.groupby("seed")]
                mean, std = _seed_stats(values)
                record = _cell_record(report, experiment, algorithm, metric, 100 * mean, 100 * std, len(values),
                                      diverged)
                record["column"] = report.attributes(experiment)[column_attr]
                record["block"] = report.attributes(experiment)[block_attr] if block_attr else ""
                records.append(record)
    frame = pd.DataFrame(records)
    columns = list(dict.fromkeys(frame["column"]))
    blocks = list(dict.fromkeys(frame["block"]))
    headers = [f"{attribute_label(column_attr, c)} {m}" for c in columns for m in ("train", "test")]
    description = (f"Accuracy (%) as mean ± std over seeds of each run's average over its last {last_n} rounds. Bold: "
                   "best of the algorithms not aided by memory or known statistics in each column; underlined: "
                   "second best; server-model rows are unranked. Algorithms aided by memory or known statistics are "
                   "listed below them, unranked.")
    table = TextTable(report.title(), description, ["algorithm", *headers])
    for block in blocks:
        in_block = frame[frame["block"] == block]
        present = [a for a in report.ordered() if a in set(in_block["algorithm"])]
        marks = {}
        for (column, metric), cells in in_block.groupby(["column", "metric"], sort=False):
            eligible = cells[(cells["group"] == 1) & ~cells["algorithm"].map(is_server_row)]
            marks[(column, metric)] = rank_marks(dict(zip(eligible["algorithm"], eligible["mean"])), decimals)
        for group in (1, 2):
            members = [a for a in present if report.group(a) == group]
            if not members:
                continue
            name = "not aided by memory or known statistics" if group == 1 else "aided by memory or known statistics"
            table.rows.append(Section(f"{attribute_label(block_attr, block)}: {name}" if block_attr else name))
            for algorithm in members:
                row = [report.label(algorithm)]
                for column in columns:
                    for metric in ("train_acc", "test_acc"):
                        cell = in_block[(in_block["algorithm"] == algorithm) & (in_block["column"] == column)
                                        & (in_block["metric"] == metric)]
                        if cell.empty:
                            row.append("n/a")
                            continue
                        c = cell.iloc[0]
                        text = _mean_std_text(c["mean"], c["std"], decimals, bool(c["diverged"]))
                        row.append(Cell(text, marks[(column, metric)].get(algorithm)))
                table.rows.append(row)
    table.footnotes += _diverged_note(records)
    return table, frame, frame


def _targets(report: Report, runs, experiment: str) -> tuple[list[float], str]:
    from fedavail.report.runs import window_mean

    settings = report.settings
    targets = settings.get("targets")
    if isinstance(targets, dict) and experiment in targets:
        return [float(t) for t in targets[experiment]], "given"
    if isinstance(targets, list):
        return [float(t) for t in targets], "given"
    info = report.experiments[experiment]
    last_n = int(info["training"]["last_n"])
    finals = []
    for algorithm in info["algorithms"]:
        values = [window_mean(r, "test_acc", last_n, report.rounds(experiment))
                  for _, r in runs.run(experiment, algorithm).groupby("seed")]
        finals.append(_seed_stats(values)[0])
    best = np.nanmax(finals) if np.isfinite(finals).any() else float("nan")
    if not np.isfinite(best):
        return [], "no finite accuracy"
    base = np.floor(best * 10 + 1e-9) / 10 or best
    return [round(f * base, 6) for f in settings["fractions"]], (
        f"fractions {', '.join(f'{f:g}' for f in settings['fractions'])} of the best final test accuracy "
        f"{100 * best:.1f}% rounded down to {100 * base:g}%")


def rounds_to_target_table(spec: dict, runs) -> tuple:
    """FedSWE Table 7: the first round at which the mean test accuracy over seeds, sampled every `sample_every`
    rounds, reaches each target accuracy; "—" when it never does."""
    from fedavail.report.render import Cell, Section, TextTable
    from fedavail.report.runs import first_reaching, mean_curve

    report = Report(spec)
    sample_every = report.settings["sample_every"]
    records, headers, notes, columns = [], [], [], []
    for experiment, info in report.experiments.items():
        targets, how = _targets(report, runs, experiment)
        notes.append(f"{experiment}: targets {', '.join(f'{100 * t:g}%' for t in targets) or 'none'} ({how}).")
        for target in targets:
            columns.append((experiment, target))
            headers.append(f"{attribute_label('dataset', report.attributes(experiment)['dataset'])} "
                           f"{100 * target:g}%")
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            curve = mean_curve(run, "test_acc", sample_every, report.rounds(experiment))
            diverged = runs.diverged(experiment, algorithm)
            for target in targets:
                reached = first_reaching(curve, target) if len(curve) else None
                record = _cell_record(report, experiment, algorithm, f"rounds_to_{100 * target:g}",
                                      float("nan") if reached is None else float(reached), float("nan"),
                                      run["seed"].nunique(), diverged)
                record["target"] = target
                records.append(record)
    frame = pd.DataFrame(records)
    description = (f"First round at which the test accuracy, averaged over seeds and sampled every {sample_every} "
                   "rounds, reaches each target; — when it never does.")
    table = TextTable(report.title(), description, ["algorithm", *headers])
    for group in (1, 2):
        members = [a for a in report.ordered() if report.group(a) == group]
        if not members:
            continue
        table.rows.append(Section("not aided by memory or known statistics" if group == 1
                                  else "aided by memory or known statistics"))
        for algorithm in members:
            row = [report.label(algorithm)]
            for experiment, target in columns:
                cell = frame[(frame["algorithm"] == algorithm) & (frame["experiment"] == experiment)
                             & np.isclose(frame["target"], target)] if len(frame) else frame
                if cell.empty:
                    row.append("n/a")
                    continue
                c = cell.iloc[0]
                text = "—" if c["mean"] != c["mean"] else f"{int(c['mean'])}"
                row.append(Cell(text + (" †" if c["diverged"] else "")))
            table.rows.append(row)
    table.footnotes += notes + _diverged_note(records)
    return table, frame, frame


def fast_table(spec: dict, runs) -> tuple:
    """FAST style: A ± B = mean and std of the last `last` evaluated test accuracies (of every seed, pooled) and
    Ratio = rounds with arbitrary participation / total rounds (mean over seeds), one row per experiment."""
    from fedavail.report.render import Cell, TextTable
    from fedavail.report.runs import arbitrary_ratio, last_values

    report = Report(spec)
    last, decimals = report.settings["last"], report.settings["decimals"]
    records = []
    for experiment, info in report.experiments.items():
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            diverged = runs.diverged(experiment, algorithm)
            seeds = run["seed"].nunique()
            values = [v for _, r in run.groupby("seed") for v in last_values(r, "test_acc", last)]
            mean, std = _seed_stats(values)
            records.append(_cell_record(report, experiment, algorithm, "test_acc", 100 * mean, 100 * std, seeds,
                                        diverged))
            ratios = [arbitrary_ratio(r) for _, r in run.groupby("seed")]
            ratio, ratio_std = _seed_stats(ratios)
            records.append(_cell_record(report, experiment, algorithm, "ratio", 100 * ratio, 100 * ratio_std, seeds,
                                        diverged))
    frame = pd.DataFrame(records)
    with_ratio = [a for a in report.algorithms
                  if np.isfinite(frame[(frame["algorithm"] == a) & (frame["metric"] == "ratio")]["mean"]).any()]
    headers = []
    for algorithm in report.algorithms:
        headers.append(report.label(algorithm))
        if algorithm in with_ratio:
            headers.append(f"{report.label(algorithm)} Ratio")
    description = (f"Test accuracy (%) A ± B: mean and standard deviation of the last {last} test accuracies of every "
                   "seed. Ratio = rounds with arbitrary participation / total rounds (%), for algorithms with snapshot "
                   "rounds.")
    table = TextTable(report.title(), description, ["experiment", *headers])
    for experiment in report.experiments:
        a = report.attributes(experiment)
        name = " ".join(x for x in (attribute_label("dataset", a["dataset"]),
                                    attribute_label("alpha", a["alpha"]) if a["alpha"] is not None else "",
                                    str(a["dynamics"] or "")) if x)
        row = [name]
        for algorithm in report.algorithms:
            cells = frame[(frame["experiment"] == experiment) & (frame["algorithm"] == algorithm)]
            if cells.empty:
                row += ["n/a"] * (2 if algorithm in with_ratio else 1)
                continue
            acc = cells[cells["metric"] == "test_acc"].iloc[0]
            row.append(Cell(_mean_std_text(acc["mean"], acc["std"], decimals, bool(acc["diverged"]))))
            if algorithm in with_ratio:
                ratio = cells[cells["metric"] == "ratio"].iloc[0]["mean"]
                row.append("—" if ratio != ratio else f"{ratio:.1f}%")
        table.rows.append(row)
    table.footnotes += _diverged_note(records)
    return table, frame, frame


def memory_table(spec: dict, runs) -> tuple:
    """State memory per algorithm (summary.json state_bytes), with the model dimension, peak memory and wall time."""
    from fedavail.report.render import Section, TextTable

    report = Report(spec)
    s = runs.summaries
    records = []
    for experiment, info in report.experiments.items():
        for algorithm in info["algorithms"]:
            rows = s[(s["experiment"] == experiment) & (s["algorithm"] == algorithm)]
            if rows.empty:
                continue
            state = float(rows["state_bytes"].mean())
            dimension = float(rows["dimension"].mean()) if rows["dimension"].notna().any() else float("nan")
            records.append({"experiment": experiment, "algorithm": algorithm,
                            "identity": report.identity(experiment, algorithm), "label": report.label(algorithm),
                            "state_bytes": state, "dimension": dimension,
                            "model_copies": state / (4 * dimension) if dimension == dimension else float("nan"),
                            "peak_memory_bytes": float(rows["peak_memory_bytes"].mean()),
                            "wall_seconds": float(rows["wall_seconds"].mean()), "seeds": len(rows),
                            "diverged": "; ".join(f"seed {int(r.seed)} at round {int(r.diverged_at)}"
                                                  for r in rows.itertuples() if r.diverged_at == r.diverged_at)})
    frame = pd.DataFrame(records)
    description = ("Bytes of algorithm state at the end of training (every tensor the algorithm keeps: server model, "
                   "per-client tables, counters), in MiB and in float32 model copies (state / 4d); peak process "
                   "memory and wall time are means over seeds.")
    table = TextTable(report.title(), description, ["algorithm", "state (MiB)", "model copies", "d",
                                                    "peak memory (MiB)", "wall time (s)"])
    for experiment in report.experiments:
        part = frame[frame["experiment"] == experiment] if len(frame) else frame
        if part.empty:
            continue
        table.rows.append(Section(experiment))
        for r in part.itertuples():
            table.rows.append([r.label + (" †" if r.diverged else ""), f"{r.state_bytes / 2**20:.3f}",
                               f"{r.model_copies:.1f}", f"{r.dimension:.0f}", f"{r.peak_memory_bytes / 2**20:.0f}",
                               f"{r.wall_seconds:.1f}"])
    table.footnotes += [f"† diverged (NaN/inf), kept and marked: {r.experiment} / {r.label}: {r.diverged}."
                        for r in frame.itertuples() if r.diverged] if len(frame) else []
    return table, frame, None


TABLE_BUILDERS = {"fedswe_table": accuracy_table, "sweep": accuracy_table, "rounds_to_target": rounds_to_target_table,
                  "fast_table": fast_table, "memory": memory_table}
