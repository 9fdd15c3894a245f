"""The papers' qualitative claims, written as declarative checks over the runs of a config (report kind `claims`).

    reports:
      claims:
        kind: claims
        claims:
          - claim: "FedSWE (k = 100) beats FedAvg over active clients under sine availability"
            source: "FedSWE Table 2"
            check: {greater: [mnist5k_sine/fedswe_k100, mnist5k_sine/fedavg_active]}

A cell is "<experiment>/<algorithm>", or a mapping {cell: "<experiment>/<algorithm>", metric: ..., model: ...}.
Its value per seed is, by metric: test_acc / train_acc (default test_acc) and consensus_error, the mean over the
evaluated rounds among the run's last `last_n` rounds (the experiment's training.last_n unless the report sets one);
snapshot_share, the share of rounds that were FAST snapshots (1 − FAST's Ratio). model (the report's `model`,
default local_mean) picks, for algorithms that keep local copies, the mean of those copies or (global) the server
model.

Checks (thresholds in the metric's own units, accuracies and shares as fractions):
  greater: [a, b]                                mean(a) > mean(b)
  recovers_gap: {method, low, high, fraction}    method − low ≥ fraction · (high − low), with high − low > 0
  below: [a, threshold]  /  above: [a, threshold]
  decreasing: [a, b, c, ...]                     each mean below the previous
  all_of: [check, check, ...]                    every one of them

Verdict. Each comparison is a difference D that the claim says is positive, judged against the spread s = the
largest standard deviation over seeds of the cells it involves: holds if D > s, fails if D < −s, otherwise "not
resolved" (a difference within the seeds' spread is no verdict). With a single seed there is no spread: the verdict
is the sign of D, marked "1 seed". A cell with a seed without a finite value (a diverged run, a metric the run does
not log) leaves its claim not resolved; so does recovers_gap when high − low is not beyond the spread. all_of and
decreasing hold when every part holds and fail when any part fails.

The spec part (validation, the cells a report reads) is imported by the Snakefile and stays free of pandas."""

from fedavail.specs import REQUIRED, check_keys

CLAIM_KEYS = {"claim": REQUIRED, "source": REQUIRED, "check": REQUIRED}
CELL_KEYS = {"cell": REQUIRED, "metric": None, "model": None}
METRICS = ("test_acc", "train_acc", "consensus_error", "snapshot_share")
MODELS = ("local_mean", "global")
CHECKS = ("greater", "recovers_gap", "below", "above", "decreasing", "all_of")
GAP_KEYS = {"method": REQUIRED, "low": REQUIRED, "high": REQUIRED, "fraction": REQUIRED}
HOLDS, FAILS, NOT_RESOLVED = "holds", "fails", "not resolved"
VERDICT_RULE = ("A claim holds (fails) when the difference it states exceeds (falls below minus) the largest "
                "standard deviation over seeds of the cells it involves; a difference within that spread is not "
                "resolved. With one seed there is no spread and the verdict is the sign of the difference, marked "
                "\"1 seed\".")


# ---------------------------------------------------------------- the spec: cells and validation


def parse_cell(cell, where: str) -> dict:
    """{experiment, algorithm, metric, model} of a cell; ValueError naming `where` if it is malformed."""
    if isinstance(cell, str):
        cell = {"cell": cell}
    if not isinstance(cell, dict):
        raise ValueError(f"{where}: a cell is '<experiment>/<algorithm>' or a mapping with 'cell', got {cell!r}")
    check_keys(cell, CELL_KEYS, "key", where)
    name = cell["cell"]
    if not isinstance(name, str) or name.count("/") != 1 or "" in name.split("/"):
        raise ValueError(f"{where}: cell {name!r} is not '<experiment>/<algorithm>'")
    experiment, algorithm = name.split("/")
    metric, model = cell.get("metric") or "test_acc", cell.get("model")
    if metric not in METRICS:
        raise ValueError(f"{where}.metric: {metric!r} is not one of {METRICS}")
    if model is not None and model not in MODELS:
        raise ValueError(f"{where}.model: {model!r} is not one of {MODELS}")
    return {"experiment": experiment, "algorithm": algorithm, "metric": metric, "model": model}


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: a number, got {value!r}")
    return float(value)


def parse_check(check, where: str) -> dict:
    """The check as {kind, cells, ...}; ValueError naming the offending key."""
    if not isinstance(check, dict) or len(check) != 1 or next(iter(check)) not in CHECKS:
        raise ValueError(f"{where}: one of {CHECKS} as a one-key mapping, got {check!r}")
    kind, args = next(iter(check.items()))
    where = f"{where}.{kind}"
    if kind == "all_of":
        if not isinstance(args, list) or not args:
            raise ValueError(f"{where}: a non-empty list of checks")
        return {"kind": kind, "parts": [parse_check(c, f"{where}[{i}]") for i, c in enumerate(args)]}
    if kind == "recovers_gap":
        if not isinstance(args, dict):
            raise ValueError(f"{where}: a mapping with {sorted(GAP_KEYS)}")
        check_keys(args, GAP_KEYS, "key", where)
        fraction = _number(args["fraction"], f"{where}.fraction")
        if not 0 < fraction <= 1:
            raise ValueError(f"{where}.fraction: in (0, 1], got {fraction!r}")
        cells = {role: parse_cell(args[role], f"{where}.{role}") for role in ("method", "low", "high")}
        return {"kind": kind, "cells": cells, "fraction": fraction}
    if kind in ("below", "above"):
        if not isinstance(args, list) or len(args) != 2:
            raise ValueError(f"{where}: [cell, threshold]")
        return {"kind": kind, "cells": {"value": parse_cell(args[0], f"{where}[0]")},
                "threshold": _number(args[1], f"{where}[1]")}
    if not isinstance(args, list) or len(args) < 2 or (kind == "greater" and len(args) != 2):
        raise ValueError(f"{where}: {'two cells' if kind == 'greater' else 'a list of two or more cells'}")
    return {"kind": kind, "cells": {str(i): parse_cell(c, f"{where}[{i}]") for i, c in enumerate(args)}}


def parse_claims(claims) -> list[dict]:
    if not isinstance(claims, list) or not claims:
        raise ValueError("claims: a non-empty list of {claim, source, check}")
    parsed = []
    for i, claim in enumerate(claims):
        where = f"claims[{i}]"
        if not isinstance(claim, dict):
            raise ValueError(f"{where}: a mapping with {sorted(CLAIM_KEYS)}")
        check_keys(claim, CLAIM_KEYS, "key", where)
        for key in ("claim", "source"):
            if not isinstance(claim[key], str) or not claim[key].strip():
                raise ValueError(f"{where}.{key}: a non-empty string")
        parsed.append({"claim": claim["claim"], "source": claim["source"],
                       "check": parse_check(claim["check"], f"{where}.check")})
    return parsed


def check_cells(check: dict) -> list[dict]:
    if check["kind"] == "all_of":
        return [cell for part in check["parts"] for cell in check_cells(part)]
    return list(check["cells"].values())


def referenced(claims) -> tuple[list[str], list[str]]:
    """The experiments and the algorithms the claims read, in order of first mention."""
    cells = [cell for claim in parse_claims(claims) for cell in check_cells(claim["check"])]
    return list(dict.fromkeys(c["experiment"] for c in cells)), list(dict.fromkeys(c["algorithm"] for c in cells))


def validate(report: dict, config: dict) -> None:
    """Every cell names an experiment of the config and an algorithm that experiment runs."""
    for key in ("experiments", "algorithms"):
        if report.get(key):
            raise ValueError(f"{key}: kind 'claims' reads the experiments and algorithms its claims name; "
                             f"do not list them")
    if report.get("model") not in MODELS:
        raise ValueError(f"model: {report.get('model')!r} is not one of {MODELS}")
    last_n = report.get("last_n")
    if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
        raise ValueError(f"last_n: a positive integer, got {last_n!r}")
    for i, claim in enumerate(parse_claims(report["claims"])):
        for cell in check_cells(claim["check"]):
            experiment, algorithm = cell["experiment"], cell["algorithm"]
            if experiment not in config["experiments"]:
                raise ValueError(f"claims[{i}]: experiment {experiment!r} is not defined under 'experiments'")
            if algorithm not in config["experiments"][experiment]["algorithms"]:
                raise ValueError(f"claims[{i}]: experiment {experiment!r} does not run algorithm {algorithm!r}")


# ---------------------------------------------------------------- evaluation over the runs


def _cell_values(runs, report, cell: dict) -> tuple:
    """(per-seed values, rounds) of a cell."""
    import numpy as np

    from fedavail.report.runs import arbitrary_ratio, window_mean

    training = report.experiments[cell["experiment"]]["training"]
    rounds = int(training["rounds"])
    last_n = int(report.settings.get("last_n") or training["last_n"])
    model = cell["model"] or report.settings["model"]
    values = []
    for _, run in runs.run(cell["experiment"], cell["algorithm"]).groupby("seed"):
        metric = cell["metric"]
        if metric == "snapshot_share":
            values.append(1.0 - arbitrary_ratio(run))
            continue
        local = f"{metric}_local_mean"
        if model == "local_mean" and local in run and run[local].notna().any():
            metric = local
        values.append(window_mean(run, metric, last_n, rounds))
    return np.asarray(values, dtype=float), rounds


def _stats(values) -> dict:
    import numpy as np

    finite = values[np.isfinite(values)]
    complete = len(finite) == len(values) and len(values) > 0
    return {"mean": float(finite.mean()) if complete else float("nan"),
            "std": float(finite.std(ddof=0)) if complete else float("nan"), "seeds": len(values)}


def _judge(difference: float, spread: float) -> str:
    if difference != difference or spread != spread:
        return NOT_RESOLVED
    if difference > spread:
        return HOLDS
    if difference < -spread:
        return FAILS
    return NOT_RESOLVED


def _combine(verdicts: list[str]) -> str:
    if FAILS in verdicts:
        return FAILS
    return HOLDS if all(v == HOLDS for v in verdicts) else NOT_RESOLVED


def _show(value: float, metric: str) -> str:
    if value != value:
        return "—"
    return f"{value:.3g}" if metric == "consensus_error" else f"{100 * value:.1f}"


def _unit(metric: str) -> str:
    return "" if metric == "consensus_error" else " points"


class _Evaluation:
    """The numbers of one claim: every cell's statistics and every comparison's difference and spread."""

    def __init__(self, runs, report):
        self.runs, self.report = runs, report
        self.cells, self.comparisons = {}, []  # cells by (experiment, algorithm, metric, model), lettered A, B, ...

    def cell(self, cell: dict) -> dict:
        key = (cell["experiment"], cell["algorithm"], cell["metric"], cell["model"])
        if key not in self.cells:
            values, rounds = _cell_values(self.runs, self.report, cell)
            self.cells[key] = {**cell, **_stats(values), "rounds": rounds, "letter": chr(ord("A") + len(self.cells))}
        return self.cells[key]

    def compare(self, difference: float, cells: list[dict], what: str, metric: str) -> str:
        spread = max(c["std"] for c in cells)
        seeds = min(c["seeds"] for c in cells)
        verdict = _judge(difference, spread)
        self.comparisons.append({"what": what, "difference": difference, "spread": spread, "seeds": seeds,
                                 "metric": metric, "verdict": verdict})
        return verdict

    def run(self, check: dict) -> str:
        kind = check["kind"]
        if kind == "all_of":
            return _combine([self.run(part) for part in check["parts"]])
        cells = {role: self.cell(c) for role, c in check["cells"].items()}
        if kind == "greater":
            a, b = cells["0"], cells["1"]
            return self.compare(a["mean"] - b["mean"], [a, b], f"{a['letter']} − {b['letter']}", a["metric"])
        if kind == "decreasing":
            ordered = [cells[str(i)] for i in range(len(cells))]
            return _combine([self.compare(a["mean"] - b["mean"], [a, b], f"{a['letter']} − {b['letter']}",
                                          a["metric"]) for a, b in zip(ordered, ordered[1:])])
        if kind in ("below", "above"):
            value = cells["value"]
            threshold = _show(check["threshold"], value["metric"])
            if kind == "above":
                return self.compare(value["mean"] - check["threshold"], [value], f"{value['letter']} − {threshold}",
                                    value["metric"])
            return self.compare(check["threshold"] - value["mean"], [value], f"{threshold} − {value['letter']}",
                                value["metric"])
        method, low, high = cells["method"], cells["low"], cells["high"]
        parts = [method, low, high]
        gap = high["mean"] - low["mean"]
        gap_verdict = self.compare(gap, parts, f"gap {high['letter']} − {low['letter']}", low["metric"])
        share = (method["mean"] - low["mean"]) / gap if gap == gap and gap != 0 else float("nan")
        self.comparisons[-1]["recovered_share"] = share
        fraction = f"{check['fraction']:g}"
        recovered = self.compare(method["mean"] - low["mean"] - check["fraction"] * gap, parts,
                                 f"{method['letter']} − {low['letter']} − {fraction} × gap", low["metric"])
        # Without a gap beyond the spread there is nothing to recover: the claim is not resolved.
        return recovered if gap_verdict == HOLDS else NOT_RESOLVED

    def name(self, cell: dict) -> str:
        metric = "" if cell["metric"] == "test_acc" else f" {cell['metric']}"
        model = {"global": ", server model", "local_mean": ", mean of local copies", None: ""}[cell["model"]]
        return f"{self.report.label(cell['algorithm'])}{model}{metric} @ {cell['experiment']}"

    def numbers(self) -> str:
        shown = []
        for c in self.cells.values():
            mean, std = _show(c["mean"], c["metric"]), _show(c["std"], c["metric"])
            shown.append(f"{c['letter']} = {self.name(c)}: {mean} ± {std} ({c['seeds']} seed{'s' * (c['seeds'] != 1)}, "
                         f"{c['rounds']} rounds)")
        for comparison in self.comparisons:
            metric = comparison["metric"]
            difference = comparison["difference"]
            sign = "+" if difference == difference and difference >= 0 else ""
            text = f"{comparison['what']} = {sign}{_show(difference, metric)}{_unit(metric)}"
            if comparison["seeds"] > 1:
                text += f" (spread {_show(comparison['spread'], metric)})"
            if "recovered_share" in comparison and comparison["recovered_share"] == comparison["recovered_share"]:
                text += f", {100 * comparison['recovered_share']:.0f}% of it recovered"
            shown.append(text)
        return "; ".join(shown)


def claims_table(spec: dict, runs) -> tuple:
    """claim | source | our numbers | verdict, one row per claim, and the same as CSV rows."""
    import pandas as pd

    from fedavail.report.render import TextTable
    from fedavail.report.tables import Report

    report = Report(spec)
    description = ("Each paper claim checked on our runs: the numbers are mean ± std over seeds of each cell "
                   "(accuracies in %, over each run's last evaluated rounds), then the difference the claim is "
                   f"about. {VERDICT_RULE}")
    table = TextTable(report.title(), description, ["claim", "source", "our numbers", "verdict"])
    records = []
    for claim in parse_claims(report.settings["claims"]):
        evaluation = _Evaluation(runs, report)
        verdict = evaluation.run(claim["check"])
        single = bool(evaluation.cells) and max(c["seeds"] for c in evaluation.cells.values()) == 1
        shown = f"{verdict} (1 seed)" if single and verdict != NOT_RESOLVED else verdict
        numbers = evaluation.numbers()
        table.rows.append([claim["claim"], claim["source"], numbers, shown])
        records.append({"claim": claim["claim"], "source": claim["source"], "verdict": verdict,
                        "single_seed": single, "numbers": numbers,
                        "differences": ";".join(f"{c['difference']:.6g}" for c in evaluation.comparisons),
                        "spreads": ";".join(f"{c['spread']:.6g}" for c in evaluation.comparisons)})
    frame = pd.DataFrame(records)
    return table, frame, None
