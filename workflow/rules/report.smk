# Reports, all by one command (`fedavail report`) on the tidy frame of their runs (fedavail.report.frame): per
# experiment, results/experiments/<experiment>/ (a table of mean ± std over seeds of the last-N-round test accuracy,
# and accuracy curves); per entry of the config's `reports:` (fedavail.plan.reports), results/reports/<name>/ (a
# table in Markdown, LaTeX and CSV, and for the paper tables the published values beside ours; or a figure in PNG and
# PDF with the numbers it plots); and every run, one row per round with its settings, in
# results/frames/<config>.parquet (<config>: the config file's name, so each config's frame is its own). One rule body,
# which the others reuse with their own outputs. Each job's params are exactly its own slice of the config, so editing
# one report reruns only that report.


rule report_table:
    input:
        unpack(report_inputs),
    output:
        md=report(
            f"{fp.REPORT_DIR}/table.md",
            caption="../report/report.rst",
            category="Reports",
            labels={"report": "{report}", "content": "ours"},
        ),
        tex=f"{fp.REPORT_DIR}/table.tex",
        csv=f"{fp.REPORT_DIR}/table.csv",
    log:
        "logs/reports/{report}/table.log",
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=derived(report_spec),
        spec_sha256=sha256_of(report_spec),
        run_dirs=derived(report_run_dirs),
        caption=report_caption,
        out=report_out,
    shell:
        "fedavail report --spec {params.spec:q} --run-dirs {params.run_dirs:q} --out {params.out} > {log:q} 2>&1"


use rule report_table as report_paper with:
    output:
        paper_md=report(
            f"{fp.REPORT_DIR}/paper.md",
            caption="../report/paper.rst",
            category="Reports",
            labels={"report": "{report}", "content": "paper vs ours"},
        ),
        paper_tex=f"{fp.REPORT_DIR}/paper.tex",
        paper_csv=f"{fp.REPORT_DIR}/paper.csv",
    log:
        "logs/reports/{report}/paper.log",


use rule report_table as report_figure with:
    output:
        png=report(
            f"{fp.REPORT_DIR}/figure.png",
            caption="../report/report.rst",
            category="Reports",
            labels={"report": "{report}", "content": "figure"},
        ),
        pdf=f"{fp.REPORT_DIR}/figure.pdf",
        csv=f"{fp.REPORT_DIR}/figure.csv",
    log:
        "logs/reports/{report}/figure.log",


use rule report_table as report_experiment with:
    output:
        md=report(
            f"{fp.EXPERIMENT_DIR}/table.md",
            caption="../report/table.rst",
            category="Experiments",
            labels={"experiment": "{experiment}", "content": "table"},
        ),
        csv=f"{fp.EXPERIMENT_DIR}/table.csv",
        png=report(
            f"{fp.EXPERIMENT_DIR}/accuracy.png",
            caption="../report/accuracy.rst",
            category="Experiments",
            labels={"experiment": "{experiment}", "content": "test accuracy per round"},
        ),
    log:
        "logs/experiments/{experiment}.log",


use rule report_table as report_runs with:
    output:
        parquet=RUNS_FRAME,
    log:
        "logs/report/runs.log",
