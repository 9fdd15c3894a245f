# Training: one job per experiment x algorithm x seed (execution.seeds_per_job: 1, the default), or one job per
# batch of runs that share a dataset and every training and algorithm setting, trained in one process (seeds_per_job:
# all: one interpreter start for many runs; on GPUs one vmap over all their clients). Either way exactly one rule
# writes each run's files. A job's params are exactly its own config slice and the hash of the code it runs
# (fedavail.plan.sources), so a changed setting or edited code reruns only the runs it affects; the slice reruns a job
# through its digest (sha256_of, in common.smk), so that a dry run's reasons do not print it. Two rule families,
# because a rule's outputs are a fixed list of patterns: a batch's files need a rule of their own, while one job per
# run is one rule, `train`, with a {seed} wildcard, the name that profiles and --set-resources train:... address.


if EXECUTION.seeds_per_job == 1:

    rule train:
        input:
            unpack(train_inputs),
        output:
            metrics=f"{fp.RUN_DIR}/metrics.parquet",
            summary=f"{fp.RUN_DIR}/summary.json",
        log:
            "logs/train/{experiment}/{algorithm}/seed{seed}.log",
        conda:
            "../envs/fedavail.yaml"
        threads: EXECUTION.train_threads
        resources:
            # On clusters (profiles/slurm): one GPU unless the run is CPU-only (a GPU-less cluster overrides with
            # --set-resources train:gpu=0), the job's threads per GPU, memory from the data size, and a time limit
            # from the run's rounds; retries get more of both. Locally `gpu` only counts (profiles/local-gpu caps it).
            gpu=0 if EXECUTION.device == "cpu" else 1,
            cpus_per_gpu=EXECUTION.train_threads,
            mem_mb=train_mem_mb,
            runtime=train_runtime,
        params:
            spec=derived(train_spec),
            spec_sha256=sha256_of(train_spec),
            code=train_code_sha256,
            execution=train_execution_options,
            malloc=malloc_environment,
        shell:
            # malloc settings in the job's environment (fedavail.launcher): read once, when the process starts.
            "{params.malloc} fedavail train --prepared {input.prepared:q} --partition {input.partition:q} "
            '--trace {input.trace:q} --out-dir "$(dirname {output.metrics:q})" --spec {params.spec:q} '
            "{params.execution} --gpu-slots .snakemake/fedavail-gpu-slots > {log:q} 2>&1"

else:
    # One rule per batch of runs (fedavail.plan.plan.TrainingBatch), its outputs listed: a job's files span
    # experiments and seeds, which no wildcard pattern can name. A batch whose runs change (an added seed or
    # experiment, a changed setting) reruns; its runs finished before are restored from their finished.json
    # (fedavail.train.RunPaths.finished), not recomputed.
    for batch in PLAN.training_batches:

        rule:
            name:
                batch.name
            input:
                unpack(functools.partial(batch_inputs, batch)),
            output:
                metrics=batch_outputs(batch, "metrics.parquet"),
                summary=batch_outputs(batch, "summary.json"),
            log:
                f"logs/train/{batch.name}.log",
            # The longest batches first, so that the short ones fill the cores at the end.
            priority: batch_rounds(batch)
            conda:
                "../envs/fedavail.yaml"
            threads: EXECUTION.train_threads
            resources:
                gpu=0 if EXECUTION.device == "cpu" else 1,
                cpus_per_gpu=EXECUTION.train_threads,
                mem_mb=train_mem_mb,
                runtime=functools.partial(batch_runtime, batch),
            params:
                spec=derived(functools.partial(batch_specs, batch)),
                spec_sha256=sha256_of(functools.partial(batch_specs, batch)),
                code=PLAN.training_code_sha256(batch.runs[0].algorithm),
                out_dirs=batch_out_dirs,
                execution=train_execution_options,
                malloc=malloc_environment,
            shell:
                "{params.malloc} fedavail train-seeds --prepared {input.prepared:q} --partition {input.partition:q} "
                "--trace {input.trace:q} --out-dir {params.out_dirs} --spec {params.spec:q} "
                "{params.execution} --gpu-slots .snakemake/fedavail-gpu-slots > {log:q} 2>&1"
