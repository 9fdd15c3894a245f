"""The Plan: a checked config with every entry resolved once, and the runs and job specs derived from it. The
Snakefile loads one (fedavail.plan.load.load) and every rule reads its jobs' specs from it; a job passes its spec on
the command line, and the stages run what the spec says (the trainer, each run's summary.json, which the reports
read)."""

import re
from dataclasses import asdict, dataclass
from functools import cached_property

from fedavail.availability.trace_models import TRACE_MODELS, trace_spec
from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.checks import check_combinations, check_finite, check_names, parse_checked_reports, resolve_entries
from fedavail.plan.errors import ConfigError
from fedavail.plan.experiments import ExecutionOptions
from fedavail.plan.labels import entry_labels
from fedavail.plan.paths import RUN_DIR, path
from fedavail.plan.reports import Report
from fedavail.plan.sources import executed_algorithms, training_code_sha256
from fedavail.plan.specs import as_json


@dataclass(frozen=True)
class Run:
    experiment: str
    algorithm: str
    seed: int

    @property
    def directory(self) -> str:
        return path(RUN_DIR, experiment=self.experiment, algorithm=self.algorithm, seed=self.seed)


def experiment_seeds(config: dict, experiment: str) -> list[int]:
    """The experiment's own seeds (e.g. one seed for a cheap sweep), else the config's."""
    return config["experiments"][experiment].get("seeds", config["seeds"])


@dataclass(frozen=True)
class ExperimentPlan:
    partition: str
    trace: str
    algorithms: tuple[str, ...]
    seeds: tuple[int, ...]  # its own, else the config's
    training: dict  # the experiment's training block, as the schema filled it in
    local: dict[str, dict]  # algorithm -> its training.local, resolved with the algorithm's own lr


@dataclass(frozen=True)
class TrainingBatch:
    """Runs that one training process trains together (execution.seeds_per_job: all), their clients in the same
    vmap calls: every run of one dataset with the same training and algorithm settings, so the seeds of an
    experiment x algorithm and the runs of experiments that differ from it only in partition or trace."""

    name: str  # its rule's: train_<the first run's algorithm entry>, numbered when several batches share it
    dataset: str
    runs: tuple[Run, ...]
    specs: tuple[dict, ...]  # each run's run_spec, in the order of `runs`


@dataclass(frozen=True)
class Plan:
    """Everything the jobs of a config depend on. `config` is the checked config (grids expanded, the schema's
    defaults filled in): the report jobs' specs quote its partition, training and algorithm entries as written, and
    each trace as resolved in `traces`."""

    config: dict
    execution: ExecutionOptions
    datasets: dict[str, dict]  # name -> the prepare job's spec
    partitions: dict[str, dict]  # name -> the partition job's spec
    traces: dict[str, dict]  # name -> the trace job's spec
    algorithm_options: dict[str, AlgorithmOptions]
    experiments: dict[str, ExperimentPlan]
    reports: dict[str, Report]
    # algorithm entry (of those the experiments train) -> how reports show it: its label (fedavail.plan.labels), the
    # method's identity in the papers' tables and whether memory or known statistics aid it
    shown: dict[str, dict]

    @cached_property
    def algorithms(self) -> dict[str, dict]:
        """name -> the algorithm as a training job receives it: `algorithm` and every hyperparameter (its `lr` is in
        the run's training.local)."""
        return {name: {"algorithm": self.config["algorithms"][name]["algorithm"],
                       **{key: getattr(options, key) for key in options.hyperparameters()}}
                for name, options in self.algorithm_options.items()}

    def training_code_sha256(self, algorithm: str) -> str:
        """The hash of the code a run of entry `algorithm` executes (fedavail.plan.sources)."""
        name = self.config["algorithms"][algorithm]["algorithm"]
        return training_code_sha256(executed_algorithms(name, self.algorithm_options[algorithm]))

    def trace_partition(self, trace: str) -> str | None:
        """The partition whose class mixes trace `trace` reads, if its model reads one."""
        spec = self.traces[trace]
        return spec["partition"] if TRACE_MODELS[spec["model"]].NEEDS_PARTITION else None

    def trace_records(self, trace: str) -> list[str]:
        """The device records trace `trace` reads (fedavail.availability.device_records)."""
        spec = self.traces[trace]
        return TRACE_MODELS[spec["model"]].record_files(spec)

    def runs(self, experiment: str | None = None) -> list[Run]:
        names = [experiment] if experiment else list(self.experiments)
        return [Run(e, a, s) for e in names for a in self.experiments[e].algorithms for s in self.experiments[e].seeds]

    def dataset(self, experiment: str) -> str:
        return self.partitions[self.experiments[experiment].partition]["dataset"]

    @cached_property
    def training_batches(self) -> tuple[TrainingBatch, ...]:
        groups: dict[str, list[tuple[Run, dict]]] = {}
        for run in self.runs():
            spec = self.run_spec(run)
            key = as_json([self.dataset(run.experiment), spec["training"], spec["algorithm"]])
            groups.setdefault(key, []).append((run, spec))
        batches, names = [], set()
        for members in groups.values():
            runs, specs = zip(*members)
            stem = "train_" + re.sub(r"\W", "_", runs[0].algorithm)
            name, number = stem, 1
            while name in names:
                number += 1
                name = f"{stem}_{number}"
            names.add(name)
            batches.append(TrainingBatch(name, self.dataset(runs[0].experiment), runs, specs))
        return tuple(batches)

    def report_job(self, name: str) -> dict:
        """Report `name`'s job spec."""
        report = self.reports[name]
        return self._report_job(name, asdict(report), {e: report.selected(self.config, e) for e in report.experiments})

    def experiment_job(self, experiment: str) -> dict:
        """The job spec of the experiment's own table and accuracy figure."""
        report = {"kind": "experiment", "title": experiment, "experiments": [experiment],
                  "last_n": self.experiments[experiment].training["last_n"]}
        return self._report_job(experiment, report, {experiment: list(self.experiments[experiment].algorithms)})

    def runs_job(self) -> dict:
        """The job spec of every run's frame (results/frames/<config>.parquet, fedavail.plan.paths.RUNS_FRAME)."""
        report = {"kind": "runs", "title": "runs", "experiments": list(self.experiments)}
        return self._report_job("runs", report, {e: list(x.algorithms) for e, x in self.experiments.items()})

    def _report_job(self, name: str, report: dict, selected: dict[str, list[str]]) -> dict:
        """What a report job depends on: its settings and, per experiment, its partition, its trace as resolved here
        (every default in: the report reads it as it is), its training and the algorithms it shows (lists keep the
        config's order through the rule's sorted JSON)."""
        config = self.config
        experiments = {e: {"partition": config["partitions"][self.experiments[e].partition],
                           "trace": self.traces[self.experiments[e].trace], "training": self.experiments[e].training,
                           "algorithms": algorithms, "seeds": list(self.experiments[e].seeds)}
                       for e, algorithms in selected.items()}
        used = sorted({a for info in experiments.values() for a in info["algorithms"]})
        return {"name": name, "report": report, "experiments": experiments,
                "algorithms": {a: config["algorithms"][a] for a in used}, "shown": {a: self.shown[a] for a in used}}

    def run_spec(self, run: Run) -> dict:
        """Exactly what one training run depends on: its experiment's training settings with the local optimisation
        block resolved for its algorithm, the algorithm's hyperparameters, its seed (the trainer keys every stream of
        the run by it: fedavail.train.RunInputs.seed)."""
        plan = self.experiments[run.experiment]
        return {"experiment": run.experiment, "algorithm_id": run.algorithm, "seed": run.seed,
                "training": {**plan.training, "local": plan.local[run.algorithm]},
                "algorithm": self.algorithms[run.algorithm]}


def build_plan(config: dict) -> Plan:
    """`config` (grids expanded, validated against the schema) checked and resolved: raise ConfigError naming the
    first key whose value cannot run (fedavail.plan.checks)."""
    check_names(config)
    check_finite(config)
    execution, partitions, trace_models, algorithms, local = resolve_entries(config)
    check_combinations(config, trace_models, algorithms)
    traces = {name: trace_spec(model) for name, model in trace_models.items()}
    reports = parse_checked_reports(config)
    experiments = {name: ExperimentPlan(spec["partition"], spec["trace"], tuple(spec["algorithms"]),
                                        tuple(experiment_seeds(config, name)), spec["training"], local[name])
                   for name, spec in config["experiments"].items()}
    datasets = {name: dict((config.get("datasets") or {}).get(name, {}))
                for name in {spec["dataset"] for spec in config["partitions"].values()}}
    return Plan(config, execution, datasets, partitions, traces, algorithms, experiments, reports,
                _shown(config, algorithms, experiments))


def _shown(config: dict, options: dict[str, AlgorithmOptions], experiments: dict[str, ExperimentPlan]) -> dict:
    used = sorted({a for experiment in experiments.values() for a in experiment.algorithms})
    try:
        labels = entry_labels({a: config["algorithms"][a] for a in used}, {a: options[a] for a in used})
    except ValueError as error:
        raise ConfigError(f"algorithms: {error}") from error
    return {a: {"label": labels[a], "identity": options[a].identity(), "aided": options[a].aided()} for a in used}
