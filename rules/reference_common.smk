# Input and params functions of the HMC reference's rules (rules/reference.smk); the planning
# itself is symbnn.reference.plan, importable and tested without Snakemake.

import symbnn.reference.plan

# the report's section for the reference (its entries exist only where a reference was built)
REFERENCE_CATEGORY = "6 HMC reference"


def reference_of(wildcards):
    return experiment_of(wildcards).reference


def reference_inputs(wildcards):
    """The pool and its accuracies where the chains start at the pool's modes."""
    if reference_of(wildcards).start != "pool":
        return {}
    return {
        "pool": f"{RESULTS}/{wildcards.experiment}/modes/pool.zarr",
        "accuracies": accuracies_input(POOL)(wildcards),
    }


def reference_start_rows(wildcards):
    """Params function: the pool rows the chains start from."""
    modes = symbnn.reference.plan.start_rows(SETTINGS, wildcards.experiment)
    return kept_mode_rows(wildcards, modes) if modes else []


def reference_targets(enabled_only):
    return symbnn.reference.plan.targets(SETTINGS, method_variants, enabled_only)


def variant_files(name):
    """Input function: `name` (predictions.zarr, samples.zarr) of every method's variant."""
    return lambda wc: [
        f"{RESULTS}/{wc.experiment}/methods/{m}/{v}/{name}"
        for m, v in method_variants(wc.experiment)
    ]
