"""What the derivation knows of torch's operations: which modules, functions and tensor
methods pass units on (positively homogeneous or not), pool, reshape, sum, multiply,
concatenate or only read metadata (`symbnn.symmetry.derive`)."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
LINEAR = (nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear)
BATCHNORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
DROPOUT = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)
# positively homogeneous and channel-wise: permutations and positive scales pass
HOMOGENEOUS_MODULES = (nn.ReLU, nn.LeakyReLU, nn.Identity, *DROPOUT)
# channel-wise pooling over k trailing (spatial) axes
POOL_MODULES = {
    nn.MaxPool1d: 1,
    nn.MaxPool2d: 2,
    nn.MaxPool3d: 3,
    nn.AvgPool1d: 1,
    nn.AvgPool2d: 2,
    nn.AvgPool3d: 3,
    nn.AdaptiveAvgPool1d: 1,
    nn.AdaptiveAvgPool2d: 2,
    nn.AdaptiveAvgPool3d: 3,
    nn.AdaptiveMaxPool1d: 1,
    nn.AdaptiveMaxPool2d: 2,
    nn.AdaptiveMaxPool3d: 3,
}
# elementwise (or symmetric across units) but not positively homogeneous: permutations only
NONHOMOGENEOUS_MODULES = (
    nn.ReLU6,
    nn.Hardtanh,
    nn.SiLU,
    nn.GELU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.ELU,
    nn.SELU,
    nn.CELU,
    nn.Softplus,
    nn.Mish,
    nn.LogSigmoid,
    nn.Softsign,
    nn.Tanhshrink,
    nn.Softshrink,
    nn.Hardshrink,
    nn.Threshold,
    nn.Softmax,
    nn.LogSoftmax,
    nn.Softmin,
    nn.Softmax2d,
)
RESHAPE_MODULES = (nn.Flatten, nn.Unflatten)

HOMOGENEOUS_FUNCTIONS = {
    F.relu,
    F.relu_,
    torch.relu,
    torch.relu_,
    F.leaky_relu,
    F.leaky_relu_,
    F.dropout,
    F.dropout1d,
    F.dropout2d,
    F.dropout3d,
    F.alpha_dropout,
    F.feature_alpha_dropout,
    torch.dropout,
    torch.abs,
    torch.clone,
    operator.pos,
}
HOMOGENEOUS_METHODS = {
    "relu",
    "relu_",
    "abs",
    "contiguous",
    "clone",
    "detach",
    "to",
    "float",
    "double",
    "half",
    "type",
    "type_as",
}
POOL_FUNCTIONS = {
    F.max_pool1d: 1,
    F.max_pool2d: 2,
    F.max_pool3d: 3,
    torch.max_pool1d: 1,
    torch.max_pool2d: 2,
    torch.max_pool3d: 3,
    F.avg_pool1d: 1,
    F.avg_pool2d: 2,
    F.avg_pool3d: 3,
    torch.avg_pool1d: 1,
    F.adaptive_avg_pool1d: 1,
    F.adaptive_avg_pool2d: 2,
    F.adaptive_avg_pool3d: 3,
    torch.adaptive_avg_pool1d: 1,
    F.adaptive_max_pool1d: 1,
    F.adaptive_max_pool2d: 2,
    F.adaptive_max_pool3d: 3,
}
# pooling functions that never average in padding zeros
SHIFT_FREE_POOLS = {
    f for f in POOL_FUNCTIONS if "max" in f.__name__ or "adaptive_avg" in f.__name__
}
NONHOMOGENEOUS_FUNCTIONS = {
    F.relu6,
    F.hardtanh,
    F.hardtanh_,
    F.silu,
    F.gelu,
    F.elu,
    F.elu_,
    F.selu,
    F.celu,
    F.softplus,
    F.mish,
    F.hardswish,
    F.hardsigmoid,
    F.logsigmoid,
    F.softsign,
    F.tanhshrink,
    F.softshrink,
    F.hardshrink,
    F.sigmoid,
    F.tanh,
    F.softmax,
    F.log_softmax,
    F.softmin,
    torch.tanh,
    torch.sigmoid,
    torch.softmax,
    torch.log_softmax,
    torch.exp,
    torch.log,
    torch.sin,
    torch.cos,
    torch.square,
    torch.sqrt,
    torch.erf,
    torch.pow,
    torch.clamp,
    torch.clip,
}
NONHOMOGENEOUS_METHODS = {
    "tanh",
    "tanh_",
    "sigmoid",
    "sigmoid_",
    "exp",
    "log",
    "sin",
    "cos",
    "square",
    "sqrt",
    "pow",
    "softmax",
    "log_softmax",
    "clamp",
    "clamp_",
    "clip",
}
ADD = {operator.add, operator.iadd, torch.add, operator.sub, operator.isub, torch.sub}
ADD_METHODS = {"add", "add_", "sub", "sub_"}
MUL = {operator.mul, operator.imul, torch.mul}
MUL_METHODS = {"mul", "mul_"}
DIV = {operator.truediv, operator.itruediv, torch.div}
DIV_METHODS = {"div", "div_"}
NEG = {operator.neg, torch.neg}
CAT = {torch.cat, torch.concat, torch.concatenate}
RESHAPE_FUNCTIONS = {torch.flatten, torch.reshape, torch.squeeze, torch.unsqueeze}
RESHAPE_METHODS = {"flatten", "view", "reshape", "squeeze", "unsqueeze", "view_as", "reshape_as"}
TRANSPOSE = {torch.transpose, torch.permute, torch.t}
TRANSPOSE_METHODS = {"transpose", "permute", "t"}
REDUCE = {torch.mean, torch.sum, torch.amax}
REDUCE_METHODS = {"mean", "sum", "amax"}
# read a tensor's metadata only: no effect on its units
METADATA_METHODS = {"size", "dim", "numel", "type"}
# new tensors shaped like their input, not computed from it: no effect on its units
SHAPED_LIKE = {
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
}
SHAPED_LIKE_METHODS = {"new_zeros", "new_ones", "new_empty", "new_full"}


def homogeneous_function(t: Any) -> bool:
    if t in HOMOGENEOUS_FUNCTIONS:
        return True
    # torchvision.ops.stochastic_depth (not imported: torchvision is heavy) scales whole
    # samples, by 0 or 1 / (1 - p), and is the identity in eval mode
    return getattr(t, "__name__", "") == "stochastic_depth" and getattr(
        t, "__module__", ""
    ).startswith("torchvision.ops")


def as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)
