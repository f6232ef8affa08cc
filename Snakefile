# symbnn workflow: train a target posterior from seeds, remove its symmetries, estimate
# posteriors with approximate methods, compare them and report.
# The work is done by the `symbnn` library (src/symbnn); rules and scripts stay thin.

from snakemake.utils import min_version

import symbnn.jobenv
import symbnn.settings

min_version("9.0")

# With `--sdm conda` jobs run in envs/symbnn.yaml, which holds symbnn's dependencies but not
# symbnn itself: they import it from this checkout.
symbnn.jobenv.put_sources_on_pythonpath(workflow.basedir)


configfile: "config.yaml"


report: "report/workflow.rst"


# Every setting checked once, defaults filled in: rules read SETTINGS, never `config`.
SETTINGS = symbnn.jobenv.workflow_settings(config, workflow)


include: "rules/common.smk"
include: "rules/posterior.smk"
include: "rules/symmetry.smk"
include: "rules/methods.smk"
include: "rules/mmd.smk"
include: "rules/report.smk"
include: "rules/analyses.smk"
include: "rules/alignment.smk"


rule all:
    default_target: True
    input:
        all_targets(),
        *analyses_targets(),
        *alignment_targets(),
