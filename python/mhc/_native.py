"""The torch ops library mhc/_torch_ops.so (python/src/torch): loaded once here, which registers
torch.ops.mhc.*, and its two plain C entry points, reached through ctypes where the dispatcher
cannot be called (a fake inside a trace) or hands back only an error code (the Autograd kernels).
mhc/ops.py and mhc/_fakes.py both read it; it imports neither."""

import ctypes
import os

import torch

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_ops.so")


def _load():
    if not os.path.exists(_PATH):
        raise ImportError(
            f"mhc: the torch ops library {_PATH} is missing: this mhc was built without torch "
            "(MHC_TORCH_OPS=OFF, or torch not importable at build time). Install torch first and "
            "rebuild: pip install --no-build-isolation . (docs/python.md, \"Building\")")
    torch.ops.load_library(_PATH)
    native = ctypes.CDLL(_PATH)  # the same handle as torch's
    native.mhc_torch_note_error.argtypes = [ctypes.c_char_p]
    native.mhc_torch_note_error.restype = None
    native.mhc_torch_site_state.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
    native.mhc_torch_site_state.restype = ctypes.c_int
    return native


_LIB = _load()


def note_error(message):
    """Notes `message` in the C++ library, which passes it on as the error of the op call that
    reached Python through torch's dispatcher."""
    _LIB.mhc_torch_note_error(message.encode("utf-8", "replace"))


def site_state(handle):
    """(1, (n, C, device type, device index, has a norm weight)) for a bound site, (-1, None) for
    a released one, (0, None) for a handle never bound: read from the C++ registry without the
    dispatcher, which a fake inside a trace cannot call."""
    shape = (ctypes.c_int64 * 5)()
    state = _LIB.mhc_torch_site_state(int(handle), shape)
    return state, (tuple(shape) if state == 1 else None)
