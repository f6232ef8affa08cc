"""The symmetry-counts table (paper appendix D.4, with the mode count of D.1): for every
architecture the report covers, its parameters, permutation group order, scaling and softmax
degrees of freedom, counted from the symmetry structure alone (models built on torch's meta
device: nothing is trained or allocated), beside what the paper states.

`counted_architectures` reads only the settings (the workflow calls it while planning);
`symmetry_counts_table` builds the models and imports torch and polars."""

from __future__ import annotations

import json
import re
from typing import Any

from symbnn.settings import Config

# architectures the report discusses whatever the run: the paper's networks, the ResNet-18
# stem TinyImageNet usually gets, the authors' released CIFAR-10 network
REFERENCE_ARCHITECTURES = (
    ({"name": "optunet"}, "the paper's OptuNet widths"),
    ({"name": "resnet18", "num_classes": 100}, "the paper's CIFAR-100 ResNet-18"),
    (
        {"name": "resnet18", "num_classes": 200, "stem": "imagenet"},
        "a TinyImageNet ResNet-18 with ImageNet stem (D27)",
    ),
    ({"name": "resnet20_frn_silu", "num_classes": 10}, "the authors' released CIFAR-10 networks"),
)
TOY_WIDTHS = [2, 2, 1]  # symbnn.analyses.toy.WIDTHS
DIABETES_FEATURES = 10  # inputs of the marginals' MLPs

# what the paper itself states, by architecture name (its D.4 gives rules, no totals)
PAPER = {
    "optunet": "its own OptuNet: 392 parameters (section 4); that network is unpublished (D1)",
    "resnet18": "D.1: |G| 'of the order of' a power of ten; the power is not legible in our copy",
}


def spec_key(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True)


def counted_architectures(config: Config) -> list[dict[str, Any]]:
    """One entry per distinct model spec the report covers (every configured experiment's, the
    reference architectures, the analyses' MLPs): ``{"spec": ..., "used_by": [...]}``."""
    entries: dict[str, dict[str, Any]] = {}

    def add(spec: dict[str, Any], use: str) -> None:
        entries.setdefault(spec_key(spec), {"spec": spec, "used_by": []})["used_by"].append(use)

    # by name: reordering config.yaml changes nothing
    for name in sorted(config.experiments):
        add(config.experiments[name].model.to_dict(), f"experiment {name}")
    for spec, use in REFERENCE_ARCHITECTURES:
        add(spec, use)
    analyses = config.analyses
    if analyses.enabled("toy"):
        add({"name": "mlp", "widths": TOY_WIDTHS}, "toy posterior")
    if analyses.enabled("marginals"):
        widths = [DIABETES_FEATURES, *analyses.marginals.hidden, 1]
        add({"name": "mlp", "widths": widths}, "marginals")
    if analyses.enabled("symmetrised_vi"):
        add({"name": "mlp", "widths": [2, analyses.symmetrised_vi.hidden, 2]}, "symmetrised VI")
    return list(entries.values())


def describe(spec: dict[str, Any]) -> str:
    options = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec['name']} ({options})" if options else spec["name"]


def note(sym) -> str:
    """Why symbnn's count differs from the paper's rule, or what limits it."""
    # local: keeps numba, torch out of importing symbnn.report.symmetry_counts
    from symbnn.symmetry.counting import feeds_grouped_conv

    notes = []
    if any(feeds_grouped_conv(g) for g in sym.groups):
        notes.append(
            "grouped conv: its channels permute only inside a group, and whole groups swap "
            "on both sides at once; the paper's rule keeps all n! of its output channels (D17)"
        )
    if not sym.scale_groups:
        # each reason's first clause ("silu is not positively homogeneous: no scaling ...")
        reasons = sorted({re.split(r":| \(", reason)[0] for _, reason in sym.limits})
        notes.append("no scaling symmetry: " + "; ".join(reasons or ["no positive homogeneity"]))
    if any(s.absorbed_by_bn for s in sym.scale_groups):
        notes.append(
            "BatchNorm adds one sDoF per channel; residual sums tie their channels' "
            "permutation and output scale"
        )
    return "; ".join(notes)


def counts_row(spec: dict[str, Any]) -> dict[str, Any]:
    """Counts of one architecture, a shipped model built on the meta device (a model named by
    import path is built as it is: its structure is traced, which a meta tensor may not pass)."""
    import contextlib

    import torch

    # local: keeps torch out of importing symbnn.report.symmetry_counts
    from symbnn.models import build_model, count_parameters, is_import_path

    # local: keeps numba, torch out of importing symbnn.report.symmetry_counts
    from symbnn.symmetry import unit_groups

    # local: keeps numba, torch out of importing symbnn.report.symmetry_counts
    from symbnn.symmetry.counting import (
        count_symmetries,
        paper_log10_permutations,
        total_symmetries,
    )

    with contextlib.nullcontext() if is_import_path(spec["name"]) else torch.device("meta"):
        model = build_model(spec)
        sym = unit_groups(spec)
    total = total_symmetries(sym)
    return {
        "architecture": describe(spec),
        "parameters": count_parameters(model),
        "log10 |G|": total["log10_permutations"],
        "log10 |G|, paper's rule": paper_log10_permutations(sym),
        "sDoF": total["scaling_dof"],
        "sDoF from BatchNorm": sum(r["bn_scaling_dof"] for r in count_symmetries(sym)),
        "softmax DoF": total["softmax_dof"],
        "log10 modes if Dirac (D.1)": total["log10_permutations"],
        "note": note(sym),
    }


# the D.1 columns of a measured posterior (`symbnn.analyses.mode_count.mode_count_summary`)
MEASURED = (
    "networks measured",
    "identity tolerance",
    "closest unit pair",
    "networks with nearly identical units",
    "log10 modes, measured (D.1)",
)


def symmetry_counts_table(
    architectures: list[dict[str, Any]], measured: dict[str, dict[str, Any]] | None = None
):
    """The table: one row per architecture; ``measured`` maps a spec (its `spec_key`) to its D.1
    summary (`symbnn.analyses.mode_count.mode_count_summary`)."""
    import polars as pl

    measured = measured or {}
    # the measured posterior's architecture first
    architectures = sorted(architectures, key=lambda entry: spec_key(entry["spec"]) not in measured)
    rows = []
    for entry in architectures:
        spec = entry["spec"]
        row = {**counts_row(spec), "used by": ", ".join(entry["used_by"])}
        summary = measured.get(spec_key(spec), {})
        row.update({column: summary.get(column) for column in MEASURED})
        row["paper states"] = PAPER.get(spec["name"])
        rows.append(row)
    first, last = ["architecture", "used by"], ["paper states", "note"]
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.select(first + [c for c in frame.columns if c not in first + last] + last)


def html_sections(table) -> list:
    """The table as the report shows it (`symbnn.report.tables.sections_to_html`): the counts,
    the D.1 measurement (its rows only), and the sentences (uses, what the paper states,
    notes), each led by the architecture."""
    # local: keeps polars out of importing symbnn.report.symmetry_counts
    from symbnn.report.tables import split_columns

    counts = [c for c in table.columns if c not in (*MEASURED, *TEXT_COLUMNS, "architecture")]
    return split_columns(
        table,
        [
            ("Symmetries counted from the structure (D.4)", counts),
            ("Modes measured on the canonical target networks (D.1)", list(MEASURED)),
            ("Where each architecture is used, and notes", list(TEXT_COLUMNS)),
        ],
        "architecture",
    )


TEXT_COLUMNS = ("used by", "paper states", "note")
