# Helpers shared by the rules: config validation (schema, then fedavail.config.check) and the job grid.
import fedavail.config as fc
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


validate(config, schema="../schemas/config.schema.yaml", set_default=True)
try:
    fc.check(config)
except fc.ConfigError as error:
    raise WorkflowError(f"invalid config: {error}")

EXECUTION = config["execution"]


wildcard_constraints:
    seed=r"\d+",
    dataset=r"[^/]+",
    partition=r"[^/]+",
    trace=r"[^/]+",
    experiment=r"[^/]+",
    algorithm=r"[^/]+",


def prepared_file(dataset):
    return f"data/prepared/{dataset}.pt"


def partition_file(partition, seed):
    return f"data/partitions/{partition}/seed{seed}.npz"


def trace_file(trace, seed):
    return f"data/traces/{trace}/seed{seed}.npz"


def run_dirs(experiment):
    return [run.directory for run in fc.runs(config, experiment)]


def final_outputs():
    outputs = []
    for experiment in config["experiments"]:
        outputs += [
            f"results/tables/{experiment}.md",
            f"results/tables/{experiment}.csv",
            f"results/figures/{experiment}_accuracy.png",
        ]
    return outputs


def trace_inputs(wildcards):
    if fc.trace_needs_partition(config, wildcards.trace):
        return {"partition": partition_file(config["traces"][wildcards.trace]["partition"], wildcards.seed)}
    return {}


def trace_partition_option(wildcards, input):
    return f"--partition {input.partition}" if "partition" in input.keys() else ""


def train_inputs(wildcards):
    experiment = config["experiments"][wildcards.experiment]
    partition = config["partitions"][experiment["partition"]]
    return {
        "prepared": prepared_file(partition["dataset"]),
        "partition": partition_file(experiment["partition"], wildcards.seed),
        "trace": trace_file(experiment["trace"], wildcards.seed),
        "code": fc.training_sources(),
    }


def trace_partition_option(wildcards, input):
    return f"--partition {input.partition}" if "partition" in input.keys() else ""
