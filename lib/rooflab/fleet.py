"""A service under load: continuous batching in steady state, the latency-throughput frontier, cost, energy
and tensor parallelism.

What it models: an engine that keeps ``batch`` sequences decoding at once, each engine step making one token
for every one of them, while finished requests leave and new ones are prefilled, either in passes of their own
between decode steps (``prefill="separate"``, vLLM's first scheduler) or merged into the step
(``prefill="chunked"``: Sarathi, vLLM V1, SGLang).  Steps are priced with the per-operation roofline of
:mod:`rooflab.serving`, the decode attention at the mean context a slot sees.  No queueing: the load is exactly
``batch`` sequences.  Memory caps the batch: every slot holds the cache of the workload's longest request, beside
the weights, within 0.9 (vLLM's ``gpu_memory_utilization``) of what a process can allocate on each GPU
(``Hardware.usable_memory``).  Tensor parallelism splits every operation over ``tp`` GPUs and adds two ring
all-reduces of 16-bit activations a layer, not overlapped with compute.  Throughputs, costs and energies are per
GPU unless named otherwise.

The formulas (the steady state, its time to first token, the memory cap, the all-reduce, the prices) are in
docs/formulas.md: assignments 5 and 6 derive them, and this help is what their students read.

Efficiency is ``"ideal"`` by default, as everywhere in the library: the bound no measurement beats; pass
``efficiency="typical"`` for the calibrated estimate and quote it with its error band.  Prices come as blended
(all the GPU time charged to the output tokens) and, as API price sheets charge them, for prompt and generated
tokens apart; the energy per token is a bound (a board draws at most its power).

>>> import rooflab as rl
>>> s = rl.steady_state("Llama-3-8B", "H100", prompt_len=2000, output_len=300, batch=64, efficiency="ideal")
>>> round(s.itl.m_as("ms"), 1), round(s.output_throughput.m_as("token/s"))  # the step 9.5 ms + 0.21 prefills
(16.2, 3964)
>>> round(s.cost_per_million(rl.Q_(3.95, "USD/h")).m_as("USD/Mtok"), 3), round(s.energy_per_token.m_as("J/token"), 3)
(0.277, 0.177)
>>> best = rl.best_under_sla("Llama-3-8B", "A100-80GB", 2000, 300, ttft_limit=rl.Q_(500, "ms"),
...                         itl_limit=rl.Q_(50, "ms"), efficiency="typical")
>>> best.batch, round(best.itl.m_as("ms"), 1), best.bound  # still below the bend
(61, 50.0, 'memory')
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import pint

from .efficiency import Efficiency, efficiency as _efficiency
from .hardware import Hardware, hardware as _hardware
from .models import Model
from .precision import Precision
from .memory import GPU_MEMORY_UTILIZATION, DoesNotFit, check_fit, footprint, weights_message
from .operations import Setup, forward_pass, setup
from .roofline import Cost
from .units import Q_, quantity, rounded, to_si
from .validation import fraction, lengths

__all__ = [
    "Workload", "workload", "SteadyState", "steady_state", "frontier", "best_under_sla", "max_concurrency",
    "ParallelStep", "tensor_parallel_step", "all_reduce_time", "cost_per_million_tokens", "energy_per_token", "Price",
    "example_prices", "example_price", "SLAUnmet", "TYPICAL_ALLREDUCE_LATENCY", "PRICES",
]

#: The typical preset's fixed cost of one all-reduce (fitted on the tensor-parallel rows: see rooflab.efficiency).
TYPICAL_ALLREDUCE_LATENCY = _efficiency("typical").allreduce_latency
_ACTIVATION_BYTES = 2.0  # 16-bit activations cross the link
_MODES = ("separate", "chunked")


class SLAUnmet(ValueError):
    """No batch meets the latency targets (or none fits)."""


# -- the workload --------------------------------------------------------------------------------------------

def _distribution(value, name: str, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and their probabilities from a number, a list of samples or a {length: weight} mapping."""
    if isinstance(value, dict):
        if not value:
            raise ValueError(f"{name} must not be an empty mapping")
        keys = lengths(np.asarray(list(value)), name, minimum)
        weights = np.asarray([_weight(w, name) for w in value.values()], dtype=float)
    else:
        keys = lengths(value, name, minimum)
        if np.ndim(keys) == 0:
            return np.asarray([int(keys)]), np.ones(1)
        if np.ndim(keys) != 1 or np.size(keys) == 0:
            raise ValueError(f"{name} must be a number, a flat list of lengths or a {{length: weight}} mapping")
        weights = np.ones(np.size(keys))
    keys = np.asarray(keys, dtype=np.int64)
    return keys, weights / weights.sum()


def _weight(weight, name: str) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)) or not weight > 0:
        raise ValueError(f"{name}: every weight of a {{length: weight}} mapping must be a positive number, "
                         f"got {weight!r}")
    return float(weight)


@dataclass(frozen=True)
class Workload:
    """Prompt and answer lengths, each a small distribution (independent of each other).

    ``prompt_lens`` and ``output_lens`` with their probabilities; the properties give what the steady state needs.
    """

    prompt_lens: tuple[int, ...]
    prompt_weights: tuple[float, ...]
    output_lens: tuple[int, ...]
    output_weights: tuple[float, ...]

    def _p(self):
        return np.asarray(self.prompt_lens, dtype=float), np.asarray(self.prompt_weights)

    def _o(self):
        return np.asarray(self.output_lens, dtype=float), np.asarray(self.output_weights)

    @cached_property
    def mean_prompt_len(self) -> float:
        """E[P], tokens."""
        p, w = self._p()
        return float(p @ w)

    @cached_property
    def mean_prompt_len_squared(self) -> float:
        """E[P^2], tokens^2 (causal attention of a prompt grows as its square)."""
        p, w = self._p()
        return float((p * p) @ w)

    @cached_property
    def mean_output_len(self) -> float:
        """E[O], tokens per request."""
        o, w = self._o()
        return float(o @ w)

    @cached_property
    def decode_steps(self) -> float:
        """E[O - 1]: decode steps a request holds a slot for (its first token comes from the prefill)."""
        return self.mean_output_len - 1.0

    @cached_property
    def decode_context(self) -> float:
        """Mean context of a decoding slot, tokens: E[P] + E[(O - 1)(O - 2)] / (2 E[O - 1]).

        The k-th decode step of a request (k = 1 .. O - 1) attends over P + k - 1 tokens; slots are weighted
        by the steps they last.  For fixed lengths, P + (O - 2) / 2.
        """
        o, w = self._o()
        return self.mean_prompt_len + float(((o - 1) * (o - 2)) @ w) / (2.0 * self.decode_steps)

    @cached_property
    def tokens_held(self) -> int:
        """Cache a slot must be able to hold: longest prompt + longest answer, tokens."""
        return int(max(self.prompt_lens) + max(self.output_lens))

    @cached_property
    def longest_context(self) -> int:
        """Longest context a request reaches: max P + max O - 1 (the last token is never fed back)."""
        return self.tokens_held - 1

    def prefill_steps(self, chunk: int | None) -> float:
        """E[ceil(P / chunk)]: steps a chunked prefill spreads a prompt over (1 without a chunk limit)."""
        if chunk is None:
            return 1.0
        p, w = self._p()
        return float(np.ceil(p / chunk) @ w)

    def __repr__(self) -> str:
        return (f"Workload(prompt_len={_shown(self.prompt_lens, self.prompt_weights)}, "
                f"output_len={_shown(self.output_lens, self.output_weights)})")


def _shown(values, weights) -> str:
    if len(values) == 1:
        return str(values[0])
    return "{" + ", ".join(f"{v}: {w:.3g}" for v, w in zip(values, weights)) + "}"


def workload(prompt_len, output_len) -> Workload:
    """Return a Workload.  Each length is a whole number, a list of sample lengths (equally likely) or a
    mapping {length: weight} (weights need not sum to 1).  Answers need at least 2 tokens (one decode step).

    >>> w = workload({100: 3, 1000: 1}, 200)
    >>> w.mean_prompt_len, w.decode_context, w.tokens_held
    (325.0, 424.0, 1200)
    """
    if type(prompt_len) is int and type(output_len) is int:
        return _fixed(prompt_len, output_len)
    p, pw = _distribution(prompt_len, "prompt_len", 1)
    o, ow = _distribution(output_len, "output_len", 2)
    return Workload(tuple(int(x) for x in p), tuple(float(x) for x in pw),
                    tuple(int(x) for x in o), tuple(float(x) for x in ow))


@lru_cache(maxsize=256)
def _fixed(prompt_len: int, output_len: int) -> Workload:
    """A workload of fixed lengths, made once (the common case)."""
    lengths(prompt_len, "prompt_len")
    lengths(output_len, "output_len", minimum=2)
    return Workload((prompt_len,), (1.0,), (output_len,), (1.0,))


# -- a group of GPUs and one forward pass -----------------------------------------------------------------

@dataclass(slots=True)
class _Group:
    s: Setup
    tp: int
    kv_share: float  # share of each token's K and V one GPU holds
    link: float  # one-way link bandwidth an all-reduce reaches, B/s (inf when tp == 1)
    latency: float  # s per all-reduce
    name: str  # the efficiency preset's name


def _group(model, hardware, precision, tp, efficiency, mfu, mbu, overhead, allreduce_latency) -> _Group:
    s = setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    n = lengths(tp, "tp")
    if np.ndim(n):
        raise TypeError("tp must be one whole number of GPUs, not an array")
    m = s.model
    kv_share = math.ceil(m.kv_heads / n) / m.kv_heads  # KV heads split N ways, replicated past kv_heads
    preset = _efficiency(efficiency)
    if n == 1:
        latency = 0.0
    elif allreduce_latency is None:
        latency = preset.allreduce_latency_si
    else:
        latency = to_si(allreduce_latency, "time", "allreduce_latency")
        if latency < 0:
            raise ValueError(f"allreduce_latency must not be negative, got {allreduce_latency}")
    # an all-reduce reaches the preset's share of the link (1 for the ideal)
    link = math.inf if n == 1 else s.device.link_bandwidth_si(n) * preset.allreduce_efficiency
    return _Group(s, n, kv_share, link, latency if n > 1 else 0.0, preset.name)


def _pass_si(g: _Group, decode_seqs, context, prefill_tokens, prefill_sq, prefill_seqs, fits=True):
    """One forward pass on each GPU of the group: ``decode_seqs`` sequences add a token at ``context``, and
    ``prefill_tokens`` prompt tokens (``prefill_seqs`` prompts whose squared lengths sum to ``prefill_sq``) are
    prefilled.  Returns (Cost per GPU, communication time in s)."""
    s, n, m = g.s, g.tp, g.s.model
    tokens = decode_seqs + prefill_tokens
    cost = forward_pass(s, decode_seqs, context, prefill_tokens, prefill_sq, prefill_seqs, fits, n, g.kv_share)
    if n == 1:
        return cost, 0.0 * tokens
    message = tokens * m.d_model * _ACTIVATION_BYTES
    return cost, 2.0 * m.layers * _all_reduce_si(message, n, g.link, g.latency)


def _all_reduce_si(message, n: int, link: float, latency: float):
    """Seconds of one ring all-reduce of ``message`` bytes on each of ``n`` GPUs: each sends 2 (n - 1) / n of it
    (n - 1 rounds of reduce-scatter, n - 1 of all-gather, a 1/n chunk each) at ``link`` B/s, plus ``latency``."""
    return latency + 2.0 * (n - 1) / n * message / link


# -- memory ----------------------------------------------------------------------------------------------

def _room(g: _Group, w: Workload, gpu_memory_utilization: float):
    """(bytes left for caches on one GPU, cache bytes one slot needs on one GPU, weights per GPU): the engine's
    share u of what a process can allocate, less the weights."""
    f = footprint(g.s, w.tokens_held, gpu_memory_utilization, tp=g.tp, kv_share=g.kv_share)
    return f.usable - f.reserve - f.weights, f.kv, f.weights


def _max_batch(g: _Group, w: Workload, u: float) -> int:
    room, per_slot, _ = _room(g, w, u)
    return max(int(math.floor(room / per_slot)), 0)


def _weights_message(g: _Group, w: Workload, u: float) -> str:
    f = footprint(g.s, w.tokens_held, u, tp=g.tp, kv_share=g.kv_share)
    return (f"{weights_message(g.s, f, u, g.tp)}; each sequence needs {f.kv / 1e9:.3f} GB of cache for "
            f"{w.tokens_held:,} tokens")


# -- the steady state --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SteadyState:
    """An engine serving ``batch`` sequences at once, in steady state (arrays for a sweep over the batch).

    ``*_si`` fields are SI floats or arrays for the whole group of ``tp`` GPUs; the properties give quantities,
    throughput per GPU unless named otherwise.  ``decode`` is one GPU's decode pass (its ``parts``: body,
    attention, head), ``prefill`` one GPU's prefill pass (separate mode) or None (chunked, merged in ``decode``).
    """

    batch: int | np.ndarray
    tp: int
    itl_si: float | np.ndarray
    ttft_si: float | np.ndarray
    throughput_si: float | np.ndarray  # output token/s of the group
    request_rate_si: float | np.ndarray  # requests/s of the group
    tokens_per_step: float | np.ndarray  # B + k
    decode: Cost = field(repr=False)
    prefill: Cost | None = field(repr=False)
    communication_si: float | np.ndarray = field(repr=False)  # s of all-reduces per iteration
    fits: bool | np.ndarray = True
    max_batch: int = 0
    power_si: float | None = field(default=None, repr=False)  # board power of one GPU, W
    workload: Workload | None = field(default=None, repr=False)
    mode: str = "separate"
    efficiency: str = "ideal"
    prefill_share: float | np.ndarray = field(default=0.0, repr=False)  # share of a step's time spent prefilling

    @property
    def itl(self) -> pint.Quantity:
        """Inter-token latency at this load: one engine iteration, ms."""
        return quantity(self.itl_si, "time").to("ms")

    @property
    def ttft(self) -> pint.Quantity:
        """Time to first token at this load, ms."""
        return quantity(self.ttft_si, "time").to("ms")

    @property
    def output_throughput(self) -> pint.Quantity:
        """Output tokens per second per GPU: the tokens a step makes over its time, shared by the tp GPUs."""
        return quantity(self.throughput_si / self.tp, "token_rate")

    @property
    def group_throughput(self) -> pint.Quantity:
        """Output tokens per second of the whole group of tp GPUs."""
        return quantity(self.throughput_si, "token_rate")

    @property
    def per_request_throughput(self) -> pint.Quantity:
        """Tokens per second one user sees while their answer streams (not the GPU's throughput)."""
        return quantity(1.0 / self.itl_si, "token_rate")

    @property
    def request_rate(self) -> pint.Quantity:
        """Requests finished per second per GPU."""
        return quantity(self.request_rate_si / self.tp, "request_rate")

    @property
    def bound(self) -> str | np.ndarray:
        """What binds the decode step's body (its weight matmuls): "memory" below the bend, "compute" past it.
        For a mixture of experts, its experts' matmuls (the last to turn)."""
        parts = self.decode.parts
        return (parts["body"] if "body" in parts else parts["experts"]).bound

    @property
    def energy_per_token(self) -> pint.Quantity:
        """Upper bound on energy per output token at board power, J/token (docs/formulas.md)."""
        if self.power_si is None:
            raise ValueError("this device has no published board power, so no energy bound can be given")
        return quantity(self.power_si * self.tp / self.throughput_si, "energy_per_token")

    def cost_per_million(self, price: pint.Quantity) -> pint.Quantity:
        """Cost of a million output tokens, USD/Mtok, for ``price`` per GPU and unit of time (USD/h or USD/s),
        all the GPU time charged to the output tokens (the blended figure)."""
        return cost_per_million_tokens(price, self.output_throughput)

    def cost_per_million_input(self, price: pint.Quantity) -> pint.Quantity:
        """Cost of a million prompt tokens, USD/Mtok, as API price sheets charge them: only the GPU time spent
        prefilling (``prefill_share`` of each step) is charged to them (docs/formulas.md)."""
        prompts = self.request_rate_si * self.workload.mean_prompt_len / (self.tp * self.prefill_share)
        return cost_per_million_tokens(price, quantity(prompts, "token_rate"))

    def cost_per_million_output(self, price: pint.Quantity) -> pint.Quantity:
        """Cost of a million generated tokens, USD/Mtok, charged apart from the prompts: only the GPU time spent
        decoding (the rest of each step) is charged to them (docs/formulas.md)."""
        made = self.batch / self.itl_si / (self.tp * (1.0 - self.prefill_share))
        return cost_per_million_tokens(price, quantity(made, "token_rate"))

    def meets(self, ttft_limit: pint.Quantity | None = None, itl_limit: pint.Quantity | None = None):
        """Whether the point fits in memory and meets the targets given (element-wise for sweeps)."""
        ok = np.asarray(self.fits, dtype=bool)
        if ttft_limit is not None:
            ok = ok & (np.asarray(self.ttft_si) <= to_si(ttft_limit, "time", "ttft_limit"))
        if itl_limit is not None:
            ok = ok & (np.asarray(self.itl_si) <= to_si(itl_limit, "time", "itl_limit"))
        return bool(ok) if ok.ndim == 0 else ok

    def at(self, index: int) -> SteadyState:
        """The point ``index`` of a sweep, as a scalar SteadyState."""
        def pick(x):
            return x[index].item() if isinstance(x, np.ndarray) else x

        def cost(c: Cost | None):
            if c is None:
                return None
            parts = {name: cost(part) for name, part in c.parts.items()}
            return Cost(pick(c.flops_si), pick(c.bytes_si), pick(c.compute_time_si), pick(c.memory_time_si),
                        pick(c.time_si), pick(c.fits), c.mfu, c.mbu, parts, c.overhead_si)

        return SteadyState(pick(self.batch), self.tp, pick(self.itl_si), pick(self.ttft_si),
                           pick(self.throughput_si), pick(self.request_rate_si), pick(self.tokens_per_step),
                           cost(self.decode), cost(self.prefill), pick(self.communication_si), pick(self.fits),
                           self.max_batch, self.power_si, self.workload, self.mode, self.efficiency,
                           pick(self.prefill_share))

    def __len__(self) -> int:
        return int(np.size(self.batch))

    def __repr__(self) -> str:
        if np.ndim(self.batch) == 0:
            fits = "" if np.all(self.fits) else ", DOES NOT FIT"
            tp = f", tp={self.tp}" if self.tp > 1 else ""
            return (f"SteadyState(batch={self.batch}{tp}, itl={rounded(self.itl):~P}, ttft={rounded(self.ttft):~P}, "
                    f"output_throughput={rounded(self.output_throughput):~P} per GPU, bound={self.bound!r}{fits})")
        return f"SteadyState(sweep of {np.size(self.batch)} batches, 1 to {int(np.max(self.batch))})"


def steady_state(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    output_len,
    batch,
    precision: str | Precision = "fp16",
    tp: int = 1,
    prefill: str = "separate",
    chunk: int | None = None,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    efficiency: str | Efficiency = "ideal",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allreduce_latency: pint.Quantity | None = None,
    allow_overflow: bool = False,
) -> SteadyState:
    """Return the steady state of continuous batching with ``batch`` sequences decoding (an array for a sweep).

    One iteration of the group is a decode step of the batch at the mean context plus the prefill of the prompts
    that replace the requests it finishes (in passes of their own, or merged into the step when chunked), plus
    the all-reduces when tp > 1; the ITL, the throughput and the TTFT follow from it.  Assignment 5 derives them;
    docs/formulas.md gives them.  ``prompt_len`` and ``output_len`` are numbers, lists of samples or {length: weight} mappings.  Raises DoesNotFit when the batch
    exceeds 0.9 of the usable memory (saying how many sequences fit) unless ``allow_overflow``, and ContextTooLong
    beyond the model's context.
    """
    g = _group(model, hardware, precision, tp, efficiency, mfu, mbu, overhead, allreduce_latency)
    w = workload(prompt_len, output_len)
    b = lengths(batch, "batch")
    if prefill not in _MODES:
        raise ValueError(f"prefill must be one of {', '.join(map(repr, _MODES))}, got {prefill!r}")
    if chunk is not None:
        chunk = lengths(chunk, "chunk")
    u = fraction(gpu_memory_utilization, "gpu_memory_utilization")
    g.s.model.check_context(w.longest_context, "this workload (longest prompt + longest answer - 1)")
    cap = _max_batch(g, w, u)
    fits = b <= cap
    if not allow_overflow and not np.all(fits):
        if cap == 0:
            raise DoesNotFit(f"not one sequence fits: {_weights_message(g, w, u)}. Use more GPUs (tp), fewer "
                             f"bytes per weight, a larger device, or shorter requests.")
        raise DoesNotFit(f"batch {int(np.max(b)):,} does not fit: at most {cap:,} sequences fit. "
                         f"{_weights_message(g, w, u)}. Use batch <= {cap:,}, or pass allow_overflow=True.")
    return _steady_si(g, w, b, prefill, chunk, fits, cap)


def _steady_si(g: _Group, w: Workload, b, mode: str, chunk, fits, cap: int) -> SteadyState:
    k = b / w.decode_steps
    c = w.decode_context
    p1, p2 = w.mean_prompt_len, w.mean_prompt_len_squared
    if mode == "separate":
        decode, comm_d = _pass_si(g, b, c, 0.0, 0.0, 0.0, fits)
        group = np.maximum(k, 1.0)
        prefill, comm_p = _pass_si(g, 0.0, 0.0, group * p1, group * p2, group, fits)
        prefill_time = prefill.time_si + comm_p
        step = decode.time_si + comm_d + (k / group) * prefill_time
        ttft = prefill_time + step / 2.0
        comm = comm_d + (k / group) * comm_p
        prefill_share = (k / group) * prefill_time / step
    else:
        decode, comm = _pass_si(g, b, c, k * p1, k * p2, k, fits)
        prefill = None
        step = decode.time_si + comm
        # A prompt spans n = E[ceil(P / chunk)] steps, each carrying at least its own chunk: when fewer
        # prompts arrive per step than that (k < 1 / n), the steps that carry it are heavier than the mean.
        n = w.prefill_steps(chunk)
        share = np.maximum(k, 1.0 / n)
        carrying, comm_c = _pass_si(g, b, c, share * p1, share * p2, share, fits)
        ttft = n * (carrying.time_si + comm_c) + step / 2.0
        # the merged pass's time, shared out as the prompts' work and the decode work would take apart
        alone_d, comm_ad = _pass_si(g, b, c, 0.0, 0.0, 0.0, fits)
        alone_p, comm_ap = _pass_si(g, 0.0, 0.0, k * p1, k * p2, k, fits)
        prefill_share = (alone_p.time_si + comm_ap) / (alone_p.time_si + comm_ap + alone_d.time_si + comm_ad)
    tokens = b + k
    if not isinstance(step, np.ndarray):
        step, ttft, tokens, comm = float(step), float(ttft), float(tokens), float(comm)
        prefill_share = float(prefill_share)
        fits = bool(fits)
    return SteadyState(b, g.tp, step, ttft, tokens / step, k / step, tokens, decode, prefill, comm, fits, cap,
                       g.s.device.power_si, w, mode, g.name, prefill_share)


def max_concurrency(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    output_len,
    precision: str | Precision = "fp16",
    tp: int = 1,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
) -> int:
    """Return the most sequences (an int) whose caches fit at the workload's longest context beside the weights,
    per group of tp GPUs, within ``gpu_memory_utilization`` (0.9) of what a process can allocate
    (``Hardware.usable_memory``); 0 if none (docs/formulas.md)."""
    g = _group(model, hardware, precision, tp, "ideal", None, None, None, None)
    return _max_batch(g, workload(prompt_len, output_len), fraction(gpu_memory_utilization, "gpu_memory_utilization"))


def frontier(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    output_len,
    batch=None,
    precision: str | Precision = "fp16",
    tp: int = 1,
    **options,
) -> SteadyState:
    """Return the latency-throughput frontier: the steady state at every batch from 1 to the most that fits
    (or at the array ``batch`` given), as one vectorised SteadyState.  Plot ``itl`` against
    ``output_throughput``.  Options are those of :func:`steady_state`."""
    if batch is None:
        u = options.get("gpu_memory_utilization", GPU_MEMORY_UTILIZATION)
        cap = max_concurrency(model, hardware, prompt_len, output_len, precision, tp, u)
        if cap == 0:
            g = _group(model, hardware, precision, tp, "ideal", None, None, None, None)
            raise DoesNotFit(f"not one sequence fits: {_weights_message(g, workload(prompt_len, output_len), u)}.")
        batch = np.arange(1, cap + 1)
    else:
        batch = np.atleast_1d(lengths(batch, "batch"))
    return steady_state(model, hardware, prompt_len, output_len, batch, precision, tp, **options)


def best_under_sla(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    output_len,
    ttft_limit: pint.Quantity | None = None,
    itl_limit: pint.Quantity | None = None,
    precision: str | Precision = "fp16",
    tp: int = 1,
    **options,
) -> SteadyState:
    """Return the steady state with the largest throughput per GPU that fits and meets the TTFT and ITL
    targets (ideal efficiency unless ``efficiency=`` says otherwise), over every batch that fits.

    Raises SLAUnmet, saying what batch 1 reaches, when no batch meets them.
    """
    if ttft_limit is None and itl_limit is None:
        raise ValueError("give ttft_limit, itl_limit or both, as quantities of time, e.g. itl_limit=Q_(50, 'ms')")
    sweep = frontier(model, hardware, prompt_len, output_len, None, precision, tp, **options)
    ok = sweep.meets(ttft_limit, itl_limit)
    if not np.any(ok):
        first = sweep.at(0)
        raise SLAUnmet(
            f"no batch meets ttft <= {ttft_limit} and itl <= {itl_limit} for this workload on "
            f"{_name(hardware)} (tp={tp}): batch 1 already gives ttft {rounded(first.ttft):~P} "
            f"and itl {rounded(first.itl):~P}. Relax the targets, use a faster device or more GPUs.")
    index = int(np.argmax(np.where(ok, sweep.throughput_si, -np.inf)))
    return sweep.at(index)


def _name(hardware) -> str:
    return hardware if isinstance(hardware, str) else hardware.name


# -- tensor parallelism, one step -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ParallelStep:
    """One decode step on a tensor-parallel group: each GPU's share of the operations, then the all-reduces."""

    compute: Cost  # one GPU's body, attention and head (and the per-pass overhead)
    communication_si: float | np.ndarray  # s: 2 x layers all-reduces
    tp: int

    @property
    def time(self) -> pint.Quantity:
        """compute + communication, ms."""
        return quantity(self.compute.time_si + self.communication_si, "time").to("ms")

    @property
    def communication(self) -> pint.Quantity:
        """Time of the step's all-reduces, ms."""
        return quantity(self.communication_si, "time").to("ms")

    def __repr__(self) -> str:
        if np.ndim(self.communication_si) == 0:
            return (f"ParallelStep(tp={self.tp}, time={rounded(self.time):~P}, "
                    f"communication={rounded(self.communication):~P})")
        return f"ParallelStep(sweep of {np.size(self.communication_si)} points)"


def tensor_parallel_step(
    model: Model | str,
    hardware: Hardware | str,
    context_len,
    batch=1,
    precision: str | Precision = "fp16",
    tp: int = 2,
    efficiency: str | Efficiency = "ideal",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allreduce_latency: pint.Quantity | None = None,
    allow_overflow: bool = False,
) -> ParallelStep:
    """Return one decode step of ``batch`` sequences at ``context_len`` on ``tp`` GPUs, as a ParallelStep (its
    ``time`` and ``communication`` in ms).

    Each GPU computes and reads its share of the body, the attention over its KV heads' caches and the head, then
    the group sums its partial activations with ring all-reduces (16-bit whatever the weights' format) over the
    link's one-way bandwidth, half ``interconnect_bandwidth``.  Assignment 6b derives the count; docs/formulas.md
    gives it.
    """
    g = _group(model, hardware, precision, tp, efficiency, mfu, mbu, overhead, allreduce_latency)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
    g.s.model.check_context(c + 1, "this decode step")
    fits = check_fit(g.s, b * (c + 1), f"step on tp={g.tp}", allow_overflow, tp=g.tp, kv_share=g.kv_share)
    cost, comm = _pass_si(g, b, c, 0.0, 0.0, 0.0, fits)
    return ParallelStep(cost, comm if isinstance(comm, np.ndarray) else float(comm), g.tp)


def all_reduce_time(message: pint.Quantity, gpus: int, hardware: Hardware | str,
                    efficiency: str | Efficiency = "ideal") -> pint.Quantity:
    """Return the time of one ring all-reduce of ``message`` (bytes on each GPU) among ``gpus`` GPUs, in µs.

    Counted: the bytes each GPU sends round the ring, over the link one way (half the datasheet's two-way
    ``interconnect_bandwidth``; fewer links on a mesh: :meth:`Hardware.link_bandwidth_si`), at the preset's
    all-reduce efficiency, plus its fixed cost; nothing on one GPU.  Assignment 6b derives the count from a ring run
    in numpy; docs/formulas.md gives it.
    """
    device = _hardware(hardware)
    nbytes = to_si(message, "bytes", "message")
    if np.any(np.asarray(nbytes) < 0):
        raise ValueError(f"message must not be negative, got {message}")
    n = lengths(gpus, "gpus")
    if np.ndim(n):
        raise TypeError("gpus must be one whole number of GPUs, not an array")
    if n == 1:
        return quantity(0.0 * np.asarray(nbytes, dtype=float), "time").to("µs")
    preset = _efficiency(efficiency)
    link = device.link_bandwidth_si(n) * preset.allreduce_efficiency
    return quantity(_all_reduce_si(nbytes, n, link, preset.allreduce_latency_si), "time").to("µs")


# -- money and energy ---------------------------------------------------------------------------------------

def cost_per_million_tokens(price: pint.Quantity, throughput: pint.Quantity) -> pint.Quantity:
    """Return USD per million output tokens (USD/Mtok) for a GPU rented at ``price`` per unit of time (USD/h or
    USD/s) making ``throughput`` tokens per second (a number or an array); docs/formulas.md.

    >>> cost_per_million_tokens(Q_(3.6, "USD/h"), Q_(1000, "token/s"))
    <Quantity(1.0, 'dollar / megatoken')>
    """
    rate = to_si(price, "price_rate", "price")
    tokens = to_si(throughput, "token_rate", "throughput")
    return quantity(rate / tokens, "cost_per_token").to("USD/Mtok")


def energy_per_token(power: pint.Quantity, throughput: pint.Quantity) -> pint.Quantity:
    """Return an upper bound on joules per output token: board power / (tokens per second), J/token.

    >>> energy_per_token(Q_(700, "W"), Q_(7000, "token/s"))
    <Quantity(0.1, 'joule / token')>
    """
    return quantity(to_si(power, "power", "power") / to_si(throughput, "token_rate", "throughput"),
                    "energy_per_token")


# -- an example price table ---------------------------------------------------------------------------------

#: The shipped example prices: on-demand list prices of one GPU, dated, with their sources.  An EXAMPLE:
#: prices change monthly and differ by provider, region and commitment; pass your own.
PRICES = Path(__file__).resolve().parent / "data" / "gpu_prices.csv"


@dataclass(frozen=True)
class Price:
    """One provider's on-demand list price for one GPU, as it was quoted on ``date`` (an example)."""

    device: str
    provider: str
    usd_per_hour: float
    quoted: str  # as the provider writes it, e.g. "$0.001097 / sec"
    date: str
    source_url: str
    notes: str = ""

    @property
    def price(self) -> pint.Quantity:
        """USD per GPU-hour."""
        return Q_(self.usd_per_hour, "USD/h")


@lru_cache(maxsize=2)
def example_prices(path: str | Path = PRICES) -> tuple[Price, ...]:
    """Return the example price table (``data/gpu_prices.csv``): EXAMPLE prices, dated, with sources."""
    with open(path, newline="", encoding="utf-8") as f:
        return tuple(Price(**{k: float(v) if k == "usd_per_hour" else v for k, v in row.items()})
                     for row in csv.DictReader(f))


def example_price(device: Hardware | str, provider: str | None = None) -> pint.Quantity:
    """Return an EXAMPLE on-demand price of one GPU, USD/h (the first listed provider unless ``provider``).

    >>> example_price("H100")
    <Quantity(3.9492, 'dollar / hour')>
    """
    from .hardware import hardware as _hardware

    name = _hardware(device).name
    rows = [p for p in example_prices() if p.device == name and (provider is None or p.provider == provider)]
    if not rows:
        known = sorted({p.device for p in example_prices()})
        raise KeyError(f"no example price for {name}{' from ' + provider if provider else ''}; the example table "
                       f"has {', '.join(known)}. Pass your own price, e.g. Q_(2.5, 'USD/h').")
    return rows[0].price
