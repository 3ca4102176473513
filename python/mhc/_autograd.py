"""The ops' autograd behaviour: mhc is inference-only, and a backward through an op raises.

Without an Autograd kernel, torch's fallback gives the outputs a grad_fn that warns and passes
no gradient on, so a loss through the ops would train on silently missing gradients. Each op's
C++ Autograd kernel (python/src/torch/registration.cpp) sends a call made with grad enabled to
its twin mhc::_grad_<op>, whose Autograd kernel is the one here: an op called with no input that
requires grad runs as is and its outputs do not require grad; otherwise the outputs (or, for the
`_out` ops, the written buffers) hang off a node whose backward raises. Under torch.no_grad the
C++ kernel sends the call to mhc::_nograd_<op> instead, and under torch.inference_mode no
Autograd kernel runs: no Python on either path. torch.library.register_autograd does not take
these ops (keyword-only or mutated tensors), hence the kernel by hand.

Under torch.compile with inputs that require grad, AOTAutograd traces the backward at compile
time, so the compile raises the same error: compile inference under torch.no_grad().
"""

import torch

_BELOW_AUTOGRAD = torch._C._after_autograd_keyset


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, name, written, *tensors):
        ctx.name = name
        result = run()
        if not written:
            return result
        dirty = tuple(tensors[i] for i in written)
        ctx.mark_dirty(*dirty)
        return dirty

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            f"mhc.{ctx.name} is inference-only: it has no backward, and gradients cannot flow "
            "through it (docs/python.md). Run the forward under torch.no_grad() or "
            "torch.inference_mode(), or detach its inputs")


def inference_only(op, name):
    """The Autograd kernel of `op` (an OpOverload: the _grad_ twin of mhc.`name`), for
    Library.impl(..., with_keyset=True); its messages name mhc.`name`."""
    schema = op._schema
    positional = [a.name for a in schema.arguments if not a.kwarg_only]
    written = {a.name for a in schema.arguments
               if a.alias_info is not None and a.alias_info.is_write}

    def kernel(keyset, *args, **kwargs):
        def run():
            with torch._C._AutoDispatchBelowAutograd():
                return op.redispatch(keyset & _BELOW_AUTOGRAD, *args, **kwargs)

        if not torch.is_grad_enabled():  # no_grad: nothing to record (and the common case)
            return run()
        named = [*zip(positional, args), *kwargs.items()]
        tensors = [(k, v) for k, v in named if isinstance(v, torch.Tensor)]
        if not any(v.requires_grad for _, v in tensors):
            return run()
        indices = tuple(i for i, (k, _) in enumerate(tensors) if k in written)
        result = _NoBackward.apply(run, name, indices, *(v for _, v in tensors))
        return None if written else result

    return kernel
