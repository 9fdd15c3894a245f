# fedavail: federated learning under intermittent client availability, reproduced end to end.
#   snakemake --cores all                                   the default run (config/config.yaml)
#   snakemake --cores all --configfile config/fedswe.yaml   another config
from snakemake.utils import min_version

from fedavail.plan.load import check_config_files

min_version("9.0")


report: "workflow/report/workflow.rst"


# The default run's config, unless the command line names one: Snakemake would otherwise merge the two. Read strictly
# first, so that a YAML error names its file and line (the profiles check the files named by --configfile).
if not workflow.config_settings.configfiles:
    check_config_files(["config/config.yaml"])

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/traces.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
