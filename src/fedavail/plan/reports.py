"""The config's `reports:` section as typed specs, one dataclass per report kind with its defaults written here only;
each report job's slice of the config; every report output path (docs/configuration.md, "Reports"). Imported by the
Snakefile while it builds the DAG: no torch, no pandas."""

import typing
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from typing import Literal

from fedavail.availability.trace_models import TRACE_MODELS
from fedavail.options import (Registry, check_fields, check_int, check_positive, has_type, is_number, must, option,
                              type_name)
from fedavail.plan.claim_parsing import check_cells, parse_claims, referenced
from fedavail.plan.paths import EXPERIMENT_DIR, REPORT_DIR, RUN_DIR, path
from fedavail.plan.specs import stated_trace

# What an experiment is, in the words the tables, figures and published values use (fedavail.report.frame columns).
ATTRIBUTES = ("experiment", "dataset", "scheme", "alpha", "num_clients", "rounds", "trace_model", "dynamics", "gamma",
              "period", "low", "p", "distribution", "window", "inner")
Attribute = Literal[ATTRIBUTES]
EvalModel = Literal["local_mean", "global"]
SHAPING = {"sine": {"gamma", "period"}, "staircase": {"period", "low"}, "two_group": {"window", "inner"}}  # by dynamics
# Every report kind by its `kind` name (what builds each: fedavail.report.BUILDERS, under the same name)
KINDS = Registry("kind")


def _list(*values):
    return field(default_factory=lambda: list(values))


_DECIMALS = partial(check_int, minimum=0)
_ACCURACY = must("an accuracy in (0, 1]", lambda v: 0 < v <= 1)
_ACCURACIES = must("accuracies in (0, 1]", lambda v: bool(v) and all(is_number(t) and 0 < t <= 1 for t in v))
_TWO_NUMBERS = must("two numbers", lambda v: len(v) == 2)


def report_kind(name: str):
    return lambda cls: KINDS.add(name)(dataclass(frozen=True)(cls))


@dataclass(frozen=True)
class Report:
    kind: str
    title: str | None = None
    experiments: list[str] = _list()
    algorithms: list[str] | None = None  # a subset of the experiments' algorithms, and their row order
    labels: dict[str, str] = field(default_factory=dict)  # algorithm name -> display label

    DESCRIPTION: typing.ClassVar[str]  # what it shows, its caption (str.format with the report's settings)
    SHAPE: typing.ClassVar[str] = "table"
    LAYOUT: typing.ClassVar[tuple] = ()  # keys naming the attributes that place an experiment in the table
    PAPER_SOURCES: typing.ClassVar[tuple] = ()  # a paper table: the published tables beside it (report/compare.py)

    def __post_init__(self):
        check_fields(self)  # each kind declares its keys' allowed values on their fields

    @classmethod
    def from_config(cls, raw: dict) -> "Report":
        return cls(**raw)

    def check(self, config: dict) -> None:
        """Raise ValueError("<key>: ...") for what the types and the keys' own checks cannot say."""
        if not self.experiments:
            raise ValueError(f"experiments: kind {self.kind!r} needs at least one experiment")
        for experiment in self.experiments:
            if experiment not in config["experiments"]:
                raise ValueError(f"experiments: {experiment!r} is not defined under 'experiments'")
        offered = {a for e in self.experiments for a in config["experiments"][e]["algorithms"]}
        for algorithm in self.algorithms or ():
            if algorithm not in offered:
                raise ValueError(f"algorithms: {algorithm!r} is run by none of the report's experiments")
        placed = {}  # LAYOUT position -> the experiment there
        for experiment in self.experiments if self.LAYOUT else ():
            exp = config["experiments"][experiment]
            settings = attributes(experiment, config["partitions"][exp["partition"]],
                                  stated_trace(config, exp["trace"]), exp["training"])
            # the attributes it has: a sine trace has a γ even where the trace model's default gives it
            applies = {a for a in ATTRIBUTES if settings[a] is not None} | applicable(settings)
            for key in self.LAYOUT:
                if getattr(self, key) not in applies:
                    raise ValueError(f"{key}: experiment {experiment!r} has no {getattr(self, key)!r}")
            position = tuple(settings.get(getattr(self, key)) for key in self.LAYOUT)
            if position in placed:
                raise ValueError(f"experiments: {placed[position]!r} and {experiment!r} land in the same cell "
                                 f"({', '.join(f'{getattr(self, k)} = {v}' for k, v in zip(self.LAYOUT, position))})")
            placed[position] = experiment

    def selected(self, config: dict, experiment: str) -> list[str]:
        ran = config["experiments"][experiment]["algorithms"]
        return list(ran) if self.algorithms is None else [a for a in self.algorithms if a in ran]


@dataclass(frozen=True)
class Accuracy(Report):
    last_n: int = option(50, check=check_int)
    eval_model: EvalModel = "local_mean"
    decimals: int = option(1, check=_DECIMALS)
    memory_aided: list[str] | None = None  # group 2 (unranked); by default MIFA, FedVARP, FedAvg with known p_i^t
    paper: bool = True
    SHAPE = "paper_table"


@report_kind("fedswe_table")
class FedsweTable(Accuracy):
    DESCRIPTION = ("train and test accuracy (%), mean ± std over seeds of each run's average over its last {last_n} "
                   "rounds (FedSWE Table 2 style); in every column the best of the algorithms not aided by memory or "
                   "known statistics is bold and the second underlined")
    PAPER_SOURCES = ("FedSWE Table 2",)
    columns: Attribute = "dataset"
    blocks: Attribute = "dynamics"
    LAYOUT = ("blocks", "columns")


@report_kind("sweep")
class Sweep(Accuracy):
    DESCRIPTION = ("train and test accuracy (%) against {parameter}, mean ± std over seeds of each run's "
                   "last-{last_n}-round average (FedSWE Tables 8 and 9 style); best of the memory-free group bold, "
                   "second underlined")
    PAPER_SOURCES = ("FedSWE Table 8", "FedSWE Table 9", "FedSWE Table 2")
    parameter: Attribute = None
    LAYOUT = ("parameter",)


@report_kind("rounds_to_target")
class RoundsToTarget(Report):
    DESCRIPTION = ("the first round at which the mean test accuracy over seeds, sampled every {sample_every} rounds, "
                   "reaches each target (FedSWE Table 7 style); — when never reached")
    PAPER_SOURCES = ("FedSWE Table 7",)
    targets: list[float] | dict[str, list[float]] | None = None  # None: `fractions` of the best final accuracy
    fractions: list[float] = _list(0.25, 0.5, 0.75, 1.0)
    sample_every: int = option(20, check=check_int)
    eval_model: EvalModel = "local_mean"
    memory_aided: list[str] | None = None
    paper: bool = True
    SHAPE = "paper_table"

    def check(self, config: dict) -> None:
        super().check(config)
        targets = self.targets
        if isinstance(targets, dict) and (unknown := set(targets) - set(self.experiments)):
            raise ValueError(f"targets: {sorted(unknown)[0]!r} is not one of the report's experiments")
        lists = list(targets.values()) if isinstance(targets, dict) else [] if targets is None else [targets]
        for values in [*lists, self.fractions]:
            if not values or not all(0 < v <= 1 for v in values):
                raise ValueError(f"targets: accuracies in (0, 1] as a list (or a mapping experiment -> list), got "
                                 f"{values!r}")


@report_kind("time_to_accuracy")
class TimeToAccuracy(Report):
    DESCRIPTION = ("the virtual time (hours of device time, a trace's clock) until each run's test accuracy first "
                   "reaches each target, mean ± std over the seeds that reach it, and each algorithm's paired "
                   "difference to the reference with its 95% interval over seeds")
    targets: list[float] = option([0.5, 0.7], check=_ACCURACIES)
    reference: str | None = None  # None: the first algorithm shown
    eval_model: EvalModel = "local_mean"

    def check(self, config: dict) -> None:
        super().check(config)
        for experiment in self.experiments if self.reference is not None else ():
            if self.reference not in self.selected(config, experiment):
                raise ValueError(f"reference: the report shows no {self.reference!r} in experiment {experiment!r}")


@report_kind("fast_table")
class FastTable(Report):
    DESCRIPTION = ("test accuracy (%) of the server model, A ± B, the mean and standard deviation of the last {last} "
                   "test accuracies of every seed (FAST style), and Ratio = rounds with arbitrary participation / "
                   "total rounds")
    PAPER_SOURCES = ("FAST §5.1",)
    last: int = option(5, check=check_int)
    decimals: int = option(2, check=_DECIMALS)
    paper: bool = True
    SHAPE = "paper_table"


@report_kind("memory")
class Memory(Report):
    DESCRIPTION = ("bytes of algorithm state (summary.json state_bytes) per algorithm, with the model dimension d, "
                   "peak memory and wall time")


class Figure(Report):  # writes figure.{png,pdf,csv}
    SHAPE = "figure"


@report_kind("curves")
class Curves(Figure):
    DESCRIPTION = ("{metric} against the round, mean over seeds with a band of ± one standard deviation (FedSWE Figs. "
                   "7 and 10 style)")
    metric: str = "test_acc"
    sample_every: int | None = option(None, check=check_int)
    log_y: bool = False
    eval_model: EvalModel = "local_mean"


@report_kind("accuracy_vs_time")
class AccuracyVsTime(Figure):
    DESCRIPTION = ("test accuracy against virtual time (hours of device time, a trace's clock): each seed's run thin, "
                   "the mean over seeds of accuracy and time at each evaluated round thick")
    eval_model: EvalModel = "local_mean"


@report_kind("consensus")
class Consensus(Figure):
    DESCRIPTION = ("the consensus error (1/m) Σ_i ‖x_i − x̄‖² on a logarithmic scale, mean over seeds ± one standard "
                   "deviation (FedSWE Fig. 6 style)")
    metric: str = "consensus_error"
    sample_every: int | None = option(None, check=check_int)
    log_y: bool = True


@report_kind("k_sweep")
class KSweep(Figure):
    DESCRIPTION = ("test accuracy averaged over the last {last_n} rounds and the number of rounds to reach "
                   "{target_percent}% test accuracy against FedSWE's interpolation coefficient {parameter} (FedSWE "
                   "Figs. 8, 9, 11 and 12 style); mean ± std over seeds")
    parameter: str = "k"  # an algorithm hyperparameter
    last_n: int = option(500, check=check_int)
    target: float = option(0.4, check=_ACCURACY)
    sample_every: int | None = option(None, check=check_int)
    eval_model: EvalModel = "local_mean"

    def check(self, config: dict) -> None:
        super().check(config)
        for algorithm in dict.fromkeys(a for e in self.experiments for a in self.selected(config, e)):
            spec = config["algorithms"][algorithm]
            if self.parameter not in spec and spec["algorithm"] != "fedswe":
                raise ValueError(f"parameter: algorithm {algorithm!r} has no hyperparameter {self.parameter!r}; "
                                 "list the swept algorithms under 'algorithms'")


@report_kind("grid")
class Grid(Figure):
    DESCRIPTION = ("train and test accuracy (%) of each run's last-{last_n}-round average against {x}, one line per "
                   "{hue} (FedSWE Fig. 3 style); mean ± std over seeds")
    x: Attribute = None
    hue: Attribute = None
    last_n: int = option(50, check=check_int)
    eval_model: EvalModel = "local_mean"
    LAYOUT = ("x", "hue")

    def check(self, config: dict) -> None:
        if self.x == self.hue:
            raise ValueError("hue: must differ from x")
        super().check(config)


@report_kind("fast_ratio")
class FastRatio(Figure):
    DESCRIPTION = ("test accuracy of the server model (mean of the last {last} test accuracies) against Ratio, the "
                   "share of rounds with arbitrary participation; algorithms without snapshots sit at Ratio = 100%")
    last: int = option(5, check=check_int)


@report_kind("fast_q")
class FastQ(Figure):
    DESCRIPTION = ("adaptive FAST (FAST Algorithm 2): the snapshot probability q_t that governed each round (top) and "
                   "the signal it is updated from, the participants' mean local training accuracy acc_t (bottom), one "
                   "line per seed, snapshot rounds marked ×; q_(t+1) = clip(q_t + λ(acc_(t−1) − acc_t), 0, 1) rises "
                   "only when the signal falls")

    def check(self, config: dict) -> None:
        super().check(config)
        for experiment in self.experiments:
            for algorithm in self.selected(config, experiment):
                spec = config["algorithms"][algorithm]
                if spec["algorithm"] != "fast" or spec.get("schedule") != "adaptive":
                    raise ValueError(f"algorithms: {algorithm!r} (in {experiment!r}) is not adaptive FAST; list the "
                                     "adaptive FAST algorithms under 'algorithms'")


class Toy(Figure):
    def check(self, config: dict) -> None:
        if self.experiments:
            raise ValueError(f"experiments: kind {self.kind!r} computes its figure exactly and uses no experiments")


@report_kind("toy_heterogeneity")
class ToyHeterogeneity(Toy):
    DESCRIPTION = ("Example 1 of FedSWE §4 computed exactly: two clients with F_i(x) = (x − u_i)²/2, u = {u}, "
                   "stationary availability p_1, p_2; the colour is |lim E x^t − x*| of FedAvg (closed form, no "
                   "training)")
    u: list[float] = option([0.0, 100.0], check=_TWO_NUMBERS)
    resolution: int = option(101, check=partial(check_int, minimum=3))
    weightings: list[Literal["active", "all"]] = option(["active", "all"],
                                                        check=must("a list of 'active' and/or 'all'", bool))


@report_kind("toy_interpolation")
class ToyInterpolation(Toy):
    DESCRIPTION = ("FedSWE Fig. 5 computed exactly: Algorithm 1 on two scalar clients, u = {u}, client 1 available in "
                   "even rounds only, client 2 in odd rounds only, s = {local_steps} gradient steps of size {lr}, η_g "
                   "= {global_lr}, k ∈ {k}; the global gradient ∇F(x^t) after each client's rounds and the consensus "
                   "error (1/2)Σ(x_i − x̄)² (no training). They settle on ±|u1 − u2|/2 · g/(k + g) with g = η_g(1 − "
                   "(1 − η)^s): k = 0 keeps the full bias, k > 0 shrinks it")
    u: list[float] = option([100.0, -100.0], check=_TWO_NUMBERS)
    k: list[float] = option([0, 1], check=must("a list of numbers >= 0", lambda v: bool(v) and min(v) >= 0))
    rounds: int = option(1000, check=check_int)
    local_steps: int = option(10, check=check_int)
    lr: float = option(0.001, check=check_positive)
    global_lr: float = option(1.0, check=check_positive)


@report_kind("claims")
class Claims(Report):
    DESCRIPTION = ("the papers' claims checked on these runs: each claim, its source in the paper, our numbers (mean "
                   "± std over seeds, seeds and rounds of every cell it reads), every comparison's mean difference "
                   "over seeds paired by seed with its 95% Student-t confidence interval and number of pairs, the "
                   "paper's own numbers where it publishes the same cells, and the verdict: holds or fails when the "
                   "interval lies entirely on one side of the claim's bound (0, or −margin for non-inferiority); no "
                   "difference when an accuracy comparison is neither but its 90% interval lies inside "
                   "±{equivalence_margin_points} points (two one-sided tests at the 5% level), which is also what "
                   "an `equivalent` claim needs to hold (it fails when the 95% interval lies beyond the band); "
                   "otherwise not resolved; fewer than 3 seeds, or a cell whose accuracy is still improving at the "
                   "end of its run (last window against the window before, same interval, beyond "
                   "{plateau_tolerance_points} points), give no verdict; whether a claim holds is this run's finding, "
                   "not something the pipeline assumes")
    claims: list = None
    last_n: int | None = option(None, check=check_int)  # by default each experiment's training.last_n
    model: EvalModel = "local_mean"
    # share of a run's rounds in each window of the still-improving test (>= last_n)
    plateau_window: float = option(0.2, check=must("a share of the rounds in (0, 0.5]", lambda v: 0 < v <= 0.5))
    # gain per window (accuracy fraction) above which a curve is still improving
    plateau_tolerance: float = option(0.005, check=must(">= 0", lambda v: v >= 0))
    # accuracy fraction within which two cells show no difference
    equivalence_margin: float = option(0.005, check=must("> 0", lambda v: v > 0))

    @classmethod
    def from_config(cls, raw: dict) -> "Claims":
        for key in ("experiments", "algorithms"):
            if key in raw:
                raise ValueError(f"{key}: kind 'claims' reads the experiments and algorithms its claims name; "
                                 "do not list them")
        experiments, algorithms = referenced(raw["claims"])
        return cls(**raw, experiments=experiments, algorithms=algorithms)

    def check(self, config: dict) -> None:
        for i, claim in enumerate(parse_claims(self.claims)):
            for cell in check_cells(claim["check"]):
                experiment, algorithm = cell["experiment"], cell["algorithm"]
                if experiment not in config["experiments"]:
                    raise ValueError(f"claims[{i}]: experiment {experiment!r} is not defined under 'experiments'")
                if algorithm not in config["experiments"][experiment]["algorithms"]:
                    raise ValueError(f"claims[{i}]: experiment {experiment!r} does not run algorithm {algorithm!r}")
        super().check(config)


def parse_report(name: str, raw: dict, config: dict) -> Report:
    """The report's typed spec, checked against the config; ValueError("reports.<name>.<key>: ...") otherwise."""
    try:
        kind = raw.get("kind")
        cls = KINDS[kind]
        hints = typing.get_type_hints(cls)
        known = [f.name for f in fields(cls)]
        for key, value in raw.items():
            if key not in known:
                raise ValueError(f"{key}: not a key of kind {kind!r} (keys: {sorted(known)})")
            if not has_type(value, hints[key]):
                raise ValueError(f"{key}: must be {type_name(hints[key])}, got {value!r}")
        for f in fields(cls):  # a default of None that the key's type does not allow: the key is required
            if f.name not in raw and f.default is None and not has_type(None, hints[f.name]):
                raise ValueError(f"{f.name}: required by kind {kind!r}")
        report = cls.from_config(raw)
        report.check(config)
        return report
    except ValueError as error:
        raise ValueError(f"reports.{name}.{error}") from error


def parse_reports(config: dict) -> dict[str, Report]:
    return {name: parse_report(name, raw, config) for name, raw in (config.get("reports") or {}).items()}


def applicable(settings: dict) -> set[str]:
    """The trace attributes that shape its availability (a two-group trace's, its inner staircase's too)."""
    inner = SHAPING["staircase"] if settings["dynamics"] == "two_group" and settings["inner"] == "staircase" else set()
    return SHAPING.get(settings["dynamics"], set()) | inner


def attributes(experiment: str, partition: dict, trace: dict, training: dict) -> dict:
    """ATTRIBUTES of an experiment from its partition, trace (with any model defaults filled in) and training."""
    model = trace["model"]
    setting = TRACE_MODELS[model].DYNAMICS_SETTING
    dynamics = trace.get(setting) if setting else model
    settings = {"experiment": experiment, "dataset": partition["dataset"], "scheme": partition["scheme"],
                "alpha": partition.get("alpha"), "num_clients": trace.get("num_clients") or partition.get(
                    "num_clients"), "rounds": training["rounds"], "trace_model": model, "dynamics": dynamics,
                "p": trace.get("p"), "distribution": trace.get("distribution"), "inner": trace.get("inner")}
    shaping = applicable(settings)
    return {**settings, **{key: trace.get(key) if key in shaping else None
                           for key in ("gamma", "period", "low", "window", "inner")}}


def experiment_outputs(experiment: str) -> dict[str, str]:
    folder = path(EXPERIMENT_DIR, experiment=experiment)
    return {"md": f"{folder}/table.md", "csv": f"{folder}/table.csv", "png": f"{folder}/accuracy.png"}


def report_outputs(name: str, report: Report) -> dict[str, str]:
    """Every file of the report (rules report_table, report_figure and report_paper write them)."""
    folder = path(REPORT_DIR, report=name)
    if report.SHAPE == "figure":
        return {"png": f"{folder}/figure.png", "pdf": f"{folder}/figure.pdf", "csv": f"{folder}/figure.csv"}
    paths = {"md": f"{folder}/table.md", "tex": f"{folder}/table.tex", "csv": f"{folder}/table.csv"}
    if report.SHAPE == "paper_table":
        paths.update(paper_md=f"{folder}/paper.md", paper_tex=f"{folder}/paper.tex", paper_csv=f"{folder}/paper.csv")
    return paths


def run_dirs(job: dict) -> list[str]:
    return [path(RUN_DIR, experiment=e, algorithm=a, seed=s) for e, info in job["experiments"].items()
            for a in info["algorithms"] for s in info["seeds"]]
