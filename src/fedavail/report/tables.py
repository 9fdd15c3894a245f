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
