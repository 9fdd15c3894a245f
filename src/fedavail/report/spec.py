"""Cross-experiment reports declared in a config's `reports:` section: their kinds, validation, defaults, the slice of
the config each report job receives, its output files and its caption.

    reports:
      table2: {kind: fedswe_table, experiments: [svhn_stationary, svhn_sine, ...]}
      fig8:   {kind: k_sweep, experiments: [svhn_two_group], last_n: 500}
      fig2:   {kind: toy_heterogeneity}

Every kind has one output shape (OUTPUTS): "paper_table" kinds write results/tables/<name>.{md,tex,csv} and the
comparison with the published values results/tables/<name>_paper.{md,tex,csv}; "table" kinds and the "claims" kind
(fedavail.report.claims, its own section of the HTML report) only the first three; "figure" kinds
results/figures/<name>.{png,pdf} and the plotted numbers results/figures/<name>.csv.

Experiments are described to the report code by their attributes (`experiment_attributes`: dataset, alpha, dynamics,
gamma, ...), which also key the match with published cells. This module is imported by the Snakefile: it must stay
cheap (no pandas, no plotting)."""

from copy import deepcopy

from fedavail.plan.local import DEFAULT_STEPS
from fedavail.report import claims
from fedavail.specs import REQUIRED, check_keys

# kind -> (output shape, {key: default}); REQUIRED marks keys without a default.
_COMMON = {"kind": REQUIRED, "title": None, "experiments": [], "algorithms": None, "labels": {}}
_ACCURACY = {"last_n": 50, "eval_model": "local_mean", "decimals": 1, "memory_aided": None, "paper": True}
KINDS = {
    "fedswe_table": ("paper_table", {**_ACCURACY, "columns": "dataset", "blocks": "dynamics"}),
    "sweep": ("paper_table", {**_ACCURACY, "parameter": REQUIRED}),
    "rounds_to_target": ("paper_table", {"targets": None, "fractions": [0.25, 0.5, 0.75, 1.0], "sample_every": 20,
                                         "eval_model": "local_mean", "memory_aided": None, "paper": True}),
    "fast_table": ("paper_table", {"last": 5, "decimals": 2, "paper": True}),
    "memory": ("table", {}),
    "curves": ("figure", {"metric": "test_acc", "sample_every": None, "log_y": False,
                          "eval_model": "local_mean"}),
    "consensus": ("figure", {"metric": "consensus_error", "sample_every": None, "log_y": True}),
    "k_sweep": ("figure", {"parameter": "k", "last_n": 500, "target": 0.4, "sample_every": None,
                           "eval_model": "local_mean"}),
    "grid": ("figure", {"x": REQUIRED, "hue": REQUIRED, "last_n": 50, "eval_model": "local_mean"}),
    "fast_ratio": ("figure", {"last": 5}),
    "toy_heterogeneity": ("figure", {"u": [0.0, 100.0], "resolution": 101, "weightings": ["active", "all"]}),
    "claims": ("claims", {"claims": REQUIRED, "last_n": None, "model": "local_mean"}),
    "toy_interpolation": ("figure", {"u": [100.0, -100.0], "k": [0, 1], "rounds": 1000, "local_steps": 10, "lr": 0.001,
                                     "global_lr": 1.0}),
}
TOY_KINDS = ("toy_heterogeneity", "toy_interpolation")
DESCRIPTIONS = {
    "fedswe_table": "train and test accuracy (%), mean ± std over seeds of each run's average over its last {last_n} "
                    "rounds (FedSWE Table 2 style); in every column the best of the algorithms not aided by memory "
                    "or known statistics is bold and the second underlined",
    "sweep": "train and test accuracy (%) against {parameter}, mean ± std over seeds of each run's last-{last_n}-round "
             "average (FedSWE Tables 8 and 9 style); best of the memory-free group bold, second underlined",
    "rounds_to_target": "the first round at which the mean test accuracy over seeds, sampled every {sample_every} "
                        "rounds, reaches each target (FedSWE Table 7 style); — when never reached",
    "fast_table": "test accuracy (%) of the server model, A ± B, the mean and standard deviation of the last {last} "
                  "test accuracies of every seed (FAST style), and Ratio = rounds with arbitrary participation / total "
                  "rounds",
    "memory": "bytes of algorithm state (summary.json state_bytes) per algorithm, with the model dimension d, peak "
              "memory and wall time",
    "curves": "{metric} against the round, mean over seeds with a band of ± one standard deviation (FedSWE Figs. 7 "
              "and 10 style)",
    "consensus": "the consensus error (1/m) Σ_i ‖x_i − x̄‖² on a logarithmic scale, mean over seeds ± one standard "
                 "deviation (FedSWE Fig. 6 style)",
    "k_sweep": "test accuracy averaged over the last {last_n} rounds and the number of rounds to reach "
               "{target_percent}% test accuracy against FedSWE's interpolation coefficient {parameter} "
               "(FedSWE Figs. 8, 9, 11 and 12 style); mean ± std over seeds",
    "grid": "train and test accuracy (%) of each run's last-{last_n}-round average against {x}, one line per {hue} "
            "(FedSWE Fig. 3 style); mean ± std over seeds",
    "fast_ratio": "test accuracy of the server model (mean of the last {last} test accuracies) against Ratio, the "
                  "share of rounds with "
                  "arbitrary participation; algorithms without snapshots sit at Ratio = 100%",
    "claims": "the papers' claims checked on these runs: each claim, its source in the paper, our numbers (mean ± "
              "std over seeds, seeds and rounds of every cell it reads) and its verdict: holds, fails, or not "
              "resolved when the difference it states is within the largest standard deviation over seeds of its "
              "cells (with one seed, the sign of the difference, marked \"1 seed\")",
    "toy_heterogeneity": "Example 1 of FedSWE §4 computed exactly: two clients with F_i(x) = (x − u_i)²/2, u = {u}, "
                         "stationary availability p_1, p_2; the colour is |lim E x^t − x*| of FedAvg (closed form, "
                         "no training)",
    "toy_interpolation": "FedSWE Fig. 5 computed exactly: Algorithm 1 on two scalar clients, u = {u}, client 1 "
                         "available in even rounds only, client 2 in odd rounds only, s = {local_steps} gradient steps "
                         "of size {lr}, η_g = {global_lr}, k ∈ {k}; the global gradient ∇F(x^t) after each "
                         "client's rounds and the consensus error (1/2)Σ(x_i − x̄)² (no training). They settle on "
                         "±|u1 − u2|/2 · g/(k + g) with g = η_g(1 − (1 − η)^s): k = 0 keeps the full bias, k > 0 "
                         "shrinks it",
}
EVAL_MODELS = ("global", "local_mean")
# What each eval_model scores, for captions (fedavail.report.scored_model applies it; kept here, as this module must
# not import pandas).
SCORED_MODEL = {
    "local_mean": "Algorithms that keep local copies (FedSWE, FedAWE) are scored by the mean of their clients' local "
                  "models (1/m) Σ_i X_i, as the FedAWE authors' code reports, and their server model x^t follows in "
                  "a second row marked \"server model\"; every other algorithm is scored by its server model",
    "global": "Every algorithm is scored by its server model x^t",
}
ATTRIBUTES = ("experiment", "dataset", "scheme", "alpha", "num_clients", "rounds", "trace_model", "dynamics", "gamma",
              "period", "low", "p", "distribution", "window", "inner")
PAPER_SOURCES = {
    "fedswe_table": ("FedSWE Table 2",),
    "sweep": ("FedSWE Table 8", "FedSWE Table 9", "FedSWE Table 2"),
    "rounds_to_target": ("FedSWE Table 7",),
    "fast_table": ("FAST §5.1",),
}
_TRACE_DEFAULTS = {"period": 20, "gamma": 0.3, "low": 0.4, "window": 100, "inner": "static", "fraction": 0.1}


def shape(kind: str) -> str:
    return KINDS[kind][0]


def with_defaults(report: dict) -> dict:
    keys = {**_COMMON, **KINDS[report["kind"]][1]}
    spec = {**{k: deepcopy(v) for k, v in keys.items() if v != REQUIRED}, **deepcopy(report)}
    if report["kind"] == "claims":  # it reads what its claims name
        spec["experiments"], spec["algorithms"] = claims.referenced(report["claims"])
    return spec


def output_paths(name: str, kind: str) -> dict[str, str]:
    if shape(kind) == "figure":
        return {"png": f"results/figures/{name}.png", "pdf": f"results/figures/{name}.pdf",
                "csv": f"results/figures/{name}.csv"}
    paths = {"md": f"results/tables/{name}.md", "tex": f"results/tables/{name}.tex",
             "csv": f"results/tables/{name}.csv"}
    if shape(kind) == "paper_table":
        paths.update(paper_md=f"results/tables/{name}_paper.md", paper_tex=f"results/tables/{name}_paper.tex",
                     paper_csv=f"results/tables/{name}_paper.csv")
    return paths


def experiment_outputs(experiment: str) -> list[str]:
    """The per-experiment report files (rule report_experiment)."""
    return [f"results/tables/{experiment}.md", f"results/tables/{experiment}.csv",
            f"results/figures/{experiment}_accuracy.png"]


def report_names(config: dict, output_shape: str | None = None) -> list[str]:
    reports = config.get("reports") or {}
    return [n for n, r in reports.items() if output_shape is None or shape(r["kind"]) == output_shape]


# ---------------------------------------------------------------- validation


def validate_report(name: str, report: dict, config: dict) -> None:
    """Raise ValueError naming the offending key of reports.<name>."""
    kind = report.get("kind")
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {sorted(KINDS)}")
    allowed = {**_COMMON, **KINDS[kind][1]}
    check_keys(report, allowed, "key", f"kind {kind!r}")
    if kind == "claims":
        claims.validate({**{k: v for k, v in allowed.items() if v != REQUIRED}, **report}, config)
        return
    spec = with_defaults(report)
    experiments = spec["experiments"]
    if kind in TOY_KINDS:
        if experiments:
            raise ValueError(f"experiments: kind {kind!r} computes its figure exactly and uses no experiments")
        _validate_toy(spec)
        return
    if not experiments:
        raise ValueError(f"experiments: kind {kind!r} needs at least one experiment")
    for experiment in experiments:
        if experiment not in config["experiments"]:
            raise ValueError(f"experiments: {experiment!r} is not defined under 'experiments'")
    if spec["algorithms"] is not None:
        offered = {a for e in experiments for a in config["experiments"][e]["algorithms"]}
        for algorithm in spec["algorithms"]:
            if algorithm not in offered:
                raise ValueError(f"algorithms: {algorithm!r} is run by none of the report's experiments")
    if not isinstance(spec["labels"], dict):
        raise ValueError("labels: must be a mapping of algorithm name to label")
    if spec.get("memory_aided") is not None and not isinstance(spec["memory_aided"], list):
        raise ValueError("memory_aided: must be a list of algorithm names")
    if spec.get("eval_model", "global") not in EVAL_MODELS:
        raise ValueError(f"eval_model: {spec['eval_model']!r} is not one of {EVAL_MODELS}")
    for key in ("last_n", "last", "sample_every", "decimals"):
        value = spec.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (key != "decimals")):
            raise ValueError(f"{key}: must be a positive integer, got {value!r}")
    for key in ("parameter", "x", "hue", "columns", "blocks"):
        if kind == "k_sweep" and key == "parameter":
            continue
        value = spec.get(key)
        if value is not None and value not in ATTRIBUTES:
            raise ValueError(f"{key}: {value!r} is not an experiment attribute; known: {ATTRIBUTES}")
    layout = {"fedswe_table": ("blocks", "columns"), "sweep": ("parameter",), "grid": ("x", "hue")}.get(kind, ())
    placed = {}
    for experiment in experiments:
        attributes = experiment_attributes(config, experiment)
        position = []
        for key in layout:
            attribute = spec[key]
            if attribute is None:
                continue
            if attributes[attribute] is None:
                raise ValueError(f"{key}: experiment {experiment!r} has no {attribute!r}")
            position.append(attributes[attribute])
        if layout:
            position = tuple(position)
            if position in placed:
                raise ValueError(f"experiments: {placed[position]!r} and {experiment!r} land in the same cell "
                                 f"({', '.join(f'{spec[k]} = {v}' for k, v in zip(layout, position))})")
            placed[position] = experiment
    if kind == "k_sweep":
        _validate_k_sweep(spec, config)
    if kind == "rounds_to_target":
        _validate_targets(spec)
    if kind == "grid" and spec["x"] == spec["hue"]:
        raise ValueError("hue: must differ from x")
    if kind == "k_sweep" and not 0 < spec["target"] <= 1:
        raise ValueError(f"target: an accuracy in (0, 1], got {spec['target']!r}")


def _validate_k_sweep(spec: dict, config: dict) -> None:
    parameter = spec["parameter"]
    for experiment in spec["experiments"]:
        for algorithm in selected_algorithms(config, spec, experiment):
            algorithm_spec = config["algorithms"][algorithm]
            if parameter not in algorithm_spec and algorithm_spec["algorithm"] != "fedswe":
                raise ValueError(f"parameter: algorithm {algorithm!r} has no hyperparameter {parameter!r}; "
                                 "list the swept algorithms under 'algorithms'")


def _validate_targets(spec: dict) -> None:
    targets = spec["targets"]
    lists = [] if targets is None else list(targets.values()) if isinstance(targets, dict) else [targets]
    if isinstance(targets, dict):
        extra = sorted(set(targets) - set(spec["experiments"]))
        if extra:
            raise ValueError(f"targets: {extra[0]!r} is not one of the report's experiments")
    for values in [*lists, spec["fractions"]]:
        if not isinstance(values, list) or not values or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1 for v in values):
            raise ValueError(f"targets: accuracies in (0, 1] as a list (or a mapping experiment -> list), got "
                             f"{values!r}")


def _validate_toy(spec: dict) -> None:
    u = spec["u"]
    if not isinstance(u, list) or len(u) != 2 or not all(isinstance(v, (int, float)) for v in u):
        raise ValueError(f"u: two numbers, got {u!r}")
    if spec["kind"] == "toy_heterogeneity":
        if not isinstance(spec["resolution"], int) or spec["resolution"] < 3:
            raise ValueError(f"resolution: an integer >= 3, got {spec['resolution']!r}")
        if not spec["weightings"] or not set(spec["weightings"]) <= {"active", "all"}:
            raise ValueError(f"weightings: a list of 'active' and/or 'all', got {spec['weightings']!r}")
    else:
        ks = spec["k"]
        if not isinstance(ks, list) or not ks or not all(isinstance(v, (int, float)) and v >= 0 for v in ks):
            raise ValueError(f"k: a list of numbers >= 0, got {ks!r}")
        for key in ("rounds", "local_steps"):
            if not isinstance(spec[key], int) or spec[key] < 1:
                raise ValueError(f"{key}: a positive integer, got {spec[key]!r}")
        for key in ("lr", "global_lr"):
            if not isinstance(spec[key], (int, float)) or spec[key] <= 0:
                raise ValueError(f"{key}: a positive number, got {spec[key]!r}")


def validate_outputs(config: dict) -> None:
    """No two experiments or reports may write the same file."""
    owner = {}
    items = [(f"experiments.{e}", experiment_outputs(e)) for e in config["experiments"]]
    items += [(f"reports.{n}", list(output_paths(n, r["kind"]).values()))
              for n, r in (config.get("reports") or {}).items() if r.get("kind") in KINDS]
    for key, paths in items:
        for path in paths:
            if path in owner:
                raise ValueError(f"{key}: writes {path}, which {owner[path]} writes too; rename one of them")
            owner[path] = key


# ---------------------------------------------------------------- the job's slice


def selected_algorithms(config: dict, report: dict, experiment: str) -> list[str]:
    ran = config["experiments"][experiment]["algorithms"]
    chosen = report.get("algorithms")
    return list(ran) if chosen is None else [a for a in chosen if a in ran]


def experiment_attributes(config: dict, experiment: str) -> dict:
    """What an experiment is, in the terms the tables and the published values use."""
    exp = config["experiments"][experiment]
    partition = config["partitions"][exp["partition"]]
    trace = dict(config["traces"][exp["trace"]])
    if "num_clients" not in trace and trace.get("partition") in config["partitions"]:
        trace["num_clients"] = config["partitions"][trace["partition"]].get("num_clients")
    model = trace["model"]
    dynamics = trace.get("dynamics", "stationary") if model in ("fedswe", "bernoulli") else None
    if model == "fast":
        dynamics = trace.get("distribution")
    elif model in ("markov", "cyclic"):
        dynamics = model
    setting = {**_TRACE_DEFAULTS, **trace}
    uses_period = dynamics in ("staircase", "sine") or (dynamics == "two_group" and setting["inner"] == "staircase")
    return {
        "experiment": experiment,
        "dataset": partition["dataset"],
        "scheme": partition["scheme"],
        "alpha": partition.get("alpha"),
        "num_clients": trace.get("num_clients") or partition.get("num_clients"),
        "rounds": exp["training"]["rounds"],
        "trace_model": model,
        "dynamics": dynamics,
        "gamma": setting["gamma"] if dynamics == "sine" else None,
        "period": setting["period"] if uses_period else None,
        "low": setting["low"] if uses_period and dynamics != "sine" else None,
        "p": trace.get("p"),
        "distribution": trace.get("distribution"),
        "window": setting["window"] if dynamics == "two_group" else None,
        "inner": setting["inner"] if dynamics == "two_group" else None,
    }


def job_spec(config: dict, name: str) -> dict:
    """Exactly what report `name` depends on: its settings, and for each of its experiments the attributes, training
    settings and the specs of the algorithms it shows; plus the seeds."""
    report = with_defaults(config["reports"][name])
    experiments = {}
    for experiment in report["experiments"]:
        exp = config["experiments"][experiment]
        experiments[experiment] = {
            "attributes": experiment_attributes(config, experiment),
            "training": exp["training"],
            "algorithms": {a: config["algorithms"][a] for a in selected_algorithms(config, report, experiment)},
            "algorithm_order": selected_algorithms(config, report, experiment),  # JSON params sort mapping keys
        }
    seeds = [] if report["kind"] in TOY_KINDS else list(config["seeds"])
    return {"name": name, "report": report, "experiments": experiments, "seeds": seeds}


def run_dirs(config: dict, name: str) -> list[str]:
    from fedavail.config import experiment_seeds

    report = with_defaults(config["reports"][name])
    if report["kind"] in TOY_KINDS:
        return []
    return [f"results/runs/{e}/{a}/seed{s}" for e in report["experiments"]
            for a in selected_algorithms(config, report, e) for s in experiment_seeds(config, e)]


# ---------------------------------------------------------------- captions


def _describe_experiment(attributes: dict, training: dict) -> str:
    parts = [attributes["dataset"]]
    if attributes.get("alpha") is not None:
        parts.append(f"{attributes['scheme']} α = {attributes['alpha']:g}")
    else:
        parts.append(attributes["scheme"])
    dynamics = attributes.get("dynamics")
    if dynamics:
        extra = [f"{k} = {attributes[k]:g}" for k in ("gamma", "p") if isinstance(attributes.get(k), (int, float))]
        parts.append(f"{attributes['trace_model']} availability, {dynamics}" + (f" ({', '.join(extra)})" if extra
                                                                                else ""))
    parts.append(f"{attributes['num_clients']} clients")
    parts.append(f"{training['rounds']} rounds of {_describe_local(training.get('local') or {})}")
    return f"{attributes['experiment']} ({'; '.join(parts)})"


def _describe_local(local: dict) -> str:
    work = f"{local['epochs']} local epoch(s)" if local.get("epochs") else f"{local.get('steps', DEFAULT_STEPS)} local steps"
    if local.get("max_steps"):
        work += f" (at most {local['max_steps']} steps)"
    optimizer = local.get("optimizer", "sgd")
    if local.get("optimizer_state") == "persistent":
        optimizer += ", state kept across rounds"
    return f"{work}, {optimizer}"


def caption(spec: dict) -> str:
    """What the report shows and what was run, in one paragraph (the report() caption)."""
    report = spec["report"]
    kind = report["kind"]
    values = {**report, "target_percent": f"{100 * report.get('target', 0):g}"}
    values = {k: (", ".join(f"{x:g}" for x in v) if isinstance(v, list) and all(
        isinstance(x, (int, float)) for x in v) else v) for k, v in values.items()}
    text = DESCRIPTIONS[kind].format(**values)
    title = report.get("title") or spec["name"]
    if kind in TOY_KINDS:
        return f"{title}: {text}."
    runs = "; ".join(_describe_experiment(e["attributes"], e["training"]) for e in spec["experiments"].values())
    algorithms = sorted({a for e in spec["experiments"].values() for a in e["algorithms"]})
    seeds = ", ".join(str(s) for s in spec["seeds"])
    scored = f" {SCORED_MODEL[report['eval_model']]}." if "eval_model" in report else ""
    return (f"{title}: {text}.{scored} Experiments: {runs}. Algorithms: {', '.join(algorithms)}. Seeds: {seeds}. "
            "Runs that diverged (NaN/inf) are marked †, not dropped.")


def rst_escape(text: str) -> str:
    """Text that reStructuredText (the report captions) shows literally."""
    return "".join("\\" + ch if ch in "\\*|_`" else ch for ch in text)
