"""rooflab.simulate: it prices passes as the library does, agrees with the steady state it refines, queues as
M/D/1 says a single server must, and keeps the laws every run must keep."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import rooflab as rl
from rooflab.simulate import Simulation, _pass_time, _prices, engine, poisson_trace, simulate, trace

MODEL, DEVICE = "Llama-3-8B", "H100"


def prefill_time(prompt_len, efficiency="typical"):
    return rl.prefill(MODEL, DEVICE, prompt_len, efficiency=efficiency).time_si


# -- the prices are the library's -------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8000), st.integers(1, 256), st.integers(0, 6000), st.sampled_from(["ideal", "typical"]),
       st.integers(1, 8))
def test_a_pass_costs_what_prefill_and_decode_step_say(prompt, batch, context, efficiency, width):
    p = _prices(MODEL, DEVICE, "fp16", efficiency, 8193, 0.9)
    alone = _pass_time(p, prompt, 1, p.prefill_compute * prompt**2, p.prefill_memory * prompt)
    assert alone == pytest.approx(prefill_time(prompt, efficiency), rel=1e-9)
    # a decode step (width 1), or speculation's check pass: each sequence adds width tokens, its cache read once
    step = _pass_time(p, batch * width, batch * width, width * p.decode_compute * batch * context,
                      batch * width * p.decode_memory0 + p.decode_memory1 * batch * context)
    expected = rl.decode_step(MODEL, DEVICE, context, batch, efficiency=efficiency, allow_overflow=True,
                              new_tokens=width).time_si
    assert step == pytest.approx(expected, rel=1e-9)


def test_the_pool_is_the_memory_budgets_tokens_in_blocks():
    run = simulate(engine(MODEL, DEVICE, block_size=16), rate=rl.Q_(1, "1/s"), prompt_len=100, output_len=10,
                   requests=3)
    tokens = rl.memory_budget(MODEL, DEVICE, 1, gpu_memory_utilization=0.9).max_tokens
    assert run.kv_blocks == tokens // 16


# -- it agrees with fleet.steady_state --------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [32, 64])
def test_prefill_apart_at_constant_load_matches_the_steady_state(batch):
    """Requests arrive evenly at the rate the steady state of ``batch`` sequences finishes them.  The decode
    batch, the mean step (prefills included) and the throughput agree within 5% (the run's first and last
    300 steps, filling and draining, hold fewer sequences).  TTFT agrees within 20%: the steady state adds half
    an iteration T / 2 of waiting, while an arrival waits only for the rest of the pass under way
    (E[X^2] / 2 E[X] over passes, here less than T / 2), so the simulation lies between the prefill and it."""
    ss = rl.steady_state(MODEL, DEVICE, 2000, 300, batch=batch, gpu_memory_utilization=0.9, efficiency="typical")
    run = simulate(engine(MODEL, DEVICE), rate=rl.Q_(ss.request_rate_si, "1/s"), prompt_len=2000, output_len=300,
                   requests=4000, arrivals="even")
    assert run.mean_batch == pytest.approx(batch, rel=0.05)
    assert run.mean_step.m_as("s") == pytest.approx(ss.itl_si, rel=0.05)
    assert run.output_throughput.m_as("token/s") == pytest.approx(ss.output_throughput.m_as("token/s"), rel=0.05)
    mean_ttft = run.ttft_si.mean()
    assert prefill_time(2000) <= mean_ttft <= ss.ttft_si
    assert mean_ttft == pytest.approx(ss.ttft_si, rel=0.20)
    assert run.preemptions == 0


@pytest.mark.parametrize("batch", [32, 64])
def test_chunked_at_constant_load_matches_the_steady_state(batch):
    """Chunks of k x P tokens per step (k = B / (O - 1) prompts per step) are what the steady state spreads
    evenly: with a budget of B + ceil(k P) tokens the simulation carries the same pass each step.  Step,
    batch, throughput and TTFT ((E[ceil(P / chunk)] + 1/2) x T) within 5%."""
    k = batch / 299
    budget = batch + math.ceil(k * 2000)
    ss = rl.steady_state(MODEL, DEVICE, 2000, 300, batch=batch, prefill="chunked", chunk=budget - batch, efficiency="typical",
                         gpu_memory_utilization=0.9)
    run = simulate(engine(MODEL, DEVICE, prefill="chunked", token_budget=budget),
                   rate=rl.Q_(ss.request_rate_si, "1/s"), prompt_len=2000, output_len=300, requests=4000,
                   arrivals="even")
    assert run.mean_batch == pytest.approx(batch, rel=0.05)
    assert run.mean_step.m_as("s") == pytest.approx(ss.itl_si, rel=0.05)
    assert run.output_throughput.m_as("token/s") == pytest.approx(ss.output_throughput.m_as("token/s"), rel=0.05)
    assert run.ttft_si.mean() == pytest.approx(ss.ttft_si, rel=0.05)


# -- a single server queues as M/D/1 ----------------------------------------------------------------------------

def one_at_a_time(prompt=1000):
    """An engine that serves one prompt per pass and answers with the prefill's token: service time fixed."""
    return engine(MODEL, DEVICE, token_budget=prompt, max_seqs=1)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_a_single_server_with_fixed_service_waits_as_md1_says(rho):
    """Poisson arrivals at rate lambda, service D = the prefill of 1000 tokens, mu = 1 / D: the mean wait is
    W = rho / (2 mu (1 - rho)) (Pollaczek-Khinchine with zero service variance).  Mean of 4 seeds x 20,000
    requests: within 6% at rho 0.5, 10% at rho 0.8 (waits are correlated, more so near capacity)."""
    service = prefill_time(1000)
    lam = rho / service
    waits = [simulate(one_at_a_time(), rate=rl.Q_(lam, "1/s"), prompt_len=1000, output_len=1, requests=20000,
                      seed=seed).queue_si.mean() for seed in range(4)]
    expected = rho / (2 * (1 / service) * (1 - rho))
    assert np.mean(waits) == pytest.approx(expected, rel=0.06 if rho == 0.5 else 0.10)


def test_with_one_prompt_per_pass_ttft_is_the_wait_plus_the_service():
    run = simulate(one_at_a_time(), rate=rl.Q_(20, "1/s"), prompt_len=1000, output_len=1, requests=500)
    np.testing.assert_allclose(run.ttft_si, run.queue_si + prefill_time(1000), rtol=1e-9, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(st.floats(2.0, 30.0), st.floats(1.05, 3.0), st.integers(0, 2**16))
def test_more_load_never_shortens_a_wait_at_one_server(rate, factor, seed):
    """The same seed at a higher rate compresses the same arrivals in time; with a FIFO server and fixed
    service, Lindley's recursion W' = max(0, W + D - gap) is monotone in every gap, so no wait gets shorter
    (and so no percentile)."""
    slow = simulate(one_at_a_time(), rate=rl.Q_(rate, "1/s"), prompt_len=1000, output_len=1, requests=400,
                    seed=seed)
    fast = simulate(one_at_a_time(), rate=rl.Q_(rate * factor, "1/s"), prompt_len=1000, output_len=1,
                    requests=400, seed=seed)
    assert np.all(fast.queue_si >= slow.queue_si - 1e-12)
    assert fast.ttft.p99 >= slow.ttft.p99


# -- laws of every run ---------------------------------------------------------------------------------------------

configs = st.fixed_dictionaries({
    "prefill": st.sampled_from(["separate", "chunked"]),
    "token_budget": st.sampled_from([512, 2048, 8192]),
    "kv_blocks": st.sampled_from([None, 400, 1500]),
    "block_size": st.sampled_from([8, 16, 32]),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, st.floats(1.0, 40.0), st.integers(0, 2**16))
def test_laws_of_a_run(config, rate, seed):
    """Every request is served; queue <= TTFT <= e2e; TTFT + its gaps = e2e; each answer of O tokens has
    O - 1 gaps; no TTFT below its prompt's ideal prefill, no gap below the ideal decode step of one sequence,
    no e2e below the ideal request at batch 1 (the roofline bounds)."""
    e = engine(MODEL, DEVICE, **config)
    prompts, outputs = {200: 2, 1000: 1, 3000: 1}, [2, 20, 100]
    run = simulate(e, rate=rl.Q_(rate, "1/s"), prompt_len=prompts, output_len=outputs, requests=150, seed=seed)
    t = run.trace
    assert run.served == len(t) and np.all(np.isfinite(run.e2e_si))
    assert np.all(run.queue_si >= 0) and np.all(run.queue_si <= run.ttft_si) and np.all(run.ttft_si <= run.e2e_si)
    counts = np.diff(np.append(run.gap_start, len(run.gaps_si)))
    np.testing.assert_array_equal(counts, t.output_lens - 1)
    sums = np.add.reduceat(np.append(run.gaps_si, 0.0), run.gap_start) * (counts > 0)
    np.testing.assert_allclose(run.ttft_si + sums, run.e2e_si, rtol=1e-9)
    bound = rl.prefill(MODEL, DEVICE, t.prompt_lens, efficiency="ideal").time_si
    assert np.all(run.ttft_si >= bound * (1 - 1e-12))
    smallest_step = rl.decode_step(MODEL, DEVICE, 1, 1, efficiency="ideal").time_si
    assert np.all(run.gaps_si >= smallest_step)
    ideal = rl.request(MODEL, DEVICE, t.prompt_lens, t.output_lens, efficiency="ideal").e2e.m_as("s")
    assert np.all(run.e2e_si >= ideal * (1 - 1e-12))


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    e = engine(MODEL, DEVICE, prefill="chunked", draft_model="TinyLlama-1.1B", draft_len=4, acceptance=0.7)
    a, b, c = (simulate(e, rate=rl.Q_(8, "1/s"), prompt_len=[500, 1500], output_len=[50, 200], requests=200,
                        seed=s) for s in (3, 3, 4))
    np.testing.assert_array_equal(a.e2e_si, b.e2e_si)
    np.testing.assert_array_equal(a.gaps_si, b.gaps_si)
    assert not np.array_equal(a.e2e_si, c.e2e_si)


# -- memory, prefix, chunking, speculation, disaggregation -------------------------------------------------------

def test_a_small_pool_preempts_and_still_serves_everyone():
    """120 blocks of 16 tokens = 1,920 tokens: two requests of 500 + 400 tokens fit, a burst of ten does not."""
    burst = trace(rl.Q_(np.zeros(10), "s"), 500, 400)
    run = simulate(engine(MODEL, DEVICE, kv_blocks=120), trace=burst)
    assert run.preemptions > 0 and run.served == 10
    roomy = simulate(engine(MODEL, DEVICE), trace=burst)
    assert roomy.preemptions == 0
    assert run.e2e.p99 > roomy.e2e.p99


def test_a_cached_prefix_is_counted_and_shortens_the_prefill():
    """Every request shares a 1,024-token prefix of its 1,200-token prompt; spaced 1 s apart (no queue), all but
    the first skip it, so their TTFT is the pass over 176 tokens that attend after 1,024: far below 1,200's."""
    spaced = trace(rl.Q_(np.arange(20.0), "s"), 1200, 2, shared_prefix=np.ones(20, bool))
    run = simulate(engine(MODEL, DEVICE, prefix_len=1024, prefix_share=1.0), trace=spaced)
    assert run.prefix_hits == 19 and not run.prefix_hit[0]
    assert run.ttft_si[0] == pytest.approx(prefill_time(1200), rel=1e-9)
    assert np.all(run.ttft_si[1:] < 0.5 * prefill_time(1200))
    off = simulate(engine(MODEL, DEVICE, prefix_len=1024, prefix_share=1.0, prefix_caching=False), trace=spaced)
    assert off.prefix_hits == 0


def test_chunking_bounds_the_gap_a_long_prompt_puts_into_running_streams():
    """Prefill apart, a gap that meets a 4,000-token prompt lasts at least its prefill (~0.1 s typical); chunked
    at 512 tokens, no pass carries more than 512 tokens, so no gap (without pre-emption) exceeds such a pass."""
    load = dict(rate=rl.Q_(4, "1/s"), prompt_len={4000: 1, 200: 3}, output_len=100, requests=300, seed=2)
    apart = simulate(engine(MODEL, DEVICE), **load)
    chunked = simulate(engine(MODEL, DEVICE, prefill="chunked", token_budget=512), **load)
    assert apart.gaps_si.max() >= prefill_time(4000)
    p = _prices(MODEL, DEVICE, "fp16", "typical", 513, 0.9)
    widest = _pass_time(p, 512, 512, p.prefill_compute * 4000**2, p.decode_memory1 * 512 * 4100 + p.prefill_memory
                        * 512 + p.decode_memory0 * 512)
    assert chunked.preemptions == 0 and chunked.gaps_si.max() <= widest
    assert chunked.itl.p99 < apart.itl.p99


def test_speculation_helps_one_stream_and_helps_less_when_the_batch_is_full():
    """At the ideal bound, batch 1 is memory-bound: a step of Llama-3-8B on an H100 reads 16 GB, 4.6 ms, and
    verifying 5 tokens costs about the same; the draft (TinyLlama, 2.2 GB) adds 4 x 0.66 ms.  E[tokens per
    step] = (1 - a^5) / (1 - a) = 3.36 at a = 0.8, so a token costs about (4.6 + 2.6) / 3.36 = 2.1 ms against
    4.6: TPOT falls below 55%.  At a large batch the verify pass's weight matmuls are compute-bound (5x the
    tokens, each cache still read once) and the draft reads every sequence's cache of its own: the gain shrinks.  (At "typical" efficiency each draft pass also pays the 3.7 ms per-pass
    overhead, which eats the gain at batch 1: the notebook shows it.)"""
    spec = dict(draft_model="TinyLlama-1.1B", draft_len=4, acceptance=0.8, efficiency="ideal")
    alone = dict(trace=trace(rl.Q_(np.arange(5) * 100.0, "s"), 500, 300))
    base1, spec1 = (simulate(engine(MODEL, DEVICE, **o), **alone) for o in ({"efficiency": "ideal"}, spec))
    assert spec1.tpot.mean < 0.55 * base1.tpot.mean
    crowd = dict(trace=trace(rl.Q_(np.zeros(256), "s"), 500, 300))
    base_n, spec_n = (simulate(engine(MODEL, DEVICE, **o), **crowd) for o in ({"efficiency": "ideal"}, spec))
    assert spec_n.tpot.mean / base_n.tpot.mean > spec1.tpot.mean / base1.tpot.mean


def test_disaggregated_decode_never_waits_for_a_prefill():
    """With prefill on its own GPU, the decode GPU runs decode steps only: every gap is one decode step (no
    pre-emption here); the first token streams from the prefill GPU (TTFT at least the prefill), the second
    only after the cache's trip over the link (prompt x KV bytes per token / link bandwidth) and a step."""
    load = dict(rate=rl.Q_(4, "1/s"), prompt_len=3000, output_len=100, requests=200, seed=5)
    split = simulate(engine(MODEL, DEVICE, disaggregated=True), **load)
    together = simulate(engine(MODEL, DEVICE), **load)
    assert split.engine.gpus == 2 and split.preemptions == 0
    link = rl.hardware(DEVICE).link_bandwidth_si(2)
    kv = rl.memory_budget(MODEL, DEVICE, 1).kv_per_sequence_token_si
    assert np.all(split.ttft_si >= prefill_time(3000) * (1 - 1e-9))
    first_gaps = split.gaps_si[split.gap_start]
    one_step = rl.decode_step(MODEL, DEVICE, 3000, 1, efficiency="typical").time_si
    assert np.all(first_gaps >= (3000 * kv / link + one_step) * (1 - 1e-9))
    biggest = rl.decode_step(MODEL, DEVICE, 3100, 256, efficiency="typical", allow_overflow=True).time_si
    assert split.gaps_si[split.gaps_si > 0].min() > 0
    decode_gaps = np.concatenate([split.gaps_si[s + 1:s + 99] for s in split.gap_start])
    assert decode_gaps.max() <= biggest
    assert split.itl.p99 < together.itl.p99


def test_goodput_counts_the_requests_that_meet_both_targets():
    run = simulate(engine(MODEL, DEVICE), rate=rl.Q_(6, "1/s"), prompt_len=2000, output_len=200, requests=300)
    ttft_ok = run.ttft_si <= 0.2
    tpot = (run.e2e_si - run.ttft_si) / 199
    both = ttft_ok & (tpot <= 0.03)
    assert run.attainment(rl.Q_(200, "ms"), rl.Q_(30, "ms")) == pytest.approx(both.mean())
    assert run.goodput(rl.Q_(200, "ms"), rl.Q_(30, "ms")).m_as("1/s") == pytest.approx(
        both.sum() / run.span_si)
    assert run.attainment() == 1.0


# -- bad arguments -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, word", [
    ({"prefill": "eager"}, "prefill"),
    ({"token_budget": 0}, "token_budget"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"draft_len": 3}, "draft_model"),
    ({"draft_model": "TinyLlama-1.1B", "draft_len": 2, "acceptance": 1.0}, "acceptance"),
    ({"prefix_share": 0.5}, "prefix_len"),
])
def test_a_bad_engine_is_refused_by_name(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        engine(MODEL, DEVICE, **kwargs)


def test_bad_loads_are_refused_by_name():
    e = engine(MODEL, DEVICE)
    with pytest.raises(ValueError, match="rate"):
        simulate(e, rate=rl.Q_(-1, "1/s"), prompt_len=10, output_len=10)
    with pytest.raises(rl.UnitError):
        simulate(e, rate=rl.Q_(1, "s"), prompt_len=10, output_len=10)
    with pytest.raises(ValueError, match="prompt_len"):
        simulate(e, rate=rl.Q_(1, "1/s"), prompt_len=0, output_len=10)
    with pytest.raises(ValueError, match="give rate"):
        simulate(e, prompt_len=10, output_len=10)
    with pytest.raises(TypeError, match="engine"):
        simulate("H100", rate=rl.Q_(1, "1/s"), prompt_len=10, output_len=10)
    with pytest.raises(ValueError, match="kv_blocks"):
        simulate(engine(MODEL, DEVICE, kv_blocks=10), rate=rl.Q_(1, "1/s"), prompt_len=1000, output_len=10)
    with pytest.raises(ValueError, match="arrival"):
        trace(rl.Q_([2.0, 1.0], "s"), 10, 10)
    with pytest.raises(rl.ContextTooLong):
        simulate(e, rate=rl.Q_(1, "1/s"), prompt_len=9000, output_len=10, requests=2)


def test_results_are_quantities_and_the_record_is_frozen():
    run = simulate(engine(MODEL, DEVICE), rate=rl.Q_(2, "1/s"), prompt_len=500, output_len=50, requests=50)
    assert isinstance(run, Simulation)
    assert run.ttft.p99.check("[time]") and run.output_throughput.m_as("token/s") > 0
    assert run.itl_of(0).m_as("ms").shape == (49,)
    with pytest.raises(AttributeError):
        run.passes = 3
    assert len(poisson_trace(rl.Q_(3, "1/s"), 10, 10, requests=7)) == 7


def test_a_closed_loop_of_one_never_queues_and_serves_one_request_at_a_time():
    """Concurrency 1: each request is sent when the previous finishes, so none waits, each takes its prefill
    plus O - 1 decode steps at batch 1, and the next arrives exactly when the last ends."""
    run = simulate(engine(MODEL, DEVICE), prompt_len=1000, output_len=50, requests=20, concurrency=1)
    assert np.all(run.queue_si == 0)
    alone = rl.request(MODEL, DEVICE, 1000, 50, efficiency="typical")
    np.testing.assert_allclose(run.e2e_si, alone.e2e.m_as("s"), rtol=1e-9)
    finish = run.trace.arrival_si + run.e2e_si
    np.testing.assert_allclose(run.trace.arrival_si[1:], finish[:-1], rtol=1e-12)


def test_a_closed_loop_keeps_little_s_law():
    """C requests always in flight: served per second x mean time in the system = C (Little), up to the
    last requests' drain (C of 2,000)."""
    run = simulate(engine(MODEL, DEVICE), prompt_len=500, output_len=100, requests=2000, concurrency=16)
    rate = run.served / run.span_si
    assert rate * run.e2e_si.mean() == pytest.approx(16, rel=0.02)


def test_every_published_row_names_what_the_simulator_needs_and_its_source():
    from rooflab.simulate import against_benchmark, published_benchmarks

    rows = published_benchmarks()
    assert len(rows) >= 6
    for row in rows:
        rl.model(row.catalogue_model), rl.hardware(row.device)  # both in the catalogue
        assert row.source_url.startswith("https://") and row.engine and row.version
        assert row.load_kind in ("rate", "concurrency") and row.load > 0
        assert row.measured and all(value > 0 for value in row.measured.values())
    first = against_benchmark(rows[0], requests=50)
    assert set(first) == set(rows[0].measured)
    assert all(sim > 0 for sim, _ in first.values())
