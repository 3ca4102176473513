"""Which op an mhc.* call reaches: with grad disabled (torch.no_grad, torch.inference_mode) the
op's no-grad twin directly, without the C++ autograd router's second call into the dispatcher;
with grad enabled the op itself, whose router keeps the outputs off any backward. Read from the
profiler's record of every dispatcher call."""

import pytest
import torch
from conftest import DEVICES, Site
from torch.profiler import ProfilerActivity, profile


def _dispatched(call):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {e.name for e in prof.events()}


def _calls(mhc, s):
    e = s.eps
    return {
        "pre": lambda: mhc.pre(*s.pre_args()),
        "post": lambda: mhc.post(*s.post_args()),
        "post_pre": lambda: mhc.post_pre(*s.post_args(), s.pre_mix, s.norm_weight,
                                         e["norm_eps"]),
        "boundary": lambda: mhc.boundary(*s.boundary_args()),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_grad_disabled_calls_reach_the_twin_alone(mhc, device, mode):
    s = Site(tokens=3, device=device, seed=5)
    for name, call in _calls(mhc, s).items():
        with mode():
            names = _dispatched(call)
        assert f"mhc::_nograd_{name}" in names, (name, sorted(names))
        assert f"mhc::{name}" not in names, (name, sorted(names))


@pytest.mark.parametrize("device", DEVICES)
def test_grad_enabled_calls_go_through_the_router(mhc, device):
    s = Site(tokens=3, device=device, seed=6)
    for name, call in _calls(mhc, s).items():
        with torch.enable_grad():
            names = _dispatched(call)
        assert f"mhc::{name}" in names, (name, sorted(names))
        assert f"mhc::_nograd_{name}" not in names, (name, sorted(names))


def test_twin_and_routed_calls_agree(mhc):
    s = Site(tokens=5, seed=7)
    with torch.enable_grad():
        routed = mhc.boundary(*s.boundary_args())
    with torch.no_grad():
        twin = mhc.boundary(*s.boundary_args())
    for a, b in zip(routed, twin):
        assert torch.equal(a, b)
