"""Figures of the cross-experiment reports (seaborn), each returned with the numbers it plots.

Every builder takes the report job's spec (fedavail.report.spec.job_spec) and the loaded runs (None for the exact toy
examples) and returns (matplotlib figure, long-form DataFrame of the plotted values)."""

from pathlib import Path

import numpy as np
import pandas as pd

from fedavail.io import atomic_path
from fedavail.report.tables import Report, attribute_label

PERCENT_METRICS = ("test_acc", "train_acc", "local_acc", "test_acc_local_mean")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    return plt, sns


def _panels(count: int, width: float = 5.0, height: float = 3.6, rows: int = 1):
    plt, _ = _plt()
    cols = max(1, count)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    return fig, axes


def save(fig, png: Path, pdf: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=150)
    plt.close(fig)


def _palette(report: Report):
    _, sns = _plt()
    colors = sns.color_palette("tab10" if len(report.algorithms) <= 10 else "husl", len(report.algorithms))
    return dict(zip(report.algorithms, colors))


def _experiment_title(report: Report, experiment: str) -> str:
    a = report.attributes(experiment)
    parts = [attribute_label("dataset", a["dataset"]), str(a["dynamics"] or "")]
    if a.get("inner"):
        parts.append(f"({a['inner']})")
    return f"{experiment}\n" + " ".join(p for p in parts if p)


def _diverged_suffix(runs, experiment: str, algorithm: str) -> str:
    diverged = runs.diverged(experiment, algorithm)
    return " †diverged" if diverged else ""


def curves(spec: dict, runs):
    """Per experiment, `metric` against the round: mean over seeds and a ± one std band (Figs. 6, 7, 10)."""
    from fedavail.report.runs import sampled_curve

    report = Report(spec)
    metric, sample_every = report.settings["metric"], report.settings["sample_every"]
    scale = 100.0 if metric in PERCENT_METRICS else 1.0
    colors = _palette(report)
    fig, axes = _panels(len(report.experiments))
    records = []
    for ax, (experiment, info) in zip(axes[0], report.experiments.items()):
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            seeds = [sampled_curve(r, metric, sample_every, report.rounds(experiment)).rename(seed)
                     for seed, r in run.groupby("seed")]
            seeds = [s for s in seeds if len(s)]
            if not seeds:
                continue
            table = pd.concat(seeds, axis=1).sort_index() * scale
            mean, std = table.mean(axis=1), table.std(axis=1, ddof=0).fillna(0.0)
            label = report.label(algorithm) + _diverged_suffix(runs, experiment, algorithm)
            ax.plot(mean.index, mean.to_numpy(), color=colors[algorithm], label=label, lw=1.4)
            low, high = mean - std, mean + std
            if report.settings["log_y"]:
                low = low.where(low > 0, mean)
            ax.fill_between(mean.index, low.to_numpy(), high.to_numpy(), color=colors[algorithm], alpha=0.2, lw=0)
            for round_, m, s in zip(mean.index, mean.to_numpy(), std.to_numpy()):
                records.append({"experiment": experiment, "algorithm": algorithm, "label": report.label(algorithm),
                                "round": int(round_), "metric": metric, "mean": m, "std": s, "seeds": len(seeds)})
        if report.settings["log_y"]:
            ax.set_yscale("log")
        ylabel = {"consensus_error": "consensus error (1/m) Σ‖x_i − x̄‖²"}.get(metric, metric)
        ax.set(title=_experiment_title(report, experiment), xlabel="global round",
               ylabel=f"{metric} (%)" if scale == 100 else ylabel)
        ax.legend(fontsize=7, loc="best")
    return fig, pd.DataFrame(records)


def _sweep_value(report: Report, experiment: str, algorithm: str, parameter: str):
    spec = report.experiments[experiment]["algorithms"][algorithm]
    if parameter in spec:
        return float(spec[parameter])
    if spec["algorithm"] == "fedswe" and parameter == "k":
        return 100.0  # FedSWE's default k
    return float("nan")


def k_sweep(spec: dict, runs):
    """Figs. 8/9 and 11/12: final test accuracy (last-N average) and rounds to reach a target accuracy against k."""
    from fedavail.report.runs import first_reaching, sampled_curve, window_mean
    from fedavail.report.scored_model import is_server_row

    report = Report(spec)
    settings = report.settings
    parameter, last_n, target = settings["parameter"], settings["last_n"], settings["target"]
    fig, axes = _panels(len(report.experiments), rows=2)
    records = []
    for column, (experiment, info) in enumerate(report.experiments.items()):
        rounds = report.rounds(experiment)
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            finals, reached = [], []
            for _, r in run.groupby("seed"):
                finals.append(window_mean(r, "test_acc", last_n, rounds))
                hit = first_reaching(sampled_curve(r, "test_acc", settings["sample_every"], rounds), target)
                reached.append(np.nan if hit is None else hit)
            finals, reached = np.asarray(finals, float), np.asarray(reached, float)
            records.append({
                "experiment": experiment, "algorithm": algorithm, "label": report.label(algorithm),
                parameter: _sweep_value(report, experiment, algorithm, parameter),
                "test_acc_mean": 100 * np.nanmean(finals) if np.isfinite(finals).any() else np.nan,
                "test_acc_std": 100 * np.nanstd(finals) if np.isfinite(finals).any() else np.nan,
                "rounds_to_target_mean": np.nanmean(reached) if np.isfinite(reached).any() else np.nan,
                "rounds_to_target_std": np.nanstd(reached) if np.isfinite(reached).any() else np.nan,
                "seeds": len(finals), "seeds_reaching_target": int(np.isfinite(reached).sum()),
                "target": target, "diverged": bool(runs.diverged(experiment, algorithm))})
        frame = pd.DataFrame([r for r in records if r["experiment"] == experiment]).sort_values(parameter)
        top, bottom = axes[0][column], axes[1][column]
        # One line per scored model: the reported one, and the server model x^t of local-copy algorithms.
        for server, line in frame.groupby(frame["algorithm"].map(is_server_row)):
            style = {"ls": "--" if server else "-", "label": "server model x^t" if server else "reported model"}
            top.errorbar(line[parameter], line["test_acc_mean"], yerr=line["test_acc_std"], marker="o", capsize=3,
                         color="C0", **style)
            bottom.errorbar(line[parameter], line["rounds_to_target_mean"], yerr=line["rounds_to_target_std"],
                            marker="s", capsize=3, color="C1", **style)
        if frame["algorithm"].map(is_server_row).any():
            top.legend(fontsize=7)
        for _, r in frame[frame["diverged"]].iterrows():
            top.annotate("†", (r[parameter], r["test_acc_mean"]))
        for ax in (top, bottom):
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlabel(parameter)
        if np.isfinite(frame["rounds_to_target_mean"]).any():
            bottom.set_yscale("log")
        else:
            bottom.text(0.5, 0.5, f"no run reached {100 * target:g}%", ha="center", va="center",
                        transform=bottom.transAxes)
        top.set(title=_experiment_title(report, experiment), ylabel=f"test accuracy (%), last {last_n} rounds")
        bottom.set_ylabel(f"rounds to {100 * target:g}% test accuracy")
    return fig, pd.DataFrame(records)


def grid(spec: dict, runs):
    """Fig. 3: train and test accuracy (last-N average, mean ± std over seeds) against attribute x, one line per hue."""
    from fedavail.report.runs import window_mean

    report = Report(spec)
    settings = report.settings
    x, hue, last_n = settings["x"], settings["hue"], settings["last_n"]
    records = []
    for experiment, info in report.experiments.items():
        attributes = report.attributes(experiment)
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            for metric in ("train_acc", "test_acc"):
                values = np.asarray([window_mean(r, metric, last_n, report.rounds(experiment))
                                     for _, r in run.groupby("seed")], float)
                finite = values[np.isfinite(values)]
                records.append({"experiment": experiment, "algorithm": algorithm, "label": report.label(algorithm),
                                x: attributes[x], hue: attributes[hue], "metric": metric,
                                "mean": 100 * finite.mean() if len(finite) else np.nan,
                                "std": 100 * finite.std() if len(finite) else np.nan, "seeds": len(values),
                                "diverged": bool(runs.diverged(experiment, algorithm))})
    frame = pd.DataFrame(records)
    _, sns = _plt()
    fig, axes = _panels(2)
    hues = list(dict.fromkeys(frame[hue]))
    colors = dict(zip(hues, sns.color_palette("viridis", len(hues))))
    many = frame["algorithm"].nunique() > 1
    for ax, metric in zip(axes[0], ("train_acc", "test_acc")):
        for (h, algorithm), part in frame[frame["metric"] == metric].groupby([hue, "algorithm"], sort=False):
            part = part.sort_values(x)
            label = attribute_label(hue, h) + (f", {report.label(algorithm)}" if many else "")
            label += " †diverged" if part["diverged"].any() else ""
            ax.errorbar(part[x], part["mean"], yerr=part["std"], marker="o", capsize=3, color=colors[h], label=label)
        ax.set(xlabel=attribute_label(x, "").rstrip(" =") or x, ylabel=f"{metric.split('_')[0]} accuracy (%)",
               title=f"{'Train' if metric == 'train_acc' else 'Test'} accuracy, last {last_n} rounds")
        ax.legend(fontsize=8)
    return fig, frame


def fast_ratio(spec: dict, runs):
    """FAST: test accuracy (mean of the last `last` evaluations) against Ratio, one panel per experiment."""
    from fedavail.report.runs import arbitrary_ratio, last_values

    report = Report(spec)
    last = report.settings["last"]
    colors = _palette(report)
    fig, axes = _panels(len(report.experiments))
    records = []
    for ax, (experiment, info) in zip(axes[0], report.experiments.items()):
        for algorithm in info["algorithms"]:
            run = runs.run(experiment, algorithm)
            values = np.asarray([v for _, r in run.groupby("seed") for v in last_values(r, "test_acc", last)], float)
            ratios = np.asarray([arbitrary_ratio(r) for _, r in run.groupby("seed")], float)
            ratio = float(np.nanmean(ratios)) if np.isfinite(ratios).any() else 1.0
            mean = 100 * values.mean() if len(values) else np.nan
            std = 100 * values.std() if len(values) else np.nan
            records.append({"experiment": experiment, "algorithm": algorithm, "label": report.label(algorithm),
                            "ratio": 100 * ratio, "snapshots": bool(np.isfinite(ratios).any()), "acc_mean": mean,
                            "acc_std": std, "diverged": bool(runs.diverged(experiment, algorithm))})
            ax.errorbar([100 * ratio], [mean], yerr=[std], marker="o" if np.isfinite(ratios).any() else "s",
                        capsize=3, color=colors[algorithm],
                        label=report.label(algorithm) + _diverged_suffix(runs, experiment, algorithm))
        ax.set(title=_experiment_title(report, experiment), xlabel="Ratio: rounds with arbitrary participation (%)",
               ylabel=f"test accuracy (%), last {last}")
        ax.legend(fontsize=7, loc="best")
    return fig, pd.DataFrame(records)


def toy_heterogeneity(spec: dict, runs=None):
    """Fig. 2 (Example 1): |lim E x^t − x*| of FedAvg over (p1, p2), exact."""
    from fedavail.report import toy

    settings = spec["report"]
    u1, u2 = settings["u"]
    grid_values = np.linspace(0.0, 1.0, settings["resolution"])
    weightings = settings["weightings"]
    plt, _ = _plt()
    fig, axes = _panels(len(weightings), width=4.8, height=4.0)
    records = []
    names = {"active": "FedAvg over active clients", "all": "FedAvg over all clients"}
    for ax, weighting in zip(axes[0], weightings):
        bias = toy.heterogeneity_bias(grid_values, u1, u2, weighting)
        image = ax.imshow(bias, origin="lower", extent=(0, 1, 0, 1), cmap="viridis", vmin=0,
                          vmax=0.5 * abs(u2 - u1), aspect="equal")
        ax.set(xlabel="$p_1$", ylabel="$p_2$", title=f"{names[weighting]}\n$|x_{{output}} - x^*|$")
        ax.grid(False)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        p1, p2 = np.meshgrid(grid_values, grid_values)
        records.append(pd.DataFrame({"weighting": weighting, "p1": p1.ravel(), "p2": p2.ravel(),
                                     "bias": bias.ravel()}))
    return fig, pd.concat(records, ignore_index=True)


def toy_interpolation(spec: dict, runs=None):
    """Fig. 5: FedSWE on two alternating scalar clients, exact; gradient ∇F(x^t) and consensus error per k."""
    from fedavail.report import toy

    s = spec["report"]
    fig, axes = _panels(len(s["k"]), width=4.5, height=3.2, rows=2)
    records = []
    for column, k in enumerate(s["k"]):
        result = toy.fedswe_alternating(k, s["u"], s["rounds"], s["lr"], s["local_steps"], s["global_lr"])
        steady = toy.alternating_steady_bias(k, s["u"], s["lr"], s["local_steps"], s["global_lr"])
        top, bottom = axes[0][column], axes[1][column]
        rounds, gradient = result["round"], result["gradient"]
        # x^{t+1} after client 1's (even) and client 2's (odd) rounds, as the paper's two curves
        top.plot(rounds[0::2], gradient[0::2], lw=1.2, label="after client 1 (even rounds)")
        top.plot(rounds[1::2], gradient[1::2], lw=1.2, label="after client 2 (odd rounds)")
        top.axhline(0.0, color="k", lw=0.8, ls="--", label="global optimum")
        top.set(title=f"k = {k:g}: gradient (steady ±{steady:.3g})", xlabel="global round", ylabel="∇F(x^t)")
        top.legend(fontsize=7)
        bottom.plot(result["round"], result["consensus"], lw=0.8, color="C1")
        bottom.set(title=f"k = {k:g}: consensus error", xlabel="global round", ylabel="(1/2) Σ (x_i − x̄)²")
        records.append(pd.DataFrame({"k": k, "round": result["round"], "x": result["x"],
                                     "gradient": result["gradient"], "consensus": result["consensus"],
                                     "steady_bias": steady}))
    return fig, pd.concat(records, ignore_index=True)


FIGURE_BUILDERS = {"curves": curves, "consensus": curves, "k_sweep": k_sweep, "grid": grid, "fast_ratio": fast_ratio,
                   "toy_heterogeneity": toy_heterogeneity, "toy_interpolation": toy_interpolation}
