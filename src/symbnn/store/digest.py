"""A store's manifest and digest (store format 2): what was written, so that a change to it
is found.

``manifest.json``, beside the store's top-level ``zarr.json``, holds a copy of the store's
metadata as it was written (the group's ``zarr.json``, all its attributes but the digest, and
each array's whole ``zarr.json``: data type, shape, chunk grid and key encoding, codecs, fill
value, attributes) and the CRC-32C of every chunk file (the last four bytes the ``crc32c``
codec writes), chunk by chunk in C order of the chunk grid. The group attribute ``digest`` is
the SHA-256 of the manifest's bytes. The manifest is written last, by the writer that
installs the store, so it describes the store whole.

Pure functions on JSON values and bytes: `symbnn.store` reads the files and raises.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "symbnn-manifest"
DIGEST = "digest"  # the group attribute holding the manifest's SHA-256
ALGORITHM = "sha256"


def canonical(value: Any) -> str:
    """One spelling of a JSON value (sorted keys, no spaces): equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest_of(data: bytes) -> str:
    return f"{ALGORITHM}:{hashlib.sha256(data).hexdigest()}"


def without_digest(group_meta: Mapping[str, Any]) -> dict[str, Any]:
    """The group's ``zarr.json`` content less the digest attribute (what the manifest holds)."""
    meta = dict(group_meta)
    meta["attributes"] = {k: v for k, v in meta.get("attributes", {}).items() if k != DIGEST}
    return meta


def manifest_bytes(
    group_meta: Mapping[str, Any], arrays: Mapping[str, tuple[Mapping[str, Any], list[int]]]
) -> bytes:
    """The manifest of a store whose group metadata is ``group_meta`` and whose arrays are
    ``label -> (zarr.json content, chunk checksums)``."""
    manifest = {
        "format": MANIFEST_FORMAT,
        "group": without_digest(group_meta),
        "arrays": {
            label: {"metadata": meta, "crc32c": list(crcs)}
            for label, (meta, crcs) in arrays.items()
        },
    }
    return (json.dumps(manifest, sort_keys=True, indent=1) + "\n").encode()


def parse_manifest(data: bytes) -> dict[str, Any]:
    """The manifest's content; ValueError saying which part of it is missing or of the wrong
    type (a manifest sealed with a matching digest is still only data)."""
    manifest = json.loads(data)
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"not a {MANIFEST_FORMAT} file")
    group, arrays = manifest.get("group"), manifest.get("arrays")
    if not isinstance(group, dict) or not isinstance(arrays, dict):
        raise ValueError("no 'group' or 'arrays' object")
    if not isinstance(group.get("attributes", {}), dict):
        raise ValueError("the group's 'attributes' are not an object")
    for label, entry in arrays.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("metadata"), dict):
            raise ValueError(f"array {label!r} has no 'metadata' object")
        crcs = entry.get("crc32c")
        if not isinstance(crcs, list) or not all(
            type(crc) is int and 0 <= crc < 2**32 for crc in crcs
        ):
            raise ValueError(f"array {label!r} has no list of 'crc32c' checksums (32-bit integers)")
    return manifest


def _short(value: Any, limit: int = 100) -> str:
    text = canonical(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_change(what: str, key: str, recorded: Any, found: Any, missing: object) -> str:
    """One phrase saying how ``key`` of ``what`` differs from what the manifest recorded
    (``missing`` marks an absent key)."""
    if found is missing:
        return f"{what} {key!r} was removed (it was {_short(recorded)})"
    if recorded is missing:
        return f"{what} {key!r} was added ({_short(found)})"
    if isinstance(recorded, list) and isinstance(found, list):
        try:
            lost = [x for x in recorded if x not in found]
            gained = [x for x in found if x not in recorded]
        except TypeError:
            lost = gained = []
        if lost or gained:
            parts = [
                f"lost {_short(lost)}" if lost else "",
                f"gained {_short(gained)}" if gained else "",
            ]
            return f"{what} {key!r} {' and '.join(p for p in parts if p)}"
    return f"{what} {key!r} is {_short(found)}, it was {_short(recorded)}"


def changes(what: str, recorded: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """What differs between two JSON objects, key by key (``what`` names their kind, e.g.
    "attribute")."""
    if recorded == found:  # the usual case, at C speed (a NaN, never equal, goes on below)
        return []
    missing = object()
    out = []
    for key in sorted(set(recorded) | set(found)):
        old, new = recorded.get(key, missing), found.get(key, missing)
        if old is missing or new is missing or canonical(old) != canonical(new):
            out.append(describe_change(what, key, old, new, missing))
    return out


def group_changes(manifest: Mapping[str, Any], group_meta: Mapping[str, Any]) -> list[str]:
    """How the group's metadata differs from the manifest's copy: attribute by attribute."""
    recorded, found = dict(manifest["group"]), without_digest(group_meta)
    out = changes("attribute", recorded.pop("attributes", {}), found.pop("attributes", {}))
    return out + changes("group metadata key", recorded, found)
