"""A service under load (rooflab.fleet): steady states, cost and TP derived by hand here, then laws and errors.

Llama-3-8B on an H100 SXM at fp16 (989.4 TFLOP/s, 3.35 TB/s, 81,559 MiB as nvidia-smi reports); the running
workload is 2,000-token prompts with 300-token answers.  A pass is three operations, each
max(FLOPs / peak, bytes / bandwidth), summed (docs/curriculum.md, "Counting conventions").
"""

import csv
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import rooflab as rl
from rooflab import Q_
from rooflab import calibration, fleet

PEAK, BW = 989.4e12, 3.35e12
CAP = 81_559 * 2**20
L, D, A, V = 32, 4096, 4096, 128256
P = 6_979_588_096  # Llama-3-8B's non-embedding parameters (test_models derives it)
TOTAL = P + 2 * V * D  # 8.03 B parameters
KV = 2 * L * 8 * 128 * 2  # 131,072 B per token


def roof(flops, nbytes, peak=PEAK, bandwidth=BW):
    return max(flops / peak, nbytes / bandwidth)


def decode_by_hand(batch, context):
    """One fp16 decode step of ``batch`` sequences at ``context``: body + attention + head, s."""
    return (roof(batch * 2 * P, (P + batch * D) * 2)
            + roof(batch * 4 * L * A * context, batch * (context + 1) * KV)
            + roof(batch * 2 * D * V, V * D * 2))


def prefill_by_hand(prompts, n):
    """One fp16 prefill pass of ``prompts`` prompts of ``n`` tokens (a fraction of a prompt is allowed), s."""
    tokens = prompts * n
    return (roof(2 * P * tokens, (P + tokens * D) * 2)
            + roof(prompts * 2 * L * A * n * n, tokens * KV)
            + roof(prompts * 2 * D * V, V * D * 2))


# -- derived by hand ----------------------------------------------------------------------------------------

def test_throughput_and_cost_of_the_running_workload_at_two_batches():
    """2,000-token prompts, 300-token answers, prefill apart, ideal: batch 1 and batch 64."""
    n, out = 2000, 300
    context = n + (out - 2) / 2  # 2,149: the mean context a decoding slot sees
    prefill = prefill_by_hand(1, n)  # 28.22 + 1.06 + 0.31 = 29.6 ms, one prompt per pass (k < 1)
    assert prefill * 1e3 == pytest.approx(29.6, abs=0.05)
    price = 3.9492  # USD per GPU-hour (the example table's H100)
    expected = {}
    for batch in (1, 64):
        k = batch / (out - 1)  # requests finishing (and prompts to prefill) per step: 0.00334 and 0.214
        step = decode_by_hand(batch, context) + k * prefill  # the decode step + k prefills of one prompt
        tokens = batch + k  # B decoded tokens + k first tokens from the prefills
        throughput = tokens / step
        expected[batch] = (step, throughput, price / (3600 * throughput / 1e6))
    # batch 1: 4.17 + 0.09 + 0.31 = 4.57 ms of decode + 0.0033 x 29.6 ms = 4.66 ms; 215 token/s; $5.10 a million
    # batch 64: 4.17 + 5.38 + 0.31 = 9.87 ms of decode + 0.214 x 29.6 ms = 16.2 ms; 3,964 token/s; $0.277
    assert [round(expected[1][0] * 1e3, 2), round(expected[1][1]), round(expected[1][2], 2)] == [4.66, 215, 5.1]
    assert [round(expected[64][0] * 1e3, 1), round(expected[64][1]), round(expected[64][2], 3)] == [16.2, 3964, 0.277]
    for batch, (step, throughput, cost) in expected.items():
        s = rl.steady_state("Llama-3-8B", "H100", n, out, batch, efficiency="ideal")
        assert s.itl.m_as("s") == pytest.approx(step, rel=1e-9)
        assert s.output_throughput.m_as("token/s") == pytest.approx(throughput, rel=1e-9)
        assert s.cost_per_million(Q_(price, "USD/h")).m_as("USD/Mtok") == pytest.approx(cost, rel=1e-9)
        # energy bound: 700 W x step / tokens per step
        assert s.energy_per_token.m_as("J/token") == pytest.approx(700 * step / (batch + 1 * batch / (out - 1)))
        assert s.ttft.m_as("s") == pytest.approx(prefill + step / 2)  # its prefill + half a step of waiting
    # batching 64 sequences buys 18.4x the tokens per second and cuts the cost per token as much, not 64x
    assert expected[64][1] / expected[1][1] == pytest.approx(18.4, abs=0.05)


def test_many_prompts_per_pass_and_chunked_prefill():
    """A chatbot (200-token prompts, 50-token answers) at batch 98: k = 2 prompts a step."""
    n, out, batch = 200, 50, 98
    k = batch / (out - 1)  # exactly 2 requests finish per step
    context = n + (out - 2) / 2  # 224
    step = decode_by_hand(batch, context) + prefill_by_hand(2, n)  # the two prompts share one pass
    s = rl.steady_state("Llama-3-8B", "H100", n, out, batch, efficiency="ideal")
    assert s.itl.m_as("s") == pytest.approx(step, rel=1e-9)
    assert s.output_throughput.m_as("token/s") == pytest.approx((batch + k) / step, rel=1e-9)
    assert s.request_rate.m_as("1/s") == pytest.approx(k / step, rel=1e-9)
    # chunked: one pass carries the 98 decode tokens and the 400 prompt tokens
    tokens = batch + k * n
    chunked = (roof(2 * P * tokens, (P + tokens * D) * 2)
               + roof(batch * 4 * L * A * context + k * 2 * L * A * n * n, (batch * (context + 1) + k * n) * KV)
               + roof((batch + k) * 2 * D * V, V * D * 2))
    c = rl.steady_state("Llama-3-8B", "H100", n, out, batch, prefill="chunked", efficiency="ideal")
    assert c.itl.m_as("s") == pytest.approx(chunked, rel=1e-9)
    assert c.ttft.m_as("s") == pytest.approx(1.5 * chunked)  # half a step of waiting, then the step itself
    assert c.itl < s.itl  # one weight read instead of two
    assert rl.steady_state("Llama-3-8B", "H100", n, out, batch, prefill="chunked", chunk=64,
                           efficiency="ideal").ttft.m_as("s") == pytest.approx(4.5 * chunked)  # ceil(200/64) = 4


def test_tensor_parallel_step_of_llama_3_70b_on_two_h100s():
    """Llama-3-70B at fp16, 8 sequences at 2,000 tokens, tp=2 over NVLink 4 (450 GB/s each way)."""
    p70, d70, l70, v70 = 68_452_360_192, 8192, 80, 128256
    kv70 = 2 * l70 * 8 * 128 * 2  # 327,680 B per token, half of it on each GPU
    batch, context, n = 8, 2000, 2
    body = roof(batch * 2 * p70 / n, (p70 + batch * d70) * 2 / n)  # each GPU reads half the weights: 20.4 ms
    attention = roof(batch * 4 * l70 * d70 * context / n, batch * (context + 1) * kv70 / n)  # 0.78 ms
    head = roof(batch * 2 * d70 * v70 / n, v70 * d70 * 2 / n)  # 0.31 ms
    message = batch * d70 * 2  # 131 kB of activations per all-reduce
    allreduce = 2 * (n - 1) / n * message / 450e9  # ring: 2 (N - 1) / N x message / one-way bandwidth
    communication = 2 * l70 * allreduce  # two per layer: 0.047 ms
    assert [round(t * 1e3, 2) for t in (body, attention, head, communication)] == [20.43, 0.78, 0.31, 0.05]
    step = rl.tensor_parallel_step("Llama-3-70B", "H100", context, batch, tp=2)
    assert step.time.m_as("s") == pytest.approx(body + attention + head + communication, rel=1e-9)
    assert step.communication.m_as("s") == pytest.approx(communication, rel=1e-9)
    # typical moves the bytes at its share of the link and adds its fixed cost to each of the 160 all-reduces
    e = rl.efficiency("typical")
    typical = rl.tensor_parallel_step("Llama-3-70B", "H100", context, batch, tp=2, efficiency="typical")
    expected = 2 * l70 * (e.allreduce_latency.m_as("s") + allreduce / e.allreduce_efficiency)
    assert typical.communication.m_as("s") == pytest.approx(expected, rel=1e-9)
    # the speed-up over one (imaginary, larger) H100 is just under 2: the all-reduces are not free
    one = rl.decode_step("Llama-3-70B", "H100", context, batch, allow_overflow=True).time
    assert 1.95 < (one / step.time).m_as("") < 2.0


def test_ring_all_reduce_time_by_hand():
    """A ring of N sends 2 (N - 1) chunks of M / N from each GPU: 1 MiB on two H100s (450 GB/s each way) is one
    message's worth, 1,048,576 / 450e9 = 2.330 µs; 2 MiB on four L40S (32 GB/s each way) is 1.5 of it, 98.304 µs."""
    assert rl.all_reduce_time(Q_(1_048_576, "B"), 2, "H100").m_as("us") == pytest.approx(1_048_576 / 450e9 * 1e6)
    assert rl.all_reduce_time(Q_(2_097_152, "B"), 4, "L40S").m_as("us") == pytest.approx(98.304)
    assert rl.all_reduce_time(Q_(1, "MB"), 1, "H100").m_as("s") == 0  # a group of one sends nothing
    # MI300X: seven Infinity Fabric links of 896 / 7 = 128 GB/s two ways; a group of 4 reaches 3 of them, 192 GB/s
    # one way: 1.5 x 2e6 / 192e9 = 15.625 µs
    assert rl.all_reduce_time(Q_(2, "MB"), 4, "MI300X").m_as("us") == pytest.approx(15.625)
    # typical: the bytes at its share of the link, plus its fixed cost
    e = rl.efficiency("typical")
    typical = rl.all_reduce_time(Q_(1_048_576, "B"), 2, "H100", efficiency="typical").m_as("s")
    assert typical == pytest.approx(e.allreduce_latency.m_as("s") + 1_048_576 / 450e9 / e.allreduce_efficiency)
    # the step's communication is its 2 L all-reduces of B d 16-bit values: Llama-3-70B, batch 8, 80 layers
    step = rl.tensor_parallel_step("Llama-3-70B", "H100", 2000, 8, tp=4)
    one = rl.all_reduce_time(Q_(8 * 8192 * 2, "B"), 4, "H100")
    assert step.communication.m_as("s") == pytest.approx(2 * 80 * one.m_as("s"), rel=1e-9)
    with pytest.raises(ValueError, match="message must not be negative"):
        rl.all_reduce_time(Q_(-1, "B"), 2, "H100")
    with pytest.raises(TypeError, match="message must have the dimension of GB"):
        rl.all_reduce_time(Q_(1, "ms"), 2, "H100")
    with pytest.raises(ValueError, match="gpus must be at least 1"):
        rl.all_reduce_time(Q_(1, "B"), 0, "H100")
    with pytest.raises(ValueError, match="gpus must be a whole number, got 2.5"):
        rl.all_reduce_time(Q_(1, "B"), 2.5, "H100")
    alone = dataclasses.replace(rl.hardware("H100"), interconnect_bandwidth_si=None)  # an H100 with no link
    with pytest.raises(ValueError, match="no GPU-to-GPU interconnect"):
        rl.all_reduce_time(Q_(1, "B"), 2, alone)


def test_money_and_energy_formulas():
    # $3.60 an hour at 1,000 token/s: 3.6 M tokens an hour cost $3.60, so $1 per million
    assert rl.cost_per_million_tokens(Q_(3.6, "USD/h"), Q_(1000, "token/s")).m_as("USD/Mtok") == pytest.approx(1.0)
    # the same price quoted per second ($0.001/s) is the same answer
    assert rl.cost_per_million_tokens(Q_(0.001, "USD/s"), Q_(1000, "token/s")).m_as("USD/Mtok") == pytest.approx(1.0)
    assert rl.energy_per_token(Q_(700, "W"), Q_(3500, "token/s")).m_as("J/token") == pytest.approx(0.2)
    with pytest.raises(rl.UnitError, match="price"):
        rl.cost_per_million_tokens(3.6, Q_(1000, "token/s"))
    with pytest.raises(rl.UnitError, match="throughput"):
        rl.cost_per_million_tokens(Q_(3.6, "USD/h"), Q_(1000, "1/s"))


def test_example_prices_are_dated_and_sourced():
    rows = rl.example_prices()
    assert {"H100-SXM", "A100-80GB", "L40S"} <= {p.device for p in rows}
    for p in rows:
        assert "EXAMPLE" in p.notes and p.source_url.startswith("https://") and p.date[:4] >= "2025"
        assert p.device in rl.HARDWARE and p.usd_per_hour > 0
    # Modal quotes per second: $0.001097 a second is $3.9492 an hour
    h100 = next(p for p in rows if p.device == "H100-SXM" and p.provider == "Modal")
    assert h100.quoted.startswith("$0.001097") and 0.001097 * 3600 == pytest.approx(h100.usd_per_hour)
    assert rl.example_price("h100") == Q_(3.9492, "USD/h")
    with pytest.raises(KeyError, match="Pass your own price"):
        rl.example_price("TPU-v5e")


def test_steady_decode_matches_the_decode_step_at_the_mean_context():
    s = rl.steady_state("Llama-3-8B", "H100", 2000, 300, 64, efficiency="typical")
    d = rl.decode_step("Llama-3-8B", "H100", 2149, 64, efficiency="typical")
    assert s.decode.time == d.time and s.decode.parts["attention"].time == d.parts["attention"].time


def test_workload_distributions():
    w = rl.workload({100: 3, 1000: 1}, [100, 300])
    assert w.mean_prompt_len == 325 and w.mean_output_len == 200 and w.tokens_held == 1300
    # slots weighted by how long they last: (99 x 98 + 299 x 298) / 2 / (99 + 299) / 2 ... E[(O-1)(O-2)] / (2 E[O-1])
    assert w.decode_context == pytest.approx(325 + (99 * 98 + 299 * 298) / 2 / (2 * 199))
    s = rl.steady_state("Llama-3-8B", "H100", {100: 3, 1000: 1}, [100, 300], 32)
    assert s.max_batch == rl.max_concurrency("Llama-3-8B", "H100", {100: 3, 1000: 1}, [100, 300])
    with pytest.raises(ValueError, match="output_len must be at least 2"):
        rl.workload(100, 1)
    with pytest.raises(ValueError, match="positive number"):
        rl.workload({100: -1}, 10)


# -- the frontier and the SLA ----------------------------------------------------------------------------------

def test_frontier_bends_from_memory_to_compute():
    f = rl.frontier("Llama-3-8B", "H100", 2000, 300, efficiency="ideal")
    assert len(f) == f.max_batch == rl.max_concurrency("Llama-3-8B", "H100", 2000, 300) == 200
    # vLLM's 0.9 of the 79.11 GiB a process can allocate: (76.45 GB - 16.06 GB) / (2,300 x 131,072 B) = 200.3;
    # 0.9 of the reported 85.52 GB gives the expert's 202, all of it 230 (what fleet used to size batches at)
    assert math.floor((0.9 * 79.11 * 2**30 - (P + 2 * V * D) * 2) / (2300 * KV)) == 200
    assert math.floor((0.9 * CAP - (P + 2 * V * D) * 2) / (2300 * KV)) == 202
    assert math.floor((CAP - (P + 2 * V * D) * 2) / (2300 * KV)) == 230
    # at the ideal, the body turns compute-bound where B x 2 P / peak reaches (P + B d) x 2 / bandwidth:
    # B = 2 P / (2 P / ridge - 2 d) = 296 > 200, beyond memory at fp16 ...
    assert math.ceil(2 * P / (2 * P * BW / PEAK - 2 * D)) == 296 and np.all(f.bound == "memory")
    # ... but inside it with FP8 weights and caches (507 fit) ...
    f = rl.frontier("Llama-3-8B", "H100", 2000, 300, precision="fp8", efficiency="ideal")
    bent = np.flatnonzero(f.bound == "compute")
    assert bent[0] + 1 == 296 and np.all(f.bound[bent[0]:] == "compute") and np.all(f.bound[:bent[0]] == "memory")
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", 2149, "fp8", efficiency="ideal") == 296
    # ... and at typical efficiency the body bends where B x 2 P / (peak x MFU) reaches (P + B d) x 2 /
    # (bandwidth x MBU), with the preset's 16-bit factors
    e = rl.efficiency("typical")
    bend = math.ceil(2 * P / (2 * P * BW * e.mbu / (PEAK * e.mfu) - 2 * D))
    assert bend == rl.decode_compute_bound_batch("Llama-3-8B", "H100", 2149, "fp16", efficiency="typical")
    f = rl.frontier("Llama-3-8B", "H100", 2000, 300, efficiency="typical")
    assert np.all((f.bound == "compute") == (f.batch >= bend))


def test_best_under_sla_is_the_largest_feasible_batch():
    best = rl.best_under_sla("Llama-3-8B", "H100", 2000, 300, ttft_limit=Q_(500, "ms"), itl_limit=Q_(50, "ms"),
                             efficiency="typical")
    sweep = rl.frontier("Llama-3-8B", "H100", 2000, 300, efficiency="typical")
    ok = sweep.meets(Q_(500, "ms"), Q_(50, "ms"))
    assert best.batch == int(sweep.batch[ok][-1]) and best.itl <= Q_(50, "ms") < sweep.at(best.batch).itl
    with pytest.raises(rl.SLAUnmet, match="batch 1 already gives"):
        rl.best_under_sla("Llama-3-8B", "L4", 2000, 300, ttft_limit=Q_(10, "ms"), itl_limit=Q_(5, "ms"))


# -- errors ----------------------------------------------------------------------------------------------------

def test_batch_beyond_memory_says_how_many_fit():
    with pytest.raises(rl.DoesNotFit, match="at most 200 sequences fit"):
        rl.steady_state("Llama-3-8B", "H100", 2000, 300, 201)
    assert not rl.steady_state("Llama-3-8B", "H100", 2000, 300, 201, allow_overflow=True).fits
    with pytest.raises(rl.DoesNotFit, match="not one sequence fits.*tp"):
        rl.steady_state("Llama-3-70B", "H100", 2000, 300, 1)
    assert rl.steady_state("Llama-3-70B", "H100", 2000, 300, 1, tp=2).fits
    with pytest.raises(ValueError, match="prefill must be one of"):
        rl.steady_state("Llama-3-8B", "H100", 2000, 300, 1, prefill="mixed")
    with pytest.raises(rl.ContextTooLong, match="Llama-3.1-8B"):
        rl.steady_state("Llama-3-8B", "H100", 8000, 300, 1)


def test_energy_needs_a_published_power():
    with pytest.raises(ValueError, match="board power"):
        rl.steady_state("Gemma-2B", "TPU-v5e", 200, 50, 8, "bf16").energy_per_token


# -- laws ---------------------------------------------------------------------------------------------------

MODELS = st.sampled_from(["Llama-3-8B", "Mistral-7B", "Qwen2-7B", "Gemma-2B", "Mixtral-8x7B", "Llama-3-70B"])
DEVICES = st.sampled_from(["A100-80GB", "H100", "H200", "B200", "L40S", "MI300X"])
LENGTH = st.integers(1, 3000)
OUT = st.integers(2, 1000)


def _sweep(model, device, prompt, out, tp, efficiency, mode):
    if rl.max_concurrency(model, device, prompt, out, tp=tp) < 1:
        return None
    return rl.frontier(model, device, prompt, out, tp=tp, efficiency=efficiency, prefill=mode)


@settings(max_examples=40, deadline=None)
@given(MODELS, DEVICES, LENGTH, OUT, st.sampled_from([1, 2, 4]), st.sampled_from(["separate", "chunked"]))
def test_laws_of_the_frontier(model, device, prompt, out, tp, mode):
    f = _sweep(model, device, prompt, out, tp, "ideal", mode)
    if f is None:
        return
    m, d = rl.model(model), rl.hardware(device)
    itl = f.itl.m_as("s")
    throughput = f.output_throughput.m_as("token/s")  # per GPU
    cost = f.cost_per_million(Q_(1, "USD/h")).m_as("USD/Mtok")
    assert np.all(np.diff(itl) >= -1e-15) and np.all(np.diff(f.ttft.m_as("s")) >= -1e-15)  # latency grows with B
    assert np.all(np.diff(cost) <= 1e-12 * cost[:-1])  # cost per token never rises with B (within memory)
    # never above the compute roof: each request does at least 2 P_active (P + O - 1) FLOPs for O tokens
    flops_per_token = 2 * m.active_non_embedding_params * (prompt + out - 1) / out
    assert np.all(throughput * flops_per_token <= d.peak_flops_for("fp16") * (1 + 1e-9))
    # nor above the memory roof: each step reads every GPU's share of the body's weights at least once
    # (an MoE batch reads at least the shared weights)
    weights = m.shared_non_embedding_params * 2 / tp
    assert np.all(throughput * tp <= f.tokens_per_step * tp * d.memory_bandwidth_si / weights * (1 + 1e-9))


@settings(max_examples=25, deadline=None)
@given(MODELS, DEVICES, LENGTH, OUT)
def test_typical_is_slower_than_ideal_and_tp_costs_communication(model, device, prompt, out):
    f = _sweep(model, device, prompt, out, 2, "ideal", "separate")
    if f is None:
        return
    typical = rl.frontier(model, device, prompt, out, tp=2, efficiency="typical")
    assert np.all(typical.itl_si >= f.itl_si) and np.all(typical.throughput_si <= f.throughput_si)
    assert np.all(f.communication_si > 0)
    free = rl.frontier(model, device, prompt, out, tp=2, efficiency="ideal")
    assert np.all(free.itl_si - free.communication_si < free.itl_si)


# -- the calibration table under load ------------------------------------------------------------------------

def test_ideal_is_never_above_a_measurement_under_load():
    rows = calibration.load_measurements()
    assert len(rows) >= 40 and len({r.source_url for r in rows}) >= 2
    for row in rows:
        for mode in ("separate", "chunked"):
            assert calibration.predict_load(row, "ideal", mode) >= row.value, row
    # typical lands within 25 % of most rows (median |error| well under that)
    errors = sorted(abs(calibration.predict_load(r) / r.value - 1) for r in rows)
    assert errors[len(errors) // 2] < 0.15


def test_load_table_columns_and_sources():
    with open(calibration.LOAD_DATA, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert all(r["source_url"].startswith("https://github.com/NVIDIA/TensorRT-LLM/") for r in table)
    assert {r["model"] for r in table} <= set(rl.MODELS) and {r["device"] for r in table} <= set(rl.HARDWARE)
    assert {int(r["tp"]) for r in table} >= {1, 2}


def test_input_and_output_tokens_priced_apart():
    """Price sheets charge prompt and generated tokens apart.  Separate prefill at batch 64 (2,000-token prompts,
    300-token answers, ideal): each step spends k x the one-prompt prefill pass on prompts (k = 64 / 299), so a
    million prompt tokens cost price x prefill pass / 2,000 x 1e6, and a million generated ones price x decode
    step / 64 x 1e6; charged together they add up to the GPU time of a step."""
    n, out, batch = 2000, 300, 64
    k = batch / (out - 1)
    per_second = 3.95 / 3600
    prefill, decode = prefill_by_hand(1, n), decode_by_hand(batch, n + (out - 2) / 2)
    s = rl.steady_state("Llama-3-8B", "H100", n, out, batch, efficiency="ideal")
    price = Q_(3.95, "USD/h")
    assert s.cost_per_million_input(price).m_as("USD/Mtok") == pytest.approx(per_second * prefill / n * 1e6, rel=1e-9)
    assert s.cost_per_million_output(price).m_as("USD/Mtok") == pytest.approx(per_second * decode / batch * 1e6,
                                                                             rel=1e-9)
    assert round(per_second * prefill / n * 1e6, 4) == 0.0162  # 29.6 ms for 2,000 tokens at $3.95 an hour
    # every second of the step is charged once: prompts k x 2,000 tokens, generated ones 64
    charged = (s.cost_per_million_input(price).m_as("USD/Mtok") * k * n
               + s.cost_per_million_output(price).m_as("USD/Mtok") * batch) / 1e6
    assert charged == pytest.approx(per_second * s.itl.m_as("s"), rel=1e-9)
    # chunked: the merged pass is shared out the same way, and still charged once
    c = rl.steady_state("Llama-3-8B", "H100", n, out, batch, prefill="chunked", efficiency="ideal")
    charged = (c.cost_per_million_input(price).m_as("USD/Mtok") * k * n
               + c.cost_per_million_output(price).m_as("USD/Mtok") * batch) / 1e6
    assert charged == pytest.approx(per_second * c.itl.m_as("s"), rel=1e-9)
