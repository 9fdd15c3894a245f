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
