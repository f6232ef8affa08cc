import pytest

from symbnn.mmd import MMDInputError
from symbnn.mmd.ensembles import deep_ensembles_check, split_members
from symbnn.symmetry.canonical_store import canonicalize_store


def test_members_are_disjoint_converged_checkpoints(optunet_store):
    store, _ = optunet_store(n=8)
    target, members = split_members(store.path, list(range(8)), 3)
    assert members == [5, 6, 7] and target == [0, 1, 2, 3, 4]
    converged = [0, 2, 3, 5]  # rows 1 and 4 did not converge
    target, members = split_members(store.path, converged, 2)
    assert target == [0, 2] and members == [3, 5]
    with pytest.raises(MMDInputError, match="too few"):
        split_members(store.path, converged, 3)
    # a capped target sample: the converged networks just before the members
    target, members = split_members(store.path, list(range(8)), 3, n_target=2)
    assert target == [3, 4] and members == [5, 6, 7]


def test_the_target_cap_is_a_setting_left_out_of_params_while_unset():
    from symbnn.settings import Mmd

    assert "de_target" not in Mmd(de_members=4).to_dict()
    assert Mmd(de_members=4, de_target=10).to_dict()["de_target"] == 10
    with pytest.raises(ValueError, match="de_target"):
        Mmd.parse({"de_target": 1}, "mmd")


def test_check_reports_mmd_and_ns_mmd(optunet_store, tmp_path):
    store, _ = optunet_store(n=10)
    canonicalize_store(store.path, tmp_path / "canonical.zarr")
    per_layer, summary = deep_ensembles_check(
        store.path, tmp_path / "canonical.zarr", list(range(10)), 4
    )
    assert set(per_layer["weights"]) == {"stored", "canonical"}
    assert summary["n_target"][0] == 6 and summary["n_members"][0] == 4
    # Same distribution on both sides: the unbiased estimate is close to zero.
    assert abs(summary["mmd"][0]) < 0.05 and abs(summary["ns_mmd"][0]) < 0.05
