"""Laws that hold for every input, checked with hypothesis.

Lengths are drawn inside each model's context (a longer one is an error, tested elsewhere).
"""

import numpy as np
from hypothesis import given, settings, strategies as st

import rooflab as rl
from rooflab import Precision

MODELS = st.sampled_from(["Llama-3-8B", "Llama-3.1-8B", "Llama-2-7B", "Mistral-7B", "Qwen2-7B", "Gemma-2B",
                          "Mixtral-8x7B", "TinyLlama-1.1B", "GPT-J-6B"])
DEVICES = st.sampled_from(["A100-80GB", "H100", "H200", "B200", "L40S", "MI300X", "L4"])
FRACTION = st.floats(0.0, 1.0)
BATCH = st.integers(1, 1024)
EFFICIENCY = st.builds(rl.Efficiency, st.just("drawn"), st.floats(0.05, 1.0), st.floats(0.05, 1.0),
                       st.floats(0.0, 0.01))


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
        assert set(cost.parts) == {"body", "attention", "head"}


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
