"""Which model FedSWE-style reports score: the local-copy mean for algorithms that keep local copies, with the
server model as a second, labelled row; `eval_model: global` scores every algorithm by its server model."""

import json

import pandas as pd
import pytest
from test_report import ALGS, config_with, constant, write_run

from fedavail.plan import captions, reports
from fedavail.plan.plan import build_plan
from fedavail.plan.specs import as_json
from fedavail.report import build
from fedavail.report import frame as tidy

# swe: server model 0.60 / 0.64 per seed, local-copy mean 0.80 / 0.84 (train 0.70 / 0.90); avg: 0.70 / 0.72.
LOCAL = {0: 0.80, 1: 0.84}


def server_row(algorithm):
    return f"{algorithm}{tidy.SERVER_SUFFIX}"

SERVER = {0: 0.60, 1: 0.64}


def _runs(tmp_path, experiments=("svhn_sine",)):
    dirs = []
    for experiment in experiments:
        for seed in (0, 1):
            dirs.append(write_run(tmp_path, experiment, "swe", seed, constant(SERVER[seed]), extra={
                "test_acc_local_mean": constant(LOCAL[seed]), "train_acc_local_mean": constant(0.70 + 0.2 * seed)}))
            dirs.append(write_run(tmp_path, experiment, "avg", seed, constant(0.70 + 0.02 * seed)))
    return dirs


def _report(tmp_path, report, experiments=("svhn_sine",)):
    dirs = _runs(tmp_path, experiments)
    exps = {e: ("svhn", "sine", 0.3 if i == 0 else 0.2, 0.1, ["swe", "avg"]) for i, e in enumerate(experiments)}
    config = config_with(exps, ALGS, {"r": report})
    job = json.loads(as_json(build_plan(config).report_job("r")))
    outputs = {k: tmp_path / v for k, v in reports.report_outputs("r", reports.parse_reports(config)["r"]).items()}
    assert {str(d) for d in dirs} >= {str(tmp_path / d) for d in reports.run_dirs(job)}
    return job, [tmp_path / d for d in reports.run_dirs(job)], outputs


def test_local_copy_algorithms_report_the_local_mean_with_a_server_row(tmp_path, monkeypatch):
    job, dirs, outputs = _report(tmp_path, {"kind": "fedswe_table", "experiments": ["svhn_sine"], "last_n": 20})
    assert job["report"]["eval_model"] == "local_mean"  # the default of the FedSWE-style kinds
    monkeypatch.chdir(tmp_path)
    build.make_report(job, dirs, outputs)
    cells = pd.read_csv(outputs["csv"]).set_index(["algorithm", "metric"])
    assert cells.loc[("swe", "test_acc"), "mean"] == pytest.approx(82.0)
    assert cells.loc[("swe", "train_acc"), "mean"] == pytest.approx(80.0)
    assert cells.loc[(server_row("swe"), "test_acc"), "mean"] == pytest.approx(62.0)
    assert cells.loc[(server_row("swe"), "test_acc"), "label"] == "FedSWE (k = 100), server model"
    assert cells.loc[("avg", "test_acc"), "mean"] == pytest.approx(71.0)
    markdown = outputs["md"].read_text()
    assert "| FedSWE (k = 100), server model |" in markdown
    assert "scored by the mean of their clients' local models" in markdown
    # The server row is unranked: avg (71.0) is second behind the local-copy mean (82.0), not third.
    assert "**82.0 ± 2.0**" in markdown and "<u>71.0 ± 1.0</u>" in markdown
    paper = pd.read_csv(outputs["paper_csv"])
    assert server_row("swe") not in set(paper["algorithm"])
    assert "scored by the mean of their clients' local models" in captions.caption(job)


def test_eval_model_global_scores_the_server_model_only(tmp_path, monkeypatch):
    job, dirs, outputs = _report(tmp_path, {"kind": "fedswe_table", "experiments": ["svhn_sine"], "last_n": 20,
                                            "eval_model": "global"})
    monkeypatch.chdir(tmp_path)
    build.make_report(job, dirs, outputs)
    cells = pd.read_csv(outputs["csv"]).set_index(["algorithm", "metric"])
    assert cells.loc[("swe", "test_acc"), "mean"] == pytest.approx(62.0)
    assert server_row("swe") not in cells.index.get_level_values("algorithm")
    assert "Every algorithm is scored by its server model" in outputs["md"].read_text()
    assert "Every algorithm is scored by its server model" in captions.caption(job)


def test_the_view_keeps_the_config_order_and_given_algorithm_lists(tmp_path):
    job, dirs, _ = _report(tmp_path, {"kind": "fedswe_table", "experiments": ["svhn_sine"], "last_n": 20,
                                      "algorithms": ["avg", "swe"], "memory_aided": ["swe"]})
    view = tidy.view(job, tidy.load(job, dirs))
    rows = view.drop_duplicates("algorithm").sort_values("order")
    assert rows["algorithm"].tolist() == ["avg", "swe", server_row("swe")]
    assert rows["group"].tolist() == [1, 2, 2]  # the server row follows its algorithm into memory_aided
    swe = view[view["algorithm"] == "swe"]
    assert swe["test_acc"].dropna().unique().tolist() == pytest.approx([0.80, 0.84])
    server = view[view["algorithm"] == server_row("swe")]
    assert server["test_acc"].dropna().unique().tolist() == pytest.approx([0.60, 0.64])
    assert server["seed"].nunique() == 2 and server["state_bytes"].notna().all()


@pytest.mark.parametrize("report", [
    {"kind": "curves", "experiments": ["s1", "s2"], "sample_every": 10},
    {"kind": "grid", "x": "gamma", "hue": "dataset", "experiments": ["s1", "s2"], "last_n": 20},
    {"kind": "k_sweep", "experiments": ["s1", "s2"], "algorithms": ["swe"], "last_n": 20, "target": 0.5,
     "sample_every": 10},
    {"kind": "rounds_to_target", "experiments": ["s1", "s2"], "targets": [0.7], "sample_every": 10},
])
def test_figures_and_round_tables_show_both_models(tmp_path, monkeypatch, report):
    job, dirs, outputs = _report(tmp_path, report, experiments=("s1", "s2"))
    monkeypatch.chdir(tmp_path)
    build.make_report(job, dirs, outputs)
    data = pd.read_csv(outputs["csv"])
    assert {"swe", server_row("swe")} <= set(data["algorithm"])
    column = {"curves": "mean", "grid": "mean", "k_sweep": "test_acc_mean", "rounds_to_target": "mean"}[report["kind"]]
    local = data[data["algorithm"] == "swe"]
    server = data[data["algorithm"] == server_row("swe")]
    if "metric" in data and report["kind"] != "rounds_to_target":
        local, server = local[local["metric"] == "test_acc"], server[server["metric"] == "test_acc"]
    if report["kind"] == "rounds_to_target":
        assert set(local[column]) == {0.0} and server[column].isna().all()  # 0.82 reaches 70% at once, 0.62 never
    else:
        assert local[column].mean() == pytest.approx(82.0) and server[column].mean() == pytest.approx(62.0)
