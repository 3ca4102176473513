"""mhc.configure and mhc.plan: the kernel configuration reaches every op (the torch ops and
mhc._C share it), a bad one is refused naming the key, and the launch description follows it."""

import json

import pytest
import torch
from conftest import Site, needs_cuda


@pytest.fixture
def defaults(mhc):
    yield mhc
    mhc.configure()


def test_configure_sets_both_libraries(defaults):
    mhc = defaults
    mhc.configure({"enable_mhc_overlap": True, "pdl": False})
    for text in (torch.ops.mhc._config(), mhc._C.kernel_config()):
        config = json.loads(text)
        assert config["enable_mhc_overlap"] is True and config["pdl"] is False
    mhc.configure('{"projection": "fp32"}')
    assert json.loads(torch.ops.mhc._config())["projection"] == "fp32"
    mhc.configure()
    assert json.loads(mhc._C.kernel_config())["projection"] == "tf32"


def test_bad_config_is_refused_and_changes_nothing(defaults):
    mhc = defaults
    mhc.configure({"pdl": False})
    with pytest.raises(RuntimeError, match="no_such_switch"):
        mhc.configure({"no_such_switch": True})
    with pytest.raises(RuntimeError, match="pdl"):
        mhc.configure('{"pdl": 3}')
    assert json.loads(torch.ops.mhc._config())["pdl"] is False


def test_tactics_given_twice(defaults):
    with pytest.raises(RuntimeError, match="tactics given twice"):
        defaults.configure({"tactics": "a.json"}, tactics="b.json")


def test_configured_calls_on_the_cpu(defaults):
    """The CPU backend has one path: a configuration changes no bit there."""
    mhc = defaults
    s = Site(tokens=5)
    plain = mhc.pre(*s.pre_args())
    mhc.configure({"projection": "fp32", "batch_invariant": True, "fused_boundary": False})
    for a, b in zip(mhc.pre(*s.pre_args()), plain):
        assert torch.equal(a, b)


def test_plan_needs_a_cuda_device(mhc):
    with pytest.raises(RuntimeError, match="not a CUDA device"):
        mhc.plan("cpu")


@needs_cuda
def test_plan_follows_the_configuration(defaults):
    mhc = defaults
    plain = mhc.plan()
    assert plain["batch_invariant"] is False
    assert mhc.plan(batch_invariant=True)["batch_invariant"] is True
    mhc.configure({"fused_boundary": False})
    assert mhc.plan() != plain
    mhc.configure({"batch_invariant": True})
    assert mhc.plan()["batch_invariant"] is True


@needs_cuda
@pytest.mark.parametrize("config", [{"pdl": False}, {"fused_input": False},
                                    {"projection": "fp32"}, {"batch_invariant": True}])
def test_configured_ops_agree_with_their_keywords(defaults, config):
    """A switch that keeps the bits (pdl, fused_input) gives the same results; the projection and
    batch-invariant mode give what the ops' own keywords give."""
    mhc = defaults
    s = Site(tokens=7, hidden=512, device="cuda", seed=81)
    keywords = {k: v for k, v in config.items() if k in ("projection", "batch_invariant")}
    want = mhc.pre(*s.pre_args(), **keywords)
    mhc.configure(config)
    got = mhc.pre(*s.pre_args())
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(got, want))
