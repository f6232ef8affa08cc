"""The paper's authors' released networks (Hugging Face dataset torch-uncertainty/Checkpoints)
imported into symbnn weight stores: their format, their names, their architectures.

- `releases`: the released settings looked up and resolved for their files (their symbnn
  architectures and name mappings are `symbnn.settings.checkpoints.RELEASES`);
- `sources`: bundles and folders, streamed network by network;
- `safetensors_io`, `mapping`: one network's file -> symbnn's state_dict, checked;
- `importer`: the streamed import into a store; `bundles`: writing bundles;
- `download`: fetching bundles from the hub (only when asked).
"""

from symbnn.checkpoints.importer import import_checkpoints, source_files
from symbnn.checkpoints.releases import CheckpointError, release
from symbnn.settings.checkpoints import RELEASES, Release

__all__ = [
    "RELEASES",
    "CheckpointError",
    "Release",
    "import_checkpoints",
    "release",
    "source_files",
]
