"""Loading a config: `load` is the one entry point (the Snakefile calls it) and returns its Plan.

Strict reading: a key twice in one mapping is an error, and numbers in scientific notation (1e-3) are numbers, as in
YAML 1.2 (PyYAML follows YAML 1.1, which reads them as strings). A plain scalar that YAML 1.1 reads as another number
than it shows (010 is 8, 1:00 is 60) is an error, and a document whose aliases expand to more than MAX_NODES nodes
(a "billion laughs") is refused before it is built."""

import copy
import functools
import re
import sys
from pathlib import Path

import jsonschema
import yaml

from fedavail.plan.checks import schema_problem
from fedavail.plan.errors import ConfigError, shorten
from fedavail.plan.grid import expand
from fedavail.plan.mappings import merge
from fedavail.plan.plan import Plan, build_plan
from fedavail.plan.schema import generate

# Nodes of a document with its aliases expanded: each paper config has about a thousand.
MAX_NODES = 100_000

# YAML 1.2 core schema floats (the exponent's sign optional, digits on at least one side of the point), with the
# underscores YAML 1.1 allows.
_FLOAT = re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
                        |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                        |[-+]?\.(?:inf|Inf|INF)
                        |\.(?:nan|NaN|NAN))$""", re.X)
# Integers: decimal without a leading zero, or hexadecimal (0x1F) and binary (0b101) as YAML 1.1 writes them.
_INT = re.compile(r"""^(?:[-+]?(?:0|[1-9][0-9_]*)
                      |[-+]?0x[0-9a-fA-F_]+
                      |[-+]?0b[0-1_]+)$""", re.X)
# What YAML 1.1 reads as another number than it shows: a leading zero (octal 010 = 8; 08 a string) and base 60
# (1:00 = 60, 1:30.5 = 90.5).
_AMBIGUOUS_NUMBER = re.compile(r"""^(?:[-+]?0[0-9_]+
                                   |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)$""", re.X)
_AMBIGUOUS_TAG = "tag:fedavail,2024:ambiguous-number"


class StrictLoader(yaml.SafeLoader):
    def construct_document(self, node):
        nodes = self._expanded_size(node, {})
        if nodes > MAX_NODES:
            raise ConfigError(f"{self.name}: with its aliases (*name) expanded the document has {nodes:,} nodes, more "
                              f"than MAX_NODES = {MAX_NODES:,}; write repeated settings once (grids, algorithm sets) "
                              f"instead of aliases of aliases")
        return super().construct_document(node)

    def _expanded_size(self, node, sizes: dict) -> int:
        """Nodes under `node` with every alias expanded; memoised per node (an alias is the node it names), so a tree
        of 9^9 aliased nodes costs one visit per node written."""
        if id(node) in sizes:
            if sizes[id(node)] is None:
                raise ConfigError(f"{self.name}, line {node.start_mark.line + 1}: an alias inside the node it names "
                                  f"(a structure containing itself); remove the alias")
            return sizes[id(node)]
        sizes[id(node)] = None
        # A sequence's value is its items, a mapping's its (key, value) pairs, a scalar's its text.
        items = node.value if isinstance(node, yaml.CollectionNode) else ()
        sizes[id(node)] = 1 + sum(self._expanded_size(child, sizes) for item in items
                                  for child in (item if isinstance(item, tuple) else (item,)))
        return sizes[id(node)]

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden on purpose
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"{self.name}: key {shorten(key)} appears twice in one mapping (lines "
                                  f"{seen[key] + 1} and {key_node.start_mark.line + 1}); remove one")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def construct_ambiguous_number(self, node):
        raise ConfigError(f"{self.name}, line {node.start_mark.line + 1}: {shorten(node.value)} is another number "
                          f"in YAML 1.1 than it reads (010 is 8, 1:00 is 60); write the number without leading zeros "
                          f"(10), or quote it for a string ('010')")


StrictLoader.yaml_implicit_resolvers = {  # YAML 1.1's floats and integers replaced
    first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith((":float", ":int"))]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
StrictLoader.add_implicit_resolver(_AMBIGUOUS_TAG, _AMBIGUOUS_NUMBER, list("-+0123456789"))
StrictLoader.add_constructor(_AMBIGUOUS_TAG, StrictLoader.construct_ambiguous_number)


YTE_KEY = "__use_yte__"


def load_config_file(path: str | Path) -> dict:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            loaded = yaml.load(f, Loader=StrictLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from error
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys, got {type(loaded).__name__}")
    if YTE_KEY in loaded:
        raise ConfigError(f"{path}: {YTE_KEY} makes Snakemake evaluate the file as a YTE template, running the Python "
                          f"in it when it reads the file; fedavail configs are data: remove the key")
    return loaded


def check_config_files(paths) -> None:
    """Read each config file strictly before Snakemake reads it, and exit with the first problem: Snakemake's loader
    says only "not valid JSON or YAML" for a YAML syntax or tab error, naming neither file nor line, and builds every
    alias of a document whose aliases nest mappings (minutes and gigabytes for a few hundred bytes). A missing file is
    left to Snakemake, which names it."""
    for path in paths:
        try:
            load_config_file(path)
        except FileNotFoundError:
            continue
        except ConfigError as error:
            raise SystemExit(f"invalid config: {error}") from None


def check_command_line_config_files(argv: list[str] | None = None) -> None:
    """check_config_files for the files that Snakemake's command line names (--configfile), called by the workflow
    profiles (profiles/*/config.yaml), which Snakemake reads before the config files."""
    from snakemake.cli import get_argument_parser

    try:
        args, _ = get_argument_parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    except SystemExit:  # a command line Snakemake refuses: it says why itself
        return
    check_config_files(args.configfile or ())


def read_override(entry: str) -> dict:
    """One --config KEY=VALUE entry as {KEY: value}, VALUE read as YAML by the reader of the config files, so that
    `execution={train_threads: 2}` gives the number 2. (Snakemake reads the entry itself first: the first of int, float
    and True/False that parses VALUE, else YAML with every scalar a string, '2'; fedavail uses its own reading.)"""
    key, _, text = entry.partition("=")
    loader = StrictLoader(text)
    loader.name = f"--config {key}"
    try:
        return {key: loader.get_single_data()}
    except yaml.YAMLError as error:
        raise ConfigError(f"--config {shorten(entry)} is not valid YAML: {error}") from error
    finally:
        loader.dispose()


def command_line_overrides(entries) -> dict:
    """Snakemake's --config entries (workflow.config_settings.config_args: those of the command line and the
    profiles, as Snakemake passes them on to cluster jobs) as one mapping, later entries merged over earlier ones."""
    return functools.reduce(merge, map(read_override, entries or ()), {})


def load_config(paths, overrides: dict | None = None) -> dict:
    """The config files, read strictly and merged in order, then `overrides` (Snakemake's --config), with grids and
    sets expanded."""
    return expand(functools.reduce(merge, [*map(load_config_file, paths), overrides or {}], {}))


def validate(config: dict) -> None:
    """Check `config` against the schema and fill in the defaults it states, in place (what Snakemake's
    validate(..., set_default=True) does): raise ConfigError naming the key of the first problem."""
    check_properties = jsonschema.Draft202012Validator.VALIDATORS["properties"]

    def fill_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(key, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, properties, instance, schema)

    validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"properties": fill_defaults})
    try:
        validator(generate()).validate(config)
    except jsonschema.ValidationError as error:
        raise ConfigError(schema_problem(error)) from None


def load(paths, overrides: dict | None = None) -> Plan:
    """The Plan of the config files `paths` with `overrides` (Snakemake's --config) on top."""
    config = load_config(paths, overrides)
    validate(config)
    return build_plan(config)


if __name__ == "__main__":  # python -m fedavail.plan.load CONFIG...: check config files as the workflow does
    check_config_files(sys.argv[1:])
    try:
        load(sys.argv[1:])
    except ConfigError as error:
        raise SystemExit(f"invalid config: {error}") from None
