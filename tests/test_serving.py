"""Prefill, decode, requests and memory against the curriculum's figures, derived by hand here.

Llama-3-8B on an H100 SXM at fp16: peak 989.4 TFLOP/s, 3.35 TB/s, 81,559 MiB as nvidia-smi reports.
A pass is three operations run one after the other, each max(FLOPs / peak, bytes / bandwidth), summed
(docs/curriculum.md, "Counting conventions").
"""

import math

import numpy as np
import pytest

import rooflab as rl
from rooflab import Q_

PEAK, BW = 989.4e12, 3.35e12
CAP = 81_559 * 2**20  # bytes nvidia-smi reports for an H100 SXM
USABLE = 79.11 * 2**30  # bytes a process can allocate on it (PyTorch's total capacity, vllm-project/vllm #27508)
L, D, A, V = 32, 4096, 4096, 128256
P = 6_979_588_096  # non-embedding parameters (test_models derives it)
TOTAL = P + 2 * V * D
KV = 2 * L * 8 * 128 * 2  # bytes per token


def roof(flops, nbytes, peak=PEAK, bandwidth=BW):
    return max(flops / peak, nbytes / bandwidth)


def decode_by_hand(context, batch=1):
    """(body, attention, head) times of one fp16 decode step, s."""
    body = roof(batch * 2 * P, (P + batch * D) * 2)  # weights read once, one embedding row per sequence
    attention = roof(batch * 4 * L * A * context, batch * (context + 1) * KV)  # cache read, new K and V written
    head = roof(batch * 2 * D * V, V * D * 2)
    return body, attention, head


@pytest.fixture
def llama():
    return rl.model("Llama-3-8B")


@pytest.fixture
def h100():
    return rl.hardware("H100")


def test_prefill_2000_tokens(llama, h100):
    n = 2000
    body = roof(2 * P * n, (P + n * D) * 2)  # 28.2 ms, compute-bound
    attention = roof(2 * L * A * n * n, n * KV)  # 1.06 ms of causal QK^T and AV; K and V written
    head = roof(2 * D * V, V * D * 2)  # 0.31 ms to read the head for the last token's logits
    assert [round(t * 1e3, 2) for t in (body, attention, head)] == [28.22, 1.06, 0.31]
    p = rl.prefill(llama, h100, prompt_len=n)
    assert p.time.m_as("s") == pytest.approx(body + attention + head)
    assert p.time.m_as("ms") == pytest.approx(29.6, abs=0.05)  # docs/curriculum.md: 28.2 + 1.06 + 0.31 = 29.6 ms
    assert p.flops.m_as("FLOP") == pytest.approx(2 * P * n + 2 * L * A * n * n + 2 * D * V)
    assert {k: c.bound for k, c in p.parts.items()} == {"body": "compute", "attention": "compute", "head": "memory"}
    assert p.bound == "compute" and p.dominant == "body"
    # the single max over the summed FLOPs and bytes says less: 29.3 ms
    assert p.one_operation_time.m_as("ms") == pytest.approx(29.28, abs=0.01)
    # the back-of-envelope 2 x 8.03 B x 2,000 / peak = 32.5 ms is within 10 % of the careful count
    assert 2 * TOTAL * n / PEAK == pytest.approx(p.time.m_as("s"), rel=0.10)


def test_decode_step_2000_context(llama, h100):
    body, attention, head = decode_by_hand(2000)
    assert [round(t * 1e3, 2) for t in (body, attention, head)] == [4.17, 0.08, 0.31]
    d = rl.decode_step(llama, h100, context_len=2000)
    assert {k: c.time.m_as("s") for k, c in d.parts.items()} == pytest.approx(
        {"body": body, "attention": attention, "head": head})
    assert d.time.m_as("ms") == pytest.approx(4.56, abs=0.005)  # docs/curriculum.md: 4.17 + 0.08 + 0.31 = 4.56 ms
    assert d.bound == "memory" and d.dominant == "body"
    # memory-bound by about 300x: 15.3 GB / 3.35 TB/s against 16 GFLOP / 989 TFLOP/s
    ratio = d.memory_time.m_as("s") / d.compute_time.m_as("s")
    assert 250 < ratio < 320
    # the back-of-envelope (all 16.06 GB + cache) says 4.9 ms
    assert (16.06e9 + 2000 * KV) / BW * 1e3 == pytest.approx(4.87, abs=0.01)


def test_intensities(llama, h100):
    assert rl.decode_step(llama, h100, 2000).intensity.m_as("FLOP/B") == pytest.approx(1.05, abs=0.02)
    # prefill intensity grows about as the prompt length (2 FLOP per parameter per token / 2 bytes)
    assert rl.prefill(llama, h100, 2000).intensity.m_as("FLOP/B") > 1500
    # attention over the cache: 4 L A c FLOPs for c x 2 L kv_width x 2 bytes, heads / kv_heads = 4 FLOP/B
    attention = rl.decode_step(llama, h100, 4000).parts["attention"]
    assert attention.intensity.m_as("FLOP/B") == pytest.approx(4, rel=0.001)


def test_batch_64_shares_the_weight_read(llama, h100):
    body, attention, head = decode_by_hand(2000, batch=64)
    assert [round(t * 1e3, 2) for t in (body, attention, head)] == [4.17, 5.01, 0.31]
    one = rl.decode_step(llama, h100, context_len=2000, batch=1)
    many = rl.decode_step(llama, h100, context_len=2000, batch=64)
    assert many.time.m_as("s") == pytest.approx(body + attention + head)
    assert many.time.m_as("ms") == pytest.approx(9.49, abs=0.005)  # docs/curriculum.md: 4.17 + 5.01 + 0.31 = 9.49 ms
    assert many.dominant == "attention"
    gain = 64 * one.time.m_as("s") / many.time.m_as("s")
    assert 30 < gain < 33  # about 32x, not 64x
    short = 64 * rl.decode_step(llama, h100, 16).time.m_as("s") / rl.decode_step(llama, h100, 16, batch=64).time.m_as("s")
    assert short > 60  # short contexts: nearly 64x


def test_large_batch_is_priced_per_operation(llama, h100):
    body, attention, head = decode_by_hand(300, batch=1024)
    assert [round(t * 1e3, 1) for t in (body, attention, head)] == [14.4, 12.1, 1.1]
    assert body == 1024 * 2 * P / PEAK  # the weight matmuls are compute-bound at batch 1,024
    d = rl.decode_step(llama, h100, context_len=300, batch=1024)
    assert d.time.m_as("ms") == pytest.approx((body + attention + head) * 1e3)
    assert d.time.m_as("ms") == pytest.approx(27.6, abs=0.05)  # docs/curriculum.md: 14.4 + 12.1 + 1.1 = 27.6 ms
    assert d.parts["body"].bound == "compute" and d.parts["attention"].bound == "memory"
    # a single max over the sums would say 16.5 ms
    flops = 1024 * (2 * P + 4 * L * A * 300 + 2 * D * V)
    nbytes = (P + 1024 * D) * 2 + 1024 * 301 * KV + V * D * 2
    assert d.one_operation_time.m_as("ms") == pytest.approx(max(flops / PEAK, nbytes / BW) * 1e3)
    assert d.one_operation_time.m_as("ms") == pytest.approx(16.5, abs=0.05)
    # the case: batch 1,300 at context 300 (it fits) is 35.0 ms, not 19.9 ms
    big = rl.decode_step(llama, h100, context_len=300, batch=1300)
    assert big.time.m_as("ms") == pytest.approx(sum(decode_by_hand(300, 1300)) * 1e3)
    assert round(big.time.m_as("ms"), 1) == 35.0 and round(big.one_operation_time.m_as("ms"), 1) == 19.9


def test_check_pass_reads_each_cache_once(llama, h100):
    """Speculation's check pass at batch 256, context 2,000, k = 4 drafts: each sequence adds 5 tokens.  Body and
    head work on 1,280 tokens (compute-bound: 1,280 x 2 P / 989.4 TFLOP/s = 18.06 ms; 1,280 x 2 d V = 1.36 ms);
    attention does 1,280 tokens' FLOPs (1.36 ms) but reads each of the 256 caches once and writes 5 new K, V:
    256 x 2,005 x 131,072 B / 3.35 TB/s = 20.08 ms.  A decode step of 1,280 sequences would read 5x the cache."""
    tokens = 256 * 5
    body = roof(tokens * 2 * P, (P + tokens * D) * 2)
    attention = roof(tokens * 4 * L * A * 2000, 256 * (2000 + 5) * KV)
    head = roof(tokens * 2 * D * V, V * D * 2)
    assert [round(t * 1e3, 2) for t in (body, attention, head)] == [18.06, 20.08, 1.36]
    check = rl.decode_step(llama, h100, 2000, 256, new_tokens=5, allow_overflow=True)
    assert {k: c.time.m_as("s") for k, c in check.parts.items()} == pytest.approx(
        {"body": body, "attention": attention, "head": head})
    assert check.time.m_as("ms") == pytest.approx(39.50, abs=0.005)
    wide = rl.decode_step(llama, h100, 2000, tokens, allow_overflow=True)
    assert wide.parts["attention"].bytes.m_as("B") == pytest.approx(tokens * 2001 * KV)
    assert wide.time > 2 * check.time  # 100 ms of it reading caches five times over
    # one new token is the plain decode step
    assert rl.decode_step(llama, h100, 2000, 8, new_tokens=1).time == rl.decode_step(llama, h100, 2000, 8).time
    with pytest.raises(ValueError, match="new_tokens"):
        rl.decode_step(llama, h100, 2000, new_tokens=0)
    with pytest.raises(rl.ContextTooLong):
        rl.decode_step(llama, h100, 8190, new_tokens=5)


def test_request_2000_300(llama, h100):
    r = rl.request(llama, h100, prompt_len=2000, output_len=300, precision="fp16")
    # 299 decode steps at contexts 2000..2298, all memory-bound: memory time is linear, so the mean is at 2149
    step = ((P + D) * 2 + V * D * 2 + (2149 + 1) * KV) / BW
    assert r.itl.m_as("s") == pytest.approx(step)
    assert r.ttft.m_as("ms") == pytest.approx(29.6, abs=0.05)
    assert r.e2e.m_as("s") == pytest.approx(r.ttft.m_as("s") + 299 * step)
    assert r.decode_share.m_as("") == pytest.approx(0.979, abs=0.002)  # "about 97 %"
    assert r.prefill_share.m_as("") + r.decode_share.m_as("") == pytest.approx(1)
    assert r.output_throughput.m_as("token/s") == pytest.approx(1 / step)
    assert r.request_throughput.m_as("token/s") == pytest.approx(300 / r.e2e.m_as("s"))


def test_request_with_efficiency_and_overhead(llama, h100):
    real = rl.request(llama, h100, 2000, 300, mfu=0.5, mbu=0.8, overhead=Q_(1, "ms"))
    n = 2000
    ttft = (max(2 * P * n / (0.5 * PEAK), (P + n * D) * 2 / (0.8 * BW))
            + max(2 * L * A * n * n / (0.5 * PEAK), n * KV / (0.8 * BW))
            + max(2 * D * V / (0.5 * PEAK), V * D * 2 / (0.8 * BW)) + 1e-3)
    assert real.ttft.m_as("s") == pytest.approx(ttft)
    step = ((P + D) * 2 + V * D * 2 + (2149 + 1) * KV) / (0.8 * BW) + 1e-3  # still memory-bound everywhere
    assert real.itl.m_as("s") == pytest.approx(step)


def test_presets_and_explicit_factors(llama, h100):
    typical = rl.efficiency("typical")
    assert rl.prefill(llama, h100, 2000, efficiency="typical").time == rl.prefill(
        llama, h100, 2000, mfu=typical.mfu, mbu=typical.mbu, overhead=typical.overhead).time
    # an explicit factor overrides the preset's
    mixed = rl.decode_step(llama, h100, 2000, efficiency="typical", mbu=1.0)
    body, attention, head = decode_by_hand(2000)
    assert mixed.time.m_as("s") == pytest.approx(body + attention + head + typical.overhead.m_as("s"))
    assert rl.decode_step(llama, h100, 2000, efficiency=rl.efficiency("ideal")).time.m_as("s") == pytest.approx(
        body + attention + head)


def test_memory_budget(llama, h100):
    weights = TOTAL * 2
    m = rl.memory_budget(llama, h100, context_len=4096, batch=1, precision="fp16")
    assert m.weights.m_as("B") == pytest.approx(weights)
    assert m.kv.m_as("B") == 4096 * KV
    assert m.capacity.m_as("B") == pytest.approx(CAP) and m.allocatable.m_as("B") == pytest.approx(USABLE)
    # vLLM's 0.9 of what a process can allocate, by default: 0.9 x 84.94 GB = 76.45 GB for weights and cache
    assert m.fits and m.reserve.m_as("B") == pytest.approx(0.1 * USABLE)
    assert m.usable.m_as("GB") == pytest.approx(76.45, abs=0.005)
    assert m.max_batch == math.floor((0.9 * USABLE - weights) / (4096 * KV))
    assert m.max_tokens == math.floor((0.9 * USABLE - weights) / KV) == 460_730  # 60.39e9 / 131,072
    assert m.max_context == math.floor((0.9 * USABLE - weights) / KV)
    everything = rl.memory_budget(llama, h100, context_len=4096, gpu_memory_utilization=1.0)
    assert everything.reserve.m_as("B") == 0 and everything.usable.m_as("GB") == pytest.approx(84.94, abs=0.005)
    assert everything.max_batch == math.floor((USABLE - weights) / (4096 * KV))
    # activations come out of the utilised part, as vLLM profiles them
    workspace = rl.memory_budget(llama, h100, 4096, workspace=Q_(2, "GB"))
    assert workspace.max_batch == math.floor((0.9 * USABLE - 2e9 - weights) / (4096 * KV))


def test_largest_batch_at_2000_tokens(llama, h100):
    # (0.9 x 79.11 GiB - 16.06e9) / (2,000 x 131,072) = 230.4: 230 sequences; 264 at the whole reported
    # 81,559 MiB, 243 at the label's 80e9 bytes
    by_hand = math.floor((0.9 * 79.11 * 2**30 - TOTAL * 2) / (2000 * KV))
    assert by_hand == 230
    assert math.floor((CAP - TOTAL * 2) / (2000 * KV)) == 264 and math.floor((80e9 - TOTAL * 2) / (2000 * KV)) == 243
    assert rl.memory_budget(llama, h100, context_len=2000).max_batch == by_hand


def test_t4_cannot_hold_fp16_weights(llama):
    """16.06 GB of weights against the 14.74 GiB = 15.83 GB a process can allocate on a T4 (0.9 of it, 14.24 GB,
    for an engine): it cannot even load, so every function that prices it raises, whatever the context."""
    assert TOTAL * 2 / 1e9 == pytest.approx(16.06, abs=0.005) and 14.74 * 2**30 / 1e9 == pytest.approx(15.83, abs=0.005)
    for call in (lambda: rl.request(llama, "T4", prompt_len=16, output_len=2),
                 lambda: rl.prefill(llama, "T4", 1), lambda: rl.decode_step(llama, "T4", 1),
                 lambda: rl.steady_state(llama, "T4", 16, 2, 1), lambda: rl.max_concurrency(llama, "T4", 16, 2) or
                 rl.frontier(llama, "T4", 16, 2)):
        with pytest.raises(rl.DoesNotFit, match=r"16.06 GB of weights.*T4.*14.74 GiB.*do not fit|not one sequence"):
            call()
    # the budget answers the question rather than raising: it does not fit, and no sequence does
    m = rl.memory_budget(llama, "T4", context_len=1, precision="fp16")
    assert not m.fits and m.max_batch == 0 and m.max_tokens == 0
    r = rl.request(llama, "T4", prompt_len=4096, output_len=100, allow_overflow=True)
    assert r.fits is False or not np.all(r.fits)
    assert "DOES NOT FIT" in repr(r)
    # in 8 bits it loads, with 14.24 GB less the weights = 6.22 GB for the cache
    assert rl.memory_budget(llama, "T4", context_len=4096, precision="int8").fits


def test_int4_as_shipped(llama, h100):
    # body in INT4 with an FP16 scale per 128 weights (4.125 bits), embedding and head kept in FP16
    by_hand = P * 4.125 / 8 + 2 * V * D * 2
    assert by_hand / 1e9 == pytest.approx(5.70, abs=0.005)
    assert llama.weight_bytes(rl.Precision(weights="int4", group_size=128)).m_as("B") == pytest.approx(by_hand)
    quantized = rl.Precision(weights="int4", group_size=128, quantize_embeddings=True)
    assert llama.weight_bytes(quantized).m_as("GB") == pytest.approx(TOTAL * 4.125 / 8 / 1e9)  # 4.14 GB
    # batch-1 decode at a short context: (15.01 GB) / (3.60 + 1.05 GB) = 3.2x, not 16 / 4.125 = 3.9x
    fp16 = rl.decode_step(llama, h100, 16).time.m_as("s")
    int4 = rl.decode_step(llama, h100, 16, precision="int4-g128").time.m_as("s")
    body, head = (P + D) * 2, V * D * 2
    assert int4 == pytest.approx((P * 4.125 / 8 + D * 2 + head + 17 * KV) / BW)
    assert fp16 / int4 == pytest.approx((body + head + 17 * KV) / (P * 4.125 / 8 + D * 2 + head + 17 * KV))
    assert round(fp16 / int4, 1) == 3.2


def test_context_beyond_the_model_is_an_error(llama, h100):
    with pytest.raises(rl.ContextTooLong, match=r"16,000 tokens.*maximum context is 8,192.*Llama-3.1-8B has the same"):
        rl.prefill(llama, h100, prompt_len=16_000)
    with pytest.raises(rl.ContextTooLong, match="Llama-3.1-8B"):
        rl.request(llama, h100, prompt_len=8000, output_len=500)
    rl.request(llama, h100, prompt_len=8000, output_len=193)  # 8,000 + 193 - 1 = 8,192 positions: fits
    with pytest.raises(rl.ContextTooLong):
        rl.decode_step(llama, h100, context_len=8192)
    long = rl.prefill("Llama-3.1-8B", h100, prompt_len=16_000)
    assert long.time.m_as("ms") > rl.prefill(llama, h100, 8000).time.m_as("ms")


def test_sweeps_are_one_call(llama, h100):
    n = np.array([128, 1024, 8000])
    p = rl.prefill(llama, h100, prompt_len=n)
    assert p.time.shape == (3,) and p.bound.shape == (3,) and p.dominant.shape == (3,)
    for i, k in enumerate(n):
        assert p.time[i] == rl.prefill(llama, h100, int(k)).time
        assert p.parts["attention"].time[i] == rl.prefill(llama, h100, int(k)).parts["attention"].time
    r = rl.request(llama, h100, prompt_len=n, output_len=100)
    for i, k in enumerate(n):
        assert r.itl[i].m_as("s") == pytest.approx(rl.request(llama, h100, int(k), 100).itl.m_as("s"))
    swept = rl.decode_step(llama, h100, 2000, batch=np.array([64, 300]), allow_overflow=True)
    assert list(swept.fits) == [True, False]


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
    assert huge.bytes.m_as("B") < mixtral.total_params * 2 + 256 * 4096 * 2 + 256 * kv + 1  # never more than all experts


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: rl.prefill("Llama-3-8B", "H100", prompt_len=0), ValueError, "prompt_len must be at least 1"),
        (lambda: rl.prefill("Llama-3-8B", "H100", prompt_len=-5), ValueError, "prompt_len"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", 100, batch=2.5), ValueError, "batch must be a whole"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", float("nan")), ValueError, "context_len must be finite"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", True), TypeError, "context_len must be a whole"),
        (lambda: rl.decode_step("Llama-3-8B", "H100", np.arange(5, 5)), ValueError, "context_len is an empty array"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, overhead=1), rl.UnitError, "overhead"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, overhead=Q_(-1, "ms")), ValueError, "overhead must not"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, precision="int4"), rl.UnsupportedPrecision, "no int4"),
        (lambda: rl.request("Llama-9B", "H100", 10, 10), KeyError, "unknown model"),
        (lambda: rl.request("Llama-3-8B", "H1000", 10, 10), KeyError, "unknown hardware"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, efficiency="typicall"), KeyError, "unknown efficiency"),
        (lambda: rl.request("Llama-3-8B", "H100", 10, 10, mfu=0), ValueError, "mfu must be in"),
        (lambda: rl.memory_budget("Llama-3-8B", "H100", 10, gpu_memory_utilization=0), ValueError, "gpu_memory_utilization"),
        (lambda: rl.memory_budget("Llama-3-8B", "H100", 9000), rl.ContextTooLong, "Llama-3.1-8B"),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_token_quantities_are_accepted_as_lengths(llama, h100):
    assert rl.prefill(llama, h100, Q_(2000, "token")).time == rl.prefill(llama, h100, 2000).time
