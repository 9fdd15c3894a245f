"""Algorithm identities for the reports: a config names algorithms freely (`fedavg_active`, `swe100`, ...);
`canonical(run)` names a run by what it runs (e.g. `fedswe_k0`: FedAWE, `fast_ada1`, `fastplus_scaffold_q0.5`), so a
reproduced cell is matched with a published one whatever the config calls it. Group 2 (FedSWE Table 2): MIFA,
FedVARP (O(md) memory) and FedAvg with known p_i^t; the paper boldfaces the best of group 1 only."""

MEMORY_OR_KNOWN = ("mifa", "fedvarp", "fedavg_known")

_DISPLAY = {"fedavg_active": "FedAvg over active", "fedavg_all": "FedAvg over all",
            "fedavg_known": "FedAvg with known p_i^t", "gfedavg": "gFedAvg", "fedau": "FedAU", "f3ast": "F3AST",
            "mifa": "MIFA (memory aided)", "fedvarp": "FedVARP (memory aided)", "fedprox": "FedProx",
            "scaffold": "SCAFFOLD"}


def canonical(run) -> str:
    """The paper identity of a run from its resolved settings (the frame's algorithm_name and `algorithm.*`)."""
    name = run["algorithm_name"]
    option = lambda key: run[f"algorithm.{key}"]  # noqa: E731
    number = lambda key: f"{float(option(key)):g}"  # noqa: E731
    if name == "fedavg":
        return f"fedavg_{option('weighting')}"
    if name == "fedswe":
        return f"fedswe_k{number('k')}"
    if name == "fast":
        schedule = option("schedule")
        tail = (f"ada{number('lam')}" if schedule == "adaptive" else
                f"I{int(option('interval'))}" if schedule == "every" else f"q{number('q')}")
        return f"fast_{tail}" if option("base") == "fedavg" else f"fastplus_{option('base')}_{tail}"
    return name


def display(identity: str) -> str:
    """A readable label for a canonical identity ("fedswe_k100" -> "FedSWE (k = 100)")."""
    if identity in _DISPLAY:
        return _DISPLAY[identity]
    if identity.startswith("fedswe_k"):
        return f"FedSWE (k = {identity[len('fedswe_k'):]})"
    if identity.startswith(("fast_", "fastplus_")):
        parts = identity.split("_")
        name = "FAST" if parts[0] == "fast" else f"FAST+ ({_DISPLAY.get(parts[1], parts[1])})"
        tail = parts[-1]
        if tail.startswith("ada"):
            return f"{name} Ada.({'def.' if tail == 'ada1' else tail[3:]})"
        return f"{name} {'q' if tail.startswith('q') else 'I'} = {tail[1:]}"
    return identity


def group(identity: str) -> int:
    """1 = not aided by memory or known statistics, 2 = memory or known statistics (FedSWE Table 2)."""
    return 2 if identity in MEMORY_OR_KNOWN else 1
