"""The figure kinds (matplotlib; bands and error bars: ± one std over seeds), each returned with the numbers it plots: a
filter and groupby of the report's view of the tidy frame (frame.view), but the exact toy examples read no runs."""

from itertools import cycle, product
from pathlib import Path

import numpy as np
import pandas as pd

from fedavail.io import atomic_path
from fedavail.report import BUILDERS, toy
from fedavail.report import frame as tidy
from fedavail.report.tables import attribute_label, title

PERCENT_METRICS = ("test_acc", "train_acc", "local_acc", "test_acc_local_mean")
METRIC_WORDS = {"test_acc": "test accuracy", "train_acc": "train accuracy", "local_acc": "local training accuracy",
                "test_loss": "test loss", "train_loss": "train loss", "local_loss": "local training loss",
                "consensus_error": "consensus error (1/m) Σ‖x_i − x̄‖²"}
# seaborn's "whitegrid" style in its "paper" context at font scale 1.1, which the figures were first drawn with
STYLE = {"axes.facecolor": "white", "axes.grid": True, "axes.axisbelow": True, "axes.edgecolor": ".8",
         "grid.color": ".8", "xtick.bottom": False, "ytick.left": False, "font.size": 10.5, "axes.labelsize": 10.5,
         "axes.titlesize": 10.5, "legend.title_fontsize": 10.5, "legend.fontsize": 9.5, "xtick.labelsize": 9.5,
         "ytick.labelsize": 9.5, "lines.linewidth": 1.2, "lines.markersize": 4.8}


def panels(count: int, width: float = 5.0, height: float = 3.6, rows: int = 1, job: dict | None = None, **heading):
    """rows × count panels (at least one column) under the job's title, if given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    fig, axes = plt.subplots(rows, max(1, count), figsize=(width * max(1, count), height * rows), squeeze=False)
    if job is not None:
        fig.suptitle(title(job), **heading)
    return fig, axes


def _levels(labels) -> list:
    return list(pd.unique(pd.Series(labels).dropna()))


def label_colours(labels) -> dict:
    """A tab10 colour per label, in order of first appearance."""
    import matplotlib

    return dict(zip(_levels(labels), cycle(matplotlib.colormaps["tab10"].colors)))


def _group_lines(ax, data: pd.DataFrame, x: str, y: str, hue: str | None = None, style: str | None = None,
                 aggregate: bool = True, spread: str = "band", legend: bool = True, **line) -> None:
    """One line of `y` against `x` per (hue, style) group of `data` (levels in order of first appearance): a tab10
    colour per hue level, a dash pattern per style level. With `aggregate`, the line is the mean over the group's rows
    at each x and `spread` ("band" or "bars") shows ± one std (ddof 1); without it, the rows themselves. Rows with x
    or y missing or infinite are left out. `legend` adds an entry per hue and per style level, each part headed by its
    column when both are used: the picture seaborn's lineplot drew (errorbar="sd", or estimator=None)."""
    line = {"markeredgewidth": 0.75, "markeredgecolor": "w", **line}
    colours = label_colours(data[hue] if hue else [""])  # without hue, one group in the first colour
    styles = {level: "-" if i == 0 else (0, (4, 1.5) + (1, 1.5) * (i - 1))
              for i, level in enumerate(_levels(data[style] if style else [""]))}
    rows = data[[c for c in (x, y, hue, style) if c]].replace([np.inf, -np.inf], np.nan).dropna()
    if not pd.api.types.is_numeric_dtype(rows[x]):  # categories along x in order of first appearance
        rows = rows.assign(**{x: pd.Categorical(rows[x], categories=pd.unique(rows[x]), ordered=True)})
        ax.xaxis.update_units(list(rows[x].cat.categories))
    groups = rows.assign(_hue=rows[hue] if hue else "", _style=rows[style] if style else "")
    for (level, colour), (kind, dashes) in product(colours.items(), styles.items()):
        part = rows[(groups["_hue"] == level) & (groups["_style"] == kind)]
        if not len(part):
            continue
        if not aggregate:
            part = part.sort_values(x)
            ax.plot(part[x], part[y], color=colour, linestyle=dashes, **line)
            continue
        stats = part.groupby(x, observed=True)[y].agg(["mean", "std"])
        ax.plot(stats.index, stats["mean"], color=colour, linestyle=dashes, **line)
        if spread == "band":
            ax.fill_between(stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"], color=colour,
                            alpha=0.2, linewidth=0)
        else:
            ax.errorbar(stats.index, stats["mean"], yerr=stats["std"], linestyle="", color=colour)
    parts = [(hue, {level: {"color": colour} for level, colour in colours.items()})] if hue and legend else []
    if style and legend:
        plain = ".2" if hue else colours[""]  # grey under a hue
        parts.append((style, {level: {"color": plain, "linestyle": dashes} for level, dashes in styles.items()}))
    for column, entries in parts:
        if len(parts) == 2:  # a two-part legend: each part headed by its column
            ax.plot([], [], visible=False, label=column)
        for level, look in entries.items():
            ax.plot([], [], label=str(level), **look, **line)


def metric_label(metric: str) -> str:
    words = METRIC_WORDS.get(metric, metric.replace("_", " "))
    return f"{words} (%)" if metric in PERCENT_METRICS else words


def save(fig, png: Path, pdf: Path | None = None) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    for path in filter(None, (png, pdf)):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lstrip("."), dpi=150)
    plt.close(fig)


def experiment_title(frame: pd.DataFrame, experiment: str) -> str:
    """A panel's title: the experiment's name over its dataset and dynamics."""
    a = frame[frame["experiment"] == experiment].iloc[0]
    parts = [attribute_label("dataset", a["dataset"]), str(a["dynamics"] or ""), f"({a['inner']})" if isinstance(
        a["inner"], str) else ""]
    return f"{experiment}\n" + " ".join(p for p in parts if p)


@BUILDERS.add("curves", "consensus")
def curves(job: dict, frame: pd.DataFrame):
    s = job["report"]
    runs = frame.drop_duplicates(tidy.RUN)  # "† diverged" for an algorithm with a diverged run in that experiment
    diverged = runs.groupby(["experiment", "algorithm"])["diverged_at"].transform(lambda c: c.notna().any())
    runs = runs.assign(legend=runs["label"] + np.where(diverged, " † diverged", ""))[[*tidy.RUN, "label", "legend"]]
    values = tidy.sampled(frame, s["metric"], s["sample_every"]).merge(runs, on=tidy.RUN)
    values["value"] *= 100.0 if s["metric"] in PERCENT_METRICS else 1.0
    fig, axes = panels(len(s["experiments"]), job=job)
    for ax, experiment in zip(axes[0], s["experiments"]):
        part = values[values["experiment"] == experiment]
        if len(part):
            _group_lines(ax, part, "round", "value", hue="legend", lw=1.4)
            ax.legend(title="algorithm", fontsize=7, loc="best")
        if s["log_y"]:
            ax.set_yscale("log")
        ax.set(title=experiment_title(frame, experiment), xlabel="round", ylabel=metric_label(s["metric"]))
    data = tidy.over_seeds(values, ["experiment", "algorithm", "label", "round"]).assign(metric=s["metric"])
    return fig, data.drop(columns="finite")


@BUILDERS.add("k_sweep")
def k_sweep(job: dict, frame: pd.DataFrame):
    """One line for the reported model and, for local-copy algorithms, one for the server model x^t."""
    s = job["report"]
    parameter, target = s["parameter"], s["target"]
    finals = tidy.window_mean(frame, "test_acc", s["last_n"])
    curve = tidy.sampled(frame, "test_acc", s["sample_every"])
    reached = tidy.first_reaching(curve, target, tidy.RUN).rename("reached").reset_index()
    runs = frame.drop_duplicates(tidy.RUN)[[*tidy.RUN, "label", f"algorithm.{parameter}", "diverged_at"]].merge(
        finals, on=tidy.RUN).merge(reached, on=tidy.RUN, how="left")
    runs = runs.rename(columns={f"algorithm.{parameter}": parameter}).assign(
        model=np.where(runs["algorithm"].map(tidy.is_server_row), "server model x^t", "reported model"),
        accuracy=100 * runs["value"])
    fig, axes = panels(len(s["experiments"]), rows=2, job=job)
    for (top, bottom), experiment in zip(axes.T, s["experiments"]):
        part = runs[runs["experiment"] == experiment]
        _group_lines(top, part, parameter, "accuracy", style="model", marker="o")
        top.legend(title="model")
        if part["reached"].notna().any():
            _group_lines(bottom, part, parameter, "reached", style="model", marker="s")
            bottom.legend(title="model")
            bottom.set_yscale("symlog", linthresh=1.0)
        else:
            bottom.text(0.5, 0.5, f"no run reached {100 * target:g}%", ha="center", va="center",
                        transform=bottom.transAxes)
        for ax in (top, bottom):
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlabel({"k": "interpolation coefficient k"}.get(parameter, parameter))
        top.set(title=experiment_title(frame, experiment), ylabel=f"test accuracy (%), last {s['last_n']} rounds")
        bottom.set_ylabel(f"rounds to {100 * target:g}% test accuracy")
    by = ["experiment", "algorithm", "label", parameter]
    accuracy = tidy.over_seeds(runs.assign(value=runs["accuracy"]), by)
    rounds = tidy.over_seeds(runs.assign(value=runs["reached"]), by)
    data = accuracy.rename(columns={"mean": "test_acc_mean", "std": "test_acc_std"}).drop(columns="finite").assign(
        rounds_to_target_mean=rounds["mean"], rounds_to_target_std=rounds["std"],
        seeds_reaching_target=rounds["finite"], target=target,
        diverged=runs.groupby(by, sort=False)["diverged_at"].apply(lambda c: c.notna().any()).to_numpy())
    return fig, data


@BUILDERS.add("grid")
def grid(job: dict, frame: pd.DataFrame):
    """One line per hue (and per algorithm when there are several)."""
    s = job["report"]
    x, hue = s["x"], s["hue"]
    runs = frame.drop_duplicates(tidy.RUN)[[*tidy.RUN, "label", x, hue]]
    values = pd.concat([runs.merge(tidy.window_mean(frame, m, s["last_n"]), on=tidy.RUN).assign(metric=m)
                        for m in ("train_acc", "test_acc")], ignore_index=True)
    values["value"] *= 100
    values["series"] = [attribute_label(hue, v) for v in values[hue]]
    fig, axes = panels(2, job=job)
    many = values["algorithm"].nunique() > 1
    for ax, metric in zip(axes[0], ("train_acc", "test_acc")):
        _group_lines(ax, values[values["metric"] == metric], x, "value", hue="series", style="label" if many else None,
                     spread="bars", marker="o")
        ax.legend(title=hue, fontsize=8)
        ax.set(xlabel=attribute_label(x, "").rstrip(" =") or x, ylabel=metric_label(metric),
               title=f"{metric_label(metric).removesuffix(' (%)')}, last {s['last_n']} rounds")
    return fig, tidy.over_seeds(values, ["experiment", "algorithm", "label", x, hue, "metric"]).drop(columns="finite")


@BUILDERS.add("fast_ratio")
def fast_ratio(job: dict, frame: pd.DataFrame):
    s = job["report"]
    keys = ["experiment", "algorithm"]
    accuracy = tidy.over_seeds(tidy.last_values(frame, "test_acc", s["last"]), keys, 100)
    ratio = tidy.over_seeds(tidy.arbitrary_ratio(frame), keys, 100)
    data = tidy.describe_runs(frame)[[*keys, "label", "diverged"]].merge(
        accuracy.rename(columns={"mean": "acc_mean", "std": "acc_std"})[[*keys, "acc_mean", "acc_std"]], on=keys,
        how="left").merge(ratio.rename(columns={"mean": "ratio"})[[*keys, "ratio"]], on=keys, how="left")
    data = data.assign(snapshots=np.isfinite(data["ratio"]), ratio=data["ratio"].fillna(100.0))
    colors = label_colours(data["label"])
    fig, axes = panels(len(s["experiments"]), job=job)
    for ax, experiment in zip(axes[0], s["experiments"]):
        for r in data[data["experiment"] == experiment].itertuples():
            ax.errorbar([r.ratio], [r.acc_mean], yerr=[r.acc_std], marker="o" if r.snapshots else "s", capsize=3,
                        color=colors[r.label], label=r.label + (" † diverged" if r.diverged else ""))
        ax.set(title=experiment_title(frame, experiment), xlabel="Ratio: rounds with arbitrary participation (%)",
               ylabel=f"test accuracy (%), last {s['last']} evaluations")
        ax.legend(title="algorithm", fontsize=7, loc="best")
    return fig, data


@BUILDERS.add("fast_q")
def fast_q(job: dict, frame: pd.DataFrame):
    """One line per seed: a mean over seeds would hide a seed whose q never leaves 0."""
    s = job["report"]
    columns = [c for c in ("q", "q_signal", "snapshot") if c in frame]
    data = frame[[*tidy.RUN, "label", "round", *columns]].reset_index(drop=True)
    fig, axes = panels(len(s["experiments"]), width=7.5, rows=2, height=3.0, job=job, wrap=True)
    for (top, bottom), experiment in zip(axes.T, s["experiments"]):
        part = data[data["experiment"] == experiment].assign(signal=lambda d: 100 * d.get("q_signal", np.nan),
                                                            seed=lambda d: d["seed"].astype(str))
        if len(part):
            _group_lines(top, part, "round", "q", hue="label", style="seed", aggregate=False, lw=1.0)
            _group_lines(bottom, part, "round", "signal", hue="label", style="seed", aggregate=False, legend=False,
                         lw=0.8)
            shots = part[part["snapshot"] == 1] if "snapshot" in part else part.iloc[0:0]
            top.scatter(shots["round"], shots["q"], marker="x", s=14, color="black", zorder=3, label="snapshot round")
            top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        top.set(title=experiment_title(frame, experiment), xlabel="", ylabel="q_t")
        bottom.set(xlabel="round", ylabel="acc_t (%)")
    return fig, data


def experiment_figure(job: dict, frame: pd.DataFrame):
    """An experiment's test accuracy against the round per algorithm, mean over seeds ± one std, † for diverged runs."""
    described = tidy.describe_runs(frame)
    legend = {a: f"{a} † diverged: {d}" if d else a for a, d in zip(described["algorithm"], described["diverged"])}
    evaluated = frame.dropna(subset=["test_acc"]) if "test_acc" in frame else frame.iloc[0:0].assign(test_acc=[])
    evaluated = evaluated.assign(algorithm=evaluated["algorithm"].map(legend), test_acc=100 * evaluated["test_acc"])
    fig, ((ax,),) = panels(1, width=7, height=4.5)
    if len(evaluated):
        _group_lines(ax, evaluated, "round", "test_acc", hue="algorithm")
    never = sorted(set(legend.values()) - set(evaluated["algorithm"]))
    colours = label_colours([*evaluated["algorithm"], *never])  # the colours after the evaluated algorithms'
    for label in never:
        ax.plot([], [], linestyle="none", marker="x", color=colours[label], label=f"{label} (never evaluated)")
    ax.legend(title="algorithm")
    ax.set(xlabel="round", ylabel="test accuracy (%)",
           title=f"{job['name']}: test accuracy of the server model per round (mean ± std over seeds)")
    return fig


@BUILDERS.add("toy_heterogeneity")
def toy_heterogeneity(job: dict, frame=None):
    s = job["report"]
    u1, u2 = s["u"]
    grid_values = np.linspace(0.0, 1.0, s["resolution"])
    p1, p2 = np.meshgrid(grid_values, grid_values)
    fig, axes = panels(len(s["weightings"]), width=4.8, height=4.0, job=job)
    parts = []
    for ax, weighting in zip(axes[0], s["weightings"]):
        bias = toy.heterogeneity_bias(grid_values, u1, u2, weighting)
        image = ax.imshow(bias, origin="lower", extent=(0, 1, 0, 1), cmap="viridis", vmin=0,
                          vmax=0.5 * abs(u2 - u1), aspect="equal")
        ax.set(xlabel="$p_1$", ylabel="$p_2$", title=f"FedAvg over {weighting} clients\n$|x_{{output}} - x^*|$")
        ax.grid(False)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        parts.append(pd.DataFrame({"weighting": weighting, "p1": p1.ravel(), "p2": p2.ravel(), "bias": bias.ravel()}))
    return fig, pd.concat(parts, ignore_index=True)


@BUILDERS.add("toy_interpolation")
def toy_interpolation(job: dict, frame=None):
    s = job["report"]
    fig, axes = panels(len(s["k"]), width=4.5, height=3.2, rows=2, job=job)
    parts = []
    for (top, bottom), k in zip(axes.T, s["k"]):
        result = toy.fedswe_alternating(k, s["u"], s["rounds"], s["lr"], s["local_steps"], s["global_lr"])
        steady = toy.alternating_steady_bias(k, s["u"], s["lr"], s["local_steps"], s["global_lr"])
        # x^{t+1} after client 1's (even) and client 2's (odd) rounds, as the paper's two curves
        for client in (0, 1):
            top.plot(result["round"][client::2], result["gradient"][client::2], lw=1.2,
                     label=f"after client {client + 1} ({('even', 'odd')[client]} rounds)")
        top.axhline(0.0, color="k", lw=0.8, ls="--", label="global optimum")
        top.set(title=f"k = {k:g}: gradient (steady ±{steady:.3g})", xlabel="round", ylabel="∇F(x^t)")
        top.legend(fontsize=7)
        bottom.plot(result["round"], result["consensus"], lw=0.8, color="C1")
        bottom.set(title=f"k = {k:g}: consensus error", xlabel="round", ylabel="(1/2) Σ (x_i − x̄)²")
        parts.append(pd.DataFrame({"k": k, **{c: result[c] for c in ("round", "x", "gradient", "consensus")},
                                   "steady_bias": steady}))
    return fig, pd.concat(parts, ignore_index=True)

