"""Serving one model on one device: prefill, decode steps, whole requests, memory.

Counting convention (the careful count; the notebooks contrast it with the
back-of-envelope 2 x all parameters per token):

* FLOPs.  A token passes through the *active* non-embedding parameters
  (2 FLOPs per multiply-add); the embedding is a table lookup, not a matmul.
  Causal attention adds QK^T and AV: 2 x layers x attention_width x N^2 for an
  N-token prefill (half the square), 4 x layers x attention_width x context
  for one decoded token.  Logits (2 x d_model x vocab) are computed for the
  last prompt token only, and for every decoded token.
* Bytes.  Each forward pass reads the weights once, whatever the batch: the
  non-embedding weights (for MoE only the experts the batch routes to), the
  output head (the shared matrix when embeddings are tied), and one embedding
  row per token.  Decode reads each sequence's KV cache; both phases write the
  new tokens' K and V.  Activations are assumed to stay on chip.
* Time = max(FLOPs / (peak x mfu), bytes / (bandwidth x mbu)) + overhead.

Memory held is all weights plus every sequence's KV cache plus the reserve an
engine keeps back (``1 - gpu_memory_utilization`` of capacity).

>>> import rooflab as rl
>>> llama, h100 = rl.model("Llama-3-8B"), rl.hardware("H100")
>>> p = rl.prefill(llama, h100, prompt_len=2000)
>>> p.bound, round(p.time.to("ms").magnitude, 1)
('compute', 29.3)
>>> d = rl.decode_step(llama, h100, context_len=2000)
>>> d.bound, round(d.time.to("ms").magnitude, 2)
('memory', 4.56)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pint

from .hardware import Hardware, hardware as _hardware
from .models import Model, model as _model
from .precision import Precision, as_precision
from .roofline import Cost, cost_si
from .units import quantity, to_si
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
    peak: float  # FLOP/s at the compute precision
    bandwidth: float  # B/s
    bytes_per_weight: float
    kv_per_token: float  # B
    mfu: float
    mbu: float
    overhead: float  # s


def _setup(model, hardware, precision, mfu=1.0, mbu=1.0, overhead=None) -> _Setup:
    m, device, p = _model(model), _hardware(hardware), as_precision(precision)
    return _Setup(
        model=m,
        device=device,
        precision=p,
        peak=device.peak_flops_for(p.compute),
        bandwidth=device.memory_bandwidth_si,
        bytes_per_weight=p.bytes_per_weight,
        kv_per_token=m.kv_bytes_per_token_si(p),
        mfu=fraction(mfu, "mfu"),
        mbu=fraction(mbu, "mbu"),
        overhead=0.0 if overhead is None else _non_negative(to_si(overhead, "time", "overhead"), "overhead"),
    )


def _non_negative(value, name):
    if (value < 0) if isinstance(value, float) else np.any(np.asarray(value) < 0):
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


def expected_experts(experts: int, experts_per_token: int, tokens):
    """Expected number of distinct experts that ``tokens`` tokens route to, each picking k of E.

    E x (1 - (1 - k/E)^tokens), assuming uniform, independent routing; k for one token.
    """
    return experts * (1.0 - (1.0 - experts_per_token / experts) ** np.asarray(tokens, dtype=float))


def _weight_read_bytes(s: _Setup, tokens):
    """Bytes of weights one forward pass over ``tokens`` tokens reads, embedding rows included."""
    m = s.model
    head = m.vocab * m.d_model  # the untied head, or the tied matrix read as the head
    if m.is_moe:
        experts = expected_experts(m.experts, m.experts_per_token, tokens)
        non_embedding = m.shared_non_embedding_params + m.layers * experts * m.expert_params_per_layer()
        return (non_embedding + head + tokens * m.d_model) * s.bytes_per_weight
    return (m.non_embedding_params + head + tokens * m.d_model) * s.bytes_per_weight


def _fit(s: _Setup, tokens_held, gpu_memory_utilization: float = 1.0):
    """Return (weights, kv, reserve, capacity) in bytes for ``tokens_held`` cached tokens."""
    weights = s.model.total_params * s.bytes_per_weight
    kv = tokens_held * s.kv_per_token
    capacity = s.device.memory_capacity_si
    reserve = (1.0 - gpu_memory_utilization) * capacity
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
            f"{(weights + worst) / 1e9:.2f} GB > capacity {capacity / 1e9:.0f} GB. "
            f"Use a smaller batch or context, fewer bytes per weight, a larger device, "
            f"or pass allow_overflow=True to get the timing anyway."
        )
    return fits if isinstance(fits, (bool, np.ndarray)) else bool(fits)


def _prefill_si(s: _Setup, prompt_len, batch, fits=True) -> Cost:
    m = s.model
    tokens = batch * prompt_len
    flops = batch * (
        2.0 * m.active_non_embedding_params * prompt_len
        + 2.0 * m.layers * m.attention_width * prompt_len * prompt_len
        + 2.0 * m.d_model * m.vocab
    )
    nbytes = _weight_read_bytes(s, tokens) + tokens * s.kv_per_token
    return cost_si(flops, nbytes, s.peak, s.bandwidth, s.mfu, s.mbu, s.overhead, fits)


def _decode_linear_si(s: _Setup, batch):
    """Decode-step FLOPs and bytes as f0 + f1 x context and b0 + b1 x context (floats)."""
    m = s.model
    f0 = batch * (2.0 * m.active_non_embedding_params + 2.0 * m.d_model * m.vocab)
    f1 = batch * 4.0 * m.layers * m.attention_width
    b0 = _weight_read_bytes(s, batch) + batch * s.kv_per_token  # weights, rows, the new K and V
    b1 = batch * s.kv_per_token  # every sequence reads its own cache
    return f0, f1, b0, b1


def _decode_si(s: _Setup, context_len, batch, fits=True) -> Cost:
    f0, f1, b0, b1 = _decode_linear_si(s, batch)
    flops, nbytes = f0 + f1 * context_len, b0 + b1 * context_len
    return cost_si(flops, nbytes, s.peak, s.bandwidth, s.mfu, s.mbu, s.overhead, fits)


def prefill(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    precision: str | Precision = "fp16",
    batch=1,
    mfu: float = 1.0,
    mbu: float = 1.0,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
) -> Cost:
    """Return the Cost of processing ``batch`` prompts of ``prompt_len`` tokens (time is the TTFT).

    FLOPs = batch x (2 x active non-embedding params x N + 2 x layers x attention_width x N^2
    + 2 x d_model x vocab); bytes = weights read once + embedding rows + KV written.
    Raises DoesNotFit when weights and cache exceed capacity, unless ``allow_overflow``.
    """
    s = _setup(model, hardware, precision, mfu, mbu, overhead)
    n = lengths(prompt_len, "prompt_len")
    b = lengths(batch, "batch")
    return _prefill_si(s, n, b, _check_fit(s, b * n, "prefill", allow_overflow))


def decode_step(
    model: Model | str,
    hardware: Hardware | str,
    context_len,
    batch=1,
    precision: str | Precision = "fp16",
    mfu: float = 1.0,
    mbu: float = 1.0,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
) -> Cost:
    """Return the Cost of one decode step: ``batch`` sequences each add a token after ``context_len``.

    FLOPs = batch x (2 x active non-embedding params + 4 x layers x attention_width x context
    + 2 x d_model x vocab); bytes = weights read once (shared by the batch) + batch x
    (context + 1) x KV bytes per token + embedding rows.
    """
    s = _setup(model, hardware, precision, mfu, mbu, overhead)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
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


def _decode_total_si(s: _Setup, prompt_len, steps, batch):
    """Total time of ``steps`` decode steps at contexts prompt_len .. prompt_len + steps - 1, s."""
    f0, f1, b0, b1 = _decode_linear_si(s, batch)
    c0, c1 = f0 / (s.peak * s.mfu), f1 / (s.peak * s.mfu)  # compute time = c0 + c1 x context
    m0, m1 = b0 / (s.bandwidth * s.mbu), b1 / (s.bandwidth * s.mbu)  # memory time = m0 + m1 x context
    lo, hi = prompt_len, prompt_len + steps - 1
    memory_sum = steps * m0 + m1 * (lo + hi) * steps / 2
    # max(compute, memory) = memory + max(0, compute - memory), summed exactly over whole contexts.
    return memory_sum + _sum_relu(c0 - m0, c1 - m1, lo, hi) + steps * s.overhead


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

    def __repr__(self) -> str:
        if np.ndim(self.ttft_si) == 0:
            return (
                f"Request(ttft={self.ttft:.4g~P}, itl={self.itl:.4g~P}, e2e={self.e2e:.4g~P}, "
                f"decode_share={float(self.decode_share.magnitude):.1%})"
            )
        return f"Request(sweep of {np.size(self.ttft_si)} points)"


def request(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    output_len,
    precision: str | Precision = "fp16",
    batch=1,
    mfu: float = 1.0,
    mbu: float = 1.0,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
) -> Request:
    """Return the latency of a request: TTFT, mean ITL, end-to-end time and each phase's share.

    The prefill yields the first token; each of the other output_len - 1 tokens is a decode
    step, the k-th at context prompt_len + k - 1.  ITL is their mean (with one output token,
    the step a second token would take); e2e = ttft + (output_len - 1) x itl.
    Raises DoesNotFit when weights plus the full cache exceed capacity, unless ``allow_overflow``.
    """
    s = _setup(model, hardware, precision, mfu, mbu, overhead)
    n = lengths(prompt_len, "prompt_len")
    out = lengths(output_len, "output_len")
    b = lengths(batch, "batch")
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
    """Where a device's memory goes: weights + KV cache + reserve, against capacity."""

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
        """Memory an engine keeps back, GB: (1 - gpu_memory_utilization) x capacity."""
        return quantity(self.reserve_si, "bytes").to("GB")

    @property
    def total(self) -> pint.Quantity:
        """weights + kv + reserve, GB."""
        return quantity(self.weights_si + self.kv_si + self.reserve_si, "bytes").to("GB")

    @property
    def capacity(self) -> pint.Quantity:
        """The device's memory, GB."""
        return quantity(self.capacity_si, "bytes").to("GB")

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
                f"MemoryBudget(weights={self.weights:.4g~P}, kv={self.kv:.4g~P}, "
                f"reserve={self.reserve:.4g~P}, total={self.total:.4g~P}, "
                f"capacity={self.capacity:.4g~P}, fits={self.fits}, max_batch={self.max_batch})"
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
) -> MemoryBudget:
    """Return the memory budget of ``batch`` sequences of ``context_len`` tokens.

    total = weights (all parameters) + batch x context_len x KV bytes per token
    + (1 - gpu_memory_utilization) x capacity.  vLLM's default utilization is 0.9.
    """
    s = _setup(model, hardware, precision)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
    u = fraction(gpu_memory_utilization, "gpu_memory_utilization")
    weights, kv, reserve, capacity = _fit(s, b * c, u)
    return MemoryBudget(weights, kv, reserve, capacity, s.kv_per_token, b, c)
