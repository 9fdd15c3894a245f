# Training: one job per experiment x algorithm x seed. Its params are exactly its own config slice, and it depends on
# the training code, so a changed setting or an edited engine reruns only the runs it affects.


rule train:
    input:
        unpack(train_inputs),
    output:
        metrics="results/runs/{experiment}/{algorithm}/seed{seed}/metrics.parquet",
        summary="results/runs/{experiment}/{algorithm}/seed{seed}/summary.json",
    params:
        spec=lambda w: fc.as_json(fc.run_spec(config, w.experiment, w.algorithm, int(w.seed))),
        execution=(
            f"--device {EXECUTION['device']} --batched {EXECUTION['batched']} "
            f"--checkpoint-every {EXECUTION['checkpoint_every']} --log-every {EXECUTION['log_every']}"
        ),
    threads: EXECUTION["train_threads"]
    log:
        "logs/train/{experiment}/{algorithm}/seed{seed}.log",
    conda:
        "../envs/fedavail.yaml"
    shell:
        "fedavail train --prepared {input.prepared} --partition {input.partition} --trace {input.trace} "
        "--out-dir $(dirname {output.metrics}) --spec {params.spec:q} --threads {threads} {params.execution} "
        "> {log} 2>&1"
