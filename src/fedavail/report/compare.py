"""Published numbers (paper_values.csv, transcribed from FedSWE Tables 2, 7, 8, 9 and the FAST text; accuracies in
percent, Table 7's metrics in rounds, "—" (never reached) an empty mean) beside ours, for the same cell only
(published_cells: the bundled MNIST-5k never matches), with both runs' scale: a short run is no reproduction."""

from importlib import resources

import numpy as np
import pandas as pd

from fedavail.report.render import Cell, TextTable

PAPER_FILE = "paper_values.csv"
COLUMNS = ["experiment", "algorithm", "identity", "dataset", "dynamics", "alpha", "gamma", "metric", "source",
           "paper_mean", "paper_std", "ours_mean", "ours_std", "seeds", "difference", "within_std", "ours_rounds",
           "paper_rounds", "ours_clients", "paper_clients", "note"]


def paper_values() -> pd.DataFrame:
    with resources.files("fedavail.report").joinpath(PAPER_FILE).open() as handle:
        return pd.read_csv(handle)


def published_cells(paper: pd.DataFrame, cell: dict, lenient: bool = False) -> list[dict]:
    """The published rows of a cell (dataset, dynamics, identity, metric, alpha, gamma), in order. α and γ must agree
    where the paper gives them; `lenient`: only where the cell gives them too."""

    def agrees(published, ours) -> bool:  # equal up to float rounding
        return pd.isna(published) or (lenient if pd.isna(ours) else np.isclose(float(published), float(ours)))

    rows = paper[(paper["dataset"] == cell["dataset"]) & (paper["dynamics"] == cell["dynamics"])
                 & (paper["algorithm"] == cell["identity"]) & (paper["metric"] == cell["metric"])]
    return [row for row in rows.to_dict("records")
            if agrees(row["alpha"], cell["alpha"]) and agrees(row["gamma"], cell["gamma"])]


def compare(ours: pd.DataFrame, sources, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Paper and ours side by side for every row of `ours` (a reproduced cell, as tables.cells gives it) that matches
    a published cell; sources are tried in order, the first match wins."""
    paper = paper_values() if paper is None else paper
    paper = paper[paper["source"].isin(sources)]
    rows = []
    for cell in ours.to_dict("records"):
        matches = published_cells(paper, cell)
        if not matches:
            continue
        p = min(matches, key=lambda r: sources.index(r["source"]))
        difference = cell["mean"] - p["mean"] if not (pd.isna(cell["mean"]) or pd.isna(p["mean"])) else np.nan
        within = pd.NA if pd.isna(p["std"]) or pd.isna(difference) else bool(abs(difference) <= p["std"] + 1e-9)
        note = p["note"] if isinstance(p["note"], str) else ""
        if pd.isna(p["mean"]) and pd.isna(cell["mean"]):
            note = (note + "; " if note else "") + "neither reached the target"
        rows.append({**cell, **{f"{who}_{k}": row[k] for who, row in (("ours", cell), ("paper", p))
                                for k in ("mean", "std", "rounds", "clients")},
                     "source": p["source"], "difference": difference, "within_std": within, "note": note})
    return pd.DataFrame(rows, columns=COLUMNS)


def _number(value, decimals: int) -> str:
    return "—" if pd.isna(value) else f"{value:.{decimals}f}"


def comparison_table(result: pd.DataFrame, title: str, labels: dict) -> TextTable:
    description = ("Published values beside ours for every reproduced cell that matches a published one (same "
                   "dataset, dynamics, α, γ where given, algorithm and metric). Accuracies in %; Table 7 metrics in "
                   "rounds (— = never reached). 'within std' = |ours − paper| ≤ the published std.")
    table = TextTable(f"{title}: paper vs ours", description,
                      ["experiment", "algorithm", "metric", "source", "paper", "ours", "ours − paper", "within std",
                       "rounds (ours / paper)", "clients (ours / paper)"])
    if result.empty:
        table.footnotes.append("No reproduced cell matches a published one: cells from other data or settings (e.g. "
                               "the bundled MNIST-5k) are never compared with the papers.")
    for r in result.itertuples(index=False):
        decimals = 0 if r.metric.startswith("rounds_to_") else 2
        paper = _number(r.paper_mean, decimals) + ("" if pd.isna(r.paper_std) else f" ± {r.paper_std:.1f}")
        ours = _number(r.ours_mean, decimals) + ("" if pd.isna(r.ours_std) else f" ± {r.ours_std:.{decimals}f}")
        within = "n/a" if pd.isna(r.within_std) else ("yes" if r.within_std else "no")
        difference = "—" if pd.isna(r.difference) else f"{r.difference:+.{decimals}f}"
        rounds = f"{_number(r.ours_rounds, 0)} / {_number(r.paper_rounds, 0)}"
        clients = f"{_number(r.ours_clients, 0)} / {_number(r.paper_clients, 0)}"
        table.rows.append([r.experiment, labels.get(r.algorithm, r.algorithm), r.metric, r.source, paper,
                           ours, Cell(difference), within, rounds, clients])
    return table
