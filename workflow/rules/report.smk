# Reports. Per experiment: a table of mean ± std over seeds of the last-N-round test accuracy, and accuracy curves.
# Across experiments (config `reports:`, fedavail.report.spec): the papers' tables (Markdown, LaTeX, CSV, and the
# published values beside ours), figures (PNG, PDF, and the plotted numbers as CSV) and the claims tables (the papers'
# claims checked on the runs, their own section of the HTML report). Each report job's params are exactly its own
# slice of the config, so editing one report reruns only that report.


rule report_experiment:
    input:
        metrics=lambda w: [f"{d}/metrics.parquet" for d in run_dirs(w.experiment)],
        summaries=lambda w: [f"{d}/summary.json" for d in run_dirs(w.experiment)],
    output:
        md=report(
            "results/tables/{experiment}.md",
            caption="../report/table.rst",
            category="Tables",
            labels={"experiment": "{experiment}"},
        ),
        csv="results/tables/{experiment}.csv",
        figure=report(
            "results/figures/{experiment}_accuracy.png",
            caption="../report/accuracy.rst",
            category="Figures",
            labels={"experiment": "{experiment}"},
        ),
    log:
        "logs/report/{experiment}.log",
    wildcard_constraints:
        experiment=names_pattern(config["experiments"]),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=lambda w: fc.as_json(fc.report_spec(config, w.experiment)),
        run_dirs=lambda w: run_dirs(w.experiment),
    shell:
        "fedavail report --spec {params.spec:q} --run-dirs {params.run_dirs:q} --table-md {output.md:q} "
        "--table-csv {output.csv:q} --figure {output.figure:q} > {log:q} 2>&1"


rule report_paper_table:
    input:
        unpack(report_inputs),
    output:
        md=report(
            "results/tables/{report}.md",
            caption="../report/report.rst",
            category="Paper tables",
            labels={"report": "{report}", "content": "ours"},
        ),
        tex="results/tables/{report}.tex",
        csv="results/tables/{report}.csv",
        paper_md=report(
            "results/tables/{report}_paper.md",
            caption="../report/paper.rst",
            category="Paper tables",
            labels={"report": "{report}", "content": "paper vs ours"},
        ),
        paper_tex="results/tables/{report}_paper.tex",
        paper_csv="results/tables/{report}_paper.csv",
    log:
        "logs/report_set/{report}.log",
    wildcard_constraints:
        report=names_pattern(rs.report_names(config, "paper_table")),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=lambda w: fc.as_json(fc.report_spec_of(config, w.report)),
        run_dirs=report_run_dirs,
        caption=report_caption,
    shell:
        "fedavail report-set --spec {params.spec:q} --run-dirs {params.run_dirs:q} --out md={output.md:q} "
        "tex={output.tex:q} csv={output.csv:q} paper_md={output.paper_md:q} paper_tex={output.paper_tex:q} "
        "paper_csv={output.paper_csv:q} > {log:q} 2>&1"


rule report_table:
    input:
        unpack(report_inputs),
    output:
        md=report(
            "results/tables/{report}.md",
            caption="../report/report.rst",
            category="Tables",
            labels={"report": "{report}"},
        ),
        tex="results/tables/{report}.tex",
        csv="results/tables/{report}.csv",
    log:
        "logs/report_set/{report}.log",
    wildcard_constraints:
        report=names_pattern(rs.report_names(config, "table")),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=lambda w: fc.as_json(fc.report_spec_of(config, w.report)),
        run_dirs=report_run_dirs,
        caption=report_caption,
    shell:
        "fedavail report-set --spec {params.spec:q} --run-dirs {params.run_dirs:q} --out md={output.md:q} "
        "tex={output.tex:q} csv={output.csv:q} > {log:q} 2>&1"


rule report_claims:
    input:
        unpack(report_inputs),
    output:
        md=report(
            "results/tables/{report}.md",
            caption="../report/claims.rst",
            category="Claims",
            labels={"report": "{report}"},
        ),
        tex="results/tables/{report}.tex",
        csv="results/tables/{report}.csv",
    log:
        "logs/report_set/{report}.log",
    wildcard_constraints:
        report=names_pattern(rs.report_names(config, "claims")),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=lambda w: fc.as_json(fc.report_spec_of(config, w.report)),
        run_dirs=report_run_dirs,
        caption=report_caption,
    shell:
        "fedavail report-set --spec {params.spec:q} --run-dirs {params.run_dirs:q} --out md={output.md:q} "
        "tex={output.tex:q} csv={output.csv:q} > {log:q} 2>&1"


rule report_figure:
    input:
        unpack(report_inputs),
    output:
        png=report(
            "results/figures/{report}.png",
            caption="../report/report.rst",
            category="Paper figures",
            labels={"report": "{report}"},
        ),
        pdf="results/figures/{report}.pdf",
        csv="results/figures/{report}.csv",
    log:
        "logs/report_set/{report}.log",
    wildcard_constraints:
        report=names_pattern(rs.report_names(config, "figure")),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=lambda w: fc.as_json(fc.report_spec_of(config, w.report)),
        run_dirs=report_run_dirs,
        caption=report_caption,
    shell:
        "fedavail report-set --spec {params.spec:q} --run-dirs {params.run_dirs:q} --out png={output.png:q} "
        "pdf={output.pdf:q} csv={output.csv:q} > {log:q} 2>&1"
