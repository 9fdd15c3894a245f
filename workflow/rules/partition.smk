# Partitions: one file per partition setting and seed, shared by every experiment that names it.


rule partition:
    input:
        lambda w: prepared_file(config["partitions"][w.partition]["dataset"]),
    output:
        npz="data/partitions/{partition}/seed{seed}.npz",
        stats="data/partitions/{partition}/seed{seed}.csv",
        figure=report(
            "data/partitions/{partition}/seed{seed}.png",
            caption="../report/partition.rst",
            category="Partitions",
            labels={"partition": "{partition}", "seed": "{seed}"},
        ),
    log:
        "logs/partition/{partition}/seed{seed}.log",
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=lambda w: fc.as_json(fc.partition_spec(config, w.partition)),
    shell:
        "fedavail partition --prepared {input:q} --seed {wildcards.seed:q} --spec {params.spec:q} "
        "--out {output.npz:q} --stats {output.stats:q} --figure {output.figure:q} > {log:q} 2>&1"
