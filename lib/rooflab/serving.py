"""Serving one model on one device: prefill, decode steps, whole requests, memory.

Counting convention (the careful count, per operation; the notebooks contrast
it with the back-of-envelope 2 x all parameters per token and with the
shortcut that prices a whole pass as one operation).  A forward pass is three
operations that run one after the other, each timed at
max(FLOPs / (peak x mfu), bytes / (bandwidth x mbu)), and the times add up:

1. ``body``: the weight matmuls.  A token passes through the *active*
   non-embedding parameters (2 FLOPs per multiply-add); every non-embedding
   weight is read once per pass, whatever the batch (for MoE only the experts
   the batch routes to), and one embedding row per token (a lookup, not a
   matmul).
2. ``attention``: over the KV cache.  Prefill: causal QK^T and AV,
   2 x layers x attention_width x N^2 FLOPs per sequence (half the square);
   the new tokens' K and V are written.  Decode: 4 x layers x attention_width
   x context FLOPs per sequence; each sequence reads its whole cache and writes
   its new token's K and V.
3. ``head``: the output projection, vocab x d_model weights read once per
   pass; 2 x d_model x vocab FLOPs per token that gets logits (the last prompt
   token, every decoded token).  It multiplies in 16-bit when the head is kept
   in 16-bit (quantized formats as shipped).

Activations are assumed to stay on chip.  Each pass adds ``overhead``.
Efficiency comes from a named preset (``efficiency="ideal"``, the default, or
``"typical"``, calibrated on public measurements); explicit ``mfu``, ``mbu``
and ``overhead`` override the preset's.

Memory held is all weights plus every sequence's KV cache plus the reserve an
engine leaves to other processes (``1 - gpu_memory_utilization`` of the
capacity the device reports) plus any activation workspace.

>>> import rooflab as rl
>>> llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
>>> p = rl.prefill(llama, h100, prompt_len=2000)
>>> p.bound, round(p.time.to("ms").magnitude, 1)
('compute', 29.6)
>>> d = rl.decode_step(llama, h100, context_len=2000)
>>> d.bound, d.dominant, round(d.time.to("ms").magnitude, 2)
('memory', 'body', 4.56)
>>> {name: round(part.time.m_as("ms"), 2) for name, part in d.parts.items()}
{'body': 4.17, 'attention': 0.08, 'head': 0.31}
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pint

from .efficiency import Efficiency, resolve
from .hardware import Hardware, hardware as _hardware
from .models import Model, model as _model
from .precision import Precision, as_precision
from .roofline import Cost, combine, cost_si
from .units import quantity, rounded, to_si
from .validation import fraction, lengths

__all__ = [
    "prefill",
    "decode_step",
    "request",
    "memory_budget",
    "Request",
    "MemoryBudget",
    "DoesNotFit",
    "expected_experts",
]


class DoesNotFit(ValueError):
    """The configuration needs more memory than the device has."""


@dataclass(slots=True)
class _Setup:
    """Everything a phase needs, resolved and converted to SI once."""

    model: Model
    device: Hardware
    precision: Precision
    peak: float  # FLOP/s at the compute precision: the body and attention
    head_peak: float  # FLOP/s the output head multiplies at
    bandwidth: float  # B/s
    bytes_per_weight: float  # body weights, scales included
    embedding_bytes: float  # bytes per embedding or head weight
    kv_per_token: float  # B
    mfu: float
    mbu: float
    overhead: float  # s per forward pass


def _setup(model, hardware, precision, mfu=None, mbu=None, overhead=None, efficiency="ideal") -> _Setup:
    m, device, p = _model(model), _hardware(hardware), as_precision(precision)
    mfu, mbu, overhead = resolve(efficiency, mfu, mbu, overhead)
    peak = device.peak_flops_for(p.compute)
    return _Setup(
        model=m,
        device=device,
        precision=p,
        peak=peak,
        head_peak=_head_peak(device, p, peak),
        bandwidth=device.memory_bandwidth_si,
        bytes_per_weight=p.bytes_per_weight,
        embedding_bytes=p.embedding_bytes_per_weight,
        kv_per_token=m.kv_bytes_per_token_si(p),
        mfu=mfu,
        mbu=mbu,
        overhead=overhead,
    )


def _head_peak(device: Hardware, p: Precision, peak: float) -> float:
    """The head multiplies at the compute peak if quantized with the body, else at the 16-bit peak."""
    if p.embeddings == p.weights or p.compute in ("fp16", "bf16", "fp32", "tf32"):
        return peak
    rates = device.peak_flops_si
    return rates.get(p.embeddings) or rates.get("fp16") or rates.get("bf16") or peak


def expected_experts(experts: int, experts_per_token: int, tokens):
    """Expected number of distinct experts that ``tokens`` tokens route to, each picking k of E.

    E x (1 - (1 - k/E)^tokens), assuming uniform, independent routing; k for one token.
    """
    return experts * (1.0 - (1.0 - experts_per_token / experts) ** np.asarray(tokens, dtype=float))


def _body_bytes(s: _Setup, tokens):
    """Bytes the body reads in one pass over ``tokens`` tokens: its weights (routed experts for MoE) + embedding rows."""
    m = s.model
    if m.is_moe:
        experts = expected_experts(m.experts, m.experts_per_token, tokens)
        weights = m.shared_non_embedding_params + m.layers * experts * m.expert_params_per_layer()
    else:
        weights = m.non_embedding_params
    return weights * s.bytes_per_weight + tokens * m.d_model * s.embedding_bytes


def _part(s: _Setup, flops, nbytes, peak: float) -> Cost:
    return cost_si(flops, nbytes, peak, s.bandwidth, s.mfu, s.mbu)


def _fit(s: _Setup, tokens_held, gpu_memory_utilization: float = 1.0, workspace: float = 0.0):
    """Return (weights, kv, reserve, capacity) in bytes for ``tokens_held`` cached tokens; the reserve
    includes the activation workspace."""
    weights = s.model.weight_bytes_si(s.precision)
    kv = tokens_held * s.kv_per_token
    capacity = s.device.memory_capacity_si
    reserve = (1.0 - gpu_memory_utilization) * capacity + workspace
    return weights, kv, reserve, capacity


def _check_fit(s: _Setup, tokens_held, what: str, allow_overflow: bool):
    """Return whether weights and cache fit (element-wise); raise DoesNotFit unless ``allow_overflow``."""
    weights, kv, reserve, capacity = _fit(s, tokens_held)
    fits = weights + kv + reserve <= capacity
    if not allow_overflow and not (fits is True or np.all(fits)):
        worst = np.max(kv)
        raise DoesNotFit(
            f"{s.model.name} does not fit on {s.device.name} for this {what}: weights "
            f"{weights / 1e9:.2f} GB ({s.precision}) + KV cache {worst / 1e9:.2f} GB = "
            f"{(weights + worst) / 1e9:.2f} GB > capacity {capacity / 1e9:.2f} GB "
            f"({capacity / 2**20:,.0f} MiB, as the device reports it). "
            f"Use a smaller batch or context, fewer bytes per weight, a larger device, "
            f"or pass allow_overflow=True to get the timing anyway."
        )
    return fits if isinstance(fits, (bool, np.ndarray)) else bool(fits)


def _prefill_si(s: _Setup, prompt_len, batch, fits=True) -> Cost:
    """The prefill of ``batch`` prompts of ``prompt_len`` tokens as three operations plus one overhead."""
    m = s.model
    tokens = batch * prompt_len
    parts = {
        "body": _part(s, 2.0 * m.active_non_embedding_params * tokens, _body_bytes(s, tokens), s.peak),
        "attention": _part(s, batch * 2.0 * m.layers * m.attention_width * prompt_len * prompt_len,
                           tokens * s.kv_per_token, s.peak),
        "head": _part(s, batch * 2.0 * m.d_model * m.vocab, m.vocab * m.d_model * s.embedding_bytes, s.head_peak),
    }
    return combine(parts, s.overhead, fits)


def _decode_linear_si(s: _Setup, batch):
    """A decode step's operations as FLOPs and bytes, attention linear in the context c:
    (body_flops, body_bytes, head_flops, head_bytes, attention_flops_per_c, attention_bytes_fixed,
    attention_bytes_per_c); attention FLOPs = f1 x c, bytes = b0 + b1 x c."""
    m = s.model
    return (
        batch * 2.0 * m.active_non_embedding_params,
        _body_bytes(s, batch),
        batch * 2.0 * m.d_model * m.vocab,
        m.vocab * m.d_model * s.embedding_bytes,
        batch * 4.0 * m.layers * m.attention_width,
        batch * s.kv_per_token,  # the new token's K and V written
        batch * s.kv_per_token,  # every sequence reads its own cache
    )


def _decode_si(s: _Setup, context_len, batch, fits=True) -> Cost:
    """One decode step as three operations plus one overhead."""
    body_f, body_b, head_f, head_b, f1, b0, b1 = _decode_linear_si(s, batch)
    parts = {
        "body": _part(s, body_f, body_b, s.peak),
        "attention": _part(s, f1 * context_len, b0 + b1 * context_len, s.peak),
        "head": _part(s, head_f, head_b, s.head_peak),
    }
    return combine(parts, s.overhead, fits)


def prefill(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    precision: str | Precision = "fp16",
    batch=1,
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
    efficiency: str | Efficiency = "ideal",
) -> Cost:
    """Return the Cost of processing ``batch`` prompts of ``prompt_len`` tokens (time is the TTFT), in parts.

    time = body + attention + head + overhead, each max(FLOPs / (peak x mfu), bytes / (bandwidth x mbu)):
    body 2 P N FLOPs and its weights read; attention 2 L A N^2 FLOPs and K, V written; head 2 d V FLOPs
    and V x d weights read (per prompt).  Raises ContextTooLong beyond the model's context, and
    DoesNotFit when weights and cache exceed capacity unless ``allow_overflow``.
    """
    s = _setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    n = lengths(prompt_len, "prompt_len")
    b = lengths(batch, "batch")
    s.model.check_context(n, "this prompt")
    return _prefill_si(s, n, b, _check_fit(s, b * n, "prefill", allow_overflow))


def decode_step(
    model: Model | str,
    hardware: Hardware | str,
    context_len,
    batch=1,
    precision: str | Precision = "fp16",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
    efficiency: str | Efficiency = "ideal",
) -> Cost:
    """Return the Cost of one decode step, in parts: ``batch`` sequences each add a token after ``context_len``.

    time = body + attention + head + overhead, each max(FLOPs / (peak x mfu), bytes / (bandwidth x mbu)):
    body B x 2 P FLOPs, its weights read once (shared by the batch); attention B x 4 L A c FLOPs,
    B x (c + 1) x KV bytes per token; head B x 2 d V FLOPs, V x d weights read once.
    """
    s = _setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
    s.model.check_context(c + 1, "this decode step")
    return _decode_si(s, c, b, _check_fit(s, b * (c + 1), "decode step", allow_overflow))


def _sum_relu(d0, d1, lo, hi):
    """Sum over whole c in [lo, hi] of max(0, d0 + d1 x c), in closed form (element-wise)."""
    if not any(isinstance(x, np.ndarray) for x in (d0, d1, lo, hi)):
        return _sum_relu_scalar(float(d0), float(d1), float(lo), float(hi))
    d0, d1, lo, hi = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (d0, d1, lo, hi)))
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(d1 != 0, -d0 / np.where(d1 != 0, d1, 1.0), 0.0)
    start = np.where(d1 > 0, np.maximum(lo, np.ceil(root)), lo)
    end = np.where(d1 < 0, np.minimum(hi, np.floor(root)), hi)
    count = np.maximum(0.0, end - start + 1)
    total = count * d0 + d1 * (start + end) * count / 2
    total = np.where((d1 == 0) & (d0 <= 0), 0.0, total)
    return np.maximum(total, 0.0)


def _sum_relu_scalar(d0: float, d1: float, lo: float, hi: float) -> float:
    """The same sum for one point, in plain floats (a request's hot path)."""
    if d1 == 0:
        return (hi - lo + 1) * max(d0, 0.0)
    root = -d0 / d1
    start, end = (max(lo, math.ceil(root)), hi) if d1 > 0 else (lo, min(hi, math.floor(root)))
    count = max(0.0, end - start + 1)
    return max(count * d0 + d1 * (start + end) * count / 2, 0.0)


def _max(a, b):
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


def _decode_total_si(s: _Setup, prompt_len, steps, batch):
    """Total time of ``steps`` decode steps at contexts prompt_len .. prompt_len + steps - 1, s.

    Body, head and overhead are the same every step; attention's time is the max of two linear
    functions of the context, summed exactly over whole contexts.
    """
    body_f, body_b, head_f, head_b, f1, b0, b1 = _decode_linear_si(s, batch)
    compute, memory = s.peak * s.mfu, s.bandwidth * s.mbu
    fixed = (_max(body_f / compute, body_b / memory) + _max(head_f / (s.head_peak * s.mfu), head_b / memory)
             + s.overhead)
    m0, m1 = b0 / memory, b1 / memory  # attention memory time = m0 + m1 x context
    c1 = f1 / compute  # attention compute time = c1 x context
    lo, hi = prompt_len, prompt_len + steps - 1
    memory_sum = steps * m0 + m1 * (lo + hi) * steps / 2
    # max(compute, memory) = memory + max(0, compute - memory), summed exactly over whole contexts.
    return steps * fixed + memory_sum + _sum_relu(-m0, c1 - m1, lo, hi)


@dataclass(frozen=True)
class Request:
    """Latency of serving ``batch`` identical requests together.  ``*_si`` in seconds."""

    prefill_cost: Cost
    ttft_si: float | np.ndarray
    itl_si: float | np.ndarray
    decode_time_si: float | np.ndarray
    batch: int | np.ndarray
    output_len: int | np.ndarray
    fits: bool | np.ndarray = True

    @property
    def ttft(self) -> pint.Quantity:
        """Time to first token (the prefill), ms."""
        return quantity(self.ttft_si, "time").to("ms")

    @property
    def itl(self) -> pint.Quantity:
        """Inter-token latency (TPOT), the mean decode step over the answer, ms."""
        return quantity(self.itl_si, "time").to("ms")

    @property
    def decode_time(self) -> pint.Quantity:
        """Time of all decode steps: (output_len - 1) x itl, s."""
        return quantity(self.decode_time_si, "time")

    @property
    def e2e(self) -> pint.Quantity:
        """End-to-end latency, s: ttft + (output_len - 1) x itl."""
        return quantity(self.ttft_si + self.decode_time_si, "time")

    @property
    def prefill_share(self) -> pint.Quantity:
        """Share of the request's wall time spent in prefill (dimensionless): ttft / e2e."""
        return quantity(self.ttft_si / (self.ttft_si + self.decode_time_si), "dimensionless")

    @property
    def decode_share(self) -> pint.Quantity:
        """Share of the request's wall time spent decoding: 1 - prefill_share."""
        return quantity(self.decode_time_si / (self.ttft_si + self.decode_time_si), "dimensionless")

    @property
    def output_throughput(self) -> pint.Quantity:
        """Tokens generated per second while decoding, all sequences together: batch / itl."""
        return quantity(self.batch / self.itl_si, "token_rate")

    @property
    def request_throughput(self) -> pint.Quantity:
        """Output tokens per second over the whole request, prefill included: batch x output_len / e2e."""
        return quantity(self.batch * self.output_len / (self.ttft_si + self.decode_time_si), "token_rate")

    def __repr__(self) -> str:
        if np.ndim(self.ttft_si) == 0:
            fits = "" if np.all(self.fits) else ", DOES NOT FIT"
            return (
                f"Request(ttft={rounded(self.ttft):~P}, itl={rounded(self.itl):~P}, e2e={rounded(self.e2e):~P}, "
                f"decode_share={float(self.decode_share.magnitude):.1%}{fits})"
            )
        return f"Request(sweep of {np.size(self.ttft_si)} points)"


def request(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    output_len,
    precision: str | Precision = "fp16",
    batch=1,
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
    efficiency: str | Efficiency = "ideal",
) -> Request:
    """Return the latency of a request: TTFT, mean ITL, end-to-end time and each phase's share.

    The prefill yields the first token; each of the other output_len - 1 tokens is a decode
    step, the k-th at context prompt_len + k - 1.  ITL is their mean (with one output token,
    the step a second token would take); e2e = ttft + (output_len - 1) x itl.  The last token
    is never fed back, so the request needs prompt_len + output_len - 1 tokens of context.
    Raises ContextTooLong beyond the model's context, and DoesNotFit when weights plus the full
    cache exceed capacity unless ``allow_overflow``.
    """
    s = _setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    n = lengths(prompt_len, "prompt_len")
    out = lengths(output_len, "output_len")
    b = lengths(batch, "batch")
    s.model.check_context(n + out - 1, "this request (prompt_len + output_len - 1)")
    fits = _check_fit(s, b * (n + out), "request", allow_overflow)
    pre = _prefill_si(s, n, b, fits)
    steps = out - 1
    averaged = np.maximum(steps, 1) if isinstance(steps, np.ndarray) else max(steps, 1)
    itl = _decode_total_si(s, n, averaged, b) / averaged
    if not isinstance(itl, np.ndarray):
        itl = float(itl)
    return Request(pre, pre.time_si, itl, itl * steps, b, out, fits)


@dataclass(frozen=True)
class MemoryBudget:
    """Where a device's memory goes: weights + KV cache + reserve, against the capacity it reports."""

    weights_si: float
    kv_si: float | np.ndarray
    reserve_si: float
    capacity_si: float
    kv_per_sequence_token_si: float
    batch: int | np.ndarray
    context_len: int | np.ndarray

    @property
    def weights(self) -> pint.Quantity:
        """Bytes of all weights, GB."""
        return quantity(self.weights_si, "bytes").to("GB")

    @property
    def kv(self) -> pint.Quantity:
        """Bytes of the KV cache for batch x context_len tokens, GB."""
        return quantity(self.kv_si, "bytes").to("GB")

    @property
    def reserve(self) -> pint.Quantity:
        """Memory kept from weights and cache, GB: (1 - gpu_memory_utilization) x capacity, which vLLM
        leaves to other processes, plus any activation workspace (vLLM takes it from the utilised part)."""
        return quantity(self.reserve_si, "bytes").to("GB")

    @property
    def total(self) -> pint.Quantity:
        """weights + kv + reserve, GB."""
        return quantity(self.weights_si + self.kv_si + self.reserve_si, "bytes").to("GB")

    @property
    def capacity(self) -> pint.Quantity:
        """The device's memory as it reports it (nvidia-smi's total), GB."""
        return quantity(self.capacity_si, "bytes").to("GB")

    @property
    def usable(self) -> pint.Quantity:
        """Memory weights and cache may use, GB: capacity - reserve."""
        return quantity(self.capacity_si - self.reserve_si, "bytes").to("GB")

    @property
    def fits(self) -> bool | np.ndarray:
        """Whether total <= capacity (element-wise for sweeps)."""
        fits = self.weights_si + self.kv_si + self.reserve_si <= self.capacity_si
        return fits if np.ndim(fits) else bool(fits)

    @property
    def kv_room(self) -> pint.Quantity:
        """Memory left for KV cache after weights and reserve, GB (negative if weights alone overflow)."""
        return quantity(self._room, "bytes").to("GB")

    @property
    def _room(self) -> float:
        return self.capacity_si - self.reserve_si - self.weights_si

    @property
    def max_batch(self) -> int | np.ndarray:
        """Most sequences of context_len tokens whose cache fits: floor(kv_room / (context x KV/token))."""
        return _whole(self._room / (self.context_len * self.kv_per_sequence_token_si))

    @property
    def max_context(self) -> int | np.ndarray:
        """Longest context each of ``batch`` sequences can hold: floor(kv_room / (batch x KV/token))."""
        return _whole(self._room / (self.batch * self.kv_per_sequence_token_si))

    @property
    def max_tokens(self) -> int:
        """Tokens of KV cache that fit in all, over every sequence: floor(kv_room / KV per token)."""
        return _whole(self._room / self.kv_per_sequence_token_si)

    def __repr__(self) -> str:
        if np.ndim(self.kv_si) == 0:
            return (
                f"MemoryBudget(weights={rounded(self.weights):~P}, kv={rounded(self.kv):~P}, "
                f"reserve={rounded(self.reserve):~P}, total={rounded(self.total):~P}, "
                f"capacity={rounded(self.capacity):~P}, fits={self.fits}, max_batch={self.max_batch})"
            )
        return f"MemoryBudget(sweep of {np.size(self.kv_si)} points)"


def _whole(x):
    x = np.maximum(np.floor(x), 0)
    return int(x) if np.ndim(x) == 0 else x.astype(np.int64)


def memory_budget(
    model: Model | str,
    hardware: Hardware | str,
    context_len,
    batch=1,
    precision: str | Precision = "fp16",
    gpu_memory_utilization: float = 1.0,
    workspace: pint.Quantity | None = None,
) -> MemoryBudget:
    """Return the memory budget of ``batch`` sequences of ``context_len`` tokens.

    total = weights (all parameters) + batch x context_len x KV bytes per token + reserve, with
    reserve = (1 - gpu_memory_utilization) x capacity + workspace.  Capacity is what the device
    reports.  vLLM's default utilization is 0.9; the 10% it leaves is for other processes, and
    its activations and CUDA graphs come out of the utilised 90% (pass them as ``workspace``).
    """
    s = _setup(model, hardware, precision)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
    u = fraction(gpu_memory_utilization, "gpu_memory_utilization")
    s.model.check_context(c, "this context")
    extra = 0.0 if workspace is None else to_si(workspace, "bytes", "workspace")
    if extra < 0:
        raise ValueError(f"workspace must not be negative, got {workspace}")
    weights, kv, reserve, capacity = _fit(s, b * c, u, extra)
    return MemoryBudget(weights, kv, reserve, capacity, s.kv_per_token, b, c)
