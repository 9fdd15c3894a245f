"""What a report job shows and what was run, in words: the caption of its files in the HTML report (the Snakefile
builds it while building the DAG, so no pandas here) and the scored-model footnote of its tables."""

from dataclasses import fields

from fedavail.plan.local import DEFAULT_STEPS, LocalOptions
from fedavail.plan.reports import KINDS, attributes

JOB_DESCRIPTIONS = {  # the jobs that are not report kinds (a kind's text: its DESCRIPTION, fedavail.plan.reports)
    "experiment": "test accuracy (%) of the server model per algorithm, mean ± std over seeds of each run's "
                  "last-{last_n}-round average, and its curve per round",
    "runs": "every run, one row per round, with its settings as columns",
}
SCORED_MODEL = {
    "local_mean": "Algorithms that keep local copies (FedSWE, FedAWE) are scored by the mean of their clients' local "
                  "models (1/m) Σ_i X_i, as the FedAWE authors' code reports, and their server model x^t follows in "
                  "a second row marked \"server model\"; every other algorithm is scored by its server model",
    "global": "Every algorithm is scored by its server model x^t",
}


def describe_experiment(name: str, info: dict) -> str:
    a = attributes(name, info["partition"], info["trace"], info["training"])
    parts = [a["dataset"], a["scheme"] if a["alpha"] is None else f"{a['scheme']} α = {a['alpha']:g}"]
    if a["dynamics"]:
        extra = [f"{k} = {a[k]:g}" for k in ("gamma", "p") if isinstance(a[k], (int, float))]
        parts.append(f"{a['trace_model']} availability, {a['dynamics']}" + (f" ({', '.join(extra)})" if extra else ""))
    o = {**{f.name: f.default for f in fields(LocalOptions)}, **(info["training"].get("local") or {})}
    work = f"{o['epochs']} local epoch(s)" if o["epochs"] else f"{o['steps'] or DEFAULT_STEPS} local steps"
    work += f" (at most {o['max_steps']} steps)" if o["max_steps"] else ""
    state = ", state kept across rounds" if o["optimizer_state"] == "persistent" else ""
    parts += [f"{a['num_clients']} clients", f"{a['rounds']} rounds of {work}, {o['optimizer']}{state}"]
    return f"{name} ({'; '.join(parts)})"


def _shown(value):
    if isinstance(value, list) and all(isinstance(x, (int, float)) for x in value):
        return ", ".join(f"{x:g}" for x in value)
    return value


def caption(job: dict) -> str:
    """What the report shows and what was run, in one paragraph."""
    report = job["report"]
    values = {k: _shown(v) for k, v in report.items()}
    values["target_percent"] = f"{100 * report.get('target', 0):g}"
    for key in ("plateau_tolerance", "equivalence_margin"):
        values[f"{key}_points"] = f"{100 * report.get(key, 0):g}"
    title = report.get("title") or job["name"]
    text = (JOB_DESCRIPTIONS.get(report["kind"]) or KINDS[report["kind"]].DESCRIPTION).format(**values)
    if not job["experiments"]:
        return f"{title}: {text}."
    runs = "; ".join(describe_experiment(name, info) for name, info in job["experiments"].items())
    seeds = ", ".join(str(s) for s in sorted({s for info in job["experiments"].values() for s in info["seeds"]}))
    scored = f" {SCORED_MODEL[report['eval_model']]}." if "eval_model" in report else ""
    return (f"{title}: {text}.{scored} Experiments: {runs}. Algorithms: {', '.join(sorted(job['algorithms']))}. "
            f"Seeds: {seeds}. Runs that diverged (NaN/inf) are marked †, not dropped.")


def rst_escape(text: str) -> str:
    """Text that reStructuredText (the report captions) shows literally."""
    return "".join("\\" + ch if ch in "\\*|_`" else ch for ch in text)
