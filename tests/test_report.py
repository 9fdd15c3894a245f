"""Cross-experiment reports on synthetic runs: the numbers of every table kind, the ranking marks, the paper
comparison, and every output file of every kind (tables and figures)."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fedavail.integrity import seal_summary
from fedavail.plan import captions, reports
from fedavail.plan.checks import parse_checked_reports
from fedavail.plan.errors import ConfigError
from fedavail.plan.plan import Run, build_plan
from fedavail.plan.specs import as_json
from fedavail.report import build, compare
from fedavail.report import frame as tidy
from fedavail.report import render, tables

ROUNDS = 100


def run_spec(experiment, algorithm, seed, entry):
    """The resolved spec fedavail.train writes into a run's summary.json (the reports read a run's settings there),
    for algorithm entry `entry`."""
    config = config_with({experiment: ("svhn", "stationary", None, 0.1, [algorithm])}, {algorithm: entry}, {},
                         seeds=(seed,))
    return build_plan(config).run_spec(Run(experiment, algorithm, seed))


def write_run(root, experiment, algorithm, seed, test, train=None, rounds=ROUNDS, eval_every=10, last_n=20,
              diverged_at=None, extra=None, state_bytes=4000, entry=None):
    """A run whose evaluated test accuracy at round t is test(t) (train(t) for train accuracy), evaluated like
    fedavail.train: every eval_every rounds and every round of the last last_n; stopped after diverged_at. `entry`:
    its algorithm entry, ALGS[algorithm] by default."""
    rows = []
    stop = rounds if diverged_at is None else diverged_at + 1
    for t in range(stop):
        row = {"round": t, "participants": 3, "lr": 0.1, "local_loss": 1.0, "local_acc": 0.5}
        if extra:
            row.update({k: f(t) for k, f in extra.items()})
        evaluated = (t % eval_every == 0 or t >= rounds - last_n) and t != diverged_at
        row["test_acc"] = test(t) if evaluated else np.nan
        row["train_acc"] = (train or test)(t) if evaluated else np.nan
        rows.append(row)
    directory = root / f"results/runs/{experiment}/{algorithm}/seed{seed}"
    directory.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(directory / "metrics.parquet")
    summary = {"experiment": experiment, "algorithm_id": algorithm, "seed": seed, "diverged_at": diverged_at,
               "state_bytes": state_bytes, "dimension": 1000, "wall_seconds": 2.0, "peak_memory_bytes": 2**20,
               "rounds_completed": stop, "spec": run_spec(experiment, algorithm, seed, entry or ALGS[algorithm])}
    (directory / "summary.json").write_text(json.dumps(seal_summary(summary, directory / "metrics.parquet")))
    return directory


def config_with(experiments: dict, algorithms: dict, reports: dict, seeds=(0, 1)):
    """A config: experiments {name: (dataset, dynamics, gamma, alpha, algorithm names)}."""
    partitions, traces, exps = {}, {}, {}
    for name, (dataset, dynamics, gamma, alpha, algs) in experiments.items():
        partitions[f"p_{name}"] = {"dataset": dataset, "scheme": "client_dirichlet", "num_clients": 100,
                                   "alpha": alpha}
        trace = {"model": "fedswe", "partition": f"p_{name}", "rounds": ROUNDS, "dynamics": dynamics}
        if gamma is not None:
            trace["gamma"] = gamma
        traces[f"t_{name}"] = trace
        exps[name] = {"partition": f"p_{name}", "trace": f"t_{name}", "algorithms": list(algs),
                      "training": {"model": "small_cnn", "rounds": ROUNDS, "local": {"steps": 5}, "last_n": 20,
                                   "eval_every": 10}}
    return {"seeds": list(seeds), "partitions": partitions, "traces": traces, "algorithms": algorithms,
            "experiments": exps, "reports": reports}


ALGS = {"swe": {"algorithm": "fedswe", "k": 100, "lr": 0.1}, "avg": {"algorithm": "fedavg", "weighting": "active",
        "lr": 0.05}, "all": {"algorithm": "fedavg", "weighting": "all", "lr": 0.05},
        "known": {"algorithm": "fedavg", "weighting": "known", "lr": 0.1}, "mifa": {"algorithm": "mifa", "lr": 0.05}}


def constant(value):
    return lambda t: value


def _job(config, name, dirs):
    """(job spec, the report's view of its runs), the spec passed through JSON as the rule passes it."""
    job = json.loads(as_json(build_plan(config).report_job(name)))
    return job, tidy.view(job, tidy.load(job, dirs))


def _experiment_report(tmp_path, config, dirs):
    """The per-experiment files of experiment e, as rule report_experiment writes them."""
    outputs = {k: tmp_path / v for k, v in reports.experiment_outputs("e").items()}
    build.make_report(json.loads(as_json(build_plan(config).experiment_job("e"))), dirs, outputs)
    return outputs


# ---------------------------------------------------------------- run statistics


def _one_run(tmp_path, **run):
    """The tidy frame of one run of experiment e, algorithm avg (training.last_n 20, rounds ROUNDS)."""
    config = config_with({"e": ("svhn", "sine", 0.3, 0.1, ["avg"])}, ALGS, {}, seeds=[0])
    job = build_plan(config).experiment_job("e")
    return tidy.load(job, [write_run(tmp_path, "e", "avg", 0, **run)])


def test_window_mean_uses_only_evaluated_rounds_of_the_last_n(tmp_path):
    run = _one_run(tmp_path, test=lambda t: t / 100, last_n=5)
    assert tidy.window_mean(run, "test_acc", 5)["value"].item() == pytest.approx(np.mean([95, 96, 97, 98, 99]) / 100)
    # A 50-round window sees rounds 50, 60, 70, 80, 90 (every 10th) and 95..99 (the last 5, every round).
    expected = np.mean([50, 60, 70, 80, 90, 95, 96, 97, 98, 99]) / 100
    assert tidy.window_mean(run, "test_acc", 50)["value"].item() == pytest.approx(expected)
    assert np.isnan(tidy.window_mean(run, "consensus_error", 5)["value"].item())


def test_last_values_ratio_and_first_reaching(tmp_path):
    run = _one_run(tmp_path, test=lambda t: t / 100, extra={"snapshot": lambda t: int(t % 4 == 0)})
    assert tidy.last_values(run, "test_acc", 5)["value"].tolist() == pytest.approx([0.95, 0.96, 0.97, 0.98, 0.99])
    assert tidy.arbitrary_ratio(run)["value"].item() == pytest.approx(0.75)
    curve = tidy.sampled(run, "test_acc", 20)
    assert list(curve["round"]) == [0, 20, 40, 60, 80]
    assert tidy.first_reaching(curve, 0.4, ["algorithm"])["avg"] == 40
    assert tidy.first_reaching(curve, 0.41, ["algorithm"])["avg"] == 60
    assert np.isnan(tidy.first_reaching(curve, 0.95, ["algorithm"])["avg"])


def test_the_frame_has_one_row_per_run_and_round_with_its_resolved_settings(tmp_path):
    run = _one_run(tmp_path, test=constant(0.5))
    assert len(run) == ROUNDS and run["round"].tolist() == list(range(ROUNDS))
    first = run.iloc[0]
    assert (first["experiment"], first["algorithm"], first["seed"], first["algorithm_name"]) == ("e", "avg", 0,
                                                                                                   "fedavg")
    assert first["algorithm.weighting"] == "active" and first["algorithm.lr"] == 0.05
    assert (first["dataset"], first["alpha"], first["dynamics"], first["gamma"]) == ("svhn", 0.1, "sine", 0.3)
    assert first["period"] == 20  # the trace model's default, filled in
    assert (first["rounds"], first["last_n"], first["state_bytes"]) == (ROUNDS, 20, 4000)


# ---------------------------------------------------------------- FedSWE Table 2 style


@pytest.fixture
def table2(tmp_path):
    # Final test accuracies per seed: swe 0.80/0.84, avg 0.70/0.72, all 0.60/0.60, known 0.90/0.90 (group 2).
    values = {"swe": (0.80, 0.84), "avg": (0.70, 0.72), "all": (0.60, 0.60), "known": (0.90, 0.90)}
    dirs = []
    for experiment in ("svhn_sine", "mnist_sine"):
        for algorithm, per_seed in values.items():
            for seed, value in enumerate(per_seed):
                dirs.append(write_run(tmp_path, experiment, algorithm, seed, constant(value),
                                      train=constant(value + 0.01)))
    experiments = {"svhn_sine": ("svhn", "sine", 0.3, 0.1, list(values)),
                   "mnist_sine": ("mnist5k", "sine", 0.3, 0.1, list(values))}
    config = config_with(experiments, ALGS, {"t2": {"kind": "fedswe_table", "experiments": list(experiments),
                                                    "last_n": 20}})
    job = build_plan(config).report_job("t2")
    return job, tidy.view(job, tidy.load(job, dirs))


def test_fedswe_table_numbers_and_marks(table2):
    job, runs = table2
    table, frame = tables.accuracy_table(job, runs)
    swe = frame[(frame["experiment"] == "svhn_sine") & (frame["algorithm"] == "swe") & (frame["metric"] == "test_acc")]
    assert swe["mean"].item() == pytest.approx(82.0) and swe["std"].item() == pytest.approx(2.0)
    train = frame[(frame["algorithm"] == "avg") & (frame["metric"] == "train_acc")]
    assert train["mean"].tolist() == pytest.approx([72.0, 72.0])
    markdown = render.to_markdown(table)
    # Group 1 (swe, avg, all): swe best (bold), avg second (underlined); known (group 2) is higher but unranked.
    assert "**82.0 ± 2.0**" in markdown and "<u>71.0 ± 1.0</u>" in markdown
    assert "**90.0" not in markdown and "90.0 ± 0.0" in markdown
    latex = render.to_latex(table)
    assert r"\textbf{82.0 $\pm$ 2.0}" in latex and r"\underline{71.0 $\pm$ 1.0}" in latex


def test_rank_marks_ties_and_nan():
    marks = render.rank_marks({"a": 0.5, "b": 0.5, "c": 0.4, "d": float("nan"), "e": 0.3}, 1)
    assert marks == {"a": "best", "b": "best", "c": "second"}


def test_paper_comparison_only_for_matching_cells(table2):
    job, runs = table2
    _, cells = tables.accuracy_table(job, runs)
    result = compare.compare(cells, reports.KINDS["fedswe_table"].PAPER_SOURCES)
    # SVHN sine cells match Table 2; the MNIST-5k cells are never compared.
    assert set(result["experiment"]) == {"svhn_sine"}
    assert set(result["dataset"]) == {"svhn"}
    swe = result[(result["identity"] == "fedswe_k100") & (result["metric"] == "test_acc")].iloc[0]
    assert swe["paper_mean"] == 85.8 and swe["paper_std"] == 0.8
    assert swe["difference"] == pytest.approx(82.0 - 85.8) and not swe["within_std"]
    known = result[(result["identity"] == "fedavg_known") & (result["metric"] == "test_acc")].iloc[0]
    assert known["paper_mean"] == 86.0 and known["difference"] == pytest.approx(4.0) and not known["within_std"]
    # 'all' trains 60% vs the paper's 71.3 ± 2.5
    assert len(result) == 8  # 4 algorithms x train/test


def test_comparison_within_std_and_gamma_must_agree():
    paper = compare.paper_values()
    ours = pd.DataFrame([
        {"experiment": "e", "algorithm": "x", "identity": "fedavg_active", "dataset": "svhn", "dynamics": "sine",
         "alpha": 0.1, "gamma": 0.3, "metric": "test_acc", "mean": 82.5, "std": 0.5, "seeds": 3, "rounds": 2000,
         "clients": 100},
        {"experiment": "f", "algorithm": "x", "identity": "fedavg_active", "dataset": "svhn", "dynamics": "sine",
         "alpha": 0.1, "gamma": 0.25, "metric": "test_acc", "mean": 82.5, "std": 0.5, "seeds": 3, "rounds": 2000,
         "clients": 100},
        {"experiment": "g", "algorithm": "x", "identity": "fedavg_active", "dataset": "svhn", "dynamics": "sine",
         "alpha": 0.05, "gamma": 0.3, "metric": "test_acc", "mean": 70.0, "std": 0.5, "seeds": 3, "rounds": 2000,
         "clients": 100}])
    result = compare.compare(ours, reports.KINDS["sweep"].PAPER_SOURCES, paper)
    assert list(result["experiment"]) == ["e", "g"]  # γ = 0.25 is no published cell
    e = result.iloc[0]
    assert e["source"] == "FedSWE Table 8" and e["paper_mean"] == 82.0 and e["within_std"]  # |0.5| <= 1.3
    g = result.iloc[1]
    assert g["source"] == "FedSWE Table 9" and g["paper_mean"] == 78.5 and not g["within_std"]


def test_paper_values_csv_is_complete():
    paper = compare.paper_values()
    counts = paper["source"].value_counts()
    assert counts["FedSWE Table 2"] == 3 * 3 * 10 * 2 and counts["FedSWE Table 7"] == 12 * 7
    assert counts["FedSWE Table 8"] == 3 * 7 * 2 and counts["FedSWE Table 9"] == 3 * 7 * 2
    t2 = paper[paper["source"] == "FedSWE Table 2"]
    assert (t2["std"] > 0).all() and t2["mean"].between(30, 95).all()
    never = paper[(paper["source"] == "FedSWE Table 7") & paper["mean"].isna()]
    assert set(never["algorithm"]) == {"fedavg_all"} and len(never) == 3
    # Table 8 at γ = 0.3 repeats Table 2's SVHN sine cells.
    t8 = paper[(paper["source"] == "FedSWE Table 8") & (paper["gamma"] == 0.3)]
    for row in t8.itertuples():
        twin = t2[(t2["dataset"] == "svhn") & (t2["dynamics"] == "sine") & (t2["algorithm"] == row.algorithm)
                  & (t2["metric"] == row.metric)]
        assert twin["mean"].item() == row.mean and twin["std"].item() == row.std


# ---------------------------------------------------------------- Table 7, FAST, memory


def test_rounds_to_target_first_sampled_round_and_dash(tmp_path):
    dirs = [write_run(tmp_path, "svhn_sine", "avg", s, test=lambda t, s=s: min(0.9, t / 100 + 0.05 * s))
            for s in (0, 1)]
    dirs += [write_run(tmp_path, "svhn_sine", "all", s, test=constant(0.3)) for s in (0, 1)]
    config = config_with({"svhn_sine": ("svhn", "sine", 0.3, 0.1, ["avg", "all"])}, ALGS,
                         {"t7": {"kind": "rounds_to_target", "experiments": ["svhn_sine"], "targets": [0.2, 0.4, 0.8],
                                 "sample_every": 20}})
    table, frame = tables.rounds_to_target_table(*_job(config, "t7", dirs))
    avg = frame[frame["algorithm"] == "avg"].set_index("metric")["mean"]
    # mean curve t/100 + 0.025: reaches 0.2 at sampled round 20 (0.225), 0.4 at 40 (0.425), 0.8 at 80 (0.825).
    assert avg.to_dict() == {"rounds_to_20": 20, "rounds_to_40": 40, "rounds_to_80": 80}
    flat = frame[frame["algorithm"] == "all"].set_index("metric")["mean"]
    assert flat["rounds_to_20"] == 0 and np.isnan(flat["rounds_to_40"])
    markdown = render.to_markdown(table)
    assert "| FedAvg over all | 0 | — | — |" in markdown
    result = compare.compare(frame, reports.KINDS["rounds_to_target"].PAPER_SOURCES)
    row = result[(result["identity"] == "fedavg_active") & (result["metric"] == "rounds_to_40")].iloc[0]
    assert row["paper_mean"] == 80 and row["difference"] == -40 and row["within_std"] is pd.NA


def test_rounds_to_target_auto_targets(tmp_path):
    dirs = [write_run(tmp_path, "e", "avg", 0, test=lambda t: min(0.87, t / 50))]
    config = config_with({"e": ("svhn", "sine", 0.3, 0.1, ["avg"])}, ALGS,
                         {"t7": {"kind": "rounds_to_target", "experiments": ["e"]}}, seeds=[0])
    _, frame = tables.rounds_to_target_table(*_job(config, "t7", dirs))
    # best 87% -> rounded down to 80% -> quarters 20, 40, 60, 80.
    assert list(frame["metric"]) == ["rounds_to_20", "rounds_to_40", "rounds_to_60", "rounds_to_80"]


def test_fast_table_last5_and_ratio(tmp_path):
    fast = {"algorithm": "fast", "base": "fedavg", "schedule": "adaptive", "lam": 1, "lr": 0.05}
    dirs = []
    for seed in (0, 1):
        dirs.append(write_run(tmp_path, "fm_gamma", "fedavg", seed, test=lambda t, s=seed: 0.5 + 0.01 * s,
                              last_n=1, entry=ALGS["avg"]))
        dirs.append(write_run(tmp_path, "fm_gamma", "ada", seed, test=lambda t: t / 100, last_n=1, entry=fast,
                              extra={"snapshot": lambda t, s=seed: int(t < 10 * (s + 1)), "q": constant(0.1)}))
    config = config_with({"fm_gamma": ("fashion_mnist", "stationary", None, 0.05, ["fedavg", "ada"])},
                         {"fedavg": ALGS["avg"], "ada": fast},
                         {"f": {"kind": "fast_table", "experiments": ["fm_gamma"]}})
    table, frame = tables.fast_table(*_job(config, "f", dirs))
    acc = frame[(frame["algorithm"] == "ada") & (frame["metric"] == "test_acc")].iloc[0]
    # Evaluated rounds 0, 10, ..., 90 and 99: the last five are 60, 70, 80, 90, 99 (both seeds alike).
    values = np.array([60, 70, 80, 90, 99]) / 100
    assert acc["mean"] == pytest.approx(100 * values.mean()) and acc["std"] == pytest.approx(100 * values.std())
    ratio = frame[(frame["algorithm"] == "ada") & (frame["metric"] == "ratio")].iloc[0]
    assert ratio["mean"] == pytest.approx(100 * np.mean([0.9, 0.8]))  # seeds: 10 and 20 snapshot rounds of 100
    base = frame[(frame["algorithm"] == "fedavg") & (frame["metric"] == "test_acc")].iloc[0]
    assert base["mean"] == pytest.approx(50.5) and base["std"] == pytest.approx(0.5)
    assert np.isnan(frame[(frame["algorithm"] == "fedavg") & (frame["metric"] == "ratio")]["mean"].item())
    markdown = render.to_markdown(table)
    assert "FAST Ada.(def.) Ratio" in markdown and "85.0%" in markdown and "50.50 ± 0.50" in markdown


def test_config_order_survives_the_sorted_json_spec(tmp_path):
    algorithms = {"zeta": ALGS["avg"], "alpha": ALGS["swe"], "mid": ALGS["all"]}
    experiments = {"z_exp": ("svhn", "sine", 0.3, 0.1, ["zeta", "alpha", "mid"]),
                   "a_exp": ("svhn", "sine", 0.2, 0.1, ["mid", "zeta"])}
    dirs = [write_run(tmp_path, e, a, s, constant(0.5), entry=algorithms[a]) for e, (*_, algs) in experiments.items()
            for a in algs for s in (0, 1)]
    config = config_with(experiments, algorithms, {"f": {"kind": "fast_table", "experiments": ["z_exp", "a_exp"]}})
    job = json.loads(as_json(build_plan(config).report_job("f")))
    assert list(job["experiments"]) == ["a_exp", "z_exp"]  # what the rule's JSON does to mappings
    table, _ = tables.fast_table(job, tidy.view(job, tidy.load(job, dirs)))
    assert table.columns == ["experiment", "FedAvg over active", "FedSWE (k = 100)", "FedAvg over all"]
    assert [row[0] for row in table.rows] == ["SVHN α = 0.1 sine", "SVHN α = 0.1 sine"]
    assert table.rows[1][2] == "n/a"  # a_exp (second row) did not run alpha


def test_diverged_runs_are_marked_not_dropped(tmp_path):
    dirs = [write_run(tmp_path, "e", "avg", 0, constant(0.7)),
            write_run(tmp_path, "e", "avg", 1, constant(0.5), diverged_at=30),
            write_run(tmp_path, "e", "swe", 0, constant(0.6), diverged_at=10),
            write_run(tmp_path, "e", "swe", 1, constant(0.6), diverged_at=12)]
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg", "swe"])}, ALGS,
                         {"t": {"kind": "fedswe_table", "experiments": ["e"], "last_n": 20}})
    table, frame = tables.accuracy_table(*_job(config, "t", dirs))
    avg = frame[(frame["algorithm"] == "avg") & (frame["metric"] == "test_acc")].iloc[0]
    assert avg["mean"] == pytest.approx(70.0) and avg["seeds"] == 2 and avg["diverged"] == "seed 1 at round 30"
    markdown = render.to_markdown(table)
    assert "70.0 ± 0.0 †" in markdown and "diverged (seed 0 at round 10; seed 1 at round 12) †" in markdown
    assert ("† diverged (non-finite model or exploding loss), kept and marked: e / FedAvg over active: seed 1 at "
            "round 30.") in markdown


def _diverged_before_evaluation(root, algorithm, seed):
    """A run that diverged in round 0, as fedavail.train writes it: no evaluation, so no test_acc column at all."""
    directory = root / f"results/runs/e/{algorithm}/seed{seed}"
    directory.mkdir(parents=True)
    pd.DataFrame([{"round": 0, "participants": 3, "lr": 1e6, "local_loss": 6.5e19, "local_acc": 0.1}]).to_parquet(
        directory / "metrics.parquet")
    summary = {"experiment": "e", "algorithm_id": algorithm, "seed": seed, "diverged_at": 0, "state_bytes": 4000,
               "dimension": 1000, "spec": run_spec("e", algorithm, seed, ALGS[algorithm])}
    (directory / "summary.json").write_text(json.dumps(seal_summary(summary, directory / "metrics.parquet")))
    return directory


def test_reports_render_runs_that_diverged_before_their_first_evaluation(tmp_path):
    dirs = [_diverged_before_evaluation(tmp_path, "avg", seed) for seed in (0, 1)]
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg"])}, ALGS,
                         {"t": {"kind": "fedswe_table", "experiments": ["e"], "last_n": 20}})
    outputs = _experiment_report(tmp_path / "out", config, dirs)
    assert "| avg | diverged (seed 0 at round 0; seed 1 at round 0) |" in outputs["md"].read_text()
    assert outputs["png"].stat().st_size > 0
    table, _ = tables.accuracy_table(*_job(config, "t", dirs))
    assert "diverged (seed 0 at round 0; seed 1 at round 0) †" in render.to_markdown(table)


def test_an_experiment_table_marks_a_diverged_run_that_kept_finite_weights(tmp_path):
    dirs = [write_run(tmp_path, "e", "avg", 0, constant(0.1), diverged_at=85),
            write_run(tmp_path, "e", "avg", 1, constant(0.1), diverged_at=90)]
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg"])}, ALGS, {})
    outputs = _experiment_report(tmp_path, config, dirs)
    assert "| avg | 10.00 ± 0.00 † | 10.00 | 2 | † diverged: seed 0 at round 85; seed 1 at round 90 |" in outputs[
        "md"].read_text()


def test_a_damaged_run_file_is_named(tmp_path):
    directory = write_run(tmp_path, "e", "avg", 0, constant(0.5))
    (directory / "summary.json").write_text('{"experiment": "e", "algo')
    with pytest.raises(ValueError, match=r"summary.json is unreadable .* delete it and rerun"):
        tidy.read_run(directory)
    write_run(tmp_path, "e", "avg", 0, constant(0.5))
    (directory / "metrics.parquet").write_bytes((directory / "metrics.parquet").read_bytes()[:100])
    with pytest.raises(ValueError, match=r"metrics.parquet was changed after the run wrote them"):
        tidy.read_run(directory)


def test_memory_table(tmp_path):
    dirs = [write_run(tmp_path, "e", "avg", s, constant(0.5), state_bytes=4000) for s in (0, 1)]
    dirs += [write_run(tmp_path, "e", "mifa", s, constant(0.5), state_bytes=4000 * 101) for s in (0, 1)]
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg", "mifa"])}, ALGS,
                         {"m": {"kind": "memory", "experiments": ["e"]}})
    table, frame = tables.memory_table(*_job(config, "m", dirs))
    assert frame.set_index("algorithm")["model_copies"].to_dict() == {"avg": 1.0, "mifa": 101.0}


# ---------------------------------------------------------------- labels and spec


def _shown(algorithms: dict) -> dict:
    """The plan's label, identity and group of each entry of `algorithms`, all trained by one experiment."""
    config = config_with({"e": ("svhn", "stationary", None, 0.1, list(algorithms))}, algorithms, {})
    config["experiments"]["e"]["training"]["local"]["lr"] = 0.1
    return build_plan(config).shown


def test_identities_and_labels_come_from_the_algorithms_own_options():
    shown = _shown({"a": {"algorithm": "fedswe", "k": 0}, "b": {"algorithm": "fedswe"},
                    "c": {"algorithm": "fedavg", "weighting": "known"},
                    "d": {"algorithm": "fast", "schedule": "adaptive", "lam": 7},
                    "e": {"algorithm": "fast", "base": "scaffold", "q": 0.5}, "f": {"algorithm": "fast"},
                    "g": {"algorithm": "fast", "schedule": "adaptive", "lam": 1}, "h": {"algorithm": "mifa"},
                    "i": {"algorithm": "fast", "base": "fedprox", "schedule": "adaptive"}})
    assert {name: entry["identity"] for name, entry in shown.items()} == {
        "a": "fedswe_k0", "b": "fedswe_k100", "c": "fedavg_known", "d": "fast_ada7", "e": "fastplus_scaffold_q0.5",
        "f": "fast_q0.5", "g": "fast_ada1", "h": "mifa", "i": "fastplus_fedprox_ada1"}
    assert {name: entry["label"] for name, entry in shown.items()} == {
        "a": "FedSWE (k = 0)", "b": "FedSWE (k = 100)", "c": "FedAvg with known p_i^t", "d": "FAST Ada.(7)",
        "e": "FAST+ (SCAFFOLD) q = 0.5", "f": "FAST q = 0.5", "g": "FAST Ada.(def.)", "h": "MIFA (memory aided)",
        "i": "FAST+ (FedProx) Ada.(def.)"}
    assert [name for name, entry in shown.items() if entry["aided"]] == ["c", "h"]


def test_two_entries_never_share_a_label():
    shown = _shown({"all": {"algorithm": "fedavg", "weighting": "all"},
                    "all10": {"algorithm": "fedavg", "weighting": "all", "global_lr": 10.0},
                    "slow": {"algorithm": "fedavg", "weighting": "all", "lr": 0.01},
                    "twin": {"algorithm": "fedavg", "weighting": "all"},
                    "mine": {"algorithm": "fedavg", "label": "FedAvg over all"}})
    assert {name: entry["label"] for name, entry in shown.items()} == {
        "all": "FedAvg over all (global_lr = 1) [all]", "all10": "FedAvg over all (global_lr = 10)",
        "slow": "FedAvg over all (global_lr = 1, lr = 0.01)", "twin": "FedAvg over all (global_lr = 1) [twin]",
        "mine": "FedAvg over all"}
    with pytest.raises(ConfigError, match="label 'x' is stated by the entries \\['a', 'b'\\]"):
        _shown({"a": {"algorithm": "fedavg", "label": "x"}, "b": {"algorithm": "mifa", "label": "x"}})


def test_a_label_change_reruns_reports_not_training():
    algorithms = {"avg": {"algorithm": "fedavg", "lr": 0.1}, "swe": {"algorithm": "fedswe", "lr": 0.1}}
    plans = [build_plan(config_with({"e": ("svhn", "stationary", None, 0.1, ["avg", "swe"])},
                                    {**algorithms, "avg": {**algorithms["avg"], **extra}}, {}))
             for extra in ({}, {"label": "FedAvg"})]
    assert plans[0].run_spec(Run("e", "avg", 0)) == plans[1].run_spec(Run("e", "avg", 0))
    assert plans[0].experiment_job("e") != plans[1].experiment_job("e")
    assert plans[1].experiment_job("e")["shown"]["avg"]["label"] == "FedAvg"


@pytest.mark.parametrize("report, message", [
    ({"kind": "nope"}, r"reports\.r\.kind: 'nope' is not one of \('fedswe_table', "),
    ({"kind": "fedswe_table", "experiments": ["e"], "colour": 1}, "colour"),
    ({"kind": "fedswe_table", "experiments": ["missing"]}, "missing"),
    ({"kind": "fedswe_table", "experiments": []}, "experiments"),
    ({"kind": "sweep", "experiments": ["e"]}, "parameter"),
    ({"kind": "sweep", "experiments": ["e"], "parameter": "gamma"}, "no 'gamma'"),
    ({"kind": "fedswe_table", "experiments": ["e"], "algorithms": ["zzz"]}, "zzz"),
    ({"kind": "toy_heterogeneity", "experiments": ["e"]}, "experiments"),
    ({"kind": "rounds_to_target", "experiments": ["e"], "targets": [1.5]}, "targets"),
    ({"kind": "k_sweep", "experiments": ["e"], "algorithms": ["avg"]}, "parameter"),
    ({"kind": "fast_table", "experiments": ["e"], "last": 0}, r"reports\.r\.last: must be an integer >= 1, got 0"),
    ({"kind": "curves", "experiments": ["e"], "log_y": "yes"}, r"reports\.r\.log_y: must be true or false"),
    ({"kind": "fedswe_table", "experiments": ["e"], "decimals": -1},
     r"reports\.r\.decimals: must be an integer >= 0, got -1"),
    ({"kind": "fedswe_table", "experiments": "e"}, r"reports\.r\.experiments: must be a list of a string"),
])
def test_invalid_reports_are_rejected_naming_the_key(report, message):
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg", "swe"])}, ALGS, {"r": report})
    with pytest.raises(ConfigError, match=message):
        parse_checked_reports(config)


def test_every_report_kind_has_its_builder_and_caption():
    from fedavail.report import BUILDERS, claims, figures  # noqa: F401 (importing them adds their builders)

    assert set(BUILDERS) == {*reports.KINDS, "experiment"}
    for kind, cls in reports.KINDS.items():
        assert cls.DESCRIPTION, kind
        assert bool(cls.PAPER_SOURCES) == (cls.SHAPE == "paper_table"), kind


def test_an_unknown_report_kind_is_refused_naming_the_known_ones(tmp_path):
    job = {"name": "r", "report": {"kind": "heatmap", "experiments": []}, "experiments": {}, "algorithms": {}}
    with pytest.raises(ValueError, match=r"report kind: 'heatmap' is not one of \("):
        build.make_report(job, [], {"png": tmp_path / "f.png", "pdf": tmp_path / "f.pdf", "csv": tmp_path / "f.csv"})
    with pytest.raises(ValueError, match=r"kind: 'heatmap' is not one of \('fedswe_table', "):
        captions.caption(job)


def test_report_specs_load_without_torch_pandas_or_the_report_code():
    code = ("import sys, fedavail.plan.checks, fedavail.plan.captions, fedavail.plan.reports; "
            "print(sorted(m for m in ('pandas', 'fedavail.report') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
    code = "import sys, fedavail.plan.captions, fedavail.plan.reports; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_a_report_may_share_an_experiment_name():
    config = config_with({"e": ("svhn", "stationary", None, 0.1, ["avg"])}, ALGS,
                         {"e": {"kind": "memory", "experiments": ["e"]}})
    ours = set(reports.report_outputs("e", reports.parse_reports(config)["e"]).values())
    assert not ours & set(reports.experiment_outputs("e").values())


def test_job_spec_is_only_its_slice():
    experiments = {"a": ("svhn", "stationary", None, 0.1, ["avg", "swe"]),
                   "b": ("svhn", "sine", 0.3, 0.1, ["avg", "mifa"])}
    config = config_with(experiments, ALGS, {"r": {"kind": "fedswe_table", "experiments": ["a"],
                                                   "algorithms": ["swe"]}})
    job = build_plan(config).report_job("r")
    assert list(job["experiments"]) == ["a"] and job["experiments"]["a"]["algorithms"] == ["swe"]
    assert list(job["algorithms"]) == ["swe"]
    assert reports.run_dirs(job) == ["results/runs/a/swe/seed0", "results/runs/a/swe/seed1"]
    before = json.dumps(job, sort_keys=True)
    config["algorithms"]["mifa"]["lr"] = 0.5  # not in the report: its slice does not change
    assert json.dumps(build_plan(config).report_job("r"), sort_keys=True) == before
    assert "svhn" in captions.caption(job) and "Seeds: 0, 1" in captions.caption(job)


# ---------------------------------------------------------------- every kind writes every file


def _all_kinds_config():
    algorithms = {**ALGS, "swe0": {"algorithm": "fedswe", "k": 0, "lr": 0.1},
                  "ada": {"algorithm": "fast", "base": "fedavg", "schedule": "adaptive", "lam": 1, "lr": 0.05}}
    experiments = {"s1": ("svhn", "sine", 0.3, 0.1, ["avg", "swe", "swe0", "mifa", "ada"]),
                   "s2": ("svhn", "sine", 0.2, 0.1, ["avg", "swe", "swe0", "mifa", "ada"])}
    reports = {
        "t2": {"kind": "fedswe_table", "experiments": ["s1"]},
        "t7": {"kind": "rounds_to_target", "experiments": ["s1", "s2"]},
        "t8": {"kind": "sweep", "parameter": "gamma", "experiments": ["s1", "s2"]},
        "ft": {"kind": "fast_table", "experiments": ["s1", "s2"]},
        "mem": {"kind": "memory", "experiments": ["s1"]},
        "cur": {"kind": "curves", "experiments": ["s1", "s2"], "sample_every": 10},
        "con": {"kind": "consensus", "experiments": ["s1"], "algorithms": ["swe", "swe0"]},
        "ks": {"kind": "k_sweep", "experiments": ["s1", "s2"], "algorithms": ["swe", "swe0"], "last_n": 20,
               "target": 0.5, "sample_every": 10},
        "grid": {"kind": "grid", "x": "gamma", "hue": "dataset", "experiments": ["s1", "s2"], "algorithms": ["avg"]},
        "ratio": {"kind": "fast_ratio", "experiments": ["s1"], "algorithms": ["avg", "ada"]},
        "q": {"kind": "fast_q", "experiments": ["s1", "s2"], "algorithms": ["ada"]},
        "toy1": {"kind": "toy_heterogeneity", "resolution": 11},
        "toy5": {"kind": "toy_interpolation", "rounds": 50},
    }
    return config_with(experiments, algorithms, reports)


def test_every_kind_writes_its_files(tmp_path, monkeypatch):
    config = _all_kinds_config()
    for experiment, info in config["experiments"].items():
        for algorithm in info["algorithms"]:
            for seed in config["seeds"]:
                extra = {"consensus_error": lambda t: 10.0 / (t + 1)} if algorithm.startswith("swe") else {}
                if algorithm == "ada":
                    extra = {"snapshot": lambda t: int(t % 3 == 0), "q": constant(0.3), "q_signal": constant(0.7)}
                write_run(tmp_path, experiment, algorithm, seed, lambda t, s=seed: min(0.9, t / 80 + 0.02 * s),
                          extra=extra, entry=config["algorithms"][algorithm])
    monkeypatch.chdir(tmp_path)
    for name, report in config["reports"].items():
        job = json.loads(as_json(build_plan(config).report_job(name)))  # as the rule passes it: keys sorted
        parsed = reports.parse_report(name, report, config)
        outputs = {k: tmp_path / v for k, v in reports.report_outputs(name, parsed).items()}
        build.make_report(job, reports.run_dirs(job), outputs)
        for key, path in outputs.items():
            assert path.exists() and path.stat().st_size > 0, (name, key)
        if "png" in outputs:
            assert outputs["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert outputs["pdf"].read_bytes()[:5] == b"%PDF-"
        if "paper_md" in outputs:
            assert "paper vs ours" in outputs["paper_md"].read_text()
    paper = pd.read_csv(tmp_path / "results/reports/t8/paper.csv")
    assert "FedSWE Table 8" in set(paper["source"]) <= {"FedSWE Table 8", "FedSWE Table 2"}
    assert set(paper["gamma"]) == {0.3, 0.2}
    ks = pd.read_csv(tmp_path / "results/reports/ks/figure.csv")
    assert sorted(ks["k"].unique()) == [0.0, 100.0]
    toy = pd.read_csv(tmp_path / "results/reports/toy1/figure.csv")
    assert toy["bias"].max() == pytest.approx(50.0)
    q = pd.read_csv(tmp_path / "results/reports/q/figure.csv")  # every round of every seed, not a mean
    assert len(q) == 2 * len(config["seeds"]) * ROUNDS and set(q["q"]) == {0.3} and set(q["q_signal"]) == {0.7}


@pytest.mark.parametrize("kind", ["curves", "experiment"])
def test_a_figure_job_imports_no_seaborn_and_no_scipy(tmp_path, kind):
    """`fedavail report` draws its figures with matplotlib alone: seaborn, which imports scipy.stats, took about a
    second of every figure job's start-up."""
    config = config_with({"e": ("svhn", "sine", 0.3, 0.1, ["avg", "swe"])}, ALGS,
                         {"cur": {"kind": "curves", "experiments": ["e"], "sample_every": 10}})
    dirs = [write_run(tmp_path, "e", algorithm, seed, lambda t, s=seed: min(0.9, t / 80 + 0.02 * s))
            for algorithm in ("avg", "swe") for seed in config["seeds"]]
    if kind == "curves":
        job = build_plan(config).report_job("cur")
        outputs = reports.report_outputs("cur", reports.parse_report("cur", config["reports"]["cur"], config))
    else:
        job, outputs = build_plan(config).experiment_job("e"), reports.experiment_outputs("e")
    argv = ["report", "--spec", as_json(job), "--run-dirs", *map(str, dirs),
            "--out", *(f"{key}={tmp_path / path}" for key, path in outputs.items())]
    code = ("import json, sys; from fedavail.cli import main; main(json.loads(sys.argv[1])); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'seaborn', 'scipy'})))")
    result = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], check=True, capture_output=True, text=True)
    assert json.loads(result.stdout.splitlines()[-1]) == []
    assert (tmp_path / outputs["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fast_q_takes_only_adaptive_fast():
    config = _all_kinds_config()
    with pytest.raises(ValueError, match="'avg' \\(in 's1'\\) is not adaptive FAST"):
        reports.parse_report("q", {"kind": "fast_q", "experiments": ["s1"], "algorithms": ["avg", "ada"]}, config)


def test_fast_cells_match_the_numbers_in_the_fast_text():
    base = {"experiment": "fmnist_a0.05_gamma", "algorithm": "fast_ada1", "identity": "fast_ada1",
            "dataset": "fashion_mnist", "dynamics": "gamma", "alpha": 0.05, "gamma": None, "std": 1.0, "seeds": 3,
            "rounds": 500, "clients": 100}
    ours = pd.DataFrame([{**base, "metric": "test_acc", "mean": 70.0}, {**base, "metric": "ratio", "mean": 95.0},
                         {**base, "alpha": 0.1, "metric": "test_acc", "mean": 70.0}])
    result = compare.compare(ours, reports.KINDS["fast_table"].PAPER_SOURCES)
    assert result[["metric", "paper_mean"]].values.tolist() == [["test_acc", 71.48], ["ratio", 91.8]]
    assert result["within_std"].isna().all()  # the text gives no std
