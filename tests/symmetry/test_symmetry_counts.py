"""The symmetry-counts table (paper D.4), the paper's counting rule, and the D.1 mode count."""

import math

import numpy as np
import pytest
import torch
from conftest import repo_config, stacked_state

from symbnn.analyses.mode_count import class_sizes, mode_count_summary, mode_counts, unit_vectors
from symbnn.report import symmetry_counts as sc
from symbnn.settings import config_from_mapping
from symbnn.symmetry import unit_groups
from symbnn.symmetry.counting import paper_log10_permutations, total_symmetries

OPTUNET = {"name": "optunet"}  # conv1: 2 channels, conv2: 10 in 2 groups, fc1: 3 units


def test_paper_rule_keeps_all_output_permutations_of_a_grouped_conv():
    sym = unit_groups(OPTUNET)
    # conv1 feeds the grouped conv2: (1!)^2 by both rules; conv2: 10! (paper) against
    # 2 * (5!)^2 (within groups, and the two groups swapped with conv1's channels)
    assert 10 ** paper_log10_permutations(sym) == pytest.approx(math.factorial(10) * 6)
    symbnn = 10 ** total_symmetries(sym)["log10_permutations"]
    assert symbnn == pytest.approx(2 * math.factorial(5) ** 2 * 6)
    mlp = unit_groups({"name": "mlp", "widths": [3, 5, 4, 2]})
    assert paper_log10_permutations(mlp) == pytest.approx(math.log10(120 * 24))


def test_architectures_cover_the_experiments_the_paper_and_the_analyses():
    entries = sc.counted_architectures(config_from_mapping(repo_config()))
    specs = [e["spec"] for e in entries]
    assert len({sc.spec_key(s) for s in specs}) == len(specs)  # one row per distinct model
    uses = {sc.spec_key(e["spec"]): e["used_by"] for e in entries}
    assert "experiment mnist-optunet" in uses[sc.spec_key(OPTUNET)]
    assert "the paper's OptuNet widths" in uses[sc.spec_key(OPTUNET)]
    for spec in (
        {"name": "resnet18", "num_classes": 200, "stem": "imagenet"},
        {"name": "resnet20_frn_silu", "num_classes": 10},
        {"name": "mlp", "widths": [10, 16, 16, 1]},  # the marginals' MLPs on diabetes
        {"name": "mlp", "widths": [2, 2, 1]},  # the toy posterior's
    ):
        assert sc.spec_key(spec) in uses, spec
    from symbnn.analyses.toy import WIDTHS

    assert list(WIDTHS) == sc.TOY_WIDTHS


def test_table_counts_on_the_meta_device_and_puts_the_measured_row_first():
    mlp = {"name": "mlp", "widths": [3, 5, 1]}
    entries = [{"spec": mlp, "used_by": ["toy"]}, {"spec": OPTUNET, "used_by": ["experiment x"]}]
    summary = {"networks measured": 3, "log10 modes, measured (D.1)": "5.24"}
    table = sc.symmetry_counts_table(entries, {sc.spec_key(OPTUNET): summary})
    optunet, small = table.row(0, named=True), table.row(1, named=True)
    assert optunet["parameters"] == 355 and optunet["networks measured"] == 3
    assert optunet["log10 |G|, paper's rule"] > optunet["log10 |G|"]
    assert "grouped conv" in optunet["note"] and "392" in optunet["paper states"]
    assert optunet["softmax DoF"] == 4 and optunet["sDoF"] == 15
    assert small["parameters"] == 26 and small["sDoF"] == 5 and small["note"] == ""
    assert small["networks measured"] is None and small["paper states"] is None


def test_report_page_splits_the_wide_table_into_three_narrow_ones():
    """16 columns, three of them sentences, were one table of very tall rows: the page shows
    the counts, the measured D.1 rows and the sentences apart, each led by the architecture."""
    from symbnn.report.tables import sections_to_html

    mlp = {"name": "mlp", "widths": [3, 5, 1]}
    entries = [{"spec": mlp, "used_by": ["toy"]}, {"spec": OPTUNET, "used_by": ["experiment x"]}]
    summary = {"networks measured": 3, "log10 modes, measured (D.1)": "5.24"}
    table = sc.symmetry_counts_table(entries, {sc.spec_key(OPTUNET): summary})
    sections = sc.html_sections(table)
    assert [len(frame.columns) for _, frame in sections] == [8, 6, 4]
    assert sum(len(frame.columns) - 1 for _, frame in sections) == len(table.columns) - 1
    assert all(frame.columns[0] == "architecture" for _, frame in sections)
    assert [frame.height for _, frame in sections] == [2, 1, 2]  # D.1: the measured row only
    page = sections_to_html(sections)
    assert page.count("<table class='symbnn'>") == 3 and page.count("<h3") == 3


def test_a_network_without_scaling_symmetry_says_why():
    from symbnn.symmetry.derive import symmetry_of

    silu = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.SiLU(), torch.nn.Linear(4, 2))
    sym = symmetry_of(silu, torch.randn(2, 3))
    assert total_symmetries(sym)["scaling_dof"] == 0
    assert "SiLU is not positively homogeneous" in sc.note(sym)


def identical_pair(state, network, rows, outgoing=None):
    """Make units rows[1:] of `network` copies of unit rows[0] (incoming and outgoing)."""
    (name_in, name_out) = outgoing or ("fc1", "fc2")
    a, *others = rows
    for b in others:
        state[f"{name_in}.weight"][network, b] = state[f"{name_in}.weight"][network, a]
        if f"{name_in}.bias" in state:
            state[f"{name_in}.bias"][network, b] = state[f"{name_in}.bias"][network, a]
        state[f"{name_out}.weight"][network, :, b] = state[f"{name_out}.weight"][network, :, a]


def test_identical_units_divide_the_mode_count():
    spec = {"name": "optunet", "hidden": 5}
    sym = unit_groups(spec)
    state = {k: v.double() for k, v in stacked_state(spec, 3).items()}
    identical_pair(state, 0, [1, 3, 4])  # three identical fc1 units: |Stab| = 3!
    identical_pair(state, 1, [0, 2])
    state["fc1.weight"][1, 2] *= 1.001  # within the 1% tolerance
    # conv2 channels 0 and 5 lie in different groups: alike, but they cannot be swapped alone
    state["conv2.weight"][2, 5] = state["conv2.weight"][2, 0]
    state["fc1.weight"][2, :, 5] = state["fc1.weight"][2, :, 0]
    counts = mode_counts(state, sym)
    full = total_symmetries(sym)["log10_permutations"]
    expected = [full - math.log10(6), full - math.log10(2), full]
    assert counts["log10_modes"] == pytest.approx(expected)
    assert counts["identical_pairs"] == [3, 1, 0]
    assert 0 < counts["closest_pair"][1] < 0.01 < counts["closest_pair"][2]
    summary = mode_count_summary(counts)
    assert summary["networks with nearly identical units"] == 2
    assert summary["log10 modes, measured (D.1)"] == f"{full - math.log10(6):.2f} to {full:.2f}"


def test_unit_vectors_read_a_grouped_convs_block_local_columns():
    sym = unit_groups(OPTUNET)
    state = stacked_state(OPTUNET, 2)
    conv1 = unit_vectors(state, sym.group("conv1"))  # 2 channels, one per group of conv2
    # channel 1 (group 1) is read by conv2's rows 5..9, at their block-local column 0
    expected = torch.cat(
        [state["conv1.weight"][:, 1].flatten(1), state["conv2.weight"][:, 5:, 0].flatten(1)], 1
    )
    assert torch.equal(conv1[:, 1], expected)
    assert class_sizes(np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], bool)) == [2, 1]
