"""Grids and named sets in a config, expanded into plain named entries before the config is validated, so nothing
downstream sees them (docs/configuration.md, "Grids").

- A grid entry: an entry of `partitions`, `traces`, `algorithms` or `experiments` whose name holds `{axis}` fields and
  which has a `grid:` mapping of axes. Each axis is a list of values, or a mapping of value -> overrides deep-merged
  into the entry (later axes win). The product of the axes gives one entry per cell, named by filling the name's
  fields; in the entry's strings `{axis}` is replaced by the cell's value (a string that is exactly "{axis}" becomes
  the value itself, so numbers stay numbers).
- `algorithm_sets:` names lists of algorithms (or of other sets); an `algorithms:` list of an experiment or a report
  may name a set, or be a set's name.
- A report's `experiments:` list may hold glob patterns (`fmnist_*`: the matching experiments in config order) and
  exclusions (`!*_uniform`: drop the matches so far).
- A claim of a `claims` report with a `grid:` stands for one claim per cell (`{axis}` filled in its text, source,
  check and paper); a check `all_of: {grid: {...}, check: ...}` stands for the list of that check over its cells
  (inside a claim grid, both grids' axes fill it). Strings of claims without a grid are left as written.
"""

import itertools
import string
from fnmatch import fnmatchcase

from fedavail.plan.config import ConfigError
from fedavail.config_yaml import load_config_files, merge

GRID_SECTIONS = ("partitions", "traces", "algorithms", "experiments")
GLOB_CHARACTERS = "*?["


def load(paths) -> dict:
    """The config files, read strictly and merged in order, with grids and sets expanded."""
    return expand(load_config_files(paths))


def expand(config: dict) -> dict:
    """A copy of `config` with every grid entry replaced by its cells, set names by their algorithms, experiment
    patterns by the experiments they match; `algorithm_sets` is removed."""
    expanded = dict(config)
    for section in GRID_SECTIONS:
        if isinstance(config.get(section), dict):
            expanded[section] = _expand_section(section, config[section])
    algorithms = expanded.get("algorithms") or {}
    sets = _algorithm_sets(expanded.pop("algorithm_sets", None) or {}, algorithms)
    experiments = expanded.get("experiments")
    if isinstance(experiments, dict):
        expanded["experiments"] = {name: _with_sets(f"experiments.{name}", entry, sets, algorithms)
                                   for name, entry in experiments.items()}
    if isinstance(expanded.get("reports"), dict):
        expanded["reports"] = {
            name: _with_claims(f"reports.{name}", _with_patterns(
                f"reports.{name}", _with_sets(f"reports.{name}", report, sets, algorithms), list(experiments or {})))
            for name, report in expanded["reports"].items()}
    return expanded


def _algorithm_sets(sets, algorithms: dict) -> dict:
    if not isinstance(sets, dict):
        raise ConfigError(f"algorithm_sets: must map set names to lists of algorithms, got {type(sets).__name__}")
    for name in sets:
        if name in algorithms:
            raise ConfigError(f"algorithm_sets.{name}: {name!r} is also an algorithm's name; rename one")
    return sets


def _expand_section(section: str, entries: dict) -> dict:
    expanded, origin = {}, {}
    for name, entry in entries.items():
        key = f"{section}.{name}"
        if isinstance(name, str) and _fields(key, name):
            cells = _cells(key, name, entry)
        elif isinstance(entry, dict) and "grid" in entry:
            raise ConfigError(f"{key}.grid: a grid entry's name needs a field per axis, e.g. '{name}_{{axis}}'")
        else:
            cells = [(name, entry)]
        for cell_name, cell in cells:
            if cell_name in expanded and origin[cell_name] == key:
                raise ConfigError(f"{key}: two cells are named {cell_name!r}; the name needs a field for every axis")
            if cell_name in expanded:
                raise ConfigError(f"{key}: produces {section}.{cell_name}, which {origin[cell_name]} also defines")
            expanded[cell_name] = cell
            origin[cell_name] = key
    return expanded


def _cells(key: str, template: str, entry) -> list[tuple[str, dict]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("grid"), dict) or not entry["grid"]:
        raise ConfigError(f"{key}: a name with {{fields}} is a grid and needs a non-empty `grid:` mapping of axes")
    axes = {axis: _axis_values(f"{key}.grid.{axis}", values) for axis, values in entry["grid"].items()}
    for field in _fields(key, template):
        if field not in axes:
            raise ConfigError(f"{key}: the name uses {{{field}}}, which is not an axis of its grid "
                              f"(axes: {sorted(axes)})")
    return [(_format(key, template, values), _substitute(key, cell, values))
            for values, cell in _combinations(key, entry)]


def _combinations(key: str, entry: dict, outer: dict | None = None) -> list[tuple[dict, dict]]:
    """(axis values, the entry without `grid` with the cell's overrides merged in) for every cell of its grid; the
    values extend `outer` (an enclosing grid's)."""
    if not isinstance(entry.get("grid"), dict) or not entry["grid"]:
        raise ConfigError(f"{key}.grid: a non-empty mapping of axes")
    axes = {axis: _axis_values(f"{key}.grid.{axis}", values) for axis, values in entry["grid"].items()}
    clash = sorted(set(axes) & set(outer or {}))
    if clash:
        raise ConfigError(f"{key}.grid: axis {clash[0]!r} is already an axis of the enclosing grid")
    base = {k: v for k, v in entry.items() if k != "grid"}
    cells = []
    for combination in itertools.product(*axes.values()):
        values = {**(outer or {}), **{axis: value for axis, (value, _) in zip(axes, combination)}}
        cell = base
        for _, overrides in combination:
            cell = merge(cell, overrides)
        cells.append((values, cell))
    return cells


def _with_claims(key: str, report):
    if not isinstance(report, dict) or report.get("kind") != "claims" or not isinstance(report.get("claims"), list):
        return report
    claims = []
    for i, claim in enumerate(report["claims"]):
        at = f"{key}.claims[{i}]"
        if isinstance(claim, dict) and "grid" in claim:
            claims += [_fill_claim(at, cell, values) for values, cell in _combinations(at, claim)]
        else:
            claims.append(_fill_claim(at, claim, None))
    return {**report, "claims": claims}


def _fill_claim(key: str, value, values: dict | None):
    """`value` with `{axis}` filled from `values` (None: strings kept as written) and `all_of` grids expanded."""
    if isinstance(value, dict):
        if set(value) == {"all_of"} and isinstance(value["all_of"], dict):
            inner = value["all_of"]
            where = f"{key}.all_of"
            if set(inner) != {"grid", "check"}:
                raise ConfigError(f"{where}: a list of checks, or a mapping with `grid` and `check`")
            return {"all_of": [_fill_claim(f"{where}.check", cell["check"], cell_values)
                               for cell_values, cell in _combinations(where, inner, values)]}
        return {k: _fill_claim(f"{key}.{k}", v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_claim(f"{key}[{i}]", v, values) for i, v in enumerate(value)]
    if values is None or not isinstance(value, str):
        return value
    return _substitute(key, value, values)


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
            raise ConfigError(f"{key}: axis value {value!r} must be a string or a number (it becomes part of names)")
        if overrides is None:
            raise ConfigError(f"{key}.{value}: give the overrides as a mapping ({{}} for none)")
        if not isinstance(overrides, dict):
            raise ConfigError(f"{key}.{value}: overrides must be a mapping of the entry's keys, got "
                              f"{type(overrides).__name__}")
    return pairs


def _fields(key: str, text: str) -> list[str]:
    try:
        return [field for _, field, _, _ in string.Formatter().parse(text) if field is not None]
    except ValueError as error:
        raise ConfigError(f"{key}: {text!r} is not a valid template ({error}); write {{{{ and }}}} for braces") \
            from error


def _substitute(key: str, value, values: dict):
    if isinstance(value, dict):
        return {k: _substitute(f"{key}.{k}", v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(f"{key}[{i}]", v, values) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    fields = _fields(key, value)
    for field in fields:
        if field not in values:
            raise ConfigError(f"{key}: {value!r} uses {{{field}}}, which is not an axis of the grid "
                              f"(axes: {sorted(values)})")
    if len(fields) == 1 and value == f"{{{fields[0]}}}":
        return values[fields[0]]
    return _format(key, value, values)


def _format(key: str, template: str, values: dict) -> str:
    try:
        return template.format(**values)
    except (ValueError, IndexError) as error:
        raise ConfigError(f"{key}: cannot fill {template!r} with {values} ({error})") from error


def _with_sets(key: str, entry, sets: dict, algorithms: dict):
    if not isinstance(entry, dict) or "algorithms" not in entry:
        return entry
    names = entry["algorithms"]
    if isinstance(names, str):
        if names not in sets:
            raise ConfigError(f"{key}.algorithms: {names!r} is not an algorithm set (sets: {sorted(sets)}); give a "
                              f"set's name or a list of algorithms")
        names = [names]
    if not isinstance(names, list):
        return entry
    resolved = [algorithm for name in names for algorithm in _set_members(name, sets, ())]
    for name in resolved:
        if name not in algorithms:
            raise ConfigError(f"{key}.algorithms: {name!r} is neither an algorithm nor an algorithm set")
    _no_repeats(f"{key}.algorithms", resolved, "after expanding algorithm sets")
    return {**entry, "algorithms": resolved}


def _set_members(name, sets: dict, visiting: tuple) -> list:
    if name not in sets:
        return [name]
    if name in visiting:
        raise ConfigError(f"algorithm_sets.{name}: the set contains itself ({' -> '.join(visiting + (name,))})")
    members = sets[name]
    if not isinstance(members, list):
        raise ConfigError(f"algorithm_sets.{name}: must be a list of algorithm or set names")
    return [algorithm for member in members for algorithm in _set_members(member, sets, visiting + (name,))]


def _with_patterns(key: str, report, experiments: list[str]):
    if not isinstance(report, dict) or not isinstance(report.get("experiments"), list):
        return report
    selected = []
    for item in report["experiments"]:
        if isinstance(item, str) and item.startswith("!"):
            kept = [name for name in selected if not fnmatchcase(name, item[1:])]
            if len(kept) == len(selected):
                raise ConfigError(f"{key}.experiments: {item!r} excludes nothing listed before it")
            selected = kept
        elif isinstance(item, str) and any(c in item for c in GLOB_CHARACTERS):
            matches = [name for name in experiments if fnmatchcase(name, item)]
            if not matches:
                raise ConfigError(f"{key}.experiments: pattern {item!r} matches no experiment")
            selected += matches
        else:
            selected.append(item)
    _no_repeats(f"{key}.experiments", selected, "after expanding patterns")
    return {**report, "experiments": selected}


def _no_repeats(key: str, names: list, when: str) -> None:
    repeated = sorted({str(n) for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{key}: {', '.join(repeated)} listed more than once {when}")
