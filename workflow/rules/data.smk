# Datasets: download + verify (papers' datasets), then prepare every dataset into one compact tensor file.


rule download:
    output:
        manifest=fp.RAW_MANIFEST,
    log:
        "logs/download/{dataset}.log",
    wildcard_constraints:
        dataset="|".join(fn.PAPER_DATASETS),
    retries: 3
    # On a cluster, downloads run where Snakemake runs: compute nodes often have no internet.
    localrule: True
    conda:
        "../envs/fedavail.yaml"
    shell:
        "fedavail download {wildcards.dataset:q} --raw-dir data/raw/{wildcards.dataset:q} "
        "--manifest {output.manifest:q} > {log:q} 2>&1"


rule prepare_paper_dataset:
    input:
        manifest=fp.RAW_MANIFEST,
    output:
        fp.PREPARED,
    log:
        "logs/prepare/{dataset}.log",
    wildcard_constraints:
        dataset="|".join(fn.PAPER_DATASETS),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=derived(dataset_spec),
        spec_sha256=sha256_of(dataset_spec),
        raw_sha256=raw_file_sha256,
    shell:
        "fedavail prepare {wildcards.dataset:q} --raw-dir data/raw/{wildcards.dataset:q} --out {output:q} "
        "--spec {params.spec:q} > {log:q} 2>&1"


rule prepare_bundled_dataset:
    output:
        fp.PREPARED,
    log:
        "logs/prepare/{dataset}.log",
    wildcard_constraints:
        dataset="|".join(fn.BUNDLED_DATASETS),
    conda:
        "../envs/fedavail.yaml"
    params:
        spec=derived(dataset_spec),
        spec_sha256=sha256_of(dataset_spec),
    shell:
        "fedavail prepare {wildcards.dataset:q} --out {output:q} --spec {params.spec:q} > {log:q} 2>&1"
