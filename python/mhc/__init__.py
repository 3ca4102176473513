"""mhc: manifold-constrained hyper-connections (DeepSeek-V4.x) kernels for PyTorch and C++.

`import mhc` registers the torch ops torch.ops.mhc.* (when torch is installed). The functions
here are the same ops with an `out=` argument and a torch.cuda.Stream for the overlap; the API
reference is docs/python.md.
"""

from mhc._C import __version__, has_cuda

__all__ = ["__version__", "has_cuda"]

import os as _os

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the extension works without torch (numpy, CuPy through DLPack)
    _torch = None
if _torch is not None and not _os.path.exists(
        _os.path.join(_os.path.dirname(__file__), "_torch_ops.so")):
    import warnings as _warnings

    try:  # what the build said about the ops (python/TorchOps.cmake)
        from mhc._build import TORCH_OPS as _built
    except ImportError:
        _built = "off"
    # Left out by MHC_TORCH_OPS=AUTO for want of torch at build time (a plain `pip install .`
    # builds in an isolated environment): said where a user sees it. Deliberately off: quietly.
    _warnings.warn("mhc was built without its torch ops library (MHC_TORCH_OPS=OFF, or no torch "
                   "at build time): torch.ops.mhc.* and mhc.pre etc. are not available; "
                   "importing mhc.ops says how to build them",
                   UserWarning if _built.startswith("missing") else ImportWarning, stacklevel=2)
elif _torch is not None:
    from mhc._api import (  # noqa: F401
        DEFAULT_POOL,
        OverlapDecision,
        boundary,
        coefficients,
        configure,
        hc_prenorm_gemm,
        join,
        make_workspace,
        post,
        post_pre,
        pre,
        plan,
        pre_overlap,
        supports_overlap,
    )
    from mhc._head import head  # noqa: F401
    from mhc._site import Site, bind_site  # noqa: F401
    from mhc._fp8 import fp8_scales  # noqa: F401

    __all__ += [
        "DEFAULT_POOL",
        "OverlapDecision",
        "boundary",
        "coefficients",
        "configure",
        "hc_prenorm_gemm",
        "join",
        "make_workspace",
        "post",
        "post_pre",
        "pre",
        "plan",
        "pre_overlap",
        "supports_overlap",
        "head",
        "fp8_scales",
        "Site",
        "bind_site",
    ]
