"""Prefill, decode, requests and memory against the curriculum's figures, derived by hand here.

Llama-3-8B on an H100 SXM at fp16: peak 989.4 TFLOP/s, 3.35 TB/s, 80 GB.
"""

import math

import numpy as np
import pytest

import rooflab as rl
from rooflab import Q_

PEAK, BW, CAP = 989.4e12, 3.35e12, 80e9
L, D, A, V = 32, 4096, 4096, 128256
P = 6_979_588_096  # non-embedding parameters (test_models derives it)
TOTAL = P + 2 * V * D
KV = 2 * L * 8 * 128 * 2  # bytes per token


@pytest.fixture
def llama():
    return rl.model("Llama-3-8B")


@pytest.fixture
def h100():
    return rl.hardware("H100")


def test_prefill_2000_tokens(llama, h100):
    n = 2000
    flops = 2 * P * n + 2 * L * A * n * n + 2 * D * V  # linear, causal attention, last logits
    p = rl.prefill(llama, h100, prompt_len=n)
    assert p.flops.m_as("FLOP") == pytest.approx(flops)
    assert p.time.m_as("ms") == pytest.approx(flops / PEAK * 1e3)
    assert p.time.m_as("ms") == pytest.approx(29.3, abs=0.1)
    assert p.bound == "compute"
    # the back-of-envelope 2 x 8.03 B x 2,000 / peak = 32.5 ms is within 11 % of the careful count
    assert 2 * TOTAL * n / PEAK * 1e3 == pytest.approx(p.time.m_as("ms"), rel=0.11)


def test_decode_step_2000_context(llama, h100):
    d = rl.decode_step(llama, h100, context_len=2000)
    # weights except the embedding table + one embedding row + 2,000 tokens of cache read + one written
    nbytes = (P + V * D + D) * 2 + 2001 * KV
    assert d.bytes.m_as("B") == pytest.approx(nbytes)
    assert d.time.m_as("ms") == pytest.approx(nbytes / BW * 1e3)
    assert d.time.m_as("ms") == pytest.approx(4.56, abs=0.01)
    assert d.bound == "memory"
    # memory-bound by about 300x: 15.3 GB / 3.35 TB/s against 16 GFLOP / 989 TFLOP/s
    ratio = d.memory_time.m_as("s") / d.compute_time.m_as("s")
    assert 250 < ratio < 320
    # the back-of-envelope (all 16.06 GB + cache) says 4.9 ms
    assert (16.06e9 + 2000 * KV) / BW * 1e3 == pytest.approx(4.87, abs=0.01)


def test_intensities(llama, h100):
    assert rl.decode_step(llama, h100, 2000).intensity.m_as("FLOP/B") == pytest.approx(1.05, abs=0.02)
    # prefill intensity grows about as the prompt length (2 FLOP per parameter per token / 2 bytes)
    assert rl.prefill(llama, h100, 2000).intensity.m_as("FLOP/B") > 1500


def test_batch_64_shares_the_weight_read(llama, h100):
    one = rl.decode_step(llama, h100, context_len=2000, batch=1)
    many = rl.decode_step(llama, h100, context_len=2000, batch=64)
    nbytes = (P + V * D + 64 * D) * 2 + 64 * 2001 * KV
    assert many.time.m_as("ms") == pytest.approx(nbytes / BW * 1e3)
    assert many.time.m_as("ms") == pytest.approx(9.5, abs=0.1)  # 9.8 ms with all 16.06 GB of weights
    gain = 64 * one.time.m_as("s") / many.time.m_as("s")
    assert 30 < gain < 33  # about 32x, not 64x
    short = 64 * rl.decode_step(llama, h100, 16).time.m_as("s") / rl.decode_step(llama, h100, 16, batch=64).time.m_as("s")
    assert short > 60  # short contexts: nearly 64x


def test_request_2000_300(llama, h100):
    r = rl.request(llama, h100, prompt_len=2000, output_len=300, precision="fp16")
    # 299 decode steps at contexts 2000..2298: memory time is linear, so the mean is at 2149
    step = ((P + V * D + D) * 2 + (2149 + 1) * KV) / BW
    assert r.itl.m_as("s") == pytest.approx(step)
    assert r.ttft.m_as("ms") == pytest.approx(29.3, abs=0.1)
    assert r.e2e.m_as("s") == pytest.approx(r.ttft.m_as("s") + 299 * step)
    assert r.decode_share.m_as("") == pytest.approx(0.979, abs=0.002)  # "about 97 %"
    assert r.prefill_share.m_as("") + r.decode_share.m_as("") == pytest.approx(1)
    assert r.output_throughput.m_as("token/s") == pytest.approx(1 / step)


def test_request_with_efficiency_and_overhead(llama, h100):
    ideal = rl.request(llama, h100, 2000, 300)
    real = rl.request(llama, h100, 2000, 300, mfu=0.5, mbu=0.8, overhead=Q_(1, "ms"))
    assert real.ttft.m_as("s") == pytest.approx(ideal.ttft.m_as("s") / 0.5 + 1e-3)
    assert real.itl.m_as("s") == pytest.approx(ideal.itl.m_as("s") / 0.8 + 1e-3)


def test_memory_budget(llama, h100):
    m = rl.memory_budget(llama, h100, context_len=4096, batch=1, precision="fp16")
    assert m.weights.m_as("B") == pytest.approx(TOTAL * 2)
    assert m.kv.m_as("B") == 4096 * KV
    assert m.fits and m.reserve.m_as("B") == 0 and m.capacity.m_as("GB") == 80
    assert m.max_batch == math.floor((CAP - TOTAL * 2) / (4096 * KV))
    assert m.max_tokens == pytest.approx(488_000, rel=0.001)  # the curriculum's "about 488,000 tokens"
    vllm = rl.memory_budget(llama, h100, context_len=4096, gpu_memory_utilization=0.9)
    assert vllm.reserve.m_as("GB") == pytest.approx(8)
    assert vllm.max_batch == math.floor((0.9 * CAP - TOTAL * 2) / (4096 * KV))
    assert m.max_context == math.floor((CAP - TOTAL * 2) / KV)


def test_t4_cannot_hold_fp16_weights(llama):
    m = rl.memory_budget(llama, "T4", context_len=4096, precision="fp16")
    assert not m.fits and m.max_batch == 0
    with pytest.raises(rl.DoesNotFit, match=r"weights 16.06 GB.*capacity 16 GB"):
        rl.request(llama, "T4", prompt_len=4096, output_len=100)
    r = rl.request(llama, "T4", prompt_len=4096, output_len=100, allow_overflow=True)
    assert r.fits is False or not np.all(r.fits)


def test_sweeps_are_one_call(llama, h100):
    n = np.array([128, 1024, 8192])
    p = rl.prefill(llama, h100, prompt_len=n)
    assert p.time.shape == (3,)
    for i, k in enumerate(n):
        assert p.time[i] == rl.prefill(llama, h100, int(k)).time
    r = rl.request(llama, h100, prompt_len=n, output_len=100)
    for i, k in enumerate(n):
        assert r.itl[i].m_as("s") == pytest.approx(rl.request(llama, h100, int(k), 100).itl.m_as("s"))


def test_moe_decode_reads_routed_experts():
    mixtral = rl.model("Mixtral-8x7B")
    expert = 3 * 4096 * 14336 * 2  # bytes of one expert in one layer, fp16
    one = rl.decode_step(mixtral, "H100", context_len=0, batch=1, allow_overflow=True)
    two = rl.decode_step(mixtral, "H100", context_len=0, batch=2, allow_overflow=True)
    # one token reads its 2 experts a layer; two tokens expect 8 x (1 - (6/8)^2) = 3.5 distinct experts;
    # the second token also reads one more embedding row and writes its K and V
    kv = 2 * 32 * 8 * 128 * 2
    assert two.bytes.m_as("B") - one.bytes.m_as("B") == pytest.approx(32 * 1.5 * expert + 4096 * 2 + kv)
    huge = rl.decode_step(mixtral, "H100", context_len=0, batch=256, allow_overflow=True)
    assert huge.bytes.m_as("B") < mixtral.total_params * 2 + 256 * 4096 * 2 + 1  # never more than all experts


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: rl.prefill("Llama-3-8B", "H100", prompt_len=0), ValueError, "prompt_len must be at least 1"),
        (lambda: rl.prefill("Llama-3-8B", "H100", prompt_len=-5), ValueError, "prompt_len"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", 100, batch=2.5), ValueError, "batch must be a whole"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", float("nan")), ValueError, "context_len must be finite"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", True), TypeError, "context_len must be a whole"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, overhead=1), rl.UnitError, "overhead"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, precision="int4"), rl.UnsupportedPrecision, "no int4"),
        (lambda: rl.request("Llama-9B", "H100", 10, 10), KeyError, "unknown model"),
        (lambda: rl.request("Llama-3-8B", "H1000", 10, 10), KeyError, "unknown hardware"),
        (lambda: rl.memory_budget("Llama-3-8B", "H100", 10, gpu_memory_utilization=0), ValueError, "gpu_memory_utilization"),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_token_quantities_are_accepted_as_lengths(llama, h100):
    assert rl.prefill(llama, h100, Q_(2000, "token")).time == rl.prefill(llama, h100, 2000).time
