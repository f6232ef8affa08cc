"""The findings against the HMC reference (symbnn.reference.findings): decided by the verdicts'
signed-rank test, with "within noise" where too few units can reach its level."""

import polars as pl

from symbnn.reference.findings import TARGET_QUESTION, reference_findings
from symbnn.report.verdicts import CONTRADICTED, HOLDS, WITHIN_NOISE


def chains(target, rest):
    return pl.DataFrame({"chain": list(range(len(target))), "tv_target": target, "tv_rest": rest})


def units(method, variant, to_hmc, to_target):
    n = len(to_hmc)
    return pl.DataFrame(
        {
            "compared": [method] * n,
            "variant": [variant] * n,
            "unit": list(range(n)),
            "tv": to_hmc,
            "tv_target": to_target,
        }
    )


TARGET = pl.DataFrame(
    {"compared": ["target"], "variant": ["paper"], "unit": [0], "tv": [0.1], "tv_target": [None]},
    schema_overrides={"tv_target": pl.Float64},
)


def test_a_target_far_from_every_chain_is_not_close():
    far = chains([0.30 + 0.01 * i for i in range(8)], [0.05 + 0.01 * i for i in range(8)])
    table = reference_findings(TARGET, far)
    row = table.row(0, named=True)
    assert row["question"] == TARGET_QUESTION and row["verdict"] == HOLDS
    assert row["answer"].startswith("no") and "n=8" in row["figures"]
    near = chains([0.05 + 0.01 * i for i in range(8)], [0.30 + 0.01 * i for i in range(8)])
    assert reference_findings(TARGET, near)["verdict"][0] == CONTRADICTED


def test_four_chains_cannot_reach_the_level():
    row = reference_findings(TARGET, chains([0.9] * 4, [0.1] * 4)).row(0, named=True)
    assert row["verdict"] == WITHIN_NOISE and "cannot reach p < 0.05" in row["figures"]


def test_each_variant_is_decided_on_its_own_units():
    close = units("sghmc", "1", [0.1 + 0.01 * i for i in range(7)], [0.4] * 7)
    far = units("vi", "3", [0.5] * 6, [0.2 + 0.01 * i for i in range(6)])
    few = units("de", "1", [0.1, 0.1], [0.5, 0.5])
    table = reference_findings(
        pl.concat([TARGET, close, far, few], how="diagonal_relaxed"), chains([0.2] * 4, [0.1] * 4)
    )
    assert table["compared"].to_list() == ["target", "sghmc", "vi", "de"]
    assert table["verdict"].to_list()[1:] == [HOLDS, CONTRADICTED, WITHIN_NOISE]
    assert table["answer"].to_list()[1:3] == ["closer to HMC", "closer to the target"]
