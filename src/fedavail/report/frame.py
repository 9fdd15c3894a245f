"""One tidy frame of runs: a row per run × round, the run's settings as columns beside every metric it logged. The
settings are read from the resolved spec each run's summary.json carries, never re-derived from the config. Every
table, figure and claim is a filter, groupby or pivot of it; `over_seeds` is the one place a mean ± std is taken."""

import json
from pathlib import Path

import numpy as np
import pandas as pd

from fedavail.plan.reports import attributes

RUN = ["experiment", "algorithm", "seed"]
SUMMARY = ("diverged_at", "state_bytes", "dimension", "wall_seconds", "peak_memory_bytes", "rounds_completed")
SERVER_SUFFIX = "@server"
SCORED_COLUMNS = ("test_acc", "test_loss", "train_acc", "train_loss")  # "<column>_local_mean": the local copies' mean


def read_run(run_dir: Path) -> tuple[dict, pd.DataFrame]:
    """A finished run's summary.json and metrics.parquet, checked to be its sealed outputs (fedavail.integrity)."""
    from fedavail.integrity import run_problem
    from fedavail.io import UnreadableFileError

    summary_path, metrics_path = Path(run_dir) / "summary.json", Path(run_dir) / "metrics.parquet"
    if problem := run_problem(Path(run_dir)):
        raise UnreadableFileError(summary_path, "run summary", problem)
    try:
        metrics = pd.read_parquet(metrics_path)
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise UnreadableFileError(metrics_path, "run metrics", error) from error
    return json.loads(summary_path.read_text()), metrics


def algorithm_settings(spec: dict) -> dict:
    """algorithm_name and every scalar hyperparameter of a run's `algorithm` spec (resolved: every default in)."""
    return {"algorithm_name": spec["algorithm"], **{f"algorithm.{k}": v for k, v in spec.items() if k != "algorithm"
                                                    and (v is None or isinstance(v, (bool, int, float, str)))}}


def load(job: dict, run_dirs) -> pd.DataFrame:
    """The tidy frame of these runs of the job: every metric, algorithm_name, `algorithm.<hyperparameter>` (defaults
    filled in), `training.local.<key>`, the experiment's ATTRIBUTES and last_n, seed and the run's SUMMARY."""
    experiments = {name: {**attributes(name, info["partition"], info["trace"], info["training"]),
                          "last_n": info["training"]["last_n"]} for name, info in job["experiments"].items()}
    frames = []
    for run_dir in run_dirs:
        summary, metrics = read_run(run_dir)
        spec, local = summary["spec"], summary["spec"]["training"]["local"]
        # algorithm.lr: the lr the run trained with (the algorithm's own, else the local block's)
        settings = {**experiments[spec["experiment"]], "algorithm": spec["algorithm_id"],
                    **algorithm_settings(spec["algorithm"]),
                    **{f"training.local.{k}": str(v) if isinstance(v, list) else v for k, v in local.items()},
                    "algorithm.lr": local["lr"], "seed": int(spec["seed"]), **{k: summary.get(k) for k in SUMMARY}}
        frames.append(metrics.assign(**{k: [v] * len(metrics) for k, v in settings.items()}))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*RUN, "round"])
    return frame.assign(diverged_at=frame.get("diverged_at", pd.Series(dtype=float)).astype("float64"))


def is_server_row(algorithm) -> bool:
    return str(algorithm).endswith(SERVER_SUFFIX)


def without_server_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame less the server-model rows `scored` adds."""
    return frame[~frame["algorithm"].map(is_server_row)]


def algorithms_in_order(frame: pd.DataFrame) -> list[str]:
    """The frame's algorithms in the report's order (the `order` column of `view`)."""
    return list(frame.sort_values("order", kind="stable").drop_duplicates("algorithm")["algorithm"])


def scored(frame: pd.DataFrame) -> pd.DataFrame:
    """Algorithms that log their local copies' mean are scored by it, and their server model follows as the row
    `<algorithm>@server` (label "…, server model"). Its train columns are NaN when the local mean's were not logged."""
    if "test_acc_local_mean" not in frame:
        return frame
    has_local = frame.groupby(["experiment", "algorithm"])["test_acc_local_mean"].transform(lambda c: c.notna().any())
    local = frame[has_local].assign(**{column: frame.get(f"{column}_local_mean", np.nan) for column in SCORED_COLUMNS})
    server = frame[has_local].assign(algorithm=frame.loc[has_local, "algorithm"] + SERVER_SUFFIX)
    return pd.concat([frame[~has_local], local, server], ignore_index=True)


def view(job: dict, frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as the report shows it: scored model, and per row its algorithm entry's identity, label (the plan's,
    fedavail.plan.labels, unless the report gives one), group (1 = not aided by memory or known statistics) and
    order."""
    settings = job["report"]
    if settings.get("eval_model") == "local_mean":
        frame = scored(frame)
    given = settings.get("labels") or {}
    order = list(dict.fromkeys([*(settings.get("algorithms") or []),
                                *(a for e in settings["experiments"] for a in job["experiments"][e]["algorithms"])]))
    aided = settings.get("memory_aided")

    def shown(algorithm: str) -> dict:
        base, server = algorithm.removesuffix(SERVER_SUFFIX), is_server_row(algorithm)
        entry = job["shown"][base]
        label = given.get(base) or entry["label"]
        return {"identity": entry["identity"], "label": f"{label}, server model" if server else label,
                "group": 2 if (base in aided if aided is not None else entry["aided"]) else 1,
                "order": order.index(base) + 0.5 * server if base in order else len(order)}

    # Every column these depend on is constant per algorithm: work out each algorithm once, not once per row.
    per_algorithm = {algorithm: shown(algorithm) for algorithm in frame["algorithm"].unique()}
    column = frame["algorithm"]
    return frame.assign(**{key: column.map(lambda a, key=key: per_algorithm[a][key])
                           for key in ("identity", "label", "group", "order")})


def window_mean(frame: pd.DataFrame, column: str, last_n=None) -> pd.DataFrame:
    """Per run: the mean of `column` over its evaluated rounds among the last `last_n` rounds of training (the
    experiment's last_n by default); NaN for a run that never evaluated there or never logs the column."""
    last_n = frame["last_n"] if last_n is None else last_n
    values = frame[column] if column in frame else pd.Series(np.nan, index=frame.index)
    return _per_run(frame, values.where(frame["round"] >= frame["rounds"] - last_n))


def last_values(frame: pd.DataFrame, column: str, count: int) -> pd.DataFrame:
    """Per run and evaluation: the last `count` evaluated values of `column` (FAST's "last 5 test accuracies")."""
    if column not in frame:
        return frame.iloc[0:0][RUN].assign(value=np.nan)
    evaluated = frame.dropna(subset=[column]).sort_values("round")
    return evaluated.groupby(RUN, sort=False).tail(count)[RUN].assign(value=evaluated[column])


def arbitrary_ratio(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: FAST's Ratio, rounds with arbitrary participation / rounds run (NaN without snapshot rounds)."""
    snapshot = frame["snapshot"].astype(float) if "snapshot" in frame else pd.Series(np.nan, index=frame.index)
    return _per_run(frame, snapshot).assign(value=lambda d: 1.0 - d["value"])


def time_to_target(frame: pd.DataFrame, column: str, target: float) -> pd.DataFrame:
    """Per run: `value`, the virtual seconds (`virtual_s`, logged under a trace's clock) at the end of the first
    evaluated round whose `column` reaches `target`, and `reached` True; for a run that never reaches it, its final
    virtual seconds, where its time is censored, and `reached` False (fedavail.report.censored); NaN for a run without
    a clock."""
    if column not in frame or "virtual_s" not in frame:
        return _per_run(frame, pd.Series(np.nan, index=frame.index)).assign(reached=False)
    reached = _per_run(frame, frame["virtual_s"].where(frame[column] >= target - 1e-12), "min")
    final = _per_run(frame, frame["virtual_s"], "max")["value"]
    return reached.assign(reached=reached["value"].notna(), value=reached["value"].fillna(final))


def _per_run(frame: pd.DataFrame, values: pd.Series, how: str = "mean") -> pd.DataFrame:
    value = values.groupby([frame[k] for k in RUN], sort=False).agg(how).rename("value").reset_index()
    return frame.drop_duplicates(RUN)[RUN].merge(value, on=RUN, how="left")


def sampled(frame: pd.DataFrame, column: str, every: int | None) -> pd.DataFrame:
    """Per run: the evaluated `column` by round; with `every`, the latest evaluation at or before rounds 0, S, 2S, …
    up to the run's last round (earlier rounds, and rounds after a divergence, are left out)."""
    if column not in frame:
        return frame.iloc[0:0][[*RUN, "round"]].assign(value=np.nan)
    evaluated = frame.dropna(subset=[column]).drop_duplicates([*RUN, "round"], keep="last")
    if every is None:
        return evaluated[[*RUN, "round"]].assign(value=evaluated[column])
    pieces, by_run = [], {key: run for key, run in evaluated.groupby(RUN, sort=False)}
    for key, run in frame.groupby(RUN, sort=False):
        series = by_run[key].set_index("round")[column].sort_index() if key in by_run else pd.Series(dtype=float)
        grid = np.arange(0, int(run["rounds"].iloc[0]), every)
        grid = grid[grid <= run["round"].max()]
        values = series.reindex(series.index.union(grid)).ffill().reindex(grid).dropna()
        pieces.append(pd.DataFrame({**dict(zip(RUN, key)), "round": values.index, "value": values.to_numpy()}))
    return pd.concat(pieces, ignore_index=True) if pieces else frame.iloc[0:0][[*RUN, "round"]].assign(value=np.nan)


def first_reaching(curve: pd.DataFrame, target: float, by: list[str]) -> pd.Series:
    """Per group of `by`: the first round whose value reaches `target` (NaN if none)."""
    reached = curve["round"].where(curve["value"] >= target - 1e-12)
    return reached.groupby([curve[k] for k in by], sort=False).min().astype(float)


def over_seeds(values: pd.DataFrame, by: list[str], scale: float = 1.0) -> pd.DataFrame:
    """mean ± std (ddof 0) over seeds of `value` per group, the finite values only; seeds counts every run."""
    grouped = (values["value"] * scale).groupby([values[k] for k in by], sort=False, dropna=False)
    return pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=0), "seeds": grouped.size(),
                         "finite": grouped.count()}).reset_index()


SETTINGS_KEPT = ("experiment", "algorithm", "identity", "label", "group", "order", "dataset", "dynamics", "alpha",
                 "gamma", "rounds", "num_clients", "scheme", "trace_model", "period", "low", "p", "distribution",
                 "window", "inner", "last_n")


def describe_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, algorithm) with its settings and `diverged`: "seed s at round r; …" or ""."""
    runs = frame.drop_duplicates(RUN)
    diverged = runs.dropna(subset=["diverged_at"]).sort_values("seed").groupby(["experiment", "algorithm"])
    text = diverged.apply(lambda g: "; ".join(f"seed {int(s)} at round {int(r)}" for s, r in
                                              zip(g["seed"], g["diverged_at"])), include_groups=False)
    cells = runs.drop_duplicates(["experiment", "algorithm"])[[c for c in SETTINGS_KEPT if c in runs]]
    return cells.assign(diverged=[text.get((e, a), "") for e, a in zip(cells["experiment"], cells["algorithm"])])
