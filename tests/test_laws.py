"""Laws that hold for every input, checked with hypothesis.

Lengths are drawn inside each model's context (a longer one is an error, tested elsewhere).
"""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import rooflab as rl
from rooflab import Precision

MODELS = st.sampled_from(["Llama-3-8B", "Llama-3.1-8B", "Llama-2-7B", "Mistral-7B", "Qwen2-7B", "Gemma-2B",
                          "Mixtral-8x7B", "TinyLlama-1.1B", "GPT-J-6B"])
DEVICES = st.sampled_from(["A100-80GB", "H100", "H200", "B200", "L40S", "MI300X", "L4"])
FRACTION = st.floats(0.0, 1.0)
BATCH = st.integers(1, 1024)
EFFICIENCY = st.builds(rl.Efficiency, st.just("drawn"), st.floats(0.05, 1.0), st.floats(0.05, 1.0),
                       st.floats(0.0, 0.01))
#: An efficiency with factors per weight format and an all-reduce of its own (efficiency v2).
FACTOR = st.floats(0.05, 1.0)
EFFICIENCY_V2 = st.builds(
    rl.Efficiency, st.just("drawn-v2"), FACTOR, FACTOR, st.floats(0.0, 0.01),
    st.tuples(st.tuples(st.just("fp8"), FACTOR, FACTOR), st.tuples(st.just("int8"), FACTOR, FACTOR),
              st.tuples(st.just("int4"), FACTOR, FACTOR)),
    FACTOR, st.floats(0.0, 1e-4))


def within(model, fraction, spare=2):
    """A length in [1, max_context - spare], placed by ``fraction``."""
    return 1 + int(fraction * (rl.model(model).max_context - spare - 1))


def _costs(cost):
    return cost.time.m_as("s"), cost.compute_time.m_as("s"), cost.memory_time.m_as("s")


@settings(max_examples=60, deadline=None)
@given(MODELS, DEVICES, FRACTION, BATCH)
def test_per_operation_time_is_never_below_the_single_max(model, device, fraction, batch):
    length = within(model, fraction)
    for cost in (rl.prefill(model, device, length, batch=batch, allow_overflow=True),
                 rl.decode_step(model, device, length, batch=batch, allow_overflow=True)):
        time, compute, memory = _costs(cost)
        assert time >= max(compute, memory) * (1 - 1e-12)
        assert time >= cost.one_operation_time.m_as("s") * (1 - 1e-12)
        # at the ideal, the time is the sum over the operations of each one's roofline time
        parts = sum(max(p.compute_time.m_as("s"), p.memory_time.m_as("s")) for p in cost.parts.values())
        assert abs(time - parts) <= 1e-12 * time
        body = {"projections", "router", "experts"} if rl.model(model).is_moe else {"body"}
        assert set(cost.parts) == body | {"attention", "head"}


@settings(max_examples=60, deadline=None)
@given(MODELS, DEVICES, FRACTION, BATCH, EFFICIENCY)
def test_ideal_is_never_slower_than_any_efficiency(model, device, fraction, batch, efficiency):
    length = within(model, fraction)
    for phase in (rl.prefill, rl.decode_step):
        ideal = phase(model, device, length, batch=batch, allow_overflow=True).time
        assert ideal <= phase(model, device, length, batch=batch, allow_overflow=True, efficiency="typical").time
        assert ideal <= phase(model, device, length, batch=batch, allow_overflow=True, efficiency=efficiency).time
    output = max(2, within(model, fraction / 2) // 2)
    prompt = max(1, rl.model(model).max_context - output - 1) if fraction > 0.9 else max(1, length // 2)
    ideal = rl.request(model, device, prompt, output, batch=batch, allow_overflow=True)
    typical = rl.request(model, device, prompt, output, batch=batch, allow_overflow=True, efficiency="typical")
    assert ideal.ttft <= typical.ttft and ideal.itl <= typical.itl and ideal.e2e <= typical.e2e


@settings(max_examples=60, deadline=None)
@given(MODELS, DEVICES, FRACTION, BATCH)
def test_monotone_in_length_and_batch(model, device, fraction, batch):
    length = within(model, fraction)
    step = rl.decode_step(model, device, length, batch=batch, allow_overflow=True).time
    assert rl.decode_step(model, device, length + 1, batch=batch, allow_overflow=True).time >= step
    assert rl.decode_step(model, device, length, batch=batch + 1, allow_overflow=True).time >= step
    assert rl.prefill(model, device, length + 1, allow_overflow=True).time >= rl.prefill(model, device, length, allow_overflow=True).time


@settings(max_examples=60, deadline=None)
@given(MODELS, st.sampled_from(["A100-80GB", "H100", "H200", "L40S"]), FRACTION, BATCH)
def test_more_bytes_are_never_faster(model, device, fraction, batch):
    length = within(model, fraction)
    # weights: fp16 > int8 > int4 g128 > int4 g128 with embeddings quantized too; the KV cache: fp16 > fp8
    formats = [Precision(), Precision(weights="int8"), Precision(weights="int4"),
               Precision(weights="int4", quantize_embeddings=True)]
    steps = [rl.decode_step(model, device, length, batch=batch, precision=p, allow_overflow=True).time for p in formats]
    assert all(a >= b for a, b in zip(steps, steps[1:]))
    # no byte shrinks by more than 16 / 4.125, so neither does the step (the head and cache shrink not at all)
    assert steps[0] / steps[2] <= 16 / 4.125 + 1e-9
    assert rl.decode_step(model, device, length, batch=batch, allow_overflow=True).time >= rl.decode_step(
        model, device, length, batch=batch, precision=Precision(kv="fp8"), allow_overflow=True).time
    pre16 = rl.prefill(model, device, length, allow_overflow=True)
    pre4 = rl.prefill(model, device, length, precision=formats[2], allow_overflow=True)
    assert pre16.time >= pre4.time


@settings(max_examples=40, deadline=None)
@given(MODELS, DEVICES, FRACTION, st.integers(1, 2_000))
def test_request_adds_up(model, device, fraction, output):
    m = rl.model(model)
    output = min(output, m.max_context - 1)
    prompt = 1 + int(fraction * (m.max_context - output - 1))
    r = rl.request(model, device, prompt, output, allow_overflow=True)
    assert r.e2e.m_as("s") >= r.ttft.m_as("s") * (1 - 1e-12)  # ms -> s rounding aside
    assert abs(r.prefill_share.m_as("") + r.decode_share.m_as("") - 1) < 1e-12
    first = rl.decode_step(model, device, prompt, allow_overflow=True).time.m_as("s")
    last = rl.decode_step(model, device, prompt + max(output - 2, 0), allow_overflow=True).time.m_as("s")
    assert first - 1e-15 <= r.itl.m_as("s") <= last + 1e-15  # the mean of steps lies between the ends


@settings(max_examples=30, deadline=None)
@given(MODELS, DEVICES, st.integers(0, 10**6))
def test_beyond_the_context_is_always_an_error(model, device, extra):
    m = rl.model(model)
    try:
        rl.prefill(model, device, m.max_context + 1 + extra, allow_overflow=True)
    except rl.ContextTooLong as error:
        assert m.name in str(error) and f"{m.max_context:,}" in str(error)
    else:
        raise AssertionError("no error")
    sweep = rl.prefill(model, device, np.array([1, m.max_context]), allow_overflow=True)
    assert sweep.time.shape == (2,)


# -- no time below the roofline bound of the work it contains ------------------------------------------------
# The bound is derived here from the shapes alone, leaving out what only adds work (norms, biases, the embedding
# rows, attention's bytes), so it is a floor every priced time must clear: FLOPs / peak and weight bytes /
# bandwidth, at the nominal bits of the weight format (group scales only add bytes).

NOMINAL_BYTES = {"fp16": 2.0, "bf16": 2.0, "int8": 1.0, "fp8": 1.0, "int4": 0.5}
PRECISIONS = st.sampled_from(["fp16", "int8", "fp8-w8a8", "int4-g128", "awq-int4", "gpt-fast-int4-g32"])


@st.composite
def random_models(draw):
    """A decoder-only transformer with drawn shapes (dense or mixture of experts)."""
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 128]))
    experts = draw(st.sampled_from([1, 1, 8, 16]))
    return rl.Model(
        name="drawn", layers=draw(st.integers(1, 80)), d_model=draw(st.integers(1, 64)) * 128, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, mlp_dim=draw(st.integers(1, 200)) * 128,
        vocab=draw(st.integers(1000, 200_000)), tied_embeddings=draw(st.booleans()), source="drawn by hypothesis",
        max_context=draw(st.sampled_from([2048, 8192, 32768])), experts=experts,
        experts_per_token=1 if experts == 1 else draw(st.integers(1, 2)))


ANY_MODEL = st.one_of(MODELS.map(rl.model), random_models())


def active_matmul_params(m):
    """Weights one token multiplies by, from the shapes: attention projections and k experts' MLPs per layer."""
    attention = 2 * m.d_model * m.heads * m.head_dim + 2 * m.d_model * m.kv_heads * m.head_dim
    mlp = (3 if m.gated_mlp else 2) * m.d_model * m.mlp_dim
    return m.layers * (attention + m.experts_per_token * mlp)


def read_params(m):
    """Weights a pass must read at least: every projection and at least k experts per layer."""
    return active_matmul_params(m)


def floor_s(m, device, precision, tokens, attention_flops=0.0):
    """max(FLOPs / peak, weight bytes / bandwidth), s, for ``tokens`` tokens through the body."""
    p = rl.as_precision(precision)
    d = rl.hardware(device)
    flops = 2.0 * active_matmul_params(m) * tokens + attention_flops
    return max(flops / d.peak_flops_for(p.compute), read_params(m) * NOMINAL_BYTES[p.weights] / d.memory_bandwidth_si)


def computes(device, precision):
    """Whether the device has a peak for the format's compute precision (no FP8 on an A100)."""
    return rl.as_precision(precision).compute in rl.hardware(device).peak_flops_si


def length_in(m, fraction, spare=2):
    return 1 + int(fraction * (m.max_context - spare - 1))


@settings(max_examples=80, deadline=None)
@given(ANY_MODEL, DEVICES, PRECISIONS, FRACTION, st.integers(1, 256))
def test_no_phase_is_faster_than_the_bound_of_its_work(m, device, precision, fraction, batch):
    assume(computes(device, precision))
    n = length_in(m, fraction)
    width = m.layers * m.heads * m.head_dim
    pre = rl.prefill(m, device, n, batch=batch, precision=precision, allow_overflow=True)
    # causal attention: at least half of the N x N scores, 2 x 2 FLOPs each (QK^T and AV), per layer and width
    assert pre.time.m_as("s") >= floor_s(m, device, precision, batch * n, batch * 2.0 * width * n * n) * (1 - 1e-9)
    step = rl.decode_step(m, device, n, batch=batch, precision=precision, allow_overflow=True)
    assert step.time.m_as("s") >= floor_s(m, device, precision, batch, batch * 4.0 * width * n) * (1 - 1e-9)
    out = max(2, min(300, m.max_context - n - 1))
    prompt = min(n, m.max_context - out)
    r = rl.request(m, device, prompt, out, batch=batch, precision=precision, allow_overflow=True)
    assert r.ttft.m_as("s") >= floor_s(m, device, precision, batch * prompt) * (1 - 1e-9)
    assert r.itl.m_as("s") >= floor_s(m, device, precision, batch) * (1 - 1e-9)
    assert r.e2e.m_as("s") >= (floor_s(m, device, precision, batch * prompt)
                               + (out - 1) * floor_s(m, device, precision, batch)) * (1 - 1e-9)


@settings(max_examples=120, deadline=None)
@given(ANY_MODEL, DEVICES, PRECISIONS, st.integers(1, 4000), st.integers(2, 1000), st.integers(1, 128),
       st.sampled_from([1, 2, 4]), st.sampled_from(["separate", "chunked"]), st.sampled_from([None, 64, 512]))
def test_no_steady_state_is_faster_than_the_bound_of_its_work(m, device, precision, prompt, out, batch, tp, mode,
                                                              chunk):
    assume(computes(device, precision))
    if prompt + out > m.max_context:
        prompt, out = max(1, m.max_context // 2), max(2, m.max_context // 4)
    s = rl.steady_state(m, device, prompt, out, batch, precision=precision, tp=tp, prefill=mode,
                        chunk=chunk if mode == "chunked" else None, efficiency="ideal", allow_overflow=True)
    # each GPU does 1/tp of the work: a request's first token needs its whole prompt through the body,
    # and a step carries the B decode tokens and reads its share of the weights
    assert s.ttft.m_as("s") >= floor_s(m, device, precision, prompt) / tp * (1 - 1e-9)
    assert s.itl.m_as("s") >= floor_s(m, device, precision, batch) / tp * (1 - 1e-9)
    typical = rl.steady_state(m, device, prompt, out, batch, precision=precision, tp=tp, prefill=mode,
                              efficiency="typical", allow_overflow=True)
    assert typical.itl >= s.itl * (1 - 1e-9)
    step = rl.tensor_parallel_step(m, device, prompt, batch=batch, tp=tp, precision=precision, allow_overflow=True)
    assert step.time.m_as("s") >= floor_s(m, device, precision, batch) / tp * (1 - 1e-9)


def test_chunked_prefill_is_not_faster_than_the_prompts_compute():
    """The expert's case: Llama-3-8B on an H100, 2,000-token prompts, 300 output, ideal.  The prompt's body
    alone is 2 x 6.98e9 x 2,000 / 989.4e12 = 28.2 ms (6,979,588,096 active non-embedding parameters, the
    H100 SXM's dense FP16 peak); the library had given 7.7 ms at batch 8 and 19.0 ms at batch 64."""
    bound = 2 * 6_979_588_096 * 2000 / 989.4e12
    assert round(bound * 1e3, 1) == 28.2
    for batch in (1, 8, 64, 200):
        s = rl.steady_state("Llama-3-8B", "H100", 2000, 300, batch, prefill="chunked", efficiency="ideal")
        assert s.ttft.m_as("s") >= bound
        # with a 512-token chunk the prompt spans ceil(2000 / 512) = 4 steps, each at least a quarter of it
        c = rl.steady_state("Llama-3-8B", "H100", 2000, 300, batch, prefill="chunked", chunk=512, efficiency="ideal")
        assert c.ttft.m_as("s") >= bound


def test_mixtral_experts_turn_compute_bound_at_ridge_times_e_over_k():
    """Priced per operation, Mixtral's experts on an H200 at FP16: b x 2 k L P_e / peak >= L x E(b) x P_e x 2 /
    bandwidth, with every expert read (E(b) = 8 at such batches), is b >= ridge x E / k = 206.1 x 4 = 825
    (989.4e12 / 4.8e12 = 206.125 FLOP/B); the attention projections turn near the ridge, 207; lumped into one body,
    the whole would have said 759."""
    ridge = 989.4e12 / 4.8e12
    assert round(ridge, 1) == 206.1 and math.ceil(ridge * 8 / 2) == 825
    assert rl.decode_compute_bound_batch("Mixtral-8x7B", "H200", operation="experts") == 825
    assert rl.decode_compute_bound_batch("Mixtral-8x7B", "H200") == 825  # the body: its last matmul to turn
    assert rl.decode_compute_bound_batch("Mixtral-8x7B", "H200", operation="projections") == math.ceil(ridge)
    step = rl.decode_step("Mixtral-8x7B", "H200", 1000, 8)
    m = rl.model("Mixtral-8x7B")
    experts_read = 8 * (1 - (1 - 2 / 8) ** 8)  # 7.20 of 8 experts a layer at batch 8
    assert step.parts["experts"].bytes.m_as("B") == pytest.approx(
        m.layers * experts_read * 3 * 4096 * 14336 * 2, rel=1e-12)
    assert step.parts["router"].bytes.m_as("B") == m.layers * 4096 * 8 * 2


@settings(max_examples=60, deadline=None)
@given(ANY_MODEL, DEVICES, PRECISIONS, FRACTION, st.integers(1, 256), st.sampled_from([1, 2, 4]), EFFICIENCY_V2)
def test_no_efficiency_is_faster_than_the_ideal_in_any_format(m, device, precision, fraction, batch, tp, drawn):
    # MFU and MBU per weight format, dequantisation and the all-reduce's share of the link only ever slow a time
    assume(computes(device, precision))
    n = length_in(m, fraction)
    out = max(2, min(300, m.max_context - n - 1))
    prompt = max(1, min(n, m.max_context - out - 1))
    ideal = dict(precision=precision, allow_overflow=True)
    pre, step = rl.prefill(m, device, n, batch, **ideal).time, rl.decode_step(m, device, n, batch, **ideal).time
    r = rl.request(m, device, prompt, out, batch, **ideal)
    s = rl.steady_state(m, device, prompt, out, batch, tp=tp, **ideal)
    tp_step = rl.tensor_parallel_step(m, device, n, batch, tp=tp, **ideal).time
    for e in ("typical", "typical-2023", drawn):
        assert rl.prefill(m, device, n, batch, efficiency=e, **ideal).time >= pre * (1 - 1e-9)
        assert rl.decode_step(m, device, n, batch, efficiency=e, **ideal).time >= step * (1 - 1e-9)
        t = rl.request(m, device, prompt, out, batch, efficiency=e, **ideal)
        assert t.ttft >= r.ttft * (1 - 1e-9) and t.itl >= r.itl * (1 - 1e-9)
        u = rl.steady_state(m, device, prompt, out, batch, tp=tp, efficiency=e, **ideal)
        assert u.itl >= s.itl * (1 - 1e-9) and u.ttft >= s.ttft * (1 - 1e-9)
        assert rl.tensor_parallel_step(m, device, n, batch, tp=tp, efficiency=e, **ideal).time >= tp_step * (1 - 1e-9)
