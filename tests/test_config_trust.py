"""Configs that must be refused before any job (unsafe names, NaN/inf, settings that cannot run together, repeated
YAML keys), scientific notation read as numbers, and every rule's paths quoted in its shell command."""

import copy
import re

import pytest
from snakemake.utils import validate

import fedavail.config as fc
from fedavail.config_checks import TRAIN_SAMPLES
from fedavail.config_yaml import load_config_file
from fedavail.data.prepare import prepare

from workflow_helpers import REPO, copy_workflow, snakemake

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def base_config() -> dict:
    return load_config_file(REPO / "config/test.yaml")


def checked(config: dict) -> None:
    """The workflow's order: schema (with defaults), then fedavail.config.check."""
    config = copy.deepcopy(config)
    validate(config, str(SCHEMA), set_default=True)
    fc.check(config)


def rename(section, old, new):
    def edit(c):
        c[section][new] = c[section].pop(old)
        for experiment in c["experiments"].values():
            if section == "algorithms":
                experiment["algorithms"] = [new if a == old else a for a in experiment["algorithms"]]
            elif section in ("partitions", "traces"):
                key = section[:-1]
                experiment[key] = new if experiment[key] == old else experiment[key]
        for trace in c["traces"].values():
            if section == "partitions" and trace.get("partition") == old:
                trace["partition"] = new
    return edit


def test_the_test_config_passes():
    checked(base_config())


@pytest.mark.parametrize("edit, message", [
    (rename("experiments", "tiny", "x;touch pwned_exp;"), r"experiments\.'x;touch pwned_exp;': a name must match"),
    (rename("partitions", "mnist5k_dir0.5", "p$(touch pwned)"), r"partitions\.'p\$\(touch pwned\)'"),
    (rename("experiments", "tiny", ".."), r"experiments\.'\.\.'"),
    (rename("algorithms", "fedavg_active", ".."), r"algorithms\.'\.\.'"),
    (rename("traces", "stationary", "a b"), r"traces\.'a b'"),
])
def test_unsafe_names_are_refused(edit, message):
    config = base_config()
    edit(config)
    with pytest.raises(fc.ConfigError, match=message):
        checked(config)


NAN = float("nan")


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["algorithms"]["fedavg_active"].update(lr=NAN), r"algorithms\.fedavg_active\.lr: nan is not a finite"),
    (lambda c: c["experiments"]["tiny"]["training"]["local"].update(grad_clip=NAN), r"training\.local\.grad_clip: nan"),
    (lambda c: c["algorithms"].update(swe={"algorithm": "fedswe", "lr": 0.1, "k": NAN}), r"algorithms\.swe\.k: nan"),
    (lambda c: c["algorithms"]["fedavg_active"].update(lr=float("inf")), r"algorithms\.fedavg_active\.lr: inf"),
])
def test_nan_and_inf_are_refused(edit, message):
    config = base_config()
    edit(config)
    with pytest.raises(fc.ConfigError, match=message):
        checked(config)


def _use_algorithm(c, spec):
    c["algorithms"]["extra"] = spec
    c["experiments"]["tiny"]["algorithms"].append("extra")


def _hetero_partition(c):
    c["partitions"]["mnist5k_dir0.5"].update(scheme="hetero_dirichlet")


def _fast_trace(c, **keys):
    c["traces"]["stationary"] = {"model": "fast", "num_clients": 20, "rounds": 15, **keys}


@pytest.mark.parametrize("edit, message", [
    (lambda c: _use_algorithm(c, {"algorithm": "f3ast", "lr": 0.1, "clients_per_round": 1000}),
     r"algorithms\.extra\.clients_per_round: 1000 exceeds the 20 clients"),
    (lambda c: _use_algorithm(c, {"algorithm": "f3ast", "lr": 0.1, "clients_per_round": 2.5}),
     r"'clients_per_round' must be an integer or null, got 2.5"),
    (lambda c: _use_algorithm(c, {"algorithm": "gfedavg", "lr": 0.1, "period": 2.5}),
     r"'period' must be an integer, got 2.5"),
    (lambda c: c["algorithms"]["fedavg_known"].update(p_floor=-1), r"p_floor must be in \(0, 1\] or null"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(num_clients=5000),
     r"partitions\.mnist5k_dir0\.5\.num_clients: 5000 clients, but mnist5k has only 4000"),
    (lambda c: (_fast_trace(c, distribution="uniform", snapshot_size=5), c["algorithms"].pop("fedavg_known"),
                c["experiments"]["tiny"].update(algorithms=["fedavg_active"])),
     r"traces\.stationary: trace spec key 'snapshot_size'"),
    (lambda c: c["traces"].update(stationary={"model": "bernoulli", "p": [0.5, 0.5, 0.5], "num_clients": 20,
                                              "rounds": 15}),
     r"traces\.stationary: trace spec key 'p' has 3 values for 20 clients"),
    (_hetero_partition, r"traces\.stationary\.class_mix: 'nu' \(the default\) needs a partition that draws"),
    (lambda c: _fast_trace(c, distribution="beta"), r"algorithms\.fedavg_known\.weighting: 'known' needs p_i\^t"),
    (lambda c: c.update(execution={"device": "gpu0"}), r"gpu0"),
])
def test_settings_that_cannot_run_are_refused(edit, message):
    config = base_config()
    edit(config)
    with pytest.raises(Exception, match=message):
        checked(config)


def test_train_sample_counts_of_the_bundled_datasets():
    for name in ("mnist5k", "digits"):
        assert len(prepare(name, None, {})["train_y"]) == TRAIN_SAMPLES[name]


def test_scientific_notation_is_a_number_and_repeated_keys_are_errors(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1e-3\nb: 1.0e6\nc: 2E+2\nname: mnist5k_dir0.5\n")
    assert load_config_file(path) == {"a": 0.001, "b": 1e6, "c": 200.0, "name": "mnist5k_dir0.5"}
    path.write_text("base: &base {lr: 0.1, weighting: known}\nother: {<<: *base, lr: 0.2}\n")
    assert load_config_file(path)["other"] == {"lr": 0.2, "weighting": "known"}  # a merge key may be overridden
    text = (REPO / "config/test.yaml").read_text()
    path.write_text(text + "seeds: [3]\n")
    with pytest.raises(fc.ConfigError, match="key 'seeds' appears twice"):
        load_config_file(path)
    path.write_text(text.replace("experiments:\n", "experiments:\n  tiny: {partition: a, trace: b, algorithms: [c], "
                                                   "training: {model: small_cnn, rounds: 1}}\n"))
    with pytest.raises(fc.ConfigError, match="key 'tiny' appears twice"):
        load_config_file(path)


def _workflow_with(tmp_path, text):
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "config/bad.yaml").write_text(text)
    result = snakemake(workdir, "-n", "-p", "--configfile", "config/bad.yaml", check=False)
    return workdir, result.returncode, result.stdout + result.stderr


def test_workflow_refuses_an_injected_name_before_any_job(tmp_path):
    text = (REPO / "config/test.yaml").read_text().replace("  tiny:", "  x;touch pwned_exp;:")
    workdir, returncode, output = _workflow_with(tmp_path, text)
    assert returncode != 0 and "x;touch pwned_exp;" in output and "a name must match" in output
    assert not (workdir / "pwned_exp").exists() and not (workdir / "results").exists()


def test_workflow_refuses_a_repeated_key(tmp_path):
    workdir, returncode, output = _workflow_with(tmp_path, (REPO / "config/test.yaml").read_text() + "seeds: [5]\n")
    assert returncode != 0 and "key 'seeds' appears twice" in output


def test_workflow_reads_scientific_notation_as_numbers(tmp_path):
    text = (REPO / "config/test.yaml").read_text().replace("weighting: active, lr: 0.1", "weighting: active, lr: 1e-3")
    _, returncode, output = _workflow_with(tmp_path, text)
    assert returncode == 0, output
    assert '"lr": 0.001' in output


_PATH_FIELD = re.compile(r"\{(input|output|log|wildcards|params\.run_dirs)(\.\w+)?(:q)?\}")


def test_every_rule_quotes_its_paths():
    for path in sorted((REPO / "workflow/rules").glob("*.smk")):
        for shell in re.findall(r"shell:\n((?:\s+\".*\"\n)+)", path.read_text()):
            unquoted = [m.group(0) for m in _PATH_FIELD.finditer(shell) if not m.group(3)]
            assert not unquoted, f"{path.name}: {unquoted}"
