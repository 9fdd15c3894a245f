"""Finished runs as frames: every run's per-round metrics (metrics.parquet) with experiment, algorithm and seed
columns, and one row per run from its summary.json (divergence, state bytes, timing)."""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass
class Runs:
    metrics: pd.DataFrame  # one row per (experiment, algorithm, seed, round)
    summaries: pd.DataFrame  # one row per run

    def run(self, experiment: str, algorithm: str) -> pd.DataFrame:
        m = self.metrics
        return m[(m["experiment"] == experiment) & (m["algorithm"] == algorithm)]

    def diverged(self, experiment: str, algorithm: str) -> list[tuple[int, int]]:
        """(seed, round) of every run of this cell that diverged."""
        s = self.summaries
        rows = s[(s["experiment"] == experiment) & (s["algorithm"] == algorithm) & s["diverged_at"].notna()]
        return [(int(r.seed), int(r.diverged_at)) for r in rows.itertuples()]


def _identity(run_dir: Path, summary: dict) -> tuple[str, str, int]:
    """(experiment, algorithm, seed): from the summary, else from results/runs/<experiment>/<algorithm>/seed<s>."""
    parts = Path(run_dir).parts
    experiment = summary.get("experiment") or parts[-3]
    algorithm = summary.get("algorithm_id") or parts[-2]
    return experiment, algorithm, int(summary.get("seed", parts[-1].removeprefix("seed")))


def load(run_dirs) -> Runs:
    """Load runs; which model a report scores is fedavail.report.scored_model's view of them."""
    frames, rows = [], []
    for run_dir in run_dirs:
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
        experiment, algorithm, seed = _identity(run_dir, summary)
        metrics = pd.read_parquet(Path(run_dir) / "metrics.parquet")
        metrics.insert(0, "seed", seed)
        metrics.insert(0, "algorithm", algorithm)
        metrics.insert(0, "experiment", experiment)
        frames.append(metrics)
        rows.append({"experiment": experiment, "algorithm": algorithm, "seed": seed,
                     "diverged_at": summary.get("diverged_at"), "state_bytes": summary.get("state_bytes"),
                     "dimension": summary.get("dimension"), "wall_seconds": summary.get("wall_seconds"),
                     "peak_memory_bytes": summary.get("peak_memory_bytes"),
                     "rounds_completed": summary.get("rounds_completed")})
    metrics = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["experiment", "algorithm", "seed", "round"])
    summaries = pd.DataFrame(rows, columns=["experiment", "algorithm", "seed", "diverged_at", "state_bytes",
                                            "dimension", "wall_seconds", "peak_memory_bytes", "rounds_completed"])
    summaries["diverged_at"] = summaries["diverged_at"].astype("float64")
    return Runs(metrics, summaries)


def window_mean(run: pd.DataFrame, column: str, last_n: int, rounds: int) -> float:
    """Mean of `column` over the evaluated rounds among the last `last_n` rounds of a run (NaN if none, e.g. a run
    that diverged earlier or a metric the algorithm does not log)."""
    if column not in run:
        return float("nan")
    tail = run.loc[run["round"] >= rounds - last_n, column].dropna()
    return float(tail.mean()) if len(tail) else float("nan")


def last_values(run: pd.DataFrame, column: str, count: int) -> np.ndarray:
    """The last `count` evaluated values of `column` (FAST's "last 5 test accuracies")."""
    if column not in run:
        return np.array([])
    return run.sort_values("round")[column].dropna().to_numpy()[-count:]


def arbitrary_ratio(run: pd.DataFrame) -> float:
    """FAST's Ratio: rounds with arbitrary participation / rounds run (from the per-round `snapshot` flag)."""
    if "snapshot" not in run or run["snapshot"].isna().all():
        return float("nan")
    return float(1.0 - run["snapshot"].astype(float).mean())


def sampled_curve(run: pd.DataFrame, column: str, sample_every: int | None, rounds: int) -> pd.Series:
    """A run's evaluated `column` indexed by round; with sample_every, the value at rounds 0, S, 2S, ... (< rounds),
    each the latest evaluation at or before that round (rounds before the first evaluation, or after a divergence,
    are NaN)."""
    if column not in run:
        return pd.Series(dtype=float)
    series = run.set_index("round")[column].dropna().sort_index()
    series = series[~series.index.duplicated(keep="last")]
    if sample_every is None or series.empty:
        return series
    grid = np.arange(0, rounds, sample_every)
    last = int(run["round"].max())
    sampled = series.reindex(series.index.union(grid)).ffill().reindex(grid)
    return sampled[sampled.index <= last]


def mean_curve(runs: pd.DataFrame, column: str, sample_every: int | None, rounds: int) -> pd.Series:
    """Mean over seeds of the sampled curves (a seed missing a round does not count at that round)."""
    curves = [sampled_curve(run, column, sample_every, rounds) for _, run in runs.groupby("seed")]
    curves = [c for c in curves if len(c)]
    if not curves:
        return pd.Series(dtype=float)
    return pd.concat(curves, axis=1).mean(axis=1, skipna=True).sort_index()


def first_reaching(curve: pd.Series, target: float) -> int | None:
    """The first round whose value reaches `target`, or None."""
    hits = curve.index[curve.to_numpy() >= target - 1e-12]
    return int(hits[0]) if len(hits) else None
