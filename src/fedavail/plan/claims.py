"""The `claims` report kind's claims, parsed: each paper claim as a declarative check over cells of the runs.

    claims:
      - claim: "FedSWE (k = 100) beats FedAvg over active clients under sine availability"
        source: "FedSWE Table 2"
        check: {greater: [mnist5k_sine/fedswe_k100, mnist5k_sine/fedavg_active]}

A cell is "<experiment>/<algorithm>", or a mapping {cell: "<experiment>/<algorithm>", metric: ..., model: ...}.
metric: test_acc (default), train_acc, consensus_error (each run's mean over its last `last_n` rounds) or
snapshot_share (the share of FAST snapshot rounds, 1 − FAST's Ratio). model: local_mean (the mean of the clients'
local copies, for algorithms that keep them) or global (the server model); by default the report's `model`.

Checks (thresholds in the metric's own units, accuracies and shares as fractions):
  greater: [a, b]                                mean(a) > mean(b)
  recovers_gap: {method, low, high, fraction}    method − low ≥ fraction · (high − low), with high − low > 0
  below: [a, threshold]  /  above: [a, threshold]
  decreasing: [a, b, c, ...]                     each mean below the previous
  all_of: [check, check, ...]                    every one of them
"""

from fedavail.specs import REQUIRED, check_keys

CLAIM_KEYS = {"claim": REQUIRED, "source": REQUIRED, "check": REQUIRED}
CELL_KEYS = {"cell": REQUIRED, "metric": None, "model": None}
METRICS = ("test_acc", "train_acc", "consensus_error", "snapshot_share")
MODELS = ("local_mean", "global")
CHECKS = ("greater", "recovers_gap", "below", "above", "decreasing", "all_of")
GAP_KEYS = {"method": REQUIRED, "low": REQUIRED, "high": REQUIRED, "fraction": REQUIRED}


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


def _gap(args, where: str) -> dict:
    if not isinstance(args, dict):
        raise ValueError(f"{where}: a mapping with {sorted(GAP_KEYS)}")
    check_keys(args, GAP_KEYS, "key", where)
    fraction = _number(args["fraction"], f"{where}.fraction")
    if not 0 < fraction <= 1:
        raise ValueError(f"{where}.fraction: in (0, 1], got {fraction!r}")
    cells = {role: parse_cell(args[role], f"{where}.{role}") for role in ("method", "low", "high")}
    return {"kind": "recovers_gap", "cells": cells, "fraction": fraction}


def _threshold(kind: str, args, where: str) -> dict:
    if not isinstance(args, list) or len(args) != 2:
        raise ValueError(f"{where}: [cell, threshold]")
    return {"kind": kind, "cells": {"value": parse_cell(args[0], f"{where}[0]")},
            "threshold": _number(args[1], f"{where}[1]")}


def _ordered(kind: str, args, where: str) -> dict:
    if not isinstance(args, list) or len(args) < 2 or (kind == "greater" and len(args) != 2):
        raise ValueError(f"{where}: {'two cells' if kind == 'greater' else 'a list of two or more cells'}")
    return {"kind": kind, "cells": {str(i): parse_cell(c, f"{where}[{i}]") for i, c in enumerate(args)}}


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
        return _gap(args, where)
    if kind in ("below", "above"):
        return _threshold(kind, args, where)
    return _ordered(kind, args, where)


def parse_claims(claims, where: str = "claims") -> list[dict]:
    if not isinstance(claims, list) or not claims:
        raise ValueError(f"{where}: a non-empty list of {{claim, source, check}}")
    parsed = []
    for i, claim in enumerate(claims):
        at = f"{where}[{i}]"
        if not isinstance(claim, dict):
            raise ValueError(f"{at}: a mapping with {sorted(CLAIM_KEYS)}")
        check_keys(claim, CLAIM_KEYS, "key", at)
        for key in ("claim", "source"):
            if not isinstance(claim[key], str) or not claim[key].strip():
                raise ValueError(f"{at}.{key}: a non-empty string")
        parsed.append({"claim": claim["claim"], "source": claim["source"],
                       "check": parse_check(claim["check"], f"{at}.check")})
    return parsed


def check_cells(check: dict) -> list[dict]:
    if check["kind"] == "all_of":
        return [cell for part in check["parts"] for cell in check_cells(part)]
    return list(check["cells"].values())


def referenced(claims) -> tuple[list[str], list[str]]:
    """The experiments and the algorithms the claims read, in order of first mention."""
    cells = [cell for claim in parse_claims(claims) for cell in check_cells(claim["check"])]
    return list(dict.fromkeys(c["experiment"] for c in cells)), list(dict.fromkeys(c["algorithm"] for c in cells))
