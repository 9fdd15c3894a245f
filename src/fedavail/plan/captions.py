"""What a report job shows and what was run, in words: the caption of its files in the HTML report (the Snakefile
builds it while building the DAG, so no pandas here) and the scored-model footnote of its tables."""

from dataclasses import fields

from fedavail.plan.local import DEFAULT_STEPS, LocalOptions
from fedavail.plan.reports import attributes

DESCRIPTIONS = {
    "experiment": "test accuracy (%) of the server model per algorithm, mean ± std over seeds of each run's "
                  "last-{last_n}-round average, and its curve per round",
    "runs": "every run, one row per round, with its settings as columns",
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
                  "share of rounds with arbitrary participation; algorithms without snapshots sit at Ratio = 100%",
    "fast_q": "adaptive FAST (FAST Algorithm 2): the snapshot probability q_t that governed each round (top) and the "
              "signal it is updated from, the participants' mean local training accuracy acc_t (bottom), one line "
              "per seed, snapshot rounds marked ×; q_(t+1) = clip(q_t + λ(acc_(t−1) − acc_t), 0, 1) rises only "
              "when the signal falls",
    "claims": "the papers' claims checked on these runs: each claim, its source in the paper, our numbers (mean ± "
              "std over seeds, seeds and rounds of every cell it reads), every comparison's mean difference over "
              "seeds paired by seed with its 95% Student-t confidence interval and number of pairs, the paper's own "
              "numbers where it publishes the same cells, and the verdict: holds or fails when the interval lies "
              "entirely on one side of the claim's bound (0, or −margin for non-inferiority), otherwise not "
              "resolved; fewer than 3 seeds, or a cell whose accuracy is still improving at the end of its run "
              "(last window against the window before, same interval, beyond {plateau_tolerance_points} points), "
              "give no verdict; whether a claim holds is this run's finding, not something the pipeline assumes",
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
SCORED_MODEL = {
    "local_mean": "Algorithms that keep local copies (FedSWE, FedAWE) are scored by the mean of their clients' local "
                  "models (1/m) Σ_i X_i, as the FedAWE authors' code reports, and their server model x^t follows in "
                  "a second row marked \"server model\"; every other algorithm is scored by its server model",
    "global": "Every algorithm is scored by its server model x^t",
}


def _describe_local(local: dict) -> str:
    o = {**{f.name: f.default for f in fields(LocalOptions)}, **local}
    work = f"{o['epochs']} local epoch(s)" if o["epochs"] else f"{o['steps'] or DEFAULT_STEPS} local steps"
    if o["max_steps"]:
        work += f" (at most {o['max_steps']} steps)"
    return f"{work}, {o['optimizer']}" + (", state kept across rounds" if o["optimizer_state"] == "persistent" else "")


def describe_experiment(name: str, info: dict) -> str:
    a = attributes(name, info["partition"], info["trace"], info["training"])
    parts = [a["dataset"], a["scheme"] if a["alpha"] is None else f"{a['scheme']} α = {a['alpha']:g}"]
    if a["dynamics"]:
        extra = [f"{k} = {a[k]:g}" for k in ("gamma", "p") if isinstance(a[k], (int, float))]
        parts.append(f"{a['trace_model']} availability, {a['dynamics']}" + (f" ({', '.join(extra)})" if extra else ""))
    parts.append(f"{a['num_clients']} clients")
    parts.append(f"{a['rounds']} rounds of {_describe_local(info['training'].get('local') or {})}")
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
    values["plateau_tolerance_points"] = f"{100 * report.get('plateau_tolerance', 0):g}"
    title = report.get("title") or job["name"]
    text = DESCRIPTIONS[report["kind"]].format(**values)
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
