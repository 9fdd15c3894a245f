"""One report job (`fedavail report`): load its runs into the tidy frame, build its table or figure and write the
files it is asked for (fedavail.plan.reports.report_outputs): md, tex, csv for a table; paper_md, paper_tex,
paper_csv for the published values beside ours; png, pdf, csv for a figure; md, csv, png for an experiment;
parquet for the frame of every run (kind "runs")."""

from pathlib import Path

from fedavail.io import atomic_path, write_text
from fedavail.plan.captions import SCORED_MODEL

PAPER_SOURCES = {
    "fedswe_table": ("FedSWE Table 2",),
    "sweep": ("FedSWE Table 8", "FedSWE Table 9", "FedSWE Table 2"),
    "rounds_to_target": ("FedSWE Table 7",),
    "fast_table": ("FAST §5.1",),
}
TOY_KINDS = ("toy_heterogeneity", "toy_interpolation")


def _write_csv(frame, path) -> None:
    with atomic_path(Path(path)) as tmp:
        frame.to_csv(tmp, index=False)


def _write_table(table, data, outputs: dict) -> None:
    from fedavail.report.render import to_latex, to_markdown

    if "md" in outputs:
        write_text(outputs["md"], to_markdown(table))
    if "tex" in outputs:
        write_text(outputs["tex"], to_latex(table))
    _write_csv(data, outputs["csv"])


def _write_paper(job: dict, table, cells, outputs: dict) -> None:
    from fedavail.report.compare import compare, comparison_table
    from fedavail.report.frame import is_server_row

    # The published cells are the authors' reported model: the server-model rows have no counterpart.
    cells = cells[~cells["algorithm"].map(is_server_row)]
    result = compare(cells, PAPER_SOURCES[job["report"]["kind"]] if job["report"]["paper"] else ())
    paper = comparison_table(result, table.title, dict(zip(cells["algorithm"], cells["label"])))
    _write_table(paper, result, {"md": outputs["paper_md"], "tex": outputs["paper_tex"], "csv": outputs["paper_csv"]})


def make_report(job: dict, run_dirs: list, outputs: dict) -> None:
    from fedavail.report import frame as tidy
    from fedavail.report.claims import claims_table
    from fedavail.report.figures import FIGURE_BUILDERS, experiment_figure, save
    from fedavail.report.tables import TABLE_BUILDERS

    kind = job["report"]["kind"]
    runs = None if kind in TOY_KINDS else tidy.load(job, run_dirs)
    if kind == "runs":
        with atomic_path(Path(outputs["parquet"])) as tmp:
            runs.to_parquet(tmp, index=False)
        return
    frame = None if runs is None else tidy.view(job, runs)
    if kind in FIGURE_BUILDERS:
        figure, data = FIGURE_BUILDERS[kind](job, frame)
        save(figure, Path(outputs["png"]), Path(outputs["pdf"]))
        _write_csv(data, outputs["csv"])
        return
    if kind == "experiment":
        save(experiment_figure(job, frame), Path(outputs["png"]))
    table, data = {**TABLE_BUILDERS, "claims": claims_table}[kind](job, frame)
    if "eval_model" in job["report"]:
        table.footnotes.append(SCORED_MODEL[job["report"]["eval_model"]] + ".")
    if "paper_md" in outputs:
        _write_paper(job, table, data, outputs)
    if "csv" in outputs:
        _write_table(table, data, outputs)
