"""mhc: manifold-constrained hyper-connections (DeepSeek-V4.x) kernels for PyTorch and C++.

`import mhc` registers the torch ops torch.ops.mhc.* (when torch is installed). The functions
here are the same ops with an `out=` argument and a torch.cuda.Stream for the overlap; the API
reference is docs/python.md.
"""

from mhc._C import __version__, has_cuda

__all__ = ["__version__", "has_cuda"]

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the extension works without torch (numpy, CuPy through DLPack)
    pass
else:
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
    ]
