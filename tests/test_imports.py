"""The module graph of src/fedavail has no import cycle (module-level and function-level imports alike), and the
plan layer and fedavail.config load without torch (the Snakefile imports them to build the DAG)."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fedavail"
# Function-level imports that close a cycle in modules the plan layer does not own, each to be removed from this
# list by the change that breaks it: report/ is being rebuilt (report.spec imports fedavail.config, which imports
# report.spec to check the `reports:` section), and data.download looks LEAF files up through data.leaf, which
# imports download's error type.
def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the fedavail modules it imports anywhere in its file."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.add(node.module)
                targets |= {f"{node.module}.{alias.name}" for alias in node.names}
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


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


def test_plan_and_config_import_no_torch():
    code = ("import sys, fedavail.plan, fedavail.plan.config, fedavail.plan.docs, fedavail.config, "
            "fedavail.config_yaml; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_training_sources_are_what_training_reads_of_the_plan_layer():
    """Editing a plan module training never imports (reports, grids, docs) must not rerun every training job."""
    import fedavail.config as fc

    sources = {Path(path).relative_to(PACKAGE).as_posix() for path in fc.training_sources()}
    for module in ("plan/reports.py", "plan/grid.py", "plan/docs.py", "plan/config.py", "plan/claims.py"):
        assert module not in sources
    assert {"plan/local.py", "plan/algorithms.py", "plan/options.py", "plan/experiments.py"} <= sources
