"""Configs that must be refused before any job (unsafe or overlong names, NaN/inf, settings that cannot run together
or would stall or exhaust a job, repeated YAML keys, YAML 1.1's octal and base-60 numbers, alias bombs, a CUDA
device the machine lacks), scientific notation read as numbers, --config overrides read like the files, long values
shortened in messages, and every rule's paths quoted in its shell command."""

import copy
import re
import shutil
import subprocess
import sys

import pytest
import torch
from workflow_helpers import REPO, copy_workflow, snakemake

from fedavail.data.prepare import prepare
from fedavail.plan.checks import TRAIN_SAMPLES
from fedavail.plan.errors import ConfigError
from fedavail.plan.grid import expand
from fedavail.plan.load import check_config_files, command_line_overrides, load, load_config_file, validate
from fedavail.plan.plan import build_plan


def base_config() -> dict:
    return load_config_file(REPO / "config/test.yaml")


def checked(config: dict) -> None:
    """fedavail.plan.load.load's order: schema (with defaults), then fedavail.plan.plan.build_plan."""
    config = copy.deepcopy(config)
    validate(config)
    build_plan(config)


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
    with pytest.raises(ConfigError, match=message):
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
    with pytest.raises(ConfigError, match=message):
        checked(config)


def test_command_line_overrides_are_read_like_the_config_files():
    entries = ["execution={train_threads: 2, seconds_per_round: 1e1}", "seeds=[0, 2]", "execution={log_every: 5}",
               "algorithms={fedavg_active: {lr: 0.05}}"]
    assert command_line_overrides(entries) == {"execution": {"train_threads": 2, "seconds_per_round": 10.0,
                                                             "log_every": 5},
                                               "seeds": [0, 2], "algorithms": {"fedavg_active": {"lr": 0.05}}}
    plan = load([REPO / "config/test.yaml"], command_line_overrides(entries))
    assert plan.execution.train_threads == 2 and plan.config["seeds"] == [0, 2]
    assert plan.config["algorithms"]["fedavg_active"]["lr"] == 0.05


@pytest.mark.parametrize("entry, message", [
    ("seeds=[0, 010]", r"--config seeds, line 1: '010' is another number in YAML 1\.1"),
    ("execution={train_threads: 2, train_threads: 3}", r"--config execution: key 'train_threads' appears twice"),
    ("seeds=[0, 1", r"--config 'seeds=\[0, 1' is not valid YAML"),
    ("execution={train_threads: '2'}", r"execution\.train_threads: '2' is not of type 'integer'"),
    ("execution={seconds_per_round: .nan}", r"execution\.seconds_per_round: nan is not a finite number"),
])
def test_command_line_overrides_are_refused_like_the_config_files(entry, message):
    with pytest.raises(ConfigError, match=message):
        load([REPO / "config/test.yaml"], command_line_overrides([entry]))


def test_workflow_takes_numbers_from_the_command_line(tmp_path):
    """Snakemake's own reading of --config made the 2 a string ("'2' is not of type 'integer'")."""
    workdir = copy_workflow(tmp_path / "wf")
    result = snakemake(workdir, "-n", "-p", "--cores", "4", "--configfile", "config/test.yaml", "--config",
                       "execution={train_threads: 2, seeds_per_job: all}", "seeds=[0, 2]")
    commands = [line for line in result.stdout.splitlines() if "fedavail train-seeds" in line]
    assert len(commands) == 2 and all("--threads 2 " in line and "seed2.npz" in line for line in commands)
    result = snakemake(workdir, "-n", "--configfile", "config/test.yaml", "--config", "seeds=[0, 010]", check=False)
    assert result.returncode != 0
    assert "--config seeds, line 1: '010' is another number in YAML 1.1" in result.stdout + result.stderr


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
    (lambda c: c["algorithms"]["fedavg_known"].update(p_floor=-1),
     r"fedavg option 'p_floor' must be in \(0, 1\] or null, got -1"),
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
    with pytest.raises(ConfigError, match="key 'seeds' appears twice"):
        load_config_file(path)
    path.write_text(text.replace("experiments:\n", "experiments:\n  tiny: {partition: a, trace: b, algorithms: [c], "
                                                   "training: {model: small_cnn, rounds: 1}}\n"))
    with pytest.raises(ConfigError, match="key 'tiny' appears twice"):
        load_config_file(path)


def _workflow_with(tmp_path, text, timeout=600):
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "config/bad.yaml").write_text(text)
    result = snakemake(workdir, "-n", "-p", "--configfile", "config/bad.yaml", check=False, timeout=timeout)
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


@pytest.mark.parametrize("text, shown", [
    ("rounds: 010\n", "'010'"), ("seeds: [010]\n", "'010'"), ("seeds: [0, 007]\n", "'007'"),
    ("rounds: 08\n", "'08'"), ("rounds: 1:00\n", "'1:00'"), ("rounds: 1:30:00\n", "'1:30:00'"),
])
def test_yaml_1_1_octal_and_base_60_numbers_are_refused_with_file_and_line(tmp_path, text, shown):
    path = tmp_path / "c.yaml"
    path.write_text("# a comment\n" + text)
    with pytest.raises(ConfigError, match=rf"c\.yaml, line 2: {shown} is another number in YAML 1\.1 .*write the "
                                             rf"number without leading zeros \(10\), or quote it"):
        load_config_file(path)


def test_numbers_strings_and_dates_still_load(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: [0, 10, -3, +5, -0, 1e-3, 0.5, 00.5, 1_000, 0x1F, 0b11]\n"
                    "b: ['a:b', \"1:00\", '010', a:b, 12:30:00Z, 2024-01-02]\n")
    import datetime

    assert load_config_file(path) == {"a": [0, 10, -3, 5, 0, 0.001, 0.5, 0.5, 1000, 31, 3],
                                      "b": ["a:b", "1:00", "010", "a:b", "12:30:00Z", datetime.date(2024, 1, 2)]}


def laughs(levels: int = 9) -> str:
    """A "billion laughs": 9 levels of 9 aliases of the level below, 9^9 strings once expanded, in 500 bytes."""
    lines = ['l0: &l0 "lol"'] + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "bomb:\n" + "".join(f"  {line}\n" for line in lines)


def test_an_alias_bomb_is_refused_before_it_is_built(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(laughs())
    with pytest.raises(ConfigError, match=r"c\.yaml: with its aliases \(\*name\) expanded the document has "
                                             r"([0-9,]+) nodes, more than MAX_NODES = 100,000") as error:
        load_config_file(path)
    assert int(re.search(r"has ([0-9,]+) nodes", str(error.value)).group(1).replace(",", "")) > 9**9  # counted, not built
    path.write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match=r"c\.yaml, line 1: an alias inside the node it names"):
        load_config_file(path)
    path.write_text("base: &base {lr: 0.1}\nx: *base\ny: [*base, *base]\n")
    assert load_config_file(path)["y"] == [{"lr": 0.1}, {"lr": 0.1}]


def test_workflow_refuses_an_alias_bomb(tmp_path):
    """Before, validating the expanded bomb hung for minutes (the subprocess is killed after 120 s)."""
    _, returncode, output = _workflow_with(tmp_path, (REPO / "config/test.yaml").read_text() + laughs(), timeout=120)
    assert returncode != 0 and "more than MAX_NODES = 100,000" in output, output


def mapping_laughs(levels: int = 9) -> str:
    """A "billion laughs" of mappings, which Snakemake's own loader expands (minutes, gigabytes)."""
    lines = ['l0: &l0 "lol"'] + [f"l{i}: &l{i} {{{', '.join(f'{k}: *l{i - 1}' for k in 'abcdefghi')}}}"
                                 for i in range(1, levels + 1)]
    return "bomb:\n" + "".join(f"  {line}\n" for line in lines)


@pytest.mark.parametrize("text, problem", [
    ("seeds: [0]\nexecution:\n\ttrain_threads: 1\n", r"found character '\\t' .*\n  in \"\S*c\.yaml\", line 3"),
    ("seeds: [0\nexecution: {}\n", r"while parsing a flow sequence\n  in \"\S*c\.yaml\", line 1"),
    (mapping_laughs(), r"c\.yaml: with its aliases \(\*name\) expanded the document has [0-9,]+ nodes"),
])
def test_config_files_are_checked_with_file_and_line(tmp_path, text, problem):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit, match=rf"(?s)^invalid config: .*{problem}"):
        check_config_files([tmp_path / "missing.yaml", path])
    result = subprocess.run([sys.executable, "-m", "fedavail.plan.load", str(path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and re.search(rf"(?s)^invalid config: .*{problem}", result.stderr), result.stderr


def _workflow_with_profiles(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    shutil.copytree(REPO / "profiles", workdir / "profiles")
    return workdir


def test_workflow_refuses_a_yte_config_before_snakemake_runs_it(tmp_path):
    workdir = _workflow_with_profiles(tmp_path)
    (workdir / "config/yte.yaml").write_text((REPO / "config/test.yaml").read_text() + "__use_yte__: true\n"
                                             "__definitions__:\n  - open('pwned', 'w').close()\n")
    result = snakemake(workdir, "-n", "--configfile", "config/yte.yaml", check=False)
    assert result.returncode == 1 and "__use_yte__ makes Snakemake evaluate the file" in result.stderr, result.stderr
    assert not (workdir / "pwned").exists()


def test_workflow_names_the_file_and_line_of_a_yaml_error_before_snakemake_reads_it(tmp_path):
    """Snakemake's loader says only "Config file is not valid JSON or YAML"; the profiles (read first) and the
    Snakefile (for the default config) read the files strictly before it does."""
    workdir = _workflow_with_profiles(tmp_path)
    (workdir / "config/tab.yaml").write_text("seeds: [0]\nexecution:\n\ttrain_threads: 1\n")
    (workdir / "config/bomb.yaml").write_text((REPO / "config/test.yaml").read_text() + mapping_laughs())
    for args in (["--configfile", "config/tab.yaml"], ["--workflow-profile", "profiles/slurm", "--configfile",
                                                      "config/test.yaml", "config/tab.yaml"]):
        result = snakemake(workdir, "-n", *args, check=False)
        assert result.returncode == 1 and 'in "config/tab.yaml", line 3, column 1' in result.stderr, result.stderr
    result = snakemake(workdir, "-n", "--configfile", "config/bomb.yaml", check=False, timeout=120)
    assert result.returncode == 1 and "more than MAX_NODES" in result.stderr, result.stderr
    shutil.copy(workdir / "config/tab.yaml", workdir / "config/config.yaml")
    result = snakemake(workdir, "-n", "--workflow-profile", "none", check=False)
    assert result.returncode == 1 and 'in "config/config.yaml", line 3, column 1' in result.stderr, result.stderr


def test_a_config_that_asks_for_yte_templating_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text((REPO / "config/test.yaml").read_text() + "__use_yte__: true\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: __use_yte__ makes Snakemake evaluate the file as a YTE "
                                             r"template.*remove the key"):
        load_config_file(path)


@pytest.mark.parametrize("section", ["experiments", "algorithms", "partitions", "traces"])
def test_names_longer_than_the_limit_are_refused(section):
    old = {"experiments": "tiny", "algorithms": "fedavg_active", "partitions": "mnist5k_dir0.5",
           "traces": "stationary"}[section]
    config = base_config()
    rename(section, old, "n" * 256)(config)
    with pytest.raises(ConfigError, match=rf"^{section}\.'n{{59}}… \(258 characters\): a name of 256 characters, "
                                             rf"more than MAX_NAME_LENGTH = 100"):
        checked(config)
    rename(section, "n" * 256, "n" * 100)(config)
    checked(config)


def test_report_dataset_and_grid_names_longer_than_the_limit_are_refused():
    config = base_config()
    config["reports"] = {"r" * 101: {"kind": "curves", "experiments": ["tiny"]}}
    with pytest.raises(ConfigError, match=r"^reports\.'r+… \(103 characters\): a name of 101 characters"):
        checked(config)
    config = base_config()
    config["datasets"] = {"d" * 101: {}}
    with pytest.raises(ConfigError, match=r"^datasets\.'d+… \(103 characters\): a name of 101 characters"):
        checked(config)
    config = base_config()
    config["algorithms"]["fedavg_{x}"] = {"grid": {"x": ["x" * 100]}, "algorithm": "fedavg"}
    with pytest.raises(ConfigError, match=r"^algorithms\.'fedavg_x+… \(109 characters\): a name of 107 characters"):
        checked(expand(config))


MEGABYTE = "x" * 1_000_000


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["experiments"]["tiny"].update(trace=MEGABYTE), r"experiments\.tiny\.trace: 'x{199}… \(1,000,002 "
                                                                 r"characters\) is not defined under 'traces'$"),
    (lambda c: rename("experiments", "tiny", MEGABYTE + ";")(c), r"experiments\.'x{199}… \(1,000,003 characters\): a "
                                                                 r"name must match"),
    (lambda c: c["algorithms"]["fedavg_active"].update(weighting=MEGABYTE), r"algorithms\.fedavg_active: .*'xxx"),
])
def test_error_messages_echo_a_megabyte_value_shortened(edit, message):
    config = base_config()
    edit(config)
    with pytest.raises(ConfigError, match=message) as error:
        build_plan(config)
    assert len(str(error.value)) <= 2100


def test_grid_errors_echo_a_megabyte_value_shortened():
    with pytest.raises(ConfigError) as error:
        expand({"experiments": {"e_{a}": {"grid": {"a": [1]}, "partition": MEGABYTE + "{b}"}}})
    assert str(error.value).startswith("experiments.e_{a}.partition: 'xxx") and len(str(error.value)) < 400


def test_workflow_shows_a_megabyte_value_shortened(tmp_path):
    text = (REPO / "config/test.yaml").read_text().replace("model: small_cnn", f"model: {MEGABYTE}")
    _, returncode, output = _workflow_with(tmp_path, text)
    assert returncode != 0 and "invalid config: experiments.tiny.training.model: 'xxx" in output, output[-2000:]
    assert "(1,000,002 characters) is not one of ['fast_char_lstm'" in output and len(output) < 20_000


def _local(c, **keys):
    c["experiments"]["tiny"]["training"]["local"].update(keys)


def _trace(c, **spec):
    c["traces"]["stationary"] = {"num_clients": 20, "rounds": 15, **spec}


@pytest.mark.parametrize("edit, message", [
    (lambda c: _local(c, batch_size=100_000), r"experiments\.tiny\.training\.local\.batch_size: 100000 samples per "
                                              r"minibatch, more than MAX_BATCH_SIZE = 8192; lower it \(algorithm "),
    (lambda c: _local(c, batch_size=5000), r"experiments\.tiny\.training\.local\.batch_size: 5000 samples per "
                                           r"minibatch, but mnist5k has only 4000 training samples; lower it"),
    (lambda c: _trace(c, model="bernoulli", p=0),
     r"traces\.stationary: trace spec key 'p' is 0 for every client: no client is ever available"),
    (lambda c: _trace(c, model="bernoulli", p=[0.0] * 20, dynamics="sine"), r"traces\.stationary: trace spec key 'p' "
                                                                            r"is 0 for every client"),
    (lambda c: _trace(c, model="cyclic", groups=2, p=0), r"traces\.stationary: trace spec key 'p' is 0 for every"),
    (lambda c: _trace(c, model="markov", p_on=0, p_off=0.5), r"traces\.stationary: trace spec key 'p_on' is 0 for"),
    (lambda c: c["traces"]["stationary"].update(phi_max=[0] * 10),
     r"traces\.stationary: trace spec key 'phi_max' is 0 for every class: no client is ever available"),
    (lambda c: (c["traces"]["stationary"].update(rounds=1_000_000_000),
                c["experiments"]["tiny"]["training"].update(rounds=1_000_000_000)),
     r"traces\.stationary: trace spec key 'rounds' must be at most MAX_ROUNDS = 100,000, got 1,000,000,000; lower it"),
    (lambda c: c["experiments"]["tiny"]["training"].update(rounds=1_000_000_000),
     r"experiments\.tiny\.training\.rounds: must be at most MAX_ROUNDS = 100,000, got 1,000,000,000; lower it"),
    (lambda c: c["traces"].update(big={"model": "bernoulli", "p": 0.5, "num_clients": 5000, "rounds": 100_000}),
     r"traces\.big: trace spec keys 'rounds' and 'num_clients': drawing 100,000 rounds × 5,000 clients takes about "
     r"14\.9 GiB \(32 bytes per round and client\), more than MAX_TRACE_BYTES = 4 GiB"),
])
def test_settings_that_stall_or_exhaust_a_job_are_refused(edit, message):
    config = base_config()
    edit(config)
    with pytest.raises(ConfigError, match=message):
        checked_without_schema(config)


def checked_without_schema(config: dict) -> None:
    """build_plan alone: the plan layer refuses these whether or not the schema ran first."""
    build_plan(copy.deepcopy(config))


def test_the_documented_limits_are_the_codes():
    from fedavail.availability.trace_models import MAX_TRACE_BYTES, TRACE_BYTES_PER_ENTRY
    from fedavail.plan.checks import MAX_NAME_LENGTH
    from fedavail.plan.experiments import MAX_ROUNDS
    from fedavail.plan.grid import MAX_GRID_CELLS, MAX_RUNS
    from fedavail.plan.load import MAX_NODES
    from fedavail.plan.local import MAX_BATCH_SIZE

    text = (REPO / "docs/configuration.md").read_text()
    limits = {"MAX_NODES": f"{MAX_NODES:,} nodes", "MAX_NAME_LENGTH": f"{MAX_NAME_LENGTH} characters",
              "MAX_GRID_CELLS": f"{MAX_GRID_CELLS:,} grid cells", "MAX_RUNS": f"{MAX_RUNS:,} training runs",
              "MAX_ROUNDS": f"{MAX_ROUNDS:,} rounds", "MAX_BATCH_SIZE": f"{MAX_BATCH_SIZE} samples",
              "MAX_TRACE_BYTES": f"{MAX_TRACE_BYTES / 2**30:g} GiB to draw a trace, at {TRACE_BYTES_PER_ENTRY} bytes"}
    for constant, shown in limits.items():
        assert re.search(rf"^\| {re.escape(shown)}.* \| `{constant}` \|$", text, re.MULTILINE), constant


CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


@CUDA
@pytest.mark.parametrize("stage, spec", [("train", "{}"), ("train-seeds", "[{}]")])
def test_training_on_a_missing_cuda_device_fails_in_one_line(tmp_path, stage, spec):
    command = [sys.executable, "-m", "fedavail", stage, "--prepared", "p", "--partition", "a", "--trace", "t",
               "--out-dir", "o", "--spec", spec, "--device", "cuda:1"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (f"fedavail {stage}: --device 'cuda:1', but CUDA is not available on "
                                              f"this machine; use --device auto or cpu")


@CUDA
def test_workflow_refuses_cuda_for_local_jobs_on_a_machine_without_it(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    args = ("-n", "--configfile", "config/test.yaml", "--config", "execution={device: cuda}")
    result = snakemake(workdir, *args, check=False)
    assert result.returncode != 0
    assert ("invalid config: execution.device: 'cuda', but CUDA is not available on this machine, where the jobs run"
            in result.stdout + result.stderr)
    # A cluster executor's jobs run on its nodes, which may have the GPUs this machine lacks.
    snakemake(workdir, *args, "--executor", "slurm", "--jobs", "1")
