"""The module graph of src/fedavail has no import cycle (module-level and function-level imports alike), the plan
layer imports nothing of fedavail above it and loads without torch (the Snakefile imports it to build the DAG), and so
do the commands that need none."""

import ast
import json
import subprocess
import sys

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.plan.algorithms import known_algorithms
from fedavail.plan.sources import (PACKAGE, executed_algorithms, imported_by, module_files, module_imports,
                                   training_sources)


def import_graph() -> dict[str, frozenset[str]]:
    return {module: module_imports(module) for module in module_files()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target, path + [target])
                if cycle:
                    return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start, [start])
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_function_level_imports():
    assert "fedavail.data.prepare" in import_graph()["fedavail.cli"]  # imported inside a command function


def test_no_import_cycle_among_fedavail_modules():
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


# The floors the Snakefile's DAG building stands on: the plan and, under it, the settings of the stages' domains
# (trace models, partition schemes) and the modules every layer uses.
BASE = {"fedavail.integrity", "fedavail.io", "fedavail.options", "fedavail.rng"}  # the README's bottom row
DOMAIN_SETTINGS = {"fedavail.availability", "fedavail.availability.clock", "fedavail.availability.trace_models",
                   "fedavail.availability.device_records", "fedavail.partitions", "fedavail.partitions.schemes"}


def test_the_plan_layer_imports_only_itself_the_domain_settings_and_the_base():
    """fedavail.plan imports no fedavail module but its own, the domains' settings and the base; those import only
    each other and the base, and the base nothing of fedavail but itself: the rest builds on the plan and never the
    reverse."""
    graph = import_graph()
    assert all(graph[module] <= BASE for module in BASE)
    upward = {f"{module} -> {target}" for module in DOMAIN_SETTINGS for target in graph[module]
              if target not in BASE | DOMAIN_SETTINGS}
    outside = {f"{module} -> {target}" for module, targets in graph.items() if module.startswith("fedavail.plan")
               for target in targets if not target.startswith("fedavail.plan") and target not in BASE | DOMAIN_SETTINGS}
    assert not upward and not outside


def test_building_the_dag_imports_no_torch_and_no_pandas():
    code = ("import sys, fedavail.plan.checks, fedavail.plan.docs, fedavail.plan.load, fedavail.rng; "
            "assert 'torch' not in sys.modules, 'torch imported'; assert 'pandas' not in sys.modules, 'pandas imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_training_sources_are_what_training_reads_of_the_plan_layer():
    """Editing a plan module training never imports (reports, grids, docs) must not rerun every training job."""
    sources = {path.relative_to(PACKAGE).as_posix() for path in training_sources(("fedswe",))}
    for module in ("plan/reports.py", "plan/grid.py", "plan/docs.py", "plan/errors.py", "plan/specs.py",
                   "plan/mappings.py", "plan/claim_parsing.py", "plan/checks.py", "plan/load.py", "cli.py"):
        assert module not in sources
    assert {"plan/local.py", "plan/algorithms/__init__.py", "plan/algorithms/base.py", "plan/algorithms/fedswe.py",
            "options.py", "plan/experiments.py", "availability/traces.py", "data/prepared.py", "engine/local.py",
            "algorithms/fedswe.py"} <= sources


@pytest.mark.parametrize("entry, algorithms", [
    ({"algorithm": "fedswe", "k": 0.0}, ("fedswe",)),
    ({"algorithm": "fast", "base": "scaffold", "lr": 0.1}, ("fast", "scaffold")),
])
def test_a_runs_sources_hold_the_algorithms_it_executes_and_no_other(entry, algorithms):
    name = entry["algorithm"]
    built = build_algorithm(name, {k: v for k, v in entry.items() if k not in ("algorithm", "lr")})
    assert executed_algorithms(name, built) == algorithms
    sources = {path.relative_to(PACKAGE).as_posix() for path in training_sources(algorithms)}
    for name in known_algorithms():
        expected = name in algorithms
        assert (f"algorithms/{name}.py" in sources, f"plan/algorithms/{name}.py" in sources) == (expected, expected)


def test_every_module_a_training_job_imports_is_a_training_source(tmp_path):
    """Run `fedavail train` on a tiny run and list the fedavail modules loaded by its end: each but the command line
    itself must be among the training sources, so no code the run used can change under its hash; and no pandas."""
    from synthetic import training_inputs
    from test_train import SPEC

    root = tmp_path
    training_inputs(root)
    spec = {**SPEC, "training": {**SPEC["training"], "rounds": 2, "last_n": 1}}
    code = ("import json, sys; from fedavail.cli import main; "
            f"main(['train', '--prepared', {str(root / 'data.pt')!r}, '--partition', {str(root / 'partition.npz')!r}, "
            f"'--trace', {str(root / 'trace.npz')!r}, '--spec', {json.dumps(spec)!r}, '--out-dir', "
            f"{str(tmp_path / 'run')!r}]); print(json.dumps(sorted(m for m in sys.modules if m.startswith(('fedavail', "
            "'pandas')))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout.splitlines()[-1])
    assert (tmp_path / "run/summary.json").exists()
    assert "pandas" not in loaded  # ~0.3 s of every training job (fedavail.train._write_metrics)
    sources = imported_by("fedavail.train", f"fedavail.algorithms.{spec['algorithm']['algorithm']}")
    assert set(loaded) - {"fedavail.cli", "fedavail.__main__", "fedavail.gpu_slots"} <= sources


def _command_imports(stage: str) -> set[str]:
    """The fedavail modules that `fedavail <stage>`'s command function in fedavail.cli imports."""
    tree = ast.parse((PACKAGE / "cli.py").read_text(encoding="utf-8"))
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == f"cmd_{stage}")
    return {node.module for node in ast.walk(function) if isinstance(node, ast.ImportFrom)}


def test_numpy_only_commands_import_no_torch(tmp_path):
    """download, partition, trace and report need no torch (importing it is most of a short job's time): every
    fedavail module their commands can reach imports without it, and partition and trace jobs run without it."""
    from synthetic import image_dataset

    from fedavail.data.prepared import save_prepared

    reachable = set().union(*(imported_by(module) for stage in ("download", "partition", "trace", "report")
                              for module in _command_imports(stage)))
    assert {"fedavail.data.prepared_labels", "fedavail.availability.traces", "fedavail.report.figures"} <= reachable
    save_prepared(tmp_path / "data.pt", {**image_dataset(), "train_groups": torch.arange(400) % 7})
    partition_spec = {"dataset": "blobs", "scheme": "client_dirichlet", "num_clients": 10, "alpha": 0.5}
    trace_spec = {"model": "fedswe", "dynamics": "sine", "rounds": 20}
    commands = [["partition", "--prepared", f"{tmp_path}/data.pt", "--seed", "0", "--spec", json.dumps(partition_spec),
                 "--out", f"{tmp_path}/p.npz", "--stats", f"{tmp_path}/p.csv", "--figure", f"{tmp_path}/p.png"],
                ["trace", "--partition", f"{tmp_path}/p.npz", "--seed", "0", "--spec", json.dumps(trace_spec),
                 "--out", f"{tmp_path}/t.npz", "--figure", f"{tmp_path}/t.png"]]
    code = (f"import json, sys; {'; '.join(f'import {m}' for m in sorted(reachable))}; "
            "from fedavail.report.figures import panels; from fedavail.cli import main; panels(1); "
            f"[main(argv) for argv in json.loads({json.dumps(commands)!r})]; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')))")
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(result.stdout.splitlines()[-1]) == []
    assert (tmp_path / "t.npz").exists() and (tmp_path / "t.png").exists()
