# symbnn workflow: train a target posterior from seeds, remove its symmetries, estimate
# posteriors with approximate methods, compare them and report.
# The work is done by the `symbnn` library (src/symbnn); rules and scripts stay thin.

from snakemake.utils import min_version

import symbnn.joblines
import symbnn.jobenv
import symbnn.pulled
import symbnn.report.front_page
import symbnn.settings
import symbnn.store.upgrade

min_version("9.0")

# With `--sdm conda` jobs run in envs/symbnn.yaml, which holds symbnn's dependencies but not
# symbnn itself: they import it from this checkout.
symbnn.jobenv.put_sources_on_pythonpath(workflow.basedir)


configfile: "config.yaml"


# Every setting checked once, defaults filled in: rules read SETTINGS, never `config`.
SETTINGS = symbnn.jobenv.workflow_settings(config, workflow)


include: "rules/common.smk"
include: "rules/checkpoints.smk"
include: "rules/posterior.smk"
include: "rules/symmetry.smk"
include: "rules/methods.smk"
include: "rules/mmd.smk"
include: "rules/report.smk"
include: "rules/analyses.smk"
include: "rules/alignment.smk"
include: "rules/reference_common.smk"
include: "rules/reference.smk"


rule all:
    default_target: True
    input:
        all_targets(),
        *analyses_targets(),
        *alignment_targets(),
        # the HMC reference of the experiments that enable it (`make run-hmc`: of all of them)
        *reference_targets(enabled_only=True),


# The experiments of `run` without the further analyses (rules/analyses.smk): what `make smoke`
# builds, for the smoke experiment.
rule experiments:
    input:
        all_targets(),
        *alignment_targets(),
        *reference_targets(enabled_only=True),


# the report opens on what was run and the headline results (symbnn.report.front_page)
FRONT_PAGE = symbnn.report.front_page.report_text(
    SETTINGS, "report/workflow.rst", workflow.basedir, n_parameters
)


report: FRONT_PAGE


# every rule's message ends with the job's threads, memory, time limit and GPUs, so that a
# dry run shows what each job asks for
symbnn.joblines.add_resources_to_messages(workflow)

# results restored by `dvc pull` are made up to date for Snakemake once (src/symbnn/pulled.py)
symbnn.pulled.adopt_pulled_results(workflow, [f"{RESULTS}/{name}" for name in RUN] + [ANALYSES])

# stores of the format before the digest stop the run, naming the command that upgrades them:
# Snakemake reruns nothing after a library-only change (docs/stores.md)
symbnn.store.upgrade.refuse_old_stores_at_start(
    workflow, [f"{RESULTS}/{name}" for name in RUN] + [ANALYSES]
)
