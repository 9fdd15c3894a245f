"""docs/configuration.md, the option tables of docs/algorithms.md and workflow/schemas/config.schema.yaml hold
exactly what the plan layer generates (python -m fedavail.plan.docs --write), and the defaults the workflow's schema
validation fills in are the plan layer's."""

import copy
import dataclasses
from dataclasses import MISSING

import pytest
from snakemake.utils import validate
from workflow_helpers import REPO

from fedavail.options import default_of
from fedavail.plan import schema
from fedavail.plan.algorithms import known_algorithms
from fedavail.plan.docs import (ALGORITHMS_DOCUMENT, DOCUMENT, END, OPTIONS_END, OPTIONS_START, SCHEMA, START, generate,
                                generated_part, with_options_tables)
from fedavail.plan.experiments import AugmentationOptions, ExecutionOptions, TrainingOptions
from fedavail.plan.load import load_config_file
from fedavail.plan.load import validate as validate_config

OUT_OF_DATE = "is out of date: run python -m fedavail.plan.docs --write"


def test_the_configuration_document_is_up_to_date():
    assert generated_part(DOCUMENT.read_text(encoding="utf-8")) == generate(), f"docs/configuration.md {OUT_OF_DATE}"


def test_the_algorithm_options_tables_are_up_to_date():
    text = ALGORITHMS_DOCUMENT.read_text(encoding="utf-8")
    assert with_options_tables(text) == text, f"docs/algorithms.md {OUT_OF_DATE}"
    for name in known_algorithms():
        assert OPTIONS_START.format(f"algorithm: {name}") in text


def test_an_algorithm_without_its_marker_lines_is_named():
    text = ALGORITHMS_DOCUMENT.read_text(encoding="utf-8").replace(OPTIONS_START.format("algorithm: mifa"), "")
    with pytest.raises(ValueError, match=f"options of algorithm: mifa need one line .* {OPTIONS_END}"):
        with_options_tables(text)


def test_the_schema_is_up_to_date():
    assert SCHEMA.read_text(encoding="utf-8") == schema.text(), f"{SCHEMA.relative_to(REPO)} {OUT_OF_DATE}"


def test_the_defaults_the_schema_fills_in_are_the_plans():
    """Validation (fedavail.plan.load.validate) fills execution, training and training.augmentation: with every one
    of their optional keys left out, the filled values are the dataclasses' defaults, and nothing else is filled; and
    Snakemake's validate(set_default=True) with the written schema fills in and accepts exactly the same."""
    config = load_config_file(REPO / "config/test.yaml")
    config.pop("execution", None)
    for experiment in config["experiments"].values():
        experiment["training"] = {key: experiment["training"][key] for key in ("model", "rounds", "local")}
    given, by_snakemake = copy.deepcopy(config), copy.deepcopy(config)
    validate_config(config)
    validate(by_snakemake, str(SCHEMA), set_default=True)
    assert by_snakemake == config
    assert config.pop("execution") == dataclasses.asdict(ExecutionOptions())
    given.setdefault("reports", {})
    for name, experiment in config["experiments"].items():
        training = experiment.pop("training")
        defaults = {f.name: default_of(f) for f in dataclasses.fields(TrainingOptions) if default_of(f) is not MISSING}
        assert training == {**defaults, "model": training["model"], "rounds": training["rounds"],
                            "local": given["experiments"][name]["training"]["local"],
                            "augmentation": dataclasses.asdict(AugmentationOptions())}
        given["experiments"][name].pop("training")
    assert config == given


def test_the_generated_part_documents_every_variant():
    text = generate()
    assert text.startswith(START) and text.rstrip().endswith(END)
    for heading in ("### Scheme `scheme: hetero_dirichlet`", "### Model `model: markov`",
                    "### Algorithm `algorithm: fast`", "### training.local", "| `grad_clip` | number or null | `null` |"):
        assert heading in text


def _shown(value) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def test_the_reports_section_names_every_key_of_every_kind_with_its_default():
    """The Reports section is written by hand: it must still name each kind's keys, and where it states a default
    in parentheses, the one fedavail.plan.reports declares."""
    import dataclasses

    from fedavail.plan.reports import KINDS, Report

    section = DOCUMENT.read_text(encoding="utf-8").split("## Reports", 1)[1].split("\n## ", 1)[0]
    common = {f.name for f in dataclasses.fields(Report)}
    for kind, cls in KINDS.items():
        rows = [line for line in section.splitlines() if line.startswith(f"| `{kind}` |")]
        assert len(rows) == 1, f"kind {kind!r} has no row of its own in the Reports section"
        row = rows[0]
        for f in dataclasses.fields(cls):
            if f.name in common or "the keys of" in row:
                continue
            assert f"`{f.name}`" in row, f"{kind}: key {f.name!r} is not documented"
            if f"`{f.name}` (" in row and isinstance(f.default, bool | int | float | str) and f.default is not None:
                stated = row.split(f"`{f.name}` (", 1)[1]
                assert stated.startswith(_shown(f.default)), f"{kind}.{f.name}: the docs state ({stated[:20]}...), " \
                                                              f"the spec's default is {f.default!r}"
