"""Recorded params against new ones, setting by setting (symbnn.param_diff)."""

from copy import deepcopy

from symbnn.param_diff import MAX_SHOWN, UNREADABLE, changed_params, differences, recorded_value

TRAINING = {"data": {"train": "mnist"}, "recipe": {"epochs": 2, "lr": 0.03}}
FIT = {"settings": {"rate": 0.2, "layers": 1}, "modes": [0, 1], "seed": 0}


def edited(value, path, new):
    """A deep copy of nested dict `value` with the key at `path` set to `new`."""
    copy = deepcopy(value)
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


def test_nested_keys_are_named_by_their_dotted_path():
    new = edited(TRAINING, ("recipe", "epochs"), 4)
    assert differences(TRAINING, new, "training") == [("training.recipe.epochs", 2, 4)]
    assert differences([1, 2], [1, 3], "modes") == [("modes[1]", 2, 3)]
    # compared by repr, as Snakemake compares them
    assert differences({"lr": 1}, {"lr": 1.0}, "") == [("lr", 1, 1.0)]


def test_each_changed_param_is_paired_with_its_recorded_value():
    """Two params changed at once (a job's record holds their reprs without names): each is
    told against the recorded value most like it."""
    new_training = edited(TRAINING, ("recipe", "lr"), 0.05)
    new_fit = edited(FIT, ("settings", "rate"), 0.3)
    lines = changed_params(
        [repr(FIT), repr(TRAINING)], [("training", repr(new_training)), ("fit", repr(new_fit))]
    )
    assert lines == ["training.recipe.lr 0.03 -> 0.05", "fit.settings.rate 0.2 -> 0.3"]


def test_added_and_removed_keys_and_long_values():
    old = {"rows": list(range(30)), "seed": 0}
    new = {"rows": list(range(29)), "retries": 3}
    assert changed_params([repr(old)], [("fit", repr(new))]) == [
        "fit.rows <30 items> -> <29 items>",
        "fit.seed 0 -> (none)",
        "fit.retries (none) -> 3",
    ]


def test_many_differences_are_cut_and_an_unreadable_record_is_named():
    old = {f"k{i}": i for i in range(MAX_SHOWN + 3)}
    new = {k: v + 1 for k, v in old.items()}
    lines = changed_params([repr(old)], [("p", repr(new))])
    assert lines[-1] == "+3 more" and len(lines) == MAX_SHOWN + 1
    # a record that is not a literal (an object's repr) is read as nothing, never run
    assert recorded_value("__import__('os').getcwd()") is UNREADABLE
    assert changed_params(["<object at 0x1>"], [("p", "{'a': 1}")]) == ["p changed"]
