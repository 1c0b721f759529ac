"""A discrete-event simulation of one serving engine: requests arrive, queue, share steps and finish.

:mod:`rooflab.fleet` gives the steady state: B sequences always decoding, a mean step, no queue.  This module
follows every request through an engine the way vLLM or SGLang schedule them, so that the *distribution* of
latencies appears: queueing as the load nears capacity, prefills stalling the streams, pre-emption when the
KV cache runs out.

The engine, step by step (one step = one forward pass, priced when it starts):

- **Arrivals**: Poisson at a rate, evenly spaced, or a trace; prompt and answer lengths drawn from given
  distributions (a number, a list of samples, or a {length: weight} mapping).
- **Memory**: the KV cache is paged in blocks of ``block_size`` tokens, as many as fit in
  ``gpu_memory_utilization`` x capacity after the weights (``rooflab.memory_budget(...).max_tokens``).  A
  request gets blocks for its prompt when admitted, and one more each time its cache crosses a block.  When a
  decode step needs more blocks than are free, the most recently admitted sequence is pre-empted: its blocks are
  freed and it goes back to the head of the queue, to be prefilled again over its prompt and the tokens it had
  made (recompute, vLLM's default).
- **Scheduling** under a token budget (``max_num_batched_tokens``) and at most ``max_seqs`` sequences:
  ``prefill="separate"`` (vLLM V0): when prompts wait and fit, the step is a prefill of as many as fit in the
  budget, and every running stream waits for it; otherwise a decode step of all running sequences.
  ``prefill="chunked"`` (Sarathi-Serve, vLLM V1): each step carries every running sequence's next token, then
  fills the rest of the budget with prompt chunks, first come first served.
- **Prefix caching**: a share of requests starts with the same ``prefix_len``-token system prompt; once one of
  them has been prefilled, its whole blocks stay cached and later ones skip them (a prefix hit).
- **Speculative decoding**: a draft model proposes ``draft_len`` tokens per sequence (``draft_len`` decode steps
  of the draft model), the target verifies them in one pass of ``draft_len + 1`` tokens per sequence; each draft
  token is accepted with probability ``acceptance`` until the first rejection, plus one token from the target.
- **Disaggregation**: prompts are prefilled on a GPU of their own, first come first served in batches under the
  token budget; the cache then crosses a link to the decode GPU (prompt x KV bytes per token / link bandwidth).

Each pass is priced with the library's per-operation roofline at the chosen efficiency, as :mod:`rooflab.fleet`
prices it: body max(FLOPs/(peak x MFU), bytes/(bandwidth x MBU)) over all the pass's tokens, attention over the
decode contexts and the prompt chunks, head over the tokens that get logits, plus one overhead.  The prices come
from :func:`rooflab.decode_step` and :func:`rooflab.prefill` (a table over the pass's token count, and the
per-token coefficients of attention and head), so the simulation prices exactly what the library prices.

>>> import rooflab as rl
>>> from rooflab.simulate import engine, simulate
>>> e = engine("Llama-3-8B", "H100")
>>> run = simulate(e, rate=rl.Q_(5, "1/s"), prompt_len=2000, output_len=300, requests=300, seed=1)
>>> run.ttft.p50 < run.ttft.p99, run.served
(True, 300)
"""

from __future__ import annotations

import csv
import math
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pint

from .units import Q_, quantity, rounded, to_si
from .validation import fraction, lengths

__all__ = ["Engine", "engine", "Trace", "trace", "poisson_trace", "simulate", "Simulation", "Percentiles",
           "Benchmark", "published_benchmarks", "against_benchmark", "BENCHMARKS"]

_MODES = ("separate", "chunked")


# -- the engine's configuration ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Engine:
    """One serving engine's configuration (make it with :func:`engine`).  ``*_si`` fields are SI floats."""

    model: str
    hardware: str
    precision: str = "fp16"
    efficiency: str = "typical"
    prefill: str = "separate"
    token_budget: int = 8192
    max_seqs: int = 256
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    kv_blocks: int | None = None
    prefix_len: int = 0
    prefix_share: float = 0.0
    prefix_caching: bool = True
    draft_model: str | None = None
    draft_len: int = 0
    acceptance: float = 0.0
    disaggregated: bool = False
    kv_link_si: float = 0.0  # B/s between the prefill and the decode GPU

    @property
    def gpus(self) -> int:
        """GPUs the engine occupies: 2 when prefill and decode run apart, else 1."""
        return 2 if self.disaggregated else 1

    @property
    def kv_link(self) -> pint.Quantity:
        """Bandwidth that carries a prefilled cache to the decode GPU, GB/s."""
        return Q_(self.kv_link_si / 1e9, "GB/s")


def engine(
    model: str,
    hardware: str,
    precision: str = "fp16",
    efficiency: str = "typical",
    prefill: str = "separate",
    token_budget: int = 8192,
    max_seqs: int = 256,
    block_size: int = 16,
    gpu_memory_utilization: float = 0.9,
    kv_blocks: int | None = None,
    prefix_len: int = 0,
    prefix_share: float = 0.0,
    prefix_caching: bool = True,
    draft_model: str | None = None,
    draft_len: int = 0,
    acceptance: float = 0.0,
    disaggregated: bool = False,
    kv_link: pint.Quantity | None = None,
) -> Engine:
    """Return a checked Engine.  ``model``, ``hardware`` and ``draft_model`` are catalogue names or objects;
    ``kv_blocks`` overrides the pool the memory would give (to study pre-emption); ``kv_link`` (a bandwidth) is
    the link a disaggregated prefill sends its cache over (default: the device's GPU-to-GPU link)."""
    from .hardware import hardware as _hardware
    from .models import model as _model

    name = _model(model).name
    device = _hardware(hardware)
    if prefill not in _MODES:
        raise ValueError(f"prefill must be one of {', '.join(map(repr, _MODES))}, got {prefill!r}")
    draft = None
    if draft_model is not None:
        draft = _model(draft_model).name
        if lengths(draft_len, "draft_len") < 1:
            raise ValueError("draft_len must be at least 1 with a draft_model")
        acceptance = fraction(acceptance, "acceptance") if acceptance != 0 else 0.0
        if not 0 <= acceptance < 1:
            raise ValueError(f"acceptance must be in [0, 1), got {acceptance}")
    elif draft_len:
        raise ValueError("draft_len needs a draft_model (the small model that proposes the tokens)")
    if prefix_share:
        prefix_share = fraction(prefix_share, "prefix_share")
    if prefix_share and lengths(prefix_len, "prefix_len") < 1:
        raise ValueError("prefix_share needs prefix_len, the shared prefix's length in tokens")
    link = device.link_bandwidth_si(2) if kv_link is None else to_si(kv_link, "bandwidth", "kv_link")
    if disaggregated and not link > 0:
        raise ValueError(f"kv_link must be a positive bandwidth, got {kv_link}")
    return Engine(
        model=name, hardware=device.name, precision=str(precision), efficiency=str(efficiency), prefill=prefill,
        token_budget=lengths(token_budget, "token_budget"), max_seqs=lengths(max_seqs, "max_seqs"),
        block_size=lengths(block_size, "block_size"),
        gpu_memory_utilization=fraction(gpu_memory_utilization, "gpu_memory_utilization"),
        kv_blocks=None if kv_blocks is None else lengths(kv_blocks, "kv_blocks"),
        prefix_len=lengths(prefix_len, "prefix_len", minimum=0), prefix_share=float(prefix_share),
        prefix_caching=bool(prefix_caching), draft_model=draft, draft_len=int(draft_len),
        acceptance=float(acceptance), disaggregated=bool(disaggregated), kv_link_si=float(link),
    )


# -- prices of one pass, from the library's public functions --------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Prices:
    """A pass's time in plain floats: body[tokens] + max(attention compute, memory) + head + overhead, s."""

    body: tuple[float, ...]  # s, body time of a pass over t tokens, index t (plain floats: read every pass)
    body_slope: float  # s per token past the table (the compute-bound slope)
    head_compute: float  # s per token that gets logits
    head_memory: float  # s per pass (the head's weights)
    decode_compute: float  # s of attention compute per cached token a decoding sequence attends over
    decode_memory0: float  # s per decoding sequence (its new K and V)
    decode_memory1: float  # s per cached token read
    prefill_compute: float  # s per (token^2) of causal attention: a chunk from a to b costs (b^2 - a^2) x this
    prefill_memory: float  # s per prompt token written
    overhead: float  # s per pass
    kv_bytes_per_token: float  # B
    kv_tokens: int  # tokens of cache that fit


@lru_cache(maxsize=32)
def _prices(model: str, hardware: str, precision: str, efficiency: str, table: int, utilization: float) -> _Prices:
    """Price coefficients of one model on one device from a few vectorised calls of the public functions."""
    from .serving import decode_step, memory_budget, prefill

    def compute(part):
        return part.compute_time_si / part.mfu

    def memory(part):
        return part.memory_time_si / part.mbu

    sweep = decode_step(model, hardware, 0, batch=np.arange(1, table + 1), precision=precision,
                        efficiency=efficiency, allow_overflow=True).parts["body"]
    body = np.concatenate([[0.0], np.maximum(compute(sweep), memory(sweep))])
    slope = float(compute(sweep)[-1] - compute(sweep)[-2]) if table > 1 else float(compute(sweep)[0])
    span = 1024
    one, two, far = (decode_step(model, hardware, c, batch=b, precision=precision, efficiency=efficiency,
                                 allow_overflow=True) for c, b in ((0, 1), (0, 2), (span, 1)))
    pre = prefill(model, hardware, span, precision=precision, efficiency=efficiency,
                  allow_overflow=True).parts["attention"]
    head1, head2 = one.parts["head"], two.parts["head"]
    att0, att1 = one.parts["attention"], far.parts["attention"]
    budget = memory_budget(model, hardware, 1, precision=precision, gpu_memory_utilization=utilization)
    return _Prices(
        body=tuple(body.tolist()), body_slope=max(slope, 0.0),
        head_compute=float(compute(head2) - compute(head1)), head_memory=float(memory(head1)),
        decode_compute=float(compute(att1)) / span, decode_memory0=float(memory(att0)),
        decode_memory1=float(memory(att1) - memory(att0)) / span,
        prefill_compute=float(compute(pre)) / span**2, prefill_memory=float(memory(pre)) / span,
        overhead=float(one.overhead_si), kv_bytes_per_token=float(budget.kv_per_sequence_token_si),
        kv_tokens=int(budget.max_tokens),
    )


def _pass_time(p: _Prices, tokens: int, logits: int, attention_compute: float, attention_memory: float) -> float:
    """Time of one pass, s: body over ``tokens`` + attention (its compute and memory times, s) + head + overhead."""
    last = len(p.body) - 1
    body = p.body[tokens] if tokens <= last else p.body[last] + (tokens - last) * p.body_slope
    return body + max(attention_compute, attention_memory) + max(p.head_compute * logits, p.head_memory) \
        + p.overhead


# -- arrivals -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trace:
    """Requests to serve: arrival times (s, sorted), prompt and answer lengths (tokens), and which share the
    prefix."""

    arrival_si: np.ndarray
    prompt_lens: np.ndarray
    output_lens: np.ndarray
    shared_prefix: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_si)

    @property
    def arrival(self) -> pint.Quantity:
        """Arrival times, s."""
        return quantity(self.arrival_si, "time")


def trace(arrival, prompt_lens, output_lens, shared_prefix=None) -> Trace:
    """Return a Trace from arrival times (a time quantity array, sorted) and per-request lengths (arrays of whole
    numbers, answers of at least 1 token); ``shared_prefix`` marks the requests that start with the shared
    prefix (booleans; none by default)."""
    times = np.atleast_1d(np.asarray(to_si(arrival, "time", "arrival"), dtype=float))
    n = len(times)
    if n == 0 or not np.all(np.isfinite(times)) or np.any(np.diff(times) < 0) or times[0] < 0:
        raise ValueError("arrival must be a non-empty, sorted array of non-negative times")
    prompts = np.broadcast_to(lengths(prompt_lens, "prompt_lens"), (n,)).astype(np.int64)
    outputs = np.broadcast_to(lengths(output_lens, "output_lens"), (n,)).astype(np.int64)
    shared = np.zeros(n, bool) if shared_prefix is None else np.broadcast_to(np.asarray(shared_prefix, bool), (n,))
    return Trace(times, prompts.copy(), outputs.copy(), shared.copy())


def _sampler(value, name: str, minimum: int):
    """(lengths, probabilities) from a number, a list of samples or a {length: weight} mapping."""
    if isinstance(value, dict):
        if not value:
            raise ValueError(f"{name} must not be an empty mapping")
        keys = np.atleast_1d(lengths(np.asarray(list(value)), name, minimum))
        weights = np.asarray(list(value.values()), dtype=float)
        if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise ValueError(f"{name}: every weight of a {{length: weight}} mapping must be a positive number")
        return keys, weights / weights.sum()
    keys = np.atleast_1d(lengths(value, name, minimum))
    if keys.ndim != 1 or keys.size == 0:
        raise ValueError(f"{name} must be a number, a flat list of lengths or a {{length: weight}} mapping")
    return keys, np.full(keys.size, 1.0 / keys.size)


def poisson_trace(rate, prompt_len, output_len, requests: int = 1000, seed: int = 0, arrivals: str = "poisson",
                  prefix_share: float = 0.0) -> Trace:
    """Return ``requests`` arrivals at ``rate`` (a quantity, 1/s): exponential gaps (``"poisson"``) or equal
    gaps 1/rate (``"even"``); lengths drawn independently from ``prompt_len`` and ``output_len`` (a number, a
    list of samples or a {length: weight} mapping); a ``prefix_share`` of them marked as sharing the prefix."""
    lam = to_si(rate, "request_rate", "rate")
    if not np.isscalar(lam) or not lam > 0:
        raise ValueError(f"rate must be a positive request rate, e.g. Q_(5, '1/s'), got {rate}")
    n = lengths(requests, "requests")
    if arrivals not in ("poisson", "even"):
        raise ValueError(f"arrivals must be 'poisson' or 'even', got {arrivals!r}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / lam, n) if arrivals == "poisson" else np.full(n, 1.0 / lam)
    times = np.cumsum(gaps) - gaps[0]
    p, pw = _sampler(prompt_len, "prompt_len", 1)
    o, ow = _sampler(output_len, "output_len", 1)
    prompts = p[rng.choice(p.size, n, p=pw)] if p.size > 1 else np.full(n, p[0])
    outputs = o[rng.choice(o.size, n, p=ow)] if o.size > 1 else np.full(n, o[0])
    shared = rng.random(n) < prefix_share if prefix_share else np.zeros(n, bool)
    return Trace(times, prompts.astype(np.int64), outputs.astype(np.int64), shared)


# -- results ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Percentiles:
    """p50, p90, p99 and the mean of one latency, ms."""

    p50: pint.Quantity
    p90: pint.Quantity
    p99: pint.Quantity
    mean: pint.Quantity

    def __repr__(self) -> str:
        return (f"p50={rounded(self.p50):~P}, p90={rounded(self.p90):~P}, p99={rounded(self.p99):~P}, "
                f"mean={rounded(self.mean):~P}")


def _percentiles(values: np.ndarray) -> Percentiles:
    if values.size == 0:
        nan = Q_(float("nan"), "ms")
        return Percentiles(nan, nan, nan, nan)
    p50, p90, p99 = (float(x) * 1e3 for x in np.percentile(values, [50, 90, 99]))
    return Percentiles(Q_(p50, "ms"), Q_(p90, "ms"), Q_(p99, "ms"), Q_(float(values.mean()) * 1e3, "ms"))


@dataclass(frozen=True)
class Simulation:
    """What happened to every request, and the engine's totals.  ``*_si`` arrays are seconds, one per request
    (``gaps_si``: every inter-token gap, request after request, ``gap_start[i]`` where request i's begin)."""

    engine: Engine
    trace: Trace = field(repr=False)
    queue_si: np.ndarray = field(repr=False)  # arrival -> its first pass starts
    ttft_si: np.ndarray = field(repr=False)  # arrival -> first token
    e2e_si: np.ndarray = field(repr=False)  # arrival -> last token
    gaps_si: np.ndarray = field(repr=False)
    gap_start: np.ndarray = field(repr=False)
    preemptions_per_request: np.ndarray = field(repr=False)
    prefix_hit: np.ndarray = field(repr=False)
    passes: int  # forward passes on the (decode) GPU
    decode_steps: int  # passes that carried decode tokens
    decode_tokens: int  # sequences those passes carried, summed over passes
    busy_si: float  # s the (decode) GPU spent in passes
    span_si: float  # first arrival -> last token, s
    kv_blocks: int  # blocks in the pool

    @property
    def served(self) -> int:
        """Requests served (all of them: the simulation runs until the queue is empty)."""
        return len(self.e2e_si)

    @property
    def ttft(self) -> Percentiles:
        """Time to first token: queueing + the prefill (and, chunked, the steps it spans), ms."""
        return _percentiles(self.ttft_si)

    @property
    def itl(self) -> Percentiles:
        """Every gap between two tokens of one answer, over all requests, ms (a pre-empted request's gap
        includes its wait and recompute)."""
        return _percentiles(self.gaps_si)

    @property
    def tpot(self) -> Percentiles:
        """Per request, the mean gap after the first token: (e2e - ttft) / (tokens - 1), ms."""
        return _percentiles(self._tpot_si)

    @property
    def e2e(self) -> Percentiles:
        """End-to-end latency, ms."""
        return _percentiles(self.e2e_si)

    @property
    def queue(self) -> Percentiles:
        """Waiting before the first pass that works on the request, ms."""
        return _percentiles(self.queue_si)

    @property
    def _tpot_si(self) -> np.ndarray:
        out = self.trace.output_lens
        many = out > 1
        return (self.e2e_si[many] - self.ttft_si[many]) / (out[many] - 1)

    @property
    def mean_step(self) -> pint.Quantity:
        """Mean time between two decode tokens of one stream, ms: busy time / decode steps (prefills included)."""
        return Q_(self.busy_si / max(self.decode_steps, 1) * 1e3, "ms")

    @property
    def mean_batch(self) -> float:
        """Mean number of sequences a decode step carried."""
        return self.decode_tokens / max(self.decode_steps, 1)

    @property
    def output_throughput(self) -> pint.Quantity:
        """Output tokens per second per GPU over the run: sum of answers / span / GPUs."""
        return Q_(float(self.trace.output_lens.sum()) / self.span_si / self.engine.gpus, "token/s")

    @property
    def request_rate(self) -> pint.Quantity:
        """Requests served per second per GPU over the run."""
        return Q_(self.served / self.span_si / self.engine.gpus, "1/s")

    @property
    def utilization(self) -> float:
        """Share of the run the (decode) GPU was busy."""
        return self.busy_si / self.span_si

    @property
    def preemptions(self) -> int:
        """Times a sequence was evicted from the cache (and recomputed later)."""
        return int(self.preemptions_per_request.sum())

    @property
    def prefix_hits(self) -> int:
        """Requests whose prefill skipped the cached shared prefix."""
        return int(self.prefix_hit.sum())

    def itl_of(self, request: int) -> pint.Quantity:
        """The inter-token gaps of one request, ms."""
        end = self.gap_start[request + 1] if request + 1 < len(self.gap_start) else len(self.gaps_si)
        return Q_(self.gaps_si[self.gap_start[request]:end] * 1e3, "ms")

    def meets(self, ttft_limit: pint.Quantity | None = None, itl_limit: pint.Quantity | None = None) -> np.ndarray:
        """Per request, whether its TTFT <= ``ttft_limit`` and its mean gap (TPOT) <= ``itl_limit`` (DistServe's
        per-request SLO); a one-token answer has no gap to miss."""
        ok = np.ones(self.served, bool)
        if ttft_limit is not None:
            ok &= self.ttft_si <= to_si(ttft_limit, "time", "ttft_limit")
        if itl_limit is not None:
            limit = to_si(itl_limit, "time", "itl_limit")
            many = self.trace.output_lens > 1
            ok[many] &= self._tpot_si <= limit
        return ok

    def attainment(self, ttft_limit: pint.Quantity | None = None, itl_limit: pint.Quantity | None = None) -> float:
        """Share of requests meeting both targets."""
        return float(self.meets(ttft_limit, itl_limit).mean())

    def goodput(self, ttft_limit: pint.Quantity | None = None, itl_limit: pint.Quantity | None = None
                ) -> pint.Quantity:
        """Requests per second per GPU that meet both targets (DistServe's goodput): met / span / GPUs."""
        return Q_(float(self.meets(ttft_limit, itl_limit).sum()) / self.span_si / self.engine.gpus, "1/s")

    def __repr__(self) -> str:
        return (f"Simulation({self.served} requests, ttft {self.ttft!r}; itl {self.itl!r}; "
                f"throughput={rounded(self.output_throughput):~P} per GPU, preemptions={self.preemptions}, "
                f"prefix_hits={self.prefix_hits})")


# -- the simulation -----------------------------------------------------------------------------------------------

def simulate(
    engine: Engine,
    rate: pint.Quantity | None = None,
    prompt_len=None,
    output_len=None,
    requests: int = 1000,
    seed: int = 0,
    arrivals: str = "poisson",
    trace: Trace | None = None,
    concurrency: int | None = None,
) -> Simulation:
    """Return the Simulation of ``engine`` serving ``requests`` arrivals at ``rate`` (Poisson unless
    ``arrivals="even"``), lengths drawn from ``prompt_len`` and ``output_len``, or serving ``trace``.
    With ``concurrency`` C instead of a rate (a closed loop, as ``vllm bench serve --max-concurrency C
    --request-rate inf``): C requests at once, each next one sent when one finishes.

    Runs until every request is served.  The same seed gives the same run.  Raises ValueError when a request
    can never be served (its prompt exceeds the token budget with prefills run apart, or its cache exceeds the
    whole pool) or exceeds the model's context.
    """
    if not isinstance(engine, Engine):
        raise TypeError(f"engine must be an Engine, made with rooflab.simulate.engine(...), got {engine!r}")
    if concurrency is not None:
        concurrency = lengths(concurrency, "concurrency")
        if rate is not None or engine.disaggregated:
            raise ValueError("concurrency replaces rate (a closed loop), and is not modelled with disaggregation")
        if trace is None:
            rate = Q_(1.0, "1/s")  # placeholder times: the closed loop sets the arrivals
    if trace is None:
        if rate is None or prompt_len is None or output_len is None:
            raise ValueError("give rate (or concurrency), prompt_len and output_len, or a trace")
        trace = poisson_trace(rate, prompt_len, output_len, requests, seed, arrivals, engine.prefix_share)
    if concurrency is not None:
        trace = Trace(trace.arrival_si.copy(), trace.prompt_lens, trace.output_lens, trace.shared_prefix)
    elif not isinstance(trace, Trace):
        raise TypeError(f"trace must be a Trace (rooflab.simulate.trace(...)), got {trace!r}")
    from .models import model as _model

    _model(engine.model).check_context(int((trace.prompt_lens + trace.output_lens).max()) - 1,
                                       "the longest request (prompt + answer - 1)")
    spec = engine.draft_len if engine.draft_model else 0
    table = max(engine.token_budget, engine.max_seqs * (spec + 1)) + 1
    prices = _prices(engine.model, engine.hardware, engine.precision, engine.efficiency, table,
                     engine.gpu_memory_utilization)
    draft = _prices(engine.draft_model, engine.hardware, engine.precision, engine.efficiency, engine.max_seqs + 1,
                    engine.gpu_memory_utilization) if spec else None
    blocks = engine.kv_blocks if engine.kv_blocks is not None else prices.kv_tokens // engine.block_size
    if blocks <= 0:
        raise ValueError(f"{engine.model} leaves no room for a KV cache on {engine.hardware}")
    shared_tokens = (engine.prefix_len // engine.block_size) * engine.block_size if engine.prefix_caching else 0
    if shared_tokens and np.any(trace.prompt_lens[trace.shared_prefix] <= shared_tokens):
        raise ValueError(f"prefix_len ({engine.prefix_len}) must be shorter than every prompt that shares it")
    longest = int((trace.prompt_lens + trace.output_lens).max())
    if math.ceil(longest / engine.block_size) > blocks - shared_tokens // engine.block_size:
        raise ValueError(f"a request of {longest:,} tokens needs more KV blocks than the pool of {blocks:,} blocks "
                         f"of {engine.block_size} tokens holds; give kv_blocks more, or shorter requests")
    rng = np.random.default_rng([seed, 1])
    arrival = trace.arrival_si
    n = len(trace)
    if engine.disaggregated:
        first_pass, first_token, prefill_hits = _prefill_server(engine, prices, trace, shared_tokens)
        ready = first_token + trace.prompt_lens * prices.kv_bytes_per_token / engine.kv_link_si
        state = _Run(engine, prices, draft, blocks, shared_tokens, rng, trace, ready, first_token)
    else:
        state = _Run(engine, prices, draft, blocks, shared_tokens, rng, trace, arrival, None)
    state.run(concurrency)
    if engine.disaggregated:
        hits = np.asarray(state.hit) | prefill_hits
    else:
        first_pass, first_token, hits = np.asarray(state.first_pass), np.asarray(state.first_token), state.hit
    gaps, starts = state.gaps()
    finish = np.asarray(state.finish)
    return Simulation(engine, trace, first_pass - arrival, first_token - arrival, finish - arrival, gaps, starts,
                      np.asarray(state.preempted), np.asarray(hits, bool), state.passes, state.decode_steps,
                      state.decode_tokens, state.busy, float(finish.max() - arrival[0]), blocks)


def _prefill_server(e: Engine, p: _Prices, t: Trace, shared_tokens: int):
    """A GPU that only prefills, first come first served, as many waiting prompts per pass as the token budget
    takes (one at least).  Returns each request's pass start and first token times (s) and its prefix hits."""
    n = len(t)
    start, done, hit = np.empty(n), np.empty(n), np.zeros(n, bool)
    clock, i = 0.0, 0
    cached_at = math.inf
    prompts, shared = t.prompt_lens.tolist(), t.shared_prefix.tolist()
    while i < n:
        clock = max(clock, t.arrival_si[i])
        j, tokens, square = i, 0, 0.0
        while j < n and t.arrival_si[j] <= clock and (j == i or tokens + prompts[j] <= e.token_budget):
            skip = shared_tokens if shared[j] and clock >= cached_at else 0
            hit[j] = skip > 0
            tokens += prompts[j] - skip
            square += prompts[j] ** 2 - skip ** 2
            j += 1
        duration = _pass_time(p, tokens, j - i, p.prefill_compute * square, p.prefill_memory * tokens)
        start[i:j] = clock
        clock += duration
        done[i:j] = clock
        if shared_tokens and cached_at == math.inf and any(shared[i:j]):
            cached_at = clock
        i = j
    return start, done, hit


class _Run:
    """The state of one engine while it runs: a queue, the sequences decoding, the block pool and the times of
    every token.

    A decode step costs O(1) Python work whatever the batch (the slider's budget): a running sequence is kept as
    where and when it started decoding (context c0 at step D0), so its context at step D is c0 + r (D - D0) (r = 1
    token per step, or its mean under speculation); the sum of contexts, the sequences that need a new block this
    step (those whose context is a whole number of blocks: c0 - D0 = -D mod block size) and the step each one
    finishes at are kept as counters and a schedule.  Its tokens' times are read afterwards from the list of step
    end times."""

    def __init__(self, e: Engine, prices: _Prices, draft: _Prices | None, blocks: int, shared_tokens: int,
                 rng: np.random.Generator, t: Trace, ready: np.ndarray, prefilled_at: np.ndarray | None):
        n = len(t)
        self.e, self.p, self.draft, self.rng = e, prices, draft, rng
        self.bs = e.block_size
        self.spec = e.draft_len if e.draft_model else 0
        self.free = blocks
        self.shared_tokens = shared_tokens
        self.shared_blocks = shared_tokens // e.block_size
        self.prefix_cached_at = math.inf
        self.ready = ready
        self.order = np.argsort(ready, kind="stable").tolist()
        self.prompt, self.out = t.prompt_lens.tolist(), t.output_lens.tolist()
        self.shares = t.shared_prefix.tolist()
        nan = float("nan")
        self.first_pass, self.first_token, self.finish = [nan] * n, [nan] * n, [nan] * n
        self.made, self.preempted, self.hit = [0] * n, [0] * n, [False] * n
        # a request whose cache arrives from a prefill GPU needs no pass to join; a pre-empted one does
        self.has_cache = [prefilled_at is not None] * n
        self.events: list[list] = [[] for _ in range(n)]  # per request: a token's time, or (D0, D1) decode steps
        self.step_end: list[float] = []  # when each decode step ended
        self.steps = 0  # D: decode steps so far
        self.running: dict = {}  # request -> [c0, D0, base, rate, steps, own]; in admission order
        self.finishing: dict = {}  # decode step count -> requests done once it is reached
        self.residue = [0] * self.bs  # running sequences by (c0 - D0) mod block size
        self.offset = 0.0  # sum of c0 - rate x D0 over running sequences
        self.rates = 0.0  # sum of rates: sum of contexts = offset + rates x D
        if prefilled_at is not None:
            self.made = [1] * n
            self.first_token = prefilled_at.tolist()
            for i in range(n):
                self.events[i].append(self.first_token[i])
                if self.out[i] == 1:
                    self.finish[i] = self.first_token[i]
            self.order = [i for i in self.order if self.out[i] > 1]
        self.waiting: deque = deque()
        self.prefilling: list = []  # chunked: [request, tokens done, tokens in all, tokens skipped, base, own]
        self.clock = 0.0
        self.passes = self.decode_steps = self.decode_tokens = 0
        self.busy = 0.0
        self.release = None

    # -- the loop ------------------------------------------------------------------------------------------------

    def run(self, concurrency: int | None = None) -> None:
        """Serve every request.  With ``concurrency`` C (a closed loop, as a benchmark client with a maximum
        concurrency and no rate): the first C arrive at once, then each arrives when an earlier one finishes,
        and ``self.ready`` is rewritten with those times."""
        nxt, order, ready = 0, self.order, self.ready
        if concurrency is not None:
            ready[:] = math.inf
            ready[order[:concurrency]] = 0.0
            self.release = (order, concurrency)
        chunked = self.e.prefill == "chunked"
        while True:
            while nxt < len(order) and ready[order[nxt]] <= self.clock:
                self.waiting.append(order[nxt])
                nxt += 1
            if not (self.waiting or self.running or self.prefilling):
                if nxt == len(order):
                    return
                self.clock = float(ready[order[nxt]])
                continue
            progressed = self._chunked_step() if chunked else self._separate_step()
            if not progressed:
                if nxt == len(order) or ready[order[nxt]] == math.inf:
                    raise RuntimeError("the engine is stuck: a request can never be admitted (report this)")
                self.clock = max(self.clock, float(ready[order[nxt]]))

    def _finished(self, r: int) -> None:
        self.finish[r] = self.clock
        if self.release is not None:  # closed loop: the next request arrives now
            order, released = self.release
            if released < len(order):
                self.ready[order[released]] = self.clock
                self.release = (order, released + 1)

    # -- admission -------------------------------------------------------------------------------------------

    def _own_blocks(self, tokens: int, base: int) -> int:
        return -(-tokens // self.bs) - base

    def _admit(self, budget: int, seats: int, chunked: bool) -> list:
        """Take waiting requests while the budget, the seats and the free blocks allow, first come first served.
        Returns [(request, tokens held, tokens skipped, base, own blocks)] to prefill; requests whose cache
        arrived join the decoding directly.  Blocks: the prompt's (under speculation, the whole request's)."""
        taken, tokens = [], 0
        while self.waiting and seats > 0:
            r = self.waiting[0]
            total = self.prompt[r] + self.made[r] - (1 if self.has_cache[r] else 0)
            skip = base = 0
            if not self.has_cache[r] and self.shares[r] and self.shared_tokens and \
                    self.clock >= self.prefix_cached_at:
                skip, base = self.shared_tokens, self.shared_blocks
            compute = 0 if self.has_cache[r] else total - skip
            held = total + (self.out[r] - self.made[r] if self.spec else 0)
            own = self._own_blocks(held, base)
            if own > self.free or (compute and taken and tokens + compute > budget) or (chunked and compute and
                                                                                        tokens >= budget):
                break
            self.waiting.popleft()
            self.free -= own
            seats -= 1
            if self.first_pass[r] != self.first_pass[r]:
                self.first_pass[r] = self.clock
            if compute:
                taken.append((r, total, skip, base, own))
                tokens += compute
                self.hit[r] = self.hit[r] or skip > 0
            else:
                self.has_cache[r] = False
                self._join(r, total, base, own)
        return taken

    def _join(self, r: int, c0: int, base: int, own: int) -> None:
        """Request r starts decoding with c0 tokens cached (its last token made, not yet fed back)."""
        left = self.out[r] - self.made[r]
        now = self.steps
        if self.spec:
            # the steps it needs, drawn now: each makes 1 + the drafts accepted before the first rejection
            draws = 1 + np.cumprod(self.rng.random((left, self.spec)) < self.e.acceptance, axis=1).sum(axis=1)
            steps = int(np.searchsorted(np.cumsum(draws), left)) + 1
            rate = left / steps
        else:
            steps, rate = left, 1.0
            self.residue[(c0 - now) % self.bs] += 1
        self.running[r] = [c0, now, base, rate, steps, own]
        self.finishing.setdefault(now + steps, []).append(r)
        self.offset += c0 - rate * now
        self.rates += rate

    def _leave(self, r: int) -> int:
        """Take r out of the decoding; returns its context now."""
        c0, d0, base, rate, steps, own = self.running.pop(r)
        now = self.steps
        if not self.spec:
            self.residue[(c0 - d0) % self.bs] -= 1
        self.offset -= c0 - rate * d0
        self.rates -= rate
        if now > d0:
            self.events[r].append((d0, now))
        return c0 + round(rate * (now - d0))

    def _first_token_of(self, r: int, total: int, base: int, own: int) -> None:
        """A prefill of r ended at self.clock with a token: r finishes or starts decoding."""
        self.made[r] += 1
        self.events[r].append(self.clock)
        if self.first_token[r] != self.first_token[r]:
            self.first_token[r] = self.clock
        if self.shares[r] and self.shared_tokens and self.prefix_cached_at == math.inf:
            self.prefix_cached_at = self.clock
            base, own = self.shared_blocks, own - self.shared_blocks  # its prefix blocks now belong to the cache
        if self.made[r] >= self.out[r]:
            self._finished(r)
            self.free += own
        else:
            self._join(r, total, base, own)

    # -- the two schedulers ------------------------------------------------------------------------------------

    def _separate_step(self) -> bool:
        """Prefill the prompts that wait and fit, in one pass apart; else one decode step of every sequence."""
        taken = self._admit(self.e.token_budget, self.e.max_seqs - len(self.running), chunked=False) \
            if self.waiting else None
        if taken:
            p = self.p
            tokens = sum(total - skip for _, total, skip, _, _ in taken)
            square = sum(total * total - skip * skip for _, total, skip, _, _ in taken)
            self._advance(_pass_time(p, tokens, len(taken), p.prefill_compute * square, p.prefill_memory * tokens))
            for r, total, _, base, own in taken:
                self._first_token_of(r, total, base, own)
            return True
        if not self.running:
            return False
        self._make_room()
        self._pass(0, 0, 0.0, 0.0, [])
        return True

    def _chunked_step(self) -> bool:
        """Every running sequence's next token, then prompt chunks in the rest of the budget, in one pass."""
        self._make_room()
        if not self.waiting and not self.prefilling:  # the common step: decode only
            if not self.running:
                return False
            self._pass(0, 0, 0.0, 0.0, ())
            return True
        budget = self.e.token_budget - len(self.running) * (self.spec + 1)
        seats = self.e.max_seqs - len(self.running) - len(self.prefilling)
        pending = sum(entry[2] - max(entry[1], entry[3]) for entry in self.prefilling)
        self.prefilling += [[r, 0, total, skip, base, own] for r, total, skip, base, own in
                            self._admit(budget - pending, seats, chunked=True)]
        tokens, square, done = 0, 0.0, []
        for entry in self.prefilling:
            if budget <= tokens:
                break
            a = max(entry[1], entry[3])
            c = min(entry[2] - a, budget - tokens)
            tokens += c
            square += (a + c) ** 2 - a * a
            entry[1] = a + c
            if a + c == entry[2]:
                done.append(entry)
        if not tokens and not self.running:
            return False
        p = self.p
        self._pass(tokens, len(done), p.prefill_compute * square, p.prefill_memory * tokens, done)
        return True

    # -- decoding, memory and the clock --------------------------------------------------------------------------

    def _need(self) -> int:
        """Blocks the next decode step takes: one per sequence whose context is a whole number of blocks (under
        speculation none: the whole request was reserved)."""
        return 0 if self.spec else self.residue[-self.steps % self.bs]

    def _make_room(self) -> None:
        """Pre-empt the most recently admitted sequences until the next decode step's new blocks are free."""
        while self.running and self._need() > self.free:
            r = next(reversed(self.running))
            c0, d0, base, rate, steps, own = self.running[r]
            self.finishing[d0 + steps].remove(r)
            context = self._leave(r)
            self.free += self._own_blocks(context, base)
            self.made[r] = self.out[r] - (steps - (self.steps - d0))
            self.preempted[r] += 1
            self.waiting.appendleft(r)

    def _pass(self, extra_tokens: int, extra_logits: int, extra_compute: float, extra_memory: float,
              done: list) -> None:
        """One pass: every running sequence adds its token(s), plus the prompt chunks priced by the caller."""
        p, b, k = self.p, len(self.running), self.spec
        context = self.offset + self.rates * self.steps
        width = k + 1
        duration = _pass_time(p, b * width + extra_tokens, b * width + extra_logits,
                              width * p.decode_compute * context + extra_compute,
                              b * width * p.decode_memory0 + p.decode_memory1 * context + extra_memory)
        if k and b:
            d = self.draft
            duration += k * _pass_time(d, b, b, d.decode_compute * context,
                                       b * d.decode_memory0 + d.decode_memory1 * context)
        self._advance(duration)
        if b:
            self.free -= self._need()
            self.decode_steps += 1
            self.decode_tokens += b
            self.steps += 1
            self.step_end.append(self.clock)
            for r in self.finishing.pop(self.steps, ()):
                base, own = self.running[r][2], self.running[r][5]
                context = self._leave(r)
                self._finished(r)
                self.free += own if k else self._own_blocks(context, base)
        for entry in done:
            self.prefilling.remove(entry)
            self._first_token_of(entry[0], entry[2], entry[4], entry[5])

    def _advance(self, duration: float) -> None:
        self.clock += duration
        self.busy += duration
        self.passes += 1

    def gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """Every inter-token gap, request by request in time order, and where each request's gaps start."""
        ends = np.asarray(self.step_end)
        pieces, counts = [], []
        for events in self.events:
            count = 0
            for event in events:
                if type(event) is tuple:
                    piece = ends[event[0]:event[1]]
                    count += len(piece)
                    pieces.append(piece)
                else:
                    pieces.append((event,))
                    count += 1
            counts.append(count)
        times = np.concatenate(pieces) if pieces else np.zeros(0)
        counts = np.asarray(counts)
        inside = np.ones(max(len(times) - 1, 0), bool)
        firsts = np.cumsum(counts)[:-1]
        inside[firsts[firsts > 0] - 1] = False  # the step from one request's last token to the next's first
        gaps = np.diff(times)[inside]
        starts = np.concatenate([[0], np.cumsum(np.maximum(counts - 1, 0))[:-1]]).astype(np.int64)
        return gaps, starts


# -- published measurements ---------------------------------------------------------------------------------------

#: Published serving benchmarks (``data/serving_benchmarks.csv``): an engine, a model, a device, fixed lengths,
#: a load (a request rate or a closed-loop concurrency) and the latencies it measured, each row with its source.
BENCHMARKS = Path(__file__).resolve().parent / "data" / "serving_benchmarks.csv"
_METRICS = ("ttft_mean", "ttft_p50", "ttft_p95", "ttft_p99", "itl_mean", "itl_p50", "itl_p95", "itl_p99")


@dataclass(frozen=True)
class Benchmark:
    """One published measurement of a serving engine under load; ``measured`` maps each metric the source gives
    (``ttft_p50``, ``itl_p95``, ...) to its value in ms."""

    engine: str
    version: str
    model: str  # as the source names it
    catalogue_model: str  # the rooflab model of the same shape
    device: str
    precision: str
    prompt_len: int
    output_len: int
    load_kind: str  # "rate" (requests/s, Poisson) or "concurrency" (closed loop)
    load: float
    scheduler: str  # "separate" or "chunked"
    token_budget: int
    gpu_memory_utilization: float
    measured: dict = field(compare=False)
    source_url: str = ""
    notes: str = ""


@lru_cache(maxsize=2)
def published_benchmarks(path: str | Path = BENCHMARKS) -> tuple[Benchmark, ...]:
    """Return the rows of the published benchmark table."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            measured = {m: float(row[m + "_ms"]) for m in _METRICS if row[m + "_ms"].strip()}
            rows.append(Benchmark(row["engine"], row["version"], row["model"], row["catalogue_model"], row["device"],
                                  row["precision"], int(row["prompt_len"]), int(row["output_len"]), row["load_kind"],
                                  float(row["load"]), row["scheduler"], int(row["token_budget"]),
                                  float(row["gpu_memory_utilization"]), measured, row["source_url"], row["notes"]))
    return tuple(rows)


def against_benchmark(row: Benchmark, requests: int = 1000, seed: int = 0,
                      efficiency: str = "typical") -> dict[str, tuple[float, float]]:
    """Simulate one published row: {metric: (simulated ms, measured ms)} for every metric the row gives."""
    e = engine(row.catalogue_model, row.device, precision=row.precision, efficiency=efficiency,
               prefill=row.scheduler, token_budget=row.token_budget,
               gpu_memory_utilization=row.gpu_memory_utilization)
    if row.load_kind == "concurrency":
        run = simulate(e, prompt_len=row.prompt_len, output_len=row.output_len, requests=requests, seed=seed,
                       concurrency=int(row.load))
    else:
        run = simulate(e, rate=Q_(row.load, "1/s"), prompt_len=row.prompt_len, output_len=row.output_len,
                       requests=requests, seed=seed)
    values = {"ttft": run.ttft_si * 1e3, "itl": run.gaps_si * 1e3}
    out = {}
    for metric, measured in row.measured.items():
        kind, stat = metric.split("_")
        data = values[kind]
        simulated = float(data.mean()) if stat == "mean" else float(np.percentile(data, float(stat[1:])))
        out[metric] = (simulated, measured)
    return out
