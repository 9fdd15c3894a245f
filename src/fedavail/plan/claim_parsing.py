"""The `claims` report kind's claims parsed: each paper claim a declarative check over cells
"<experiment>/<algorithm>" of the runs (docs/configuration.md, "Reports"; evaluated by fedavail.report.claims)."""

from fedavail.options import REQUIRED, check_keys

# by_construction: why the claim holds by construction (an order the update rule guarantees, a share a schedule caps):
# it is still checked and shown, and left out of the share of claims decided.
CLAIM_KEYS = {"claim": REQUIRED, "source": REQUIRED, "check": REQUIRED, "paper": None, "by_construction": None}
PAPER_KEYS = {"dataset": REQUIRED, "dynamics": REQUIRED, "alpha": None, "gamma": None}
CELL_KEYS = {"cell": REQUIRED, "metric": None, "model": None, "target": None}
# time_to_target: the virtual seconds to the first evaluation at or above the cell's `target` accuracy (a trace's clock)
METRICS = ("test_acc", "train_acc", "consensus_error", "snapshot_share", "time_to_target")
MODELS = ("local_mean", "global")
CHECKS = ("greater", "equivalent", "non_inferior", "recovers_gap", "below", "above", "decreasing", "peak", "all_of")
TWO_CELLS = ("greater", "equivalent")
PEAK_KEYS = {"sweep": REQUIRED, "at": REQUIRED}
COMPARED = {  # kind -> its keys with their defaults, its cells, its number and that number's bounds
    "recovers_gap": ({"method": REQUIRED, "low": REQUIRED, "high": REQUIRED, "fraction": REQUIRED},
                     ("method", "low", "high"), "fraction", (lambda v: 0 < v <= 1, "in (0, 1]")),
    "non_inferior": ({"method": REQUIRED, "reference": REQUIRED, "margin": 0.01}, ("method", "reference"), "margin",
                     (lambda v: v >= 0, ">= 0"))}


def parse_cell(cell, where: str) -> dict:
    """{experiment, algorithm, metric, model} of a cell; ValueError naming `where` if it is malformed."""
    cell = {"cell": cell} if isinstance(cell, str) else cell
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
    target = cell.get("target")
    if (metric == "time_to_target") != (target is not None):
        raise ValueError(f"{where}.target: an accuracy target goes with, and only with, metric time_to_target")
    if target is not None and not (_number(target, f"{where}.target") and 0 < target <= 1):
        raise ValueError(f"{where}.target: an accuracy in (0, 1], got {target!r}")
    return {"experiment": experiment, "algorithm": algorithm, "metric": metric, "model": model, "target": target}


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: a number, got {value!r}")
    return float(value)


def _mapping(args, keys: dict, where: str) -> None:
    if not isinstance(args, dict):
        raise ValueError(f"{where}: a mapping with {sorted(keys)}")
    check_keys(args, keys, "key", where)


def _compared(kind: str, args, where: str) -> dict:
    """recovers_gap and non_inferior: named cells and one number within its bounds."""
    keys, roles, key, (test, must) = COMPARED[kind]
    _mapping(args, keys, where)
    value = _number(args.get(key, keys[key]), f"{where}.{key}")
    if not test(value):
        raise ValueError(f"{where}.{key}: {must}, got {value!r}")
    return {"kind": kind, "cells": {role: parse_cell(args[role], f"{where}.{role}") for role in roles}, key: value}


def _peak(args, where: str) -> dict:
    _mapping(args, PEAK_KEYS, where)
    sweep, at = args["sweep"], args["at"]
    if not isinstance(sweep, list) or len(sweep) < 2:
        raise ValueError(f"{where}.sweep: a list of two or more cells")
    if not isinstance(at, list) or not at:
        raise ValueError(f"{where}.at: a non-empty list of cells of the sweep")
    cells = [parse_cell(c, f"{where}.sweep[{i}]") for i, c in enumerate(sweep)]
    peak = [parse_cell(c, f"{where}.at[{i}]") for i, c in enumerate(at)]
    for i, cell in enumerate(peak):
        if cell not in cells:
            raise ValueError(f"{where}.at[{i}]: {at[i]!r} is not a cell of the sweep")
    if len(peak) == len(cells):
        raise ValueError(f"{where}.at: leaves no cell of the sweep to compare with")
    return {"kind": "peak", "cells": {str(i): c for i, c in enumerate(cells)},
            "at": [str(cells.index(c)) for c in peak]}


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
    if kind in ("below", "above"):
        if not isinstance(args, list) or len(args) != 2:
            raise ValueError(f"{where}: [cell, threshold]")
        return {"kind": kind, "cells": {"value": parse_cell(args[0], f"{where}[0]")},
                "threshold": _number(args[1], f"{where}[1]")}
    if kind in COMPARED:
        return _compared(kind, args, where)
    if kind == "peak":
        return _peak(args, where)
    if not isinstance(args, list) or len(args) < 2 or (kind in TWO_CELLS and len(args) != 2):  # and decreasing
        raise ValueError(f"{where}: {'two cells' if kind in TWO_CELLS else 'a list of two or more cells'}")
    return {"kind": kind, "cells": {str(i): parse_cell(c, f"{where}[{i}]") for i, c in enumerate(args)}}


def parse_claims(claims, where: str = "claims") -> list[dict]:
    if not isinstance(claims, list) or not claims:
        raise ValueError(f"{where}: a non-empty list of {{claim, source, check}}")
    parsed = []
    for i, claim in enumerate(claims):
        at = f"{where}[{i}]"
        _mapping(claim, CLAIM_KEYS, at)
        for key in ("claim", "source", "by_construction"):
            if key in claim and (not isinstance(claim[key], str) or not claim[key].strip()):
                raise ValueError(f"{at}.{key}: a non-empty string")
        check, paper = parse_check(claim["check"], f"{at}.check"), claim.get("paper")
        if paper is not None:
            _mapping(paper, PAPER_KEYS, f"{at}.paper")
            for key in ("alpha", "gamma"):
                if paper.get(key) is not None:
                    _number(paper[key], f"{at}.paper.{key}")
            paper = {key: paper.get(key) for key in PAPER_KEYS}
        parsed.append({"claim": claim["claim"], "source": claim["source"], "check": check, "paper": paper,
                       "by_construction": claim.get("by_construction")})
    return parsed


def check_cells(check: dict) -> list[dict]:
    if check["kind"] == "all_of":
        return [cell for part in check["parts"] for cell in check_cells(part)]
    return list(check["cells"].values())


def referenced(claims) -> tuple[list[str], list[str]]:
    """The experiments and the algorithms the claims read, in order of first mention."""
    cells = [cell for claim in parse_claims(claims) for cell in check_cells(claim["check"])]
    return list(dict.fromkeys(c["experiment"] for c in cells)), list(dict.fromkeys(c["algorithm"] for c in cells))
