"""Scratch memory of the coefficient path (split-K partials and tile counters).

mhc._C allocates nothing: the coefficient path takes a uint8 `workspace` of at least
_C.workspace_bytes(hidden, n, max_tokens) bytes, zero-filled once at creation; the kernels
re-arm what the next launch reads (tile counters back at zero, flagged partials cleared) after
every launch, so one workspace serves any number of calls on ONE stream at a time. Two calls that may run concurrently (the overlap's side stream and the main stream,
or two engines' streams) need two workspaces.

An engine that captures CUDA graphs owns its workspaces: it makes them with `make_workspace`
before capture and passes `workspace=` to every op. Without `workspace=`, the ops take one from
`DEFAULT_POOL`, keyed by device, shape and "slot" (the main stream, or one slot per overlap side
stream). The pool creates or grows a workspace only outside graph capture (memory created during
a capture belongs to the graph's private pool, and a zero-fill captured in a graph runs only at
replay): a forward that is captured must have run once eagerly at its largest token count, or
the engine calls `DEFAULT_POOL.reserve(...)` first. A capture that finds no workspace raises
instead of allocating.
"""

import torch

from mhc import _C

MAIN = 0  # the slot of the stream the op runs on; an overlap side stream's slot is its handle


def make_workspace(device, hidden, n, max_tokens):
    """A zero-filled workspace for up to `max_tokens` tokens of hidden size C and n streams: a
    uint8 tensor of _C.workspace_bytes(hidden, n, max_tokens) bytes on `device`, for the ops'
    workspace= (one per stream that runs ops concurrently)."""
    size = _C.workspace_bytes(int(hidden), int(n), int(max_tokens))
    return torch.zeros(size, dtype=torch.uint8, device=device)


class WorkspacePool:
    """Workspaces by (device, hidden, n, slot), grown to the largest token count asked for."""

    def __init__(self):
        self._buffers = {}  # key -> (capacity in tokens, uint8 tensor)

    def get(self, device, hidden, n, tokens, slot=MAIN):
        entry = self._buffers.get((device, hidden, n, slot))
        if entry is not None and tokens <= entry[0]:
            return entry[1]
        return self.reserve(device, hidden, n, tokens, slot)

    def reserve(self, device, hidden, n, max_tokens, slot=MAIN):
        """Creates (or grows) the workspace now; call before capturing a graph."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        key = (device, hidden, n, slot)
        entry = self._buffers.get(key)
        if entry is not None and max_tokens <= entry[0]:
            return entry[1]
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"mhc: no workspace for {max_tokens} tokens (C={hidden}, n={n}, slot {slot}) on "
                f"{device} while a CUDA graph is being captured; run the forward once eagerly at "
                "its largest token count before capture, call mhc.DEFAULT_POOL.reserve(...), or "
                "pass workspace=mhc.make_workspace(...)"
            )
        capacity = 16
        while capacity < max_tokens:
            capacity *= 2
        if entry is not None and device.type == "cuda":
            # The old buffer may still be in use by a launch on another stream (the overlap's
            # side stream); growing happens only in eager warm-up, so waiting here is cheap.
            torch.cuda.synchronize(device)
        buf = make_workspace(device, hidden, n, capacity)
        if device.type == "cuda":
            # The zero-fill ran on the current stream; the workspace may be used first on
            # another (a side stream, a capture stream): wait for it once, here.
            torch.cuda.synchronize(device)
        self._buffers[key] = (capacity, buf)
        return buf

    def clear(self):
        self._buffers.clear()


DEFAULT_POOL = WorkspacePool()
