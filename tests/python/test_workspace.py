"""Where the ops take their workspaces: DEFAULT_POOL only where a launch needs one and the
caller passed none (never on the CPU, which ignores it)."""

import pytest
import torch
from conftest import Site, needs_cuda


@pytest.fixture
def empty_pool(mhc):
    mhc.DEFAULT_POOL.clear()
    yield mhc.DEFAULT_POOL
    mhc.DEFAULT_POOL.clear()


def test_cpu_calls_leave_the_pool_empty(mhc, empty_pool):
    s = Site(tokens=5)
    mhc.pre(*s.pre_args())
    mhc.coefficients(*s.coef_args())
    mhc.boundary(*s.boundary_args())
    torch.ops.mhc.pre_overlap(*s.pre_args(), 0)
    assert len(empty_pool) == 0


def test_pre_overlap_with_caller_workspaces_leaves_the_pool_empty(mhc, empty_pool):
    """A side stream handle with the caller's workspaces: nothing from DEFAULT_POOL."""
    s = Site(tokens=5)
    ws = mhc.make_workspace("cpu", s.hidden, s.n, s.tokens)
    main_ws = mhc.make_workspace("cpu", s.hidden, s.n, s.tokens)
    got = torch.ops.mhc.pre_overlap(*s.pre_args(), 12345, workspace=ws, main_workspace=main_ws)
    assert len(empty_pool) == 0
    assert all(torch.equal(a, b) for a, b in zip(got, mhc.pre(*s.pre_args())))


def test_main_workspace_is_checked(mhc):
    s = Site(tokens=5)
    with pytest.raises(RuntimeError, match="main_workspace must be a uint8 tensor"):
        torch.ops.mhc.pre_overlap(*s.pre_args(), 0, main_workspace=torch.zeros(4))


@needs_cuda
@pytest.mark.parametrize("norm", [torch.float32, torch.bfloat16])
def test_cuda_pre_overlap_takes_no_pool_workspace(mhc, empty_pool, norm):
    """fp32 weight: the input path needs no scratch; bf16: main_workspace serves it."""
    s = Site(tokens=5, device="cuda", norm_dtype=norm)
    side = torch.cuda.Stream()
    ws = mhc.make_workspace("cuda", s.hidden, s.n, s.tokens)
    main_ws = mhc.make_workspace("cuda", s.hidden, s.n, s.tokens) if norm == torch.bfloat16 else None
    out = mhc.pre_overlap(*s.pre_args(), stream=side, workspace=ws, main_workspace=main_ws)
    mhc.join(side, *out[1:])
    torch.cuda.synchronize()
    assert len(empty_pool) == 0
