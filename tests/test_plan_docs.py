"""docs/configuration.md holds exactly the text the plan layer generates (python -m fedavail.plan.docs --write)."""

from fedavail.plan.docs import DOCUMENT, END, START, generate, generated_part


def test_the_configuration_document_is_up_to_date():
    assert generated_part(DOCUMENT.read_text(encoding="utf-8")) == generate(), \
        "docs/configuration.md is out of date: run python -m fedavail.plan.docs --write"


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
