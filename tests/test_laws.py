"""Laws that hold for every input, checked with hypothesis."""

from hypothesis import given, settings, strategies as st

import rooflab as rl
from rooflab import Precision

MODELS = st.sampled_from(["Llama-3-8B", "Llama-2-7B", "Mistral-7B", "Qwen2-7B", "Gemma-2B", "Mixtral-8x7B", "TinyLlama-1.1B"])
DEVICES = st.sampled_from(["A100-80GB", "H100", "H200", "B200", "L40S", "MI300X", "L4"])
LENGTH = st.integers(1, 200_000)
BATCH = st.integers(1, 1024)


def _costs(cost):
    return cost.time.m_as("s"), cost.compute_time.m_as("s"), cost.memory_time.m_as("s")


@settings(max_examples=60, deadline=None)
@given(MODELS, DEVICES, LENGTH, BATCH)
def test_time_never_below_either_roof(model, device, length, batch):
    for cost in (rl.prefill(model, device, length, batch=batch, allow_overflow=True),
                 rl.decode_step(model, device, length, batch=batch, allow_overflow=True)):
        time, compute, memory = _costs(cost)
        assert time >= compute and time >= memory
        assert time == max(compute, memory)


@settings(max_examples=60, deadline=None)
@given(MODELS, DEVICES, LENGTH, BATCH)
def test_monotone_in_length_and_batch(model, device, length, batch):
    step = rl.decode_step(model, device, length, batch=batch, allow_overflow=True).time
    assert rl.decode_step(model, device, length + 1, batch=batch, allow_overflow=True).time >= step
    assert rl.decode_step(model, device, length, batch=batch + 1, allow_overflow=True).time >= step
    assert rl.prefill(model, device, length + 1, allow_overflow=True).time >= rl.prefill(model, device, length, allow_overflow=True).time


@settings(max_examples=60, deadline=None)
@given(MODELS, st.sampled_from(["A100-80GB", "H100", "H200", "L40S"]), LENGTH, BATCH)
def test_weight_only_quantization_never_slows_a_step(model, device, length, batch):
    fp16 = rl.decode_step(model, device, length, batch=batch, allow_overflow=True)
    int8 = rl.decode_step(model, device, length, batch=batch, precision=Precision(weights="int8"), allow_overflow=True)
    int4 = rl.decode_step(model, device, length, batch=batch, precision=Precision(weights="int4"), allow_overflow=True)
    assert fp16.time >= int8.time >= int4.time
    # the speedup is at most the ratio of bytes per weight (16 / 4.125), never more
    assert fp16.time / int4.time <= 16 / 4.125 + 1e-9
    pre16 = rl.prefill(model, device, length, allow_overflow=True)
    pre4 = rl.prefill(model, device, length, precision=Precision(weights="int4"), allow_overflow=True)
    assert pre16.time >= pre4.time


@settings(max_examples=40, deadline=None)
@given(MODELS, DEVICES, st.integers(1, 20_000), st.integers(1, 2_000))
def test_request_adds_up(model, device, prompt, output):
    r = rl.request(model, device, prompt, output, allow_overflow=True)
    assert r.e2e.m_as("s") >= r.ttft.m_as("s") * (1 - 1e-12)  # ms -> s rounding aside
    assert abs(r.prefill_share.m_as("") + r.decode_share.m_as("") - 1) < 1e-12
    first = rl.decode_step(model, device, prompt, allow_overflow=True).time.m_as("s")
    last = rl.decode_step(model, device, prompt + max(output - 2, 0), allow_overflow=True).time.m_as("s")
    assert first - 1e-15 <= r.itl.m_as("s") <= last + 1e-15  # the mean of steps lies between the ends
