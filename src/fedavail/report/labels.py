"""Algorithm identities for the reports: the paper's name for a config's algorithm, its display label and its group.

A config names algorithms freely (`fedavg_active`, `swe100`, ...); the paper tables name them by what they run.
`canonical(run)` maps a run's resolved algorithm settings to that identity, so a reproduced cell can be
matched with a published one whatever the config calls it:

  fedavg weighting active|all|known  -> fedavg_active | fedavg_all | fedavg_known
  fedswe k                           -> fedswe_k<k>            (k = 0 is FedAWE, the paper's "FedSWE (k = 0)")
  fast base fedavg                   -> fast_q<q> | fast_ada<λ> | fast_I<I>     (schedule bernoulli|adaptive|every)
  fast base fedprox|scaffold         -> fastplus_<base>_q<q> | fastplus_<base>_ada<λ> | fastplus_<base>_I<I>
  anything else                      -> its registry name (fedprox, scaffold, mifa, fedvarp, fedau, gfedavg, f3ast)

Groups (FedSWE Table 2): group 1 = algorithms "not aided by memory or known statistics", group 2 = MIFA, FedVARP
(O(md) memory) and FedAvg with known p_i^t (known statistics); the paper boldfaces the best of group 1 only."""

MEMORY_OR_KNOWN = ("mifa", "fedvarp", "fedavg_known")

_DISPLAY = {
    "fedavg_active": "FedAvg over active",
    "fedavg_all": "FedAvg over all",
    "fedavg_known": "FedAvg with known p_i^t",
    "gfedavg": "gFedAvg",
    "fedau": "FedAU",
    "f3ast": "F3AST",
    "mifa": "MIFA (memory aided)",
    "fedvarp": "FedVARP (memory aided)",
    "fedprox": "FedProx",
    "scaffold": "SCAFFOLD",
}


def _number(value) -> str:
    return f"{float(value):g}"


def canonical(run) -> str:
    """The paper identity of a run from its resolved settings (fedavail.report.frame: algorithm_name and
    `algorithm.<hyperparameter>` columns, the algorithm's defaults filled in)."""
    name = run["algorithm_name"]
    option = lambda key: run[f"algorithm.{key}"]  # noqa: E731
    if name == "fedavg":
        return f"fedavg_{option('weighting')}"
    if name == "fedswe":
        return f"fedswe_k{_number(option('k'))}"
    if name == "fast":
        schedule = option("schedule")
        if schedule == "adaptive":
            tail = f"ada{_number(option('lam'))}"
        elif schedule == "every":
            tail = f"I{int(option('interval'))}"
        else:
            tail = f"q{_number(option('q'))}"
        base = option("base")
        return f"fast_{tail}" if base == "fedavg" else f"fastplus_{base}_{tail}"
    return name


def display(identity: str) -> str:
    """A readable label for a canonical identity ("fedswe_k100" -> "FedSWE (k = 100)")."""
    if identity in _DISPLAY:
        return _DISPLAY[identity]
    if identity.startswith("fedswe_k"):
        return f"FedSWE (k = {identity[len('fedswe_k'):]})"
    if identity.startswith("fast_") or identity.startswith("fastplus_"):
        parts = identity.split("_")
        name = "FAST" if parts[0] == "fast" else f"FAST+ ({_DISPLAY.get(parts[1], parts[1])})"
        tail = parts[-1]
        if tail.startswith("ada"):
            value = tail[3:]
            return f"{name} Ada.({'def.' if value == '1' else value})"
        if tail.startswith("q"):
            return f"{name} q = {tail[1:]}"
        return f"{name} I = {tail[1:]}"
    return identity


def group(identity: str) -> int:
    """1 = not aided by memory or known statistics, 2 = memory or known statistics (FedSWE Table 2)."""
    return 2 if identity in MEMORY_OR_KNOWN else 1
