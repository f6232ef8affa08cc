"""The rule files' glue over symbnn.plan stays thin and named after what it calls."""

import re

from conftest import REPO

GLUE = ("rules/common.smk", "rules/reference_common.smk")


def test_each_job_function_has_the_name_of_the_library_function_it_calls():
    # docs/configuration.md's table of the rules reading each section follows a rule's params
    # into the library by name (symbnn.settings.reference.rules_reading)
    for path in GLUE:
        text = (REPO / path).read_text()
        pairs = re.findall(r"^(\w+) = job\(plan\.\w+\.(\w+)", text, flags=re.M)
        assert pairs, path
        for name, called in pairs:
            assert name == called, f"{path}: {name} calls plan's {called}"


def test_the_glue_is_short():
    assert len((REPO / "rules/common.smk").read_text().splitlines()) < 150
