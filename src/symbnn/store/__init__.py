"""The one reader and writer of symbnn's weight stores (Zarr v3).

A store is a Zarr group holding many networks of one architecture:

    <store>/zarr.json           group attributes (format, kind, architecture, experiment, ...)
    <store>/state/<name>        one array per state_dict entry, shape (n_samples, *param_shape)
    <store>/info/<name>         per-sample arrays with leading axis n_samples: seed, converged,
                                test_accuracy, and whatever a step adds (permutations, scales)

Arrays are chunked along the sample axis (a chunk is a few MiB); a sample too large for that
also splits its first parameter axis, so a column block of every sample can be streamed with
memory bounded by the block, not by the layer. Arrays are stored uncompressed: compression
saves ~8% on float weights and halves throughput.

Writes are atomic: a store is built in a hidden sibling folder and renamed into place when
complete, so a killed job never leaves a half-written store that a later step would read.
Readers address arrays by the names recorded in the attributes, never by listing folders, so
bookkeeping files such as Snakemake's ``.snakemake_timestamp`` are never read as data.

Integrity (docs/stores.md): every chunk carries a CRC-32C checksum (Zarr v3's ``crc32c``
codec) and every chunk is written, all-zero ones included (the store's attribute
``checksum: crc32c`` says so). The writer ends with a manifest (`symbnn.store.digest`: the
metadata as written and every chunk's checksum) whose SHA-256 is the group attribute
``digest``. Opening a store checks its metadata (names, shapes against ``n_samples``, one
checksum per array), that every chunk file exists (a directory listing, no data read) and
that the metadata is what the manifest recorded, and each array's data type against the
store's schema (`schema`); every read verifies the checksums of the chunks it touches and
holds each to the manifest's (`pinned`); `Store.validate` reads every chunk. So a missing,
truncated, bit-flipped or swapped chunk, an edited attribute or array metadata and a
malformed ``zarr.json`` or manifest are errors naming what changed, never a number computed
from Zarr's fill value or from damaged bytes. Stores of the format before the digest (format_version 1) are refused
with the remedy (`symbnn store upgrade`), or opened with a warning under `allow_unverified`.

A store never makes symbnn import code: an ``architecture`` naming a model by import path
opens only if the user trusts that path (`symbnn.trust`).

The package's modules: `format` (names, versions, chunking, codecs, `StoreError`), `layout`
(metadata and chunk files, read without the data), `checks` (format, digest, chunks and
checked reads), `staging` (atomic builds and the seal), `writer`, `reader`, `upgrade`
(stores of the format before the digest), `digest` (the manifest), `pinned` (reads held to
the manifest), `schema` (data types), `sameness` (two stores of the same networks),
`chunk_checksums` (the crc32c codec) and `banded_array` (large arrays written band by band).
"""

from symbnn.store.checks import (
    allow_unverified,
    check_digest,
    check_integrity,
    chunk_error,
    has_digest,
    iter_chunks,
    positive_count,
    read_checked,
    unverified_notes,
)
from symbnn.store.format import (
    ARRAY_CONFIG,
    CHECKSUM,
    CHECKSUM_CODECS,
    FORMAT,
    FORMAT_VERSION,
    MIN_CHUNK_ROWS,
    PREDICTIONS,
    REMEDY,
    UPGRADED,
    StoreError,
    chunk_shape,
)
from symbnn.store.layout import ArrayLayout, read_group_meta, read_layout
from symbnn.store.reader import Store, open_store, summary
from symbnn.store.staging import seal, staged_folder, writing
from symbnn.store.writer import StoreWriter, write_store

__all__ = [
    "ARRAY_CONFIG",
    "CHECKSUM",
    "CHECKSUM_CODECS",
    "FORMAT",
    "FORMAT_VERSION",
    "MIN_CHUNK_ROWS",
    "PREDICTIONS",
    "REMEDY",
    "UPGRADED",
    "ArrayLayout",
    "Store",
    "StoreError",
    "StoreWriter",
    "allow_unverified",
    "check_digest",
    "check_integrity",
    "chunk_error",
    "chunk_shape",
    "has_digest",
    "iter_chunks",
    "open_store",
    "positive_count",
    "read_checked",
    "read_group_meta",
    "read_layout",
    "seal",
    "staged_folder",
    "summary",
    "unverified_notes",
    "write_store",
    "writing",
]
