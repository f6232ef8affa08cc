"""Layer-wise MMD between weight samples (docs/maths.md, section 5, after MMDAgg, Schrab et al. 2023).

Modules, one job each:
    distances   pooled L1 / squared-L2 distance matrices, accumulated over column blocks
    kernels     bandwidth grids, the twenty kernels, unbiased MMD^2 from the two matrices
    aggtest     MMDAgg's aggregated permutation test (p-value and decision)
    engine      one layer end to end, from arrays or from distance matrices
    layerwise   two stores, layer by layer, and the parameter-weighted network figure
    ensembles   the Deep Ensembles check and a method's samples against the target
"""

from symbnn.mmd.aggtest import AggregatedTest, AggTestConfig, mmdagg_test
from symbnn.mmd.distances import PooledDistances, pooled_distances, resolve_device
from symbnn.mmd.engine import LayerMMD, MMDInputError, mmd_from_distances, two_sample_mmd
from symbnn.mmd.kernels import KERNEL_NAMES, N_BANDWIDTHS, mmd_values, select_bandwidths
from symbnn.mmd.layerwise import (
    BUFFER_SUFFIXES,
    DEFAULT_MAX_BYTES,
    default_layers,
    layerwise_mmd,
    network_summary,
    per_layer_schema,
)

__all__ = [
    "AggTestConfig",
    "AggregatedTest",
    "BUFFER_SUFFIXES",
    "DEFAULT_MAX_BYTES",
    "KERNEL_NAMES",
    "LayerMMD",
    "MMDInputError",
    "N_BANDWIDTHS",
    "PooledDistances",
    "default_layers",
    "layerwise_mmd",
    "mmd_from_distances",
    "mmd_values",
    "mmdagg_test",
    "network_summary",
    "per_layer_schema",
    "pooled_distances",
    "resolve_device",
    "select_bandwidths",
    "two_sample_mmd",
]
