"""Which model a FedSWE-style report scores (its `eval_model` key).

"local_mean" (the default): an algorithm that keeps local copies (FedSWE, FedAWE; its runs log test_acc_local_mean)
is scored by the mean of its clients' local models (1/m) Σ_i X_i, the model the FedAWE authors' code evaluates and
the quantity FedSWE's convergence result bounds; its server model x^t follows as a second row (line, point), marked
"server model". Algorithms with one model are scored by it. "global": every algorithm by its server model x^t.

The view is applied to the loaded runs before a builder sees them: the builders draw whatever rows the spec lists."""

import pandas as pd

SERVER_SUFFIX = "@server"
# The per-model columns fedavail.train logs, "<column>_local_mean" for the mean of the local copies.
SCORED_COLUMNS = ("test_acc", "test_loss", "train_acc", "train_loss")
LOCAL_MEAN_MARKER = "test_acc_local_mean"


def server_row(algorithm: str) -> str:
    return f"{algorithm}{SERVER_SUFFIX}"


def is_server_row(algorithm: str) -> bool:
    return str(algorithm).endswith(SERVER_SUFFIX)


def has_local_mean(run: pd.DataFrame) -> bool:
    return LOCAL_MEAN_MARKER in run and bool(run[LOCAL_MEAN_MARKER].notna().any())


def score_local_mean(spec: dict, runs):
    """(spec, runs) with every local-copy algorithm scored by its local-copy mean and given a server-model row.

    Its rows' train columns are NaN when the runs did not log the local mean's train accuracy."""
    from fedavail.report.runs import Runs
    from fedavail.report.tables import Report

    report = Report(spec)
    spec = {**spec, "report": {**spec["report"], "labels": dict(spec["report"].get("labels") or {})},
            "experiments": {name: dict(info) for name, info in spec["experiments"].items()}}
    settings = spec["report"]
    metrics, summaries = runs.metrics, runs.summaries
    local_frames, server_frames, server_summaries = [], [], []
    kept = pd.Series(True, index=metrics.index)
    for experiment, info in report.experiments.items():
        order = list(info["algorithms"])
        for algorithm in list(info["algorithms"]):
            selected = (metrics["experiment"] == experiment) & (metrics["algorithm"] == algorithm)
            run = metrics[selected]
            if not has_local_mean(run):
                continue
            server = server_row(algorithm)
            kept &= ~selected
            server_frames.append(run.assign(algorithm=server))
            local = run.copy()
            for column in SCORED_COLUMNS:
                local[column] = run[f"{column}_local_mean"] if f"{column}_local_mean" in run else float("nan")
            local_frames.append(local)
            rows = summaries[(summaries["experiment"] == experiment) & (summaries["algorithm"] == algorithm)]
            server_summaries.append(rows.assign(algorithm=server))
            spec_info = spec["experiments"][experiment]
            spec_info["algorithms"] = {**spec_info["algorithms"], server: info["algorithms"][algorithm]}
            order.insert(order.index(algorithm) + 1, server)
            spec_info["algorithm_order"] = order
            settings["labels"].setdefault(server, f"{report.label(algorithm)}, server model")
            for key in ("algorithms", "memory_aided"):
                listed = settings.get(key)
                if listed is not None and algorithm in listed and server not in listed:
                    listed = list(listed)
                    listed.insert(listed.index(algorithm) + 1, server)
                    settings[key] = listed
    if not server_frames:
        return spec, runs
    metrics = pd.concat([metrics[kept], *local_frames, *server_frames], ignore_index=True)
    summaries = pd.concat([summaries, *server_summaries], ignore_index=True)
    return spec, Runs(metrics, summaries)
