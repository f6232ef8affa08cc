# Input and params functions of the HMC reference's rules (rules/reference.smk); the planning
# itself is symbnn.reference.plan and symbnn.plan, importable and tested without Snakemake.

import symbnn.reference.plan

# the report's section for the reference (its entries exist only where a reference was built)
REFERENCE_CATEGORY = "6 HMC reference"

reference_start_rows = job(plan.kept.reference_start_rows, accuracies=POOL)
reference_mmd_summaries = job(plan.jobs.reference_mmd_summaries)
reference_variants = job(plan.params.reference_variants)


def reference_inputs(wildcards):
    """The pool and its accuracies where the chains start at the pool's modes."""
    inputs = plan.paths.reference_inputs(SETTINGS, wildcards.experiment)
    return inputs and {**inputs, "accuracies": accuracies_input(POOL)(wildcards)}


def reference_targets(enabled_only):
    return symbnn.reference.plan.targets(SETTINGS, method_variants, enabled_only)
