"""The `claims` report kind: each claim (parsed by fedavail.plan.claim_parsing) with our numbers, the paired
statistics of every comparison it makes, the paper's own numbers where published, and a verdict (VERDICT_RULE; the
rule in full: docs/configuration.md, "Reports"). all_of, decreasing and peak hold when every part holds, fail when
any part fails, and show no difference when a part does (the claimed order is then a tie); a seed without a finite
value in a cell (a diverged run, a metric not logged) leaves it not resolved. Times to a target are censored (a run that
never reaches it counts as needing more than its final device time) and compared by a paired sign test
(fedavail.report.censored), never over the seeds that reach it alone."""

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from fedavail.plan.claim_parsing import parse_claims
from fedavail.report import BUILDERS
from fedavail.report import frame as tidy
from fedavail.report.censored import ALPHA, sign_test, time_bounds
from fedavail.report.compare import paper_values, published_cells
from fedavail.report.render import TextTable
from fedavail.report.tables import title

HOLDS, FAILS, NO_DIFFERENCE, NOT_RESOLVED = "holds", "fails", "no difference", "not resolved"
DECIDED = (HOLDS, FAILS, NO_DIFFERENCE)
CONFIDENCE = 0.95
# Equivalence within ±margin by two one-sided tests at 5% each: the 90% interval inside the band.
EQUIVALENCE_CONFIDENCE = 0.90
MIN_PAIRS = 3
ACCURACY_METRICS = ("test_acc", "train_acc")
TIME = "time_to_target"
VERDICT_RULE = ("Every comparison is of per-seed differences, paired by seed (a seed gives every algorithm the same "
                "partition, trace and initial model); [low, high] is their 95% Student-t confidence interval over n "
                "pairs. A comparison holds when the interval lies entirely on the claimed side of its bound (0, or "
                "−margin for non-inferiority), fails when it lies entirely on the other side; an accuracy comparison "
                "that does neither shows no difference when its 90% interval lies inside ±margin (two one-sided "
                "tests at the 5% level; an `equivalent` claim holds so, and fails when its 95% interval lies beyond "
                f"the band); anything else is not resolved. Fewer than {MIN_PAIRS} pairs give no verdict. A claim "
                "about final accuracy is not "
                "resolved while a cell it reads is still improving at the end of its run (its last window's mean "
                "against the window before, same interval, beyond the plateau tolerance). A time to a target is "
                "censored where a run never reaches the target (more than its final device time, by an unknown "
                "amount): times are compared by a paired sign test in which a pair counts on one side of the bound "
                "only when no censored time could reverse it and an open pair counts against the claim; a "
                f"comparison holds (fails) when that side's one-sided p ≤ {ALPHA:g}, which takes 6 pairs or more.")


class Interval(NamedTuple):
    """A paired mean difference and its confidence interval over `pairs` seeds (NaN bounds below 2 pairs)."""

    mean: float
    low: float
    high: float
    pairs: int


def paired_interval(differences, confidence: float = CONFIDENCE) -> Interval:
    """Student-t interval of the mean of per-seed differences."""
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def judge(interval: Interval, bound: float = 0.0) -> tuple[str, str]:
    """(verdict, reason) for the claim "the mean difference is above `bound`"."""
    if interval.pairs < MIN_PAIRS:
        return NOT_RESOLVED, f"needs ≥ {MIN_PAIRS} seeds"
    if interval.low > bound:
        return HOLDS, ""
    if interval.high < bound:
        return FAILS, ""
    return NOT_RESOLVED, "the interval contains the bound"


def judge_equivalence(interval: Interval, tight: Interval, margin: float) -> tuple[str, str]:
    """(verdict, reason) for the claim "the mean difference lies within ±margin": `tight` is the 90% interval of the
    same differences, `interval` the 95% one."""
    if interval.pairs < MIN_PAIRS:
        return NOT_RESOLVED, f"needs ≥ {MIN_PAIRS} seeds"
    if -margin < tight.low and tight.high < margin:
        return HOLDS, ""
    if interval.low > margin or interval.high < -margin:
        return FAILS, ""
    return NOT_RESOLVED, "the interval is neither inside nor beyond the band"


def _combine(verdicts: list[str]) -> str:
    if FAILS in verdicts or NO_DIFFERENCE in verdicts:
        return FAILS if FAILS in verdicts else NO_DIFFERENCE
    return HOLDS if all(v == HOLDS for v in verdicts) else NOT_RESOLVED


def _show(value: float, metric: str, signed: bool = False, unit: bool = False) -> str:
    """Accuracies (fractions) in percentage points (`unit`: followed by " points"), times to a target in hours of
    virtual time, the consensus error as it is."""
    sign = "+" if signed else ""
    if metric == "time_to_target":
        return ("—" if value != value else f"{value / 3600:{sign}.2f}") + (" h" if unit or not signed else "")
    points = metric != "consensus_error"
    text = "—" if value != value else f"{100 * value:{sign}.1f}" if points else f"{value:{sign}.3g}"
    return text + (" points" if unit and points else "")


def window_gain(run: pd.DataFrame, column: str, window: int) -> pd.Series:
    """Per seed: mean of `column` over the evaluated rounds of the last `window` rounds minus its mean over the
    `window` rounds before (NaN where either window has no evaluation)."""
    rounds = run["rounds"]
    last = run[column].where(run["round"] >= rounds - window)
    before = run[column].where((run["round"] >= rounds - 2 * window) & (run["round"] < rounds - window))
    return last.groupby(run["seed"]).mean() - before.groupby(run["seed"]).mean()


class _Evaluation:
    """The numbers of one claim: every cell's per-seed values and every comparison's paired interval."""

    def __init__(self, frame: pd.DataFrame, job: dict):
        self.frame, self.job, self.report = frame, job, job["report"]
        self.cells, self.comparisons, self.problems = {}, [], []  # cells by (experiment, algorithm, metric, model)

    def cell(self, cell: dict) -> dict:
        key = (cell["experiment"], cell["algorithm"], cell["metric"], cell["model"], cell["target"])
        if key in self.cells:
            return self.cells[key]
        run = self.frame[(self.frame["experiment"] == cell["experiment"])
                         & (self.frame["algorithm"] == cell["algorithm"])]
        rounds = int(self.job["experiments"][cell["experiment"]]["training"]["rounds"])
        if cell["metric"] == "snapshot_share":
            per_run = tidy.arbitrary_ratio(run).assign(value=lambda v: 1.0 - v["value"])
            column = None
        else:  # the local copies' mean where asked for and logged
            scored = "test_acc" if cell["metric"] == "time_to_target" else cell["metric"]
            local = f"{scored}_local_mean"
            logged = local in run and run[local].notna().any()
            column = local if (cell["model"] or self.report["model"]) == "local_mean" and logged else scored
            per_run = tidy.time_to_target(run, column, cell["target"]) if cell["metric"] == "time_to_target" \
                else tidy.window_mean(run, column, self.report["last_n"])
        values = per_run.set_index("seed")["value"].astype(float).sort_index()
        # A time's bounds: [its time, its time] where the run reaches the target, else (final time, ∞)
        low, high = time_bounds(values, per_run.set_index("seed")["reached"].sort_index()) \
            if cell["metric"] == TIME else (values, values)
        observed = values[high == low]
        entry = {**cell, "values": values, "low": low, "high": high, "rounds": rounds,
                 "letter": chr(ord("A") + len(self.cells)), "column": column,
                 "identity": run["identity"].iloc[0] if len(run) else cell["algorithm"],
                 "attributes": run.iloc[0] if len(run) else None, "mean": float(observed.mean()),
                 "std": float(observed.std(ddof=0)), "reached": len(observed)}
        missing = values.index[~np.isfinite(values.to_numpy())].tolist()
        if missing or values.empty:
            self.problems.append(f"no value for seed {', '.join(map(str, missing)) or '—'} of {entry['letter']}")
        if column is not None and cell["metric"] in ACCURACY_METRICS:
            window = max(int(self.report["last_n"] or run["last_n"].iloc[0]),
                         math.ceil(self.report["plateau_window"] * rounds))
            gain = paired_interval(window_gain(run, column, window).dropna().to_numpy())
            if judge(gain, self.report["plateau_tolerance"])[0] == HOLDS:
                mean, low, high = (_show(v, cell["metric"], True) for v in (gain.mean, gain.low, gain.high))
                self.problems.append(f"still improving at round {rounds} ({entry['letter']}: {mean} points over its "
                                     f"last {window} rounds, [{low}, {high}])")
        self.cells[key] = entry
        return entry

    def compare(self, differences: pd.Series, what: str, metric: str, bound: float = 0.0,
                two_cells: bool = False, equivalence: bool = False, upper: pd.Series | None = None) -> str:
        """The verdict of one comparison: the mean of `differences` above `bound`; a comparison of two cells'
        accuracies may instead show no difference; `equivalence` claims the difference lies within the margin. Times
        to a target: `differences` and `upper` bound each pair's difference, compared by the sign test."""
        if metric == TIME:
            return self._compare_times(differences, upper, what, bound, equivalence)
        finite = differences[np.isfinite(differences.to_numpy(dtype=float))].to_numpy()
        interval = paired_interval(finite)
        comparison = {"what": what, "interval": interval, "metric": metric, "equivalence": equivalence}
        margin = self.report["equivalence_margin"]
        if (two_cells or equivalence) and metric in ACCURACY_METRICS:
            comparison["tight"] = tight = paired_interval(finite, EQUIVALENCE_CONFIDENCE)
            ties = judge_equivalence(interval, tight, margin)
        if equivalence:
            verdict, reason = ties if metric in ACCURACY_METRICS else (NOT_RESOLVED, "an accuracy is needed")
        else:
            verdict, reason = judge(interval, bound)
            if verdict == NOT_RESOLVED and "tight" in comparison and ties[0] == HOLDS:
                verdict, reason = NO_DIFFERENCE, f"within ±{_show(margin, metric, unit=True)}"
        self.comparisons.append({**comparison, "verdict": verdict, "reason": reason})
        return verdict

    def _compare_times(self, low: pd.Series, high: pd.Series | None, what: str, bound: float,
                       equivalence: bool) -> str:
        """A comparison of censored times: pairs whose difference lies in [low, high] against `bound`."""
        comparison = {"what": what, "metric": TIME, "equivalence": equivalence, "bound": bound}
        if equivalence or high is None:
            reason = "an accuracy is needed" if equivalence else \
                "times to a target are compared in pairs (greater, decreasing, non_inferior, above, below)"
            self.comparisons.append({**comparison, "interval": Interval(math.nan, math.nan, math.nan, 0),
                                     "verdict": NOT_RESOLVED, "reason": reason})
            return NOT_RESOLVED
        known = low.notna() & high.notna()
        test = sign_test(low[known], high[known], bound)
        verdict = {"above": HOLDS, "below": FAILS, None: NOT_RESOLVED}[test.decided()]
        few = "; deciding takes 6 pairs or more" if test.pairs - test.ties < 6 else ""
        reason = f"needs ≥ {MIN_PAIRS} seeds" if test.pairs < MIN_PAIRS else "" if verdict != NOT_RESOLVED else \
            f"the sign test does not decide (one-sided p {min(test.p_above, test.p_below):.2g} > {ALPHA:g}{few})"
        if test.pairs < MIN_PAIRS:
            verdict = NOT_RESOLVED
        self.comparisons.append({**comparison, "interval": Interval(math.nan, math.nan, math.nan, test.pairs),
                                 "sign": test, "verdict": verdict, "reason": reason})
        return verdict

    @staticmethod
    def _aligned(*cells: dict, key: str = "values") -> list[pd.Series]:
        """The cells' per-seed values (or their `low` or `high` bounds) on their common seeds (pairing across
        experiments too)."""
        joined = pd.concat([c[key] for c in cells], axis=1, join="inner")
        return [joined.iloc[:, i] for i in range(len(cells))]

    def _difference(self, a: dict, b: dict, bound: float = 0.0, note: str = "", **kind) -> str:
        (low_a, low_b), (high_a, high_b) = self._aligned(a, b, key="low"), self._aligned(a, b, key="high")
        return self.compare(low_a - high_b, f"{a['letter']} − {b['letter']}{note}", a["metric"], bound,
                            upper=high_a - low_b, **kind)

    def run(self, check: dict) -> str:
        kind = check["kind"]
        if kind == "all_of":
            return _combine([self.run(part) for part in check["parts"]])
        cells = {role: self.cell(c) for role, c in check["cells"].items()}
        if kind in ("greater", "decreasing", "equivalent"):  # each cell above (or level with) the next
            ordered = list(cells.values())
            return _combine([self._difference(a, b, two_cells=True, equivalence=kind == "equivalent")
                             for a, b in zip(ordered, ordered[1:])])
        if kind == "non_inferior":
            note = f" (margin {_show(check['margin'], cells['method']['metric'], unit=True)})"
            return self._difference(cells["method"], cells["reference"], -check["margin"], note)
        if kind == "peak":
            peak = [cells[i] for i in check["at"]]
            name = peak[0]["letter"] if len(peak) == 1 else f"max({', '.join(p['letter'] for p in peak)})"
            verdicts = []
            for other in (c for i, c in cells.items() if i not in check["at"]):
                *tops, rest = self._aligned(*peak, other)
                best = pd.concat(tops, axis=1).max(axis=1)
                verdicts.append(self.compare(best - rest, f"{name} − {other['letter']}", other["metric"],
                                             two_cells=True))
            return _combine(verdicts)
        if kind in ("below", "above"):
            value, threshold = cells["value"], check["threshold"]
            shown, metric = _show(threshold, value["metric"]), value["metric"]
            if kind == "above":
                return self.compare(value["low"] - threshold, f"{value['letter']} − {shown}", metric,
                                    upper=value["high"] - threshold)
            return self.compare(threshold - value["high"], f"{shown} − {value['letter']}", metric,
                                upper=threshold - value["low"])
        method, low, high = self._aligned(cells["method"], cells["low"], cells["high"])
        letters = {role: cells[role]["letter"] for role in ("method", "low", "high")}
        metric, fraction = cells["low"]["metric"], check["fraction"]
        gap = self.compare(high - low, f"gap {letters['high']} − {letters['low']}", metric)
        recovered = self.compare(method - low - fraction * (high - low),
                                 f"{letters['method']} − {letters['low']} − {fraction:g} × gap", metric)
        share = (method - low).mean() / (high - low).mean() if len(high) and (high - low).mean() else math.nan
        if share == share:
            self.comparisons[-1]["note"] = f", {100 * share:.0f}% of the gap recovered"
        return recovered if gap == HOLDS else NOT_RESOLVED  # without a gap that holds there is nothing to recover

    def name(self, cell: dict) -> str:
        """The cell's algorithm, the model it was scored on (as read: an algorithm without local copies is scored on
        its server model whatever the cell asks) and the experiment."""
        metric = {"test_acc": "", "time_to_target": f" virtual time to {100 * (cell['target'] or 0):g}%"}.get(
            cell["metric"], f" {cell['metric']}")
        scored = "local copies" if str(cell["column"]).endswith("_local_mean") else cell["model"]
        model = {"local copies": ", mean of local copies", "local_mean": ", server model (it keeps no local copies)",
                 "global": ", server model"}.get(scored, "")
        label = self.frame.loc[self.frame["algorithm"] == cell["algorithm"], "label"].iloc[0]
        return f"{label}{model}{metric} @ {cell['experiment']}"

    @staticmethod
    def _seeds(cell: dict) -> str:
        """The cell's seeds; for a time to a target, how many reach it (the mean ± std is theirs)."""
        seeds = f"{len(cell['values'])} seed{'s' * (len(cell['values']) != 1)}"
        return f"{cell['reached']} of {seeds} reach it" if cell["metric"] == TIME else seeds

    def numbers(self) -> str:
        return "; ".join(f"{c['letter']} = {self.name(c)}: {_show(c['mean'], c['metric'])} ± "
                         f"{_show(c['std'], c['metric'])} ({self._seeds(c)}, {c['rounds']} rounds)"
                         for c in self.cells.values())

    def intervals(self) -> str:
        shown = []
        for comparison in self.comparisons:
            metric, interval = comparison["metric"], comparison["interval"]
            if metric == TIME:
                bound = comparison["bound"]
                against = f" {_show(bound, metric, True, True)}" if bound else " 0"
                test = comparison.get("sign")
                shown.append(f"{comparison['what']}: " + (test.describe(f"above{against}", "below") if test
                                                          else comparison["reason"]))
                continue
            bounds = f" [{_show(interval.low, metric, True)}, {_show(interval.high, metric, True)}]"
            tight = comparison.get("tight")  # shown where it decided, or could have decided, an equivalence
            if tight is not None and tight.pairs >= 2 and (comparison["equivalence"]
                                                           or comparison["verdict"] == NO_DIFFERENCE):
                bounds += f" (90%: [{_show(tight.low, metric, True)}, {_show(tight.high, metric, True)}])"
            shown.append(f"{comparison['what']} = {_show(interval.mean, metric, True, True)}"
                         f"{bounds if interval.pairs >= 2 else ''}, n = {interval.pairs}{comparison.get('note', '')}")
        return "; ".join(shown)

    def verdict(self, claim: dict) -> tuple[str, str]:
        verdict = self.run(claim["check"])
        if self.problems:
            return NOT_RESOLVED, "; ".join(self.problems)
        if verdict == NO_DIFFERENCE:
            return verdict, next(c["reason"] for c in self.comparisons if c["verdict"] == NO_DIFFERENCE)
        if verdict != NOT_RESOLVED:
            return verdict, ""
        reasons = [c["reason"] for c in self.comparisons if c["verdict"] == NOT_RESOLVED and c["reason"]]
        return NOT_RESOLVED, next((r for r in reasons if r.startswith("needs")), reasons[0] if reasons else "")

    def paper(self, claim: dict, published: pd.DataFrame) -> str:
        """The paper's own difference for a two-cell comparison, where it publishes both cells."""
        check = claim["check"]
        if check["kind"] not in ("greater", "equivalent", "non_inferior"):
            return "—"
        cells = [self.cell(c) for c in check["cells"].values()]  # evaluated already: read from self.cells
        attributes = cells[0]["attributes"]
        where = claim["paper"] or {k: None if attributes is None else attributes.get(k)
                                   for k in ("dataset", "dynamics", "alpha", "gamma")}
        rows = []
        for cell in cells:  # its first published row with a mean and std; α and γ matched where both sides give them
            key = {"alpha": None, "gamma": None, **where, "identity": cell["identity"], "metric": cell["metric"]}
            found = published_cells(published, key, lenient=True)
            rows.append(next((r for r in found if not (pd.isna(r["mean"]) or pd.isna(r["std"]))), None))
        if any(row is None for row in rows):
            return "—"
        a, b = rows
        difference = a["mean"] - b["mean"]
        within = "within" if abs(difference) <= max(a["std"], b["std"]) else "beyond"
        return (f"{a['source']} ({where['dataset']}, {where['dynamics']}): {a['mean']:.1f} ± {a['std']:.1f} vs "
                f"{b['mean']:.1f} ± {b['std']:.1f}, difference {difference:+.1f} points, {within} its larger std")


@BUILDERS.add("claims")
def claims_table(job: dict, frame: pd.DataFrame) -> tuple:
    """claim | source | our numbers | paired differences | paper | verdict, one row per claim, and the CSV rows."""
    description = ("Each paper claim checked on our runs: mean ± std over seeds of every cell (accuracies in %, "
                   "each run's mean over its last evaluated rounds), then each comparison's paired difference "
                   "[95% CI] (and for two cells' accuracies the 90% CI that decides equivalence within "
                   f"±{_show(job['report']['equivalence_margin'], 'test_acc', unit=True)}), n pairs; where the paper "
                   f"publishes the same cells, its own numbers. {VERDICT_RULE}")
    table = TextTable(title(job), description,
                      ["claim", "source", "our numbers", "paired differences [95% CI]", "paper", "verdict"])
    published = paper_values()
    rows = []
    for claim in parse_claims(job["report"]["claims"]):
        evaluation = _Evaluation(frame, job)
        verdict, reason = evaluation.verdict(claim)
        shown = f"{verdict}: {reason}" if reason else verdict
        if claim["by_construction"]:
            shown += f" (by construction: {claim['by_construction']})"
        numbers, intervals, paper = evaluation.numbers(), evaluation.intervals(), evaluation.paper(claim, published)
        table.rows.append([claim["claim"], claim["source"], numbers, intervals, paper, shown])
        rows.append({"claim": claim["claim"], "source": claim["source"], "verdict": verdict, "reason": reason,
                     "by_construction": claim["by_construction"] or "", "numbers": numbers,
                     "intervals": intervals, "paper": paper,
                     **{column: ";".join(f"{getattr(c['interval'], field):.6g}" for c in evaluation.comparisons)
                        for column, field in (("differences", "mean"), ("lows", "low"), ("highs", "high"),
                                              ("pairs", "pairs"))}})
    verdicts = [r["verdict"] for r in rows if not r["by_construction"]]
    counts = ", ".join(f"{v} {verdicts.count(v)}" for v in (*DECIDED, NOT_RESOLVED) if v in verdicts)
    table.footnotes.append(f"Decided: {sum(v in DECIDED for v in verdicts)} of {len(verdicts)} claims ({counts}).")
    if constructed := [r for r in rows if r["by_construction"]]:
        one = len(constructed) == 1
        table.footnotes.append(f"Not counted: {len(constructed)} claim{'' if one else 's'} that "
                               f"hold{'s' if one else ''} by construction "
                               f"({', '.join(r['verdict'] for r in constructed)}).")
    return table, pd.DataFrame(rows)
