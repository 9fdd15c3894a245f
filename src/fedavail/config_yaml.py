"""Reading config files strictly: a key given twice in one mapping is an error (not "the later one wins"), and
numbers in scientific notation (1e-3, 1.0e6, 5E+2) are numbers. PyYAML follows YAML 1.1, which reads those as
strings; this loader resolves floats as YAML 1.2 does."""

import re
from pathlib import Path

import yaml

from fedavail.config import ConfigError

# YAML 1.2 core schema floats (the exponent's sign optional, digits on at least one side of the point), with the
# underscores YAML 1.1 allows.
_FLOAT = re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
                        |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                        |[-+]?\.(?:inf|Inf|INF)
                        |\.(?:nan|NaN|NAN))$""", re.X)


class StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden on purpose
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"{self.name}: key {key!r} appears twice in one mapping (lines {seen[key] + 1} and "
                                  f"{key_node.start_mark.line + 1}); remove one")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
StrictLoader.add_constructor("tag:yaml.org,2002:map", StrictLoader.construct_yaml_map)


def load_config_file(path: str | Path) -> dict:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            loaded = yaml.load(f, Loader=StrictLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from error
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys, got {type(loaded).__name__}")
    return loaded


def merge(base: dict, update: dict) -> dict:
    """Nested mappings merged key by key, later values winning (how Snakemake combines several config files)."""
    merged = dict(base)
    for key, value in update.items():
        merged[key] = merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) \
            else value
    return merged


def load_config_files(paths) -> dict:
    merged = {}
    for path in paths:
        merged = merge(merged, load_config_file(path))
    return merged
