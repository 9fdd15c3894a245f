"""One report job (`fedavail report`): load its runs into the tidy frame, build its table or figure and write the
files fedavail.plan.reports.report_outputs asks for."""

from pathlib import Path

from fedavail.io import atomic_path, write_text
from fedavail.plan.captions import SCORED_MODEL
from fedavail.plan.reports import KINDS
from fedavail.report import BUILDERS


def _write_table(table, data, outputs: dict, prefix: str = "") -> None:
    from fedavail.report.render import to_latex, to_markdown

    for key, render in (("md", to_markdown), ("tex", to_latex)):
        if prefix + key in outputs:
            write_text(outputs[prefix + key], render(table))
    write_text(outputs[prefix + "csv"], data.to_csv(index=False))


def make_report(job: dict, run_dirs: list, outputs: dict) -> None:
    # importing them adds their builders to BUILDERS
    from fedavail.report import claims, tables, virtual_time  # noqa: F401
    from fedavail.report import frame as tidy
    from fedavail.report.compare import compare, comparison_table
    from fedavail.report.figures import experiment_figure, save
    from fedavail.report.render import TextTable

    kind = job["report"]["kind"]
    runs = tidy.load(job, run_dirs) if job["experiments"] else None  # the exact toy examples read no runs
    if kind == "runs":
        with atomic_path(Path(outputs["parquet"])) as tmp:
            runs.to_parquet(tmp, index=False)
        return
    frame = None if runs is None else tidy.view(job, runs)
    table, data = BUILDERS[kind](job, frame)
    if not isinstance(table, TextTable):
        save(table, Path(outputs["png"]), Path(outputs["pdf"]))
        write_text(outputs["csv"], data.to_csv(index=False))
        return
    if kind == "experiment":
        save(experiment_figure(job, frame), Path(outputs["png"]))
    if "eval_model" in job["report"]:
        table.footnotes.append(SCORED_MODEL[job["report"]["eval_model"]] + ".")
    if "paper_md" in outputs:  # the published cells are the authors' reported model: server rows have no counterpart
        cells = tidy.without_server_rows(data)
        result = compare(cells, KINDS[kind].PAPER_SOURCES if job["report"]["paper"] else ())
        paper = comparison_table(result, table.title, dict(zip(cells["algorithm"], cells["label"])))
        _write_table(paper, result, outputs, "paper_")
    if "csv" in outputs:
        _write_table(table, data, outputs)
