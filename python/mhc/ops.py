"""The torch ops torch.ops.mhc.*: registered in C++ on PyTorch's stable ABI by the library
mhc/_torch_ops.so (python/src/torch), which mhc/_native.py loads.

Every op has a C++ kernel for CPU and CUDA tensors that checks its arguments before any kernel
runs, launches on torch's current stream of the tensors' device (CUDA) or runs the CPU backend,
and has an `_out` twin that writes caller-owned buffers (static CUDA-graph buffers) instead of
allocating. The fake (meta) implementations for torch.compile stay here in Python
(mhc/_fakes.py, the same checks in mhc/_checks.py), as does the autograd kernel that makes a
backward raise (mhc/_autograd.py), which only calls made with grad enabled reach. Argument
reference: docs/python.md.
"""

import functools

import torch

from mhc import _fakes as fake
from mhc import _fp8, _head, _native
from mhc._autograd import inference_only
from mhc._docs import op_doc

NAMES = ("hc_prenorm_gemm", "pre", "pre_out", "coefficients", "coefficients_out", "pre_overlap",
         "pre_overlap_out", "join", "post", "post_out", "post_pre", "post_pre_out", "boundary",
         "boundary_out", "head", "head_out")

# The schemas as registered (the C++ library defines them), without the "mhc::name" prefix.
SCHEMAS = {name: str(getattr(torch.ops.mhc, name).default._schema)[len(f"mhc::{name}"):]
           for name in NAMES}

FAKES = {
    "hc_prenorm_gemm": fake.fake_hc_prenorm_gemm,
    "pre": fake.fake_pre,
    "pre_out": fake.fake_pre_out,
    "coefficients": fake.fake_coefficients,
    "coefficients_out": fake.fake_coefficients_out,
    "pre_overlap": fake.fake_pre_overlap,
    "pre_overlap_out": fake.fake_pre_overlap_out,
    "join": fake.fake_join,
    "post": fake.fake_post,
    "post_out": fake.fake_post_out,
    "post_pre": fake.fake_post_pre,
    "post_pre_out": fake.fake_post_pre_out,
    "boundary": fake.fake_boundary,
    "boundary_out": fake.fake_boundary_out,
    **_head.FAKES,
}


# The bound sites' ops (python/src/torch/site.hpp): no twins and no Autograd kernel.
SITE_NAMES = ("bind_site", "site_pre_out", "site_coefficients_out", "site_pre_overlap_out",
              "site_boundary_out")
SITE_FAKES = {name: getattr(fake, "fake_" + name) for name in SITE_NAMES}


def _noting(function):
    """`function` (a fake or the autograd kernel), noting its error in the C++ library before it
    propagates: an op's C++ Autograd kernel reaches these through torch's dispatcher, which hands
    back only an error code, and passes the noted message on (the same RuntimeError)."""

    @functools.wraps(function)
    def noted(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as e:
            _native.note_error(str(e))
            raise

    return noted


LIB = torch.library.Library("mhc", "FRAGMENT")  # noqa: lives as long as the module

for _name in NAMES:
    _fake = _noting(FAKES[_name])
    for _op in (_name, f"_nograd_{_name}", f"_grad_{_name}"):
        torch.library.register_fake(f"mhc::{_op}", _fake, lib=LIB)
    # Inference only: a backward through any op raises instead of giving no gradient.
    _grad = getattr(torch.ops.mhc, f"_grad_{_name}")
    LIB.impl(f"_grad_{_name}", _noting(inference_only(_grad.default, _name)), "Autograd",
             with_keyset=True)
    _packet = getattr(torch.ops.mhc, _name)
    _packet.__doc__ = _packet.default.__doc__ = op_doc(_name, SCHEMAS[_name])

for _name in SITE_NAMES:
    torch.library.register_fake(f"mhc::{_name}", _noting(SITE_FAKES[_name]), lib=LIB)
    _packet = getattr(torch.ops.mhc, _name)
    _schema = str(_packet.default._schema)[len(f"mhc::{_name}"):]
    _packet.__doc__ = _packet.default.__doc__ = op_doc(_name, _schema)

_fp8.register(LIB, _noting, inference_only)  # the FP8 layer input's ops (docs/fp8.md)
