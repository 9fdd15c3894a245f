# Availability traces: who is available in every round, one file per trace setting and seed. Every algorithm of a
# seed reads the same trace, so comparisons are fair by construction.


rule trace:
    input:
        unpack(trace_inputs),
    output:
        npz=f"{fp.TRACE}.npz",
        figure=report(
            f"{fp.TRACE}.png",
            caption="../report/trace.rst",
            category="Availability traces",
            labels={"trace": "{trace}", "seed": "{seed}"},
        ),
    log:
        "logs/trace/{trace}/seed{seed}.log",
    priority: DATA_FIRST
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=derived(trace_spec),
        spec_sha256=sha256_of(trace_spec),
        partition=trace_partition_option,
        records_sha256=trace_records_sha256,
    shell:
        "fedavail trace {params.partition} --seed {wildcards.seed:q} --spec {params.spec:q} "
        "--out {output.npz:q} --figure {output.figure:q} > {log:q} 2>&1"
