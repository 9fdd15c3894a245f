"""Grids (entries whose name holds `{axis}` fields and which have a `grid:` of axes), algorithm sets, experiment
patterns of reports and claim grids, expanded into plain named entries before the config is validated, so nothing
downstream sees them (docs/configuration.md, "Grids"). A config expands to at most MAX_GRID_CELLS cells (all its
grids together, each counted before it is expanded) and MAX_RUNS training runs."""

import functools
import itertools
import math
import string
from fnmatch import fnmatchcase

from fedavail.plan.checks import check_name_length
from fedavail.plan.errors import ConfigError, shorten
from fedavail.plan.mappings import merge

GRID_SECTIONS = ("partitions", "traces", "algorithms", "experiments")
GLOB_CHARACTERS = "*?["
# Every cell is an entry (or a claim, or a check) the workflow plans jobs for: 177,147 experiments (11 axes of 3
# values) exhausted the memory of Snakemake's DAG. The paper configs have a few hundred cells each.
MAX_GRID_CELLS = 10_000
# Training runs: experiments × their algorithms × their seeds (the paper configs: at most 1,278).
MAX_RUNS = 100_000


def expand(config: dict) -> dict:
    """A copy of `config` with every grid entry replaced by its cells, set names by their algorithms, experiment
    patterns by the experiments they match; `algorithm_sets` is removed."""
    for section in (*GRID_SECTIONS, "reports"):
        if config.get(section) is not None and not isinstance(config[section], dict):
            raise ConfigError(f"{section}: must map names to entries, got {type(config[section]).__name__}")
    budget = _CellBudget()
    expanded = dict(config)
    for section in GRID_SECTIONS:
        if config.get(section) is not None:
            expanded[section] = _expand_section(section, config[section], budget)
    algorithms = expanded.get("algorithms") or {}
    sets = _algorithm_sets(expanded.pop("algorithm_sets", None) or {}, algorithms)
    experiments = expanded.get("experiments")
    if isinstance(experiments, dict):
        expanded["experiments"] = {name: _with_sets(f"experiments.{name}", entry, sets, algorithms)
                                   for name, entry in experiments.items()}
    if expanded.get("reports") is not None:
        expanded["reports"] = {
            name: _with_claims(f"reports.{name}", _with_patterns(
                f"reports.{name}", _with_sets(f"reports.{name}", report, sets, algorithms), list(experiments or {})),
                budget)
            for name, report in expanded["reports"].items()}
    _check_run_count(expanded)
    return expanded


class _CellBudget:
    """The grid cells of a config expanded so far, at most MAX_GRID_CELLS; a grid is counted before it expands."""

    def __init__(self):
        self.cells = 0

    def take(self, key: str, axes: dict) -> None:
        cells = math.prod(len(values) for values in axes.values())
        self.cells += cells
        if self.cells > MAX_GRID_CELLS:
            sizes = " × ".join(str(len(values)) for values in axes.values())
            before = f"; {self.cells - cells:,} cells of grids before it" if self.cells > cells else ""
            raise ConfigError(f"{key}.grid: {cells:,} cells ({sizes}){before}; a config's grids may have at most "
                              f"MAX_GRID_CELLS = {MAX_GRID_CELLS:,} cells in all: drop axis values or split the config")


def _check_run_count(config: dict) -> None:
    runs = 0
    for experiment in (config.get("experiments") or {}).values():
        if isinstance(experiment, dict):
            algorithms, seeds = experiment.get("algorithms"), experiment.get("seeds", config.get("seeds"))
            if isinstance(algorithms, list) and isinstance(seeds, list):
                runs += len(algorithms) * len(seeds)
    if runs > MAX_RUNS:
        raise ConfigError(f"experiments: {runs:,} training runs (experiments × algorithms × seeds), more than "
                          f"MAX_RUNS = {MAX_RUNS:,}; split the config or use fewer seeds")


def _algorithm_sets(sets, algorithms: dict) -> dict:
    if not isinstance(sets, dict):
        raise ConfigError(f"algorithm_sets: must map set names to lists of algorithms, got {type(sets).__name__}")
    for name, members in sets.items():
        if not isinstance(name, str):
            raise ConfigError(f"algorithm_sets.{shorten(name)}: a set's name must be a string")
        check_name_length("algorithm_sets", name)
        if name in algorithms:
            raise ConfigError(f"algorithm_sets.{name}: {name!r} is also an algorithm's name; rename one")
        if not isinstance(members, list):
            raise ConfigError(f"algorithm_sets.{name}: must be a list of algorithm or set names, got "
                              f"{type(members).__name__}")
        _check_name_list(f"algorithm_sets.{name}", members)
    return sets


def _check_name_list(key: str, names: list) -> None:
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ConfigError(f"{key}[{i}]: {shorten(name)} is not the name of an algorithm or an algorithm set")


def _expand_section(section: str, entries: dict, budget: _CellBudget) -> dict:
    expanded, origin = {}, {}
    for name, entry in entries.items():
        key = f"{section}.{name}"
        if isinstance(name, str) and _fields(key, name):
            cells = _cells(key, name, entry, budget)
        elif isinstance(entry, dict) and "grid" in entry:
            raise ConfigError(f"{key}.grid: a grid entry's name needs a field per axis, e.g. '{name}_{{axis}}'")
        else:
            cells = [(name, entry)]
        for cell_name, cell in cells:
            if cell_name in expanded and origin[cell_name] == key:
                raise ConfigError(f"{key}: two cells are named {shorten(cell_name)}; the name needs a field for every "
                                  f"axis")
            if cell_name in expanded:
                raise ConfigError(f"{key}: produces {section}.{cell_name}, which {origin[cell_name]} also defines")
            expanded[cell_name] = cell
            origin[cell_name] = key
    return expanded


def _cells(key: str, template: str, entry, budget: _CellBudget) -> list[tuple[str, dict]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("grid"), dict) or not entry["grid"]:
        raise ConfigError(f"{key}: a name with {{fields}} is a grid and needs a non-empty `grid:` mapping of axes")
    axes = _axes(key, entry)
    for field in _fields(key, template):
        if field not in axes:
            raise ConfigError(f"{key}: the name uses {{{field}}}, which is not an axis of its grid "
                              f"(axes: {sorted(axes)})")
    return [(_format(key, template, values), _substitute(key, cell, values))
            for values, cell in _combinations(key, entry, budget)]


def _axes(key: str, entry: dict) -> dict[str, list[tuple[object, dict]]]:
    """The entry's grid: axis name -> (value, overrides) pairs."""
    if not isinstance(entry.get("grid"), dict) or not entry["grid"]:
        raise ConfigError(f"{key}.grid: a non-empty mapping of axes")
    for axis in entry["grid"]:
        if not isinstance(axis, str):
            raise ConfigError(f"{key}.grid: axis {shorten(axis)} must be a name (a string): {{fields}} name axes")
    return {axis: _axis_values(f"{key}.grid.{axis}", values) for axis, values in entry["grid"].items()}


def _combinations(key: str, entry: dict, budget: _CellBudget, outer: dict | None = None) -> list[tuple[dict, dict]]:
    """(axis values, the entry without `grid` with the cell's overrides merged in) for every cell of its grid; the
    values extend `outer` (an enclosing grid's)."""
    axes = _axes(key, entry)
    clash = sorted(set(axes) & set(outer or {}))
    if clash:
        raise ConfigError(f"{key}.grid: axis {clash[0]!r} is already an axis of the enclosing grid")
    budget.take(key, axes)
    base = {k: v for k, v in entry.items() if k != "grid"}
    return [({**(outer or {}), **{axis: value for axis, (value, _) in zip(axes, combination)}},
             functools.reduce(merge, (overrides for _, overrides in combination), base))
            for combination in itertools.product(*axes.values())]


def _with_claims(key: str, report, budget: _CellBudget):
    if not isinstance(report, dict) or report.get("kind") != "claims" or not isinstance(report.get("claims"), list):
        return report
    claims = []
    for i, claim in enumerate(report["claims"]):
        at = f"{key}.claims[{i}]"
        if isinstance(claim, dict) and "grid" in claim:
            claims += [_substitute(at, cell, values, budget) for values, cell in _combinations(at, claim, budget)]
        else:
            claims.append(_substitute(at, claim, None, budget))
    return {**report, "claims": claims}


def _axis_values(key: str, values) -> list[tuple[object, dict]]:
    """An axis as (value, overrides) pairs, from a list of values or a mapping of value -> overrides."""
    if isinstance(values, list):
        pairs = [(value, {}) for value in values]
    elif isinstance(values, dict):
        pairs = list(values.items())
    else:
        raise ConfigError(f"{key}: an axis is a list of values or a mapping of value -> overrides, got "
                          f"{type(values).__name__}")
    if not pairs:
        raise ConfigError(f"{key}: an axis needs at least one value")
    for value, overrides in pairs:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: axis value {shorten(value)} must be a string or a number (it becomes part of "
                              f"names)")
        if overrides is None:
            raise ConfigError(f"{key}.{value}: give the overrides as a mapping ({{}} for none)")
        if not isinstance(overrides, dict):
            raise ConfigError(f"{key}.{value}: overrides must be a mapping of the entry's keys, got "
                              f"{type(overrides).__name__}")
    return pairs


def _fields(key: str, text: str) -> list[str]:
    """The `{axis}` fields of a template. A format spec or conversion ({a:>9}, {a!r}) is refused: it is formatted
    before any name check, and {a:>400000000} is a string of 400 MB."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as error:
        raise ConfigError(f"{key}: {shorten(text)} is not a valid template ({error}); write {{{{ and }}}} for "
                          f"braces") from error
    for _, field, spec, conversion in parsed:
        if spec or conversion:
            formatting = (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise ConfigError(f"{key}: {shorten(text)} formats field {shorten(field)} with {shorten(formatting, 40)}; "
                              f"a field is a plain {{axis}}, without a format spec or conversion")
    return [field for _, field, _, _ in parsed if field is not None]


def _substitute(key: str, value, values: dict | None, budget: _CellBudget | None = None):
    """`value` with `{axis}` filled from `values` (None: strings kept as written); in a claim (with the `budget`),
    `all_of` grids expanded."""
    if isinstance(value, dict):
        if budget and set(value) == {"all_of"} and isinstance(value["all_of"], dict):
            inner, where = value["all_of"], f"{key}.all_of"
            if set(inner) != {"grid", "check"}:
                raise ConfigError(f"{where}: a list of checks, or a mapping with `grid` and `check`")
            return {"all_of": [_substitute(f"{where}.check", cell["check"], cell_values, budget)
                               for cell_values, cell in _combinations(where, inner, budget, values)]}
        return {k: _substitute(f"{key}.{k}", v, values, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(f"{key}[{i}]", v, values, budget) for i, v in enumerate(value)]
    if values is None or not isinstance(value, str):
        return value
    fields = _fields(key, value)
    for field in fields:
        if field not in values:
            raise ConfigError(f"{key}: {shorten(value)} uses {{{field}}}, which is not an axis of the grid "
                              f"(axes: {sorted(values)})")
    if len(fields) == 1 and value == f"{{{fields[0]}}}":
        return values[fields[0]]
    return _format(key, value, values)


def _format(key: str, template: str, values: dict) -> str:
    try:
        return template.format(**values)
    except (ValueError, IndexError) as error:
        raise ConfigError(f"{key}: cannot fill {shorten(template)} with {shorten(values)} ({error})") from error


def _with_sets(key: str, entry, sets: dict, algorithms: dict):
    if not isinstance(entry, dict) or "algorithms" not in entry:
        return entry
    names = entry["algorithms"]
    if isinstance(names, str):
        if names not in sets:
            raise ConfigError(f"{key}.algorithms: {shorten(names)} is not an algorithm set (sets: "
                              f"{shorten(sorted(sets))}); give a set's name or a list of algorithms")
        names = [names]
    if not isinstance(names, list):
        return entry
    _check_name_list(f"{key}.algorithms", names)
    resolved = [algorithm for name in names for algorithm in _set_members(name, sets, ())]
    for name in resolved:
        if name not in algorithms:
            raise ConfigError(f"{key}.algorithms: {shorten(name)} is neither an algorithm nor an algorithm set")
    _no_repeats(f"{key}.algorithms", resolved, "after expanding algorithm sets")
    return {**entry, "algorithms": resolved}


def _set_members(name, sets: dict, visiting: tuple) -> list:
    if name not in sets:
        return [name]
    if name in visiting:
        raise ConfigError(f"algorithm_sets.{name}: the set contains itself ({' -> '.join(visiting + (name,))})")
    return [algorithm for member in sets[name] for algorithm in _set_members(member, sets, visiting + (name,))]


def _with_patterns(key: str, report, experiments: list[str]):
    if not isinstance(report, dict) or not isinstance(report.get("experiments"), list):
        return report
    selected = []
    for item in report["experiments"]:
        if isinstance(item, str) and item.startswith("!"):
            kept = [name for name in selected if not fnmatchcase(name, item[1:])]
            if len(kept) == len(selected):
                raise ConfigError(f"{key}.experiments: {shorten(item)} excludes nothing listed before it")
            selected = kept
        elif isinstance(item, str) and any(c in item for c in GLOB_CHARACTERS):
            matches = [name for name in experiments if fnmatchcase(name, item)]
            if not matches:
                raise ConfigError(f"{key}.experiments: pattern {shorten(item)} matches no experiment")
            selected += matches
        else:
            selected.append(item)
    _no_repeats(f"{key}.experiments", selected, "after expanding patterns")
    return {**report, "experiments": selected}


def _no_repeats(key: str, names: list, when: str) -> None:
    repeated = sorted({str(n) for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{key}: {', '.join(repeated)} listed more than once {when}")
