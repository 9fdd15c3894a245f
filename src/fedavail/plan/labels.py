"""What tables and figures call a config's algorithm entries: the entry's own `label`, else its algorithm's
(AlgorithmOptions.label, stated in the algorithm's options module). Entries that would share one are told apart by the
settings in which they differ (`FedAvg over all (global_lr = 10)`), else by their entry names, so no two entries of a
config share a label and no figure or table pools two entries' runs."""

import json
from collections import Counter

from fedavail.plan.algorithms.base import AlgorithmOptions


def entry_labels(entries: dict[str, dict], options: dict[str, AlgorithmOptions]) -> dict[str, str]:
    """entry name -> its label, for the algorithm entries `entries` (as the config writes them) with their options.
    ValueError when two entries state the same label."""
    stated = {name: entry["label"] for name, entry in entries.items() if "label" in entry}
    if twice := sorted(label for label, count in Counter(stated.values()).items() if count > 1):
        raise ValueError(f"label {twice[0]!r} is stated by the entries "
                         f"{sorted(name for name, label in stated.items() if label == twice[0])}; give each its own")
    sharing = {}
    for name in entries.keys() - stated.keys():
        sharing.setdefault(options[name].label(), []).append(name)
    labels = dict(stated)
    for label, names in sharing.items():
        labels.update(_told_apart(label, {name: _settings(entries[name], options[name]) for name in names}))
    counts = Counter(labels.values())
    return {name: f"{label} [{name}]" if counts[label] > 1 and name not in stated else label
            for name, label in sorted(labels.items())}


def _told_apart(label: str, settings: dict[str, dict]) -> dict[str, str]:
    """Entries of one label, each followed by the settings in which they differ."""
    if len(settings) == 1:
        return dict.fromkeys(settings, label)
    keys = dict.fromkeys(key for values in settings.values() for key in values)
    differing = [key for key in keys if len({repr(values.get(key)) for values in settings.values()}) > 1]
    told = {}
    for name, values in settings.items():
        shown = [f"{key} = {_shown(values[key])}" for key in differing if key in values]
        told[name] = f"{label} ({', '.join(shown)})" if shown else label
    return told


def _settings(entry: dict, options: AlgorithmOptions) -> dict:
    """An entry's hyperparameters (defaults filled in) and its own lr where it states one."""
    return {**{key: getattr(options, key) for key in options.hyperparameters()},
            **({"lr": entry["lr"]} if "lr" in entry else {})}


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
