# Training: one job per experiment x algorithm x seed (execution.seeds_per_job: 1, the default), or one job per
# experiment x algorithm that trains all its seeds in one process (seeds_per_job: all, for GPUs). Either way exactly
# one rule writes each run's files. A job's params are exactly its own config slice and the hash of the code it runs
# (fedavail.plan.sources), so a changed setting or edited code reruns only the runs it affects. Two rule families,
# because a rule's outputs are a fixed list of patterns: a job that writes n seeds' files needs a rule of n outputs
# per distinct seed list, while one job per run is one rule, `train`, with a {seed} wildcard, the name that profiles
# and --set-resources train:... address.


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
            spec=train_spec,
            code=train_code_sha256,
            execution=train_execution_options,
            malloc=malloc_environment,
        shell:
            # malloc settings in the job's environment (fedavail.launcher): read once, when the process starts.
            "{params.malloc} fedavail train --prepared {input.prepared:q} --partition {input.partition:q} "
            '--trace {input.trace:q} --out-dir "$(dirname {output.metrics:q})" --spec {params.spec:q} '
            "{params.execution} --gpu-slots .snakemake/fedavail-gpu-slots > {log:q} 2>&1"

else:
    # One rule per distinct seed list (a rule's outputs are fixed patterns): train_seeds_0_1_2 writes seeds 0, 1, 2
    # of every experiment x algorithm that runs those seeds. Adding a seed reruns the job of all its seeds; the
    # seeds finished before are restored from their records (fedavail.train.RunPaths.finished), not recomputed.
    for seeds in seed_lists():

        rule:
            name:
                train_seeds_rule(seeds)
            input:
                unpack(train_seeds_inputs),
            output:
                metrics=seeds_outputs(seeds, "metrics.parquet"),
                summary=seeds_outputs(seeds, "summary.json"),
            log:
                f"logs/train/{{experiment}}/{{algorithm}}/{train_seeds_rule(seeds)}.log",
            wildcard_constraints:
                experiment=experiments_with_seeds(seeds),
            conda:
                "../envs/fedavail.yaml"
            threads: EXECUTION.train_threads
            resources:
                gpu=0 if EXECUTION.device == "cpu" else 1,
                cpus_per_gpu=EXECUTION.train_threads,
                mem_mb=train_mem_mb,
                runtime=train_seeds_runtime,
            params:
                spec=train_seeds_specs,
                code=train_code_sha256,
                out_dirs=train_seeds_out_dirs,
                execution=train_execution_options,
                malloc=malloc_environment,
            shell:
                "{params.malloc} fedavail train-seeds --prepared {input.prepared:q} --partition {input.partition:q} "
                "--trace {input.trace:q} --out-dir {params.out_dirs} --spec {params.spec:q} "
                "{params.execution} --gpu-slots .snakemake/fedavail-gpu-slots > {log:q} 2>&1"
