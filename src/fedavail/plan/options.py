"""Declaring settings once: each setting is a field of a frozen dataclass with its type, default and meaning, and a
mapping from a config is checked against those annotations before the dataclass is built."""

import math
import numbers
import types
import typing
from dataclasses import MISSING, field, fields

REQUIRED = "required"  # the default of a key that has none (check_keys)


def option(default=MISSING, doc: str = "", *, choices: tuple = ()):
    """A setting: its default (none: required), what it means (docs/configuration.md), its allowed values."""
    metadata = {"doc": doc, "choices": tuple(choices)}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def required(cls) -> list[str]:
    return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]


def default_of(f):
    """A field's default, `MISSING` when it has none."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


def check_keys(spec: dict, allowed: dict, what: str, owner: str, ignore=()) -> None:
    """Raise ValueError naming the first key of `spec` that `allowed` lacks, or the first REQUIRED key it misses."""
    unknown = sorted(set(spec) - set(allowed) - set(ignore))
    if unknown:
        raise ValueError(f"{what} {unknown[0]!r} is not used by {owner} (allowed: {sorted(allowed)})")
    missing = [key for key, default in allowed.items() if default == REQUIRED and key not in spec]
    if missing:
        raise ValueError(f"{what} {missing[0]!r} is required by {owner}")


def key_table(cls) -> dict:
    """The settings of `cls` as check_keys takes them: name -> default, or REQUIRED."""
    return {f.name: REQUIRED if default_of(f) is MISSING else default_of(f) for f in fields(cls)}


def check_choices(options, what: str) -> None:
    """Raise ValueError naming the first field whose value is not one of its declared choices."""
    for f in fields(options):
        value = getattr(options, f.name)
        if f.metadata.get("choices") and value not in f.metadata["choices"]:
            raise ValueError(f"{what} {f.name!r}: {value!r} is not one of {f.metadata['choices']}")


def has_type(value, hint) -> bool:
    """`value` fits the annotation: an int is a float, a float is never an int, bool is neither."""
    allowed = _allowed(hint)
    if value is None or isinstance(value, bool):
        return type(value) in allowed
    if isinstance(value, float):
        return float in allowed and math.isfinite(value)
    if isinstance(value, int):
        return int in allowed or float in allowed
    return any(isinstance(value, t) for t in allowed if isinstance(t, type))


def type_name(hint) -> str:
    return " or ".join("null" if t is type(None) else "a finite number" if t is float else
                       "an integer" if t is int else "a mapping" if t is dict else "a list" if t is list else
                       t.__name__ for t in _allowed(hint))


def _allowed(hint) -> tuple:
    if isinstance(hint, types.UnionType):
        return tuple(typing.get_origin(t) or t for t in typing.get_args(hint))
    return (typing.get_origin(hint) or hint,)


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_int(value, key: str, minimum: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{what} {key!r} must be an integer >= {minimum}, got {value!r}")


def check_probabilities(value, key: str, allow_list: bool, what: str) -> None:
    values = value if allow_list and isinstance(value, list | tuple) else [value]
    if not values or not all(is_number(v) and 0 <= v <= 1 for v in values):
        kind = "a probability in [0, 1]" + (" or a list of them" if allow_list else "")
        raise ValueError(f"{what} {key!r} must be {kind}, got {value!r}")


class Registry(dict):
    """One family's entries by name (trace models, partition schemes, report kinds, or the code that draws or builds
    them), each added where it is defined with `@registry.add(name)`. Looking up a name nobody added raises
    ValueError listing the known ones; `key` is how that error names the setting (e.g. "trace spec key 'model'")."""

    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def add(self, *names: str):
        def register(entry):
            for name in names:
                if name in self:
                    raise ValueError(f"{self.key}: {name!r} is registered twice")
                self[name] = entry
            return entry

        return register

    def __missing__(self, name):
        raise ValueError(f"{self.key}: {name!r} is not one of {tuple(self)}")


def resolve_variant(spec: dict, variants: Registry, tag: str, what: str, kind: str):
    """`spec[tag]` names one of `variants` (a partition scheme, a trace model); the spec checked against that
    variant's dataclass and returned as it. ValueError names the offending key."""
    if not isinstance(spec, dict):
        raise ValueError(f"{kind} spec must be a mapping, got {type(spec).__name__}")
    name = spec.get(tag)
    cls = variants[name]
    check_keys(spec, key_table(cls), what, f"{tag} {name!r}", ignore={tag})
    return cls(**{key: value for key, value in spec.items() if key != tag})
