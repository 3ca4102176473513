"""What each op computes, with shapes and dtypes: the __doc__ of torch.ops.mhc.* (with the
op's schema) and of the mhc.* wrappers (with their own arguments). Reference: docs/python.md."""

SHAPES = """T tokens, n streams (1..8; 2 or 4 on CUDA), C hidden (a multiple of 8, at most 2^20; of
64 on CUDA), N = n(n+2). Tensors C-contiguous, all on one device (cpu or cuda).
Inference only: a backward through the op raises."""

_COEF_IN = """residual [T, n, C] bf16, fn [N, n*C] f32, hc_scale [3] f32, hc_base [N] f32;
rms_eps, pre_eps, sinkhorn_eps (finite, >= 0), post_mult (finite), sinkhorn_iters (1..1000);
keywords workspace (uint8, mhc.make_workspace; default mhc.DEFAULT_POOL on CUDA),
projection ("tf32" or "fp32"), batch_invariant (bool)."""

_COEF_OUT = "post [T, n] f32, comb [T, n, n] f32 (row j: source stream), next_pre_mix [T, n] f32"

_PRE_IO = f"""Inputs: {_COEF_IN}
norm_weight [C] f32 or bf16 or None (plain collapse); pre_mix [T, n] f32 (V4.1: mix = pre_mix) or
None (V4: mix = this site's own pre); norm_eps (finite, >= 0).
Outputs: layer_input [T, C] bf16, {_COEF_OUT}; no output may overlap an input or another output."""

_PRE = f"""One site's pre: the coefficients of residual and the sublayer input
layer_input = bf16(rmsnorm(bf16(sum_j mix[:, j] residual[:, j]), norm_eps) * norm_weight).
{_PRE_IO}"""

_OVERLAP = f"""V4.1 pre with the overlap: layer_input on the current stream, the coefficients on the
side stream (after the current stream's queued work); join before reading them.
{_PRE_IO}
pre_mix is required. workspace is the side stream's; main_workspace (keyword, optional) the
current stream's, used only for a bf16 norm_weight on CUDA (default: mhc.DEFAULT_POOL)."""

_COEFFICIENTS = f"""The coefficient path alone (V4.1, after post_pre).
Inputs: {_COEF_IN}
Outputs: {_COEF_OUT}. side_stream (a cudaStream_t handle, 0: the current stream) runs it on that
stream after the current stream's queued work."""

_POST_IN = """sublayer_out [T, C] bf16, residual [T, n, C] bf16, post [T, n] f32,
comb [T, n, n] f32"""

_POST = f"""This site's post: residual_next [T, n, C] bf16 with
residual_next[:, k] = bf16(post[:, k] * sublayer_out + sum_j comb[:, j, k] * residual[:, j]).
Inputs: {_POST_IN}. The output must not overlap an input."""

_POST_PRE = f"""This site's post, then the next site's input path on residual_next with the carried
next_pre_mix (one launch on CUDA; the bits of post then input_path).
Inputs: {_POST_IN}, next_pre_mix [T, n] f32, next_norm_weight [C] f32 or bf16 or None,
norm_eps (finite, >= 0); keyword workspace.
Outputs: residual_next [T, n, C] bf16, next_layer_input [T, C] bf16; no overlaps."""

_BOUNDARY = f"""A whole V4.1 boundary: post, the next site's input path with the carried pre_mix, and
the next site's coefficients of residual_next (the bits of post_pre then coefficients, except
where the kernel plan fuses them).
Inputs: {_POST_IN}, pre_mix [T, n] f32, norm_weight [C] f32 or bf16 or None, the next site's
fn, hc_scale, hc_base, and the scalars and keywords of pre.
Outputs: residual_next [T, n, C] bf16, layer_input [T, C] bf16, next_post [T, n] f32,
next_comb [T, n, n] f32, next_pre_mix [T, n] f32; no overlaps."""

_JOIN = f"""The current stream waits for the side stream's coefficient path ({_COEF_OUT}:
named so that torch.compile keeps their readers after the join)."""

_GEMM = """DeepGEMM's tf32_hc_prenorm_gemm: out[s] = x_s fn_s^T and sqrsum[s] = sum of x_s^2 over
split s of K. x [M, K] bf16, fn [N, K] f32 (N 8, 16, 24 or 32; K a multiple of 64),
out [S, M, N] f32, sqrsum [S, M] f32 (one split: also [M, N] and [M]), num_splits S >= 1."""

_HEAD = """The head collapse after the last site (DeepSeek-V4.x's hc_head, no Sinkhorn;
docs/head.md): w = sigmoid((fn . v) * rsqrt(mean(v^2) + rms_eps) * hc_scale[0] + hc_base) +
hc_eps with v a token's n streams flattened, out = bf16(sum_j w[:, j] residual[:, j]); with
norm_weight the model's final RMSNorm fused, out = bf16(rmsnorm(that, norm_eps) * norm_weight):
the LM head's input in one launch.
Inputs: residual [T, n, C] bf16, fn [n, n*C] f32, hc_scale [1] f32, hc_base [n] f32; rms_eps,
hc_eps (finite, >= 0); norm_weight [C] f32 or bf16 or None (the collapse alone); norm_eps
(finite, >= 0; None: rms_eps, the models' one RMSNorm epsilon).
Output: out [T, C] bf16, not overlapping an input."""

_BIND = """Binds one site's weights, scalars and options once, for the bound ops (site_pre_out,
site_coefficients_out, site_pre_overlap_out, site_boundary_out), and returns its handle (an int,
counting up from 1, never reused). fn, hc_scale, hc_base, norm_weight, the scalars and the
keywords as pre takes them; the registry holds the tensors themselves, not copies (in-place
updates are seen). release_site(site) lets them go. mhc.bind_site wraps it in an mhc.Site."""

_BOUND = """The bound form of {op}: the site's weights, scalars and options come from the handle
(bind_site), the rest as {op} takes them; the same checks, launches and bits. Inference only:
with grad enabled the call is refused (torch.no_grad() or torch.inference_mode())."""

SUMMARY = {
    "bind_site": _BIND,
    "site_pre": _BOUND.format(op="pre_out: residual, pre_mix, then the four outputs"),
    "site_coefficients": _BOUND.format(
        op="coefficients_out: residual, the three outputs, then side_stream"),
    "site_pre_overlap": _BOUND.format(
        op="pre_overlap_out: residual, pre_mix, side_stream, then the four outputs"),
    "site_boundary": _BOUND.format(
        op="boundary_out (the next site bound): the post inputs, pre_mix, the five outputs"),
    "pre": _PRE,
    "pre_overlap": _OVERLAP,
    "coefficients": _COEFFICIENTS,
    "join": _JOIN,
    "post": _POST,
    "post_pre": _POST_PRE,
    "boundary": _BOUNDARY,
    "hc_prenorm_gemm": _GEMM,
    "head": _HEAD,
}


def op_doc(name, schema):
    """The __doc__ of torch.ops.mhc.<name>: schema, what it computes, the shapes' limits."""
    family = name[:-4] if name.endswith("_out") else name
    writes = ("\nThe _out form writes the caller's buffers (its keyword outputs) and returns ()."
              if name.endswith("_out") and not name.startswith("site_") else "")
    return f"torch.ops.mhc.{name}{schema}\n\n{SUMMARY[family]}{writes}\n\n{SHAPES}"


def wrapper_doc(name, usage):
    """The __doc__ of mhc.<name>: its call, what it computes, the shapes' limits."""
    return f"{usage}\n\n{SUMMARY[name]}\n\n{SHAPES}"
