"""One cross-experiment report job: load its runs, build its table or figure, write every output file.

outputs (by fedavail.report.spec.output_paths): md, tex, csv (+ paper_md, paper_tex, paper_csv) for table and claims
kinds; png, pdf, csv for figure kinds."""

from pathlib import Path

from fedavail.io import atomic_path, write_text
from fedavail.report import spec as report_spec


def _write_csv(frame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def make_report(spec: dict, run_dirs: list, outputs: dict) -> None:
    from fedavail.report.claims import claims_table
    from fedavail.report.compare import compare, comparison_table
    from fedavail.report.figures import FIGURE_BUILDERS, save
    from fedavail.report.render import to_latex, to_markdown
    from fedavail.report.runs import load
    from fedavail.report.scored_model import SCORED_COLUMNS, is_server_row, score_local_mean
    from fedavail.report.tables import TABLE_BUILDERS

    settings = spec["report"]
    kind = settings["kind"]
    expected = set(report_spec.output_paths(spec["name"], kind))
    if set(outputs) != expected:
        raise ValueError(f"report {spec['name']!r} of kind {kind!r} writes {sorted(expected)}, got {sorted(outputs)}")
    runs = None if kind in report_spec.TOY_KINDS else load(run_dirs)
    if settings.get("eval_model") == "local_mean" and settings.get("metric", "test_acc") in SCORED_COLUMNS:
        spec, runs = score_local_mean(spec, runs)
    if kind in FIGURE_BUILDERS:
        figure, data = FIGURE_BUILDERS[kind](spec, runs)
        save(figure, Path(outputs["png"]), Path(outputs["pdf"]))
        _write_csv(data, Path(outputs["csv"]))
        return
    table, data, cells = {**TABLE_BUILDERS, "claims": claims_table}[kind](spec, runs)
    if "eval_model" in settings:
        table.footnotes.append(report_spec.SCORED_MODEL[settings["eval_model"]] + ".")
    write_text(outputs["md"], to_markdown(table))
    write_text(outputs["tex"], to_latex(table))
    _write_csv(data, Path(outputs["csv"]))
    if "paper_md" in outputs:
        sources = report_spec.PAPER_SOURCES[kind] if settings.get("paper", True) else ()
        # The published cells are the authors' reported model: the server-model rows have no counterpart.
        cells = cells[~cells["algorithm"].map(is_server_row)] if len(cells) else cells
        result = compare(cells, sources)
        labels = {a: table_label for a, table_label in zip(cells["algorithm"], cells["label"])} if len(cells) else {}
        paper = comparison_table(result, table.title, labels)
        write_text(outputs["paper_md"], to_markdown(paper))
        write_text(outputs["paper_tex"], to_latex(paper))
        _write_csv(result, Path(outputs["paper_csv"]))
