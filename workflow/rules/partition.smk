# Partitions: one file per partition setting and seed, shared by every experiment that names it.


rule partition:
    input:
        lambda w: prepared_file(PLAN.partitions[w.partition]["dataset"]),
    output:
        npz=f"{fp.PARTITION}.npz",
        stats=f"{fp.PARTITION}.csv",
        figure=report(
            f"{fp.PARTITION}.png",
            caption="../report/partition.rst",
            category="Partitions",
            labels={"partition": "{partition}", "seed": "{seed}"},
        ),
    log:
        "logs/partition/{partition}/seed{seed}.log",
    priority: DATA_FIRST
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=derived(partition_spec),
        spec_sha256=sha256_of(partition_spec),
    shell:
        "fedavail partition --prepared {input:q} --seed {wildcards.seed:q} --spec {params.spec:q} "
        "--out {output.npz:q} --stats {output.stats:q} --figure {output.figure:q} > {log:q} 2>&1"
