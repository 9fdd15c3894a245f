# Reports: per experiment, a table of mean ± std over seeds of the last-N-round test accuracy, and accuracy curves.


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
    params:
        spec=lambda w: fc.as_json(fc.report_spec(config, w.experiment)),
        run_dirs=lambda w: run_dirs(w.experiment),
    log:
        "logs/report/{experiment}.log",
    conda:
        "../envs/fedavail.yaml"
    shell:
        "fedavail report --spec {params.spec:q} --run-dirs {params.run_dirs} --table-md {output.md} "
        "--table-csv {output.csv} --figure {output.figure} > {log} 2>&1"
