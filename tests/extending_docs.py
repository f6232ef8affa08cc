"""The examples of docs/extending.md: its code blocks and the files they define."""

import re

from conftest import REPO

DOC = REPO / "docs" / "extending.md"
METHOD = "last_layer_gaussian:LastLayerGaussian"
EXAMPLE_MODULES = ("last_layer_gaussian", "my_models", "my_data")


def doc_blocks(kind):
    """The text of every ```KIND block of docs/extending.md, in order."""
    return re.findall(rf"^```{kind}\n(.*?)^```", DOC.read_text(), re.M | re.S)


def doc_files():
    """{file name: text} of the Python blocks that start with `# file: NAME`."""
    files = {}
    for block in doc_blocks("python"):
        first, _, rest = block.partition("\n")
        if first.startswith("# file: "):
            files[first.removeprefix("# file: ").strip()] = rest
    return files
