"""mhc: manifold-constrained hyper-connections (DeepSeek-V4.x) kernels for PyTorch and C++."""

from mhc._C import __version__, has_cuda

__all__ = ["__version__", "has_cuda"]
