"""Checked configurations for the planning tests: the tests' tiny workflow config and the
repository's config.yaml, with edits."""

import copy

from conftest import repo_config, tiny_workflow_config

from symbnn.settings import Config, config_from_mapping


def tiny(edit=None, methods=True) -> Config:
    """The tiny workflow config (experiment `tiny`), after `edit(experiment mapping)`."""
    mapping = copy.deepcopy(tiny_workflow_config(methods=methods))
    if edit is not None:
        edit(mapping["experiments"]["tiny"])
    return config_from_mapping(mapping)


def repository(edit=None) -> Config:
    """config.yaml with every experiment in `run`, after `edit(whole mapping)`."""
    mapping = copy.deepcopy(repo_config())
    mapping["run"] = list(mapping["experiments"])
    if edit is not None:
        edit(mapping)
    return config_from_mapping(mapping)
