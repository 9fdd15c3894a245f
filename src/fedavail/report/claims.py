"""The `claims` report kind evaluated on the runs: each claim (parsed by fedavail.plan.claims) gets our numbers and a
verdict.

Verdict. Each comparison is a difference D that the claim says is positive, judged against the spread s = the
largest standard deviation over seeds of the cells it involves: holds if D > s, fails if D < −s, otherwise "not
resolved" (a difference within the seeds' spread is no verdict). With a single seed there is no spread: the verdict
is the sign of D, marked "1 seed". A cell with a seed without a finite value (a diverged run, a metric the run does
not log) leaves its claim not resolved; so does recovers_gap when high − low is not beyond the spread. all_of and
decreasing hold when every part holds and fail when any part fails."""

import numpy as np
import pandas as pd

from fedavail.plan.claims import parse_claims
from fedavail.report import frame as tidy
from fedavail.report.render import TextTable
from fedavail.report.tables import title

HOLDS, FAILS, NOT_RESOLVED = "holds", "fails", "not resolved"
VERDICT_RULE = ("A claim holds (fails) when the difference it states exceeds (falls below minus) the largest "
                "standard deviation over seeds of the cells it involves; a difference within that spread is not "
                "resolved. With one seed there is no spread and the verdict is the sign of the difference, marked "
                "\"1 seed\".")


def _cell_values(frame: pd.DataFrame, job: dict, cell: dict) -> tuple:
    """(per-seed values, rounds) of a cell."""
    run = frame[(frame["experiment"] == cell["experiment"]) & (frame["algorithm"] == cell["algorithm"])]
    rounds = int(job["experiments"][cell["experiment"]]["training"]["rounds"])
    if cell["metric"] == "snapshot_share":
        return 1.0 - tidy.arbitrary_ratio(run)["value"].to_numpy(float), rounds
    metric, local = cell["metric"], f"{cell['metric']}_local_mean"
    if (cell["model"] or job["report"]["model"]) == "local_mean" and local in run and run[local].notna().any():
        metric = local
    return tidy.window_mean(run, metric, job["report"]["last_n"])["value"].to_numpy(float), rounds


def _stats(values) -> dict:
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

    def __init__(self, frame, job):
        self.frame, self.job = frame, job
        self.cells, self.comparisons = {}, []  # cells by (experiment, algorithm, metric, model), lettered A, B, ...

    def cell(self, cell: dict) -> dict:
        key = (cell["experiment"], cell["algorithm"], cell["metric"], cell["model"])
        if key not in self.cells:
            values, rounds = _cell_values(self.frame, self.job, cell)
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
        label = self.frame.loc[self.frame["algorithm"] == cell["algorithm"], "label"].iloc[0]
        return f"{label}{model}{metric} @ {cell['experiment']}"

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


def claims_table(job: dict, frame: pd.DataFrame) -> tuple:
    """claim | source | our numbers | verdict, one row per claim, and the same as CSV rows."""
    description = ("Each paper claim checked on our runs: the numbers are mean ± std over seeds of each cell "
                   "(accuracies in %, over each run's last evaluated rounds), then the difference the claim is "
                   f"about. {VERDICT_RULE}")
    table = TextTable(title(job), description, ["claim", "source", "our numbers", "verdict"])
    records = []
    for claim in parse_claims(job["report"]["claims"]):
        evaluation = _Evaluation(frame, job)
        verdict = evaluation.run(claim["check"])
        single = bool(evaluation.cells) and max(c["seeds"] for c in evaluation.cells.values()) == 1
        shown = f"{verdict} (1 seed)" if single and verdict != NOT_RESOLVED else verdict
        numbers = evaluation.numbers()
        table.rows.append([claim["claim"], claim["source"], numbers, shown])
        records.append({"claim": claim["claim"], "source": claim["source"], "verdict": verdict,
                        "single_seed": single, "numbers": numbers,
                        "differences": ";".join(f"{c['difference']:.6g}" for c in evaluation.comparisons),
                        "spreads": ";".join(f"{c['spread']:.6g}" for c in evaluation.comparisons)})
    return table, pd.DataFrame(records)
