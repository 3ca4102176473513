"""Scratch memory of the coefficient path (split-K partials and tile counters).

The coefficient path takes a uint8 `workspace` of at least _C.workspace_bytes(hidden, n,
max_tokens) bytes, zero-filled once at creation; the kernels re-arm what the next launch reads
(tile counters back at zero, flagged partials cleared) after every launch, so one workspace
serves any number of calls on ONE stream at a time. Two calls that may run concurrently (the
overlap's side stream and the main stream, or two engines' streams) need two workspaces.

An engine that captures CUDA graphs owns its workspaces: it makes them with `make_workspace`
before capture and passes `workspace=` to every op. Without `workspace=`, the ops take one from
`DEFAULT_POOL`, keyed by device, shape and "slot" (the main stream, or one slot per overlap side
stream). The pool lives in the C++ torch ops library (python/src/torch/pool.cpp; this class is
its Python face): it creates or grows a workspace only outside graph capture (memory created
during a capture belongs to the graph's private pool, and a zero-fill captured in a graph runs
only at replay): a forward that is captured must have run once eagerly at its largest token
count, or the engine calls `DEFAULT_POOL.reserve(...)` first. A capture that finds no workspace
raises instead of allocating.
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
    """Workspaces by (device, hidden, n, slot), grown to the largest token count asked for: the
    pool the ops use, held by the C++ library (one per process)."""

    def get(self, device, hidden, n, tokens, slot=MAIN):
        """The workspace for at least `tokens` tokens, made or grown now if needed."""
        return torch.ops.mhc._workspace(torch.device(device), int(hidden), int(n), int(tokens),
                                        int(slot))

    def reserve(self, device, hidden, n, max_tokens, slot=MAIN):
        """Creates (or grows) the workspace now; call before capturing a graph."""
        return self.get(device, hidden, n, max_tokens, slot)

    def clear(self):
        """Drops every workspace, back to torch's allocator: call it when no launch that uses
        one is still queued (a side stream's launch is not ordered with later allocations)."""
        torch.ops.mhc._workspace_clear()

    def __len__(self):
        return int(torch.ops.mhc._workspace_count())


DEFAULT_POOL = WorkspacePool()
