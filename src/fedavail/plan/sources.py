"""The source files a training run's numbers depend on: every fedavail module that `fedavail.train` imports, directly
or not, at module or function level, and those of the algorithms the run executes, read from the import graph, so no
module a run uses can be edited under an unchanged hash. Their content hash is a parameter of every training job
(editing one reruns the runs that use it) and part of every checkpoint's fingerprint (fedavail.train)."""

import ast
import functools
import hashlib
from pathlib import Path

from fedavail.plan.algorithms.base import AlgorithmOptions

PACKAGE = Path(__file__).resolve().parents[1]
TRAINING_ROOT = "fedavail.train"


@functools.cache
def module_files() -> dict[str, Path]:
    """Every fedavail module's file by the module's name."""
    files = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


@functools.cache
def module_imports(module: str) -> frozenset[str]:
    """The fedavail modules that `module` imports anywhere in its file, parsed once per process and only when a hash
    needs them (a training process hashes its 40-odd modules of the package's 90 at start-up)."""
    modules, targets = module_files(), set()
    for node in ast.walk(ast.parse(modules[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets.add(node.module)
            targets |= {f"{node.module}.{alias.name}" for alias in node.names}
    return frozenset(target for target in targets if target in modules and target != module)


def imported_by(*roots: str) -> set[str]:
    """The `roots` and every fedavail module they import, transitively, with the packages that importing a module
    runs."""
    seen, pending = set(), list(roots)
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            packages = [".".join(module.split(".")[:depth]) for depth in range(1, module.count(".") + 1)]
            pending += [*module_imports(module), *packages]
    return seen


def executed_algorithms(name: str, options: AlgorithmOptions) -> tuple[str, ...]:
    """The registered algorithms a run of algorithm `name` with these options executes, sorted."""
    return tuple(sorted({name, *options.composed_algorithms()}))


def training_sources(algorithms: tuple[str, ...]) -> list[Path]:
    modules = imported_by(TRAINING_ROOT, *(f"fedavail.algorithms.{name}" for name in algorithms))
    return sorted(module_files()[module] for module in modules)


@functools.cache
def training_code_sha256(algorithms: tuple[str, ...]) -> str:
    """sha256 over the training sources of a run of `algorithms` (run_algorithms): their paths, relative to the
    package so the same wherever it is installed, and their content."""
    digest = hashlib.sha256()
    for path in training_sources(algorithms):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
