"""Serving one model on one device: prefill, decode steps, whole requests, memory.

Counting convention (the careful count, per operation; the notebooks contrast it with the back-of-envelope
count, every parameter read and multiplied once per token, and with the shortcut that prices a whole pass as one
operation).  A forward pass is three operations that run one after the other, each on its own roofline, and the
times add up:

1. ``body``: the weight matmuls.  A token passes through the *active* non-embedding parameters; every
   non-embedding weight is read once per pass, whatever the batch (for MoE only the experts the batch routes
   to), and one embedding row per token (a lookup, not a matmul).
2. ``attention``: over the KV cache, causal in a prefill; each decoding sequence reads its whole cache, and
   every new token's K and V are written.
3. ``head``: the output projection, read once per pass, for each token that gets logits (the last prompt
   token, every decoded token).  It multiplies at the 16-bit peak when the head is kept in 16-bit (quantized
   formats as shipped).

The FLOPs and bytes of each are in docs/formulas.md (assignment 1 derives them, and its students read this
help).  Activations are assumed to stay on chip.  Each pass adds ``overhead``.
Efficiency comes from a named preset (``efficiency="ideal"``, the default, or
``"typical"``, calibrated on public measurements); explicit ``mfu``, ``mbu``
and ``overhead`` override the preset's.

Memory held is all weights plus every sequence's KV cache plus the reserve an
engine leaves to other processes (``1 - gpu_memory_utilization`` of what a
process can allocate, ``Hardware.usable_memory``; 0.9, vLLM's default, unless
told otherwise) plus any activation workspace.

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

from dataclasses import dataclass

import numpy as np
import pint

from .efficiency import Efficiency
from .hardware import Hardware
from .memory import GPU_MEMORY_UTILIZATION, DoesNotFit, check_fit, footprint
from .models import Model
from .operations import decode_pass, decode_total, expected_experts, prefill_pass, setup
from .precision import Precision
from .roofline import Cost
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


def prefill(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len,
    batch=1,
    precision: str | Precision = "fp16",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
    efficiency: str | Efficiency = "ideal",
) -> Cost:
    """Return the Cost of processing ``batch`` prompts of ``prompt_len`` tokens (time is the TTFT), in parts.

    The time, in s, is the sum of the three operations' roofline times (the body's weight matmuls, causal
    attention over the prompt with its K and V written, the output head for the last token) plus the overhead;
    ``parts`` holds each.  Assignment 1 derives the count; docs/formulas.md gives it.  Raises ContextTooLong beyond the model's context, and
    DoesNotFit when weights and cache exceed 0.9 of the usable memory unless ``allow_overflow``.
    """
    s = setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    n = lengths(prompt_len, "prompt_len")
    b = lengths(batch, "batch")
    s.model.check_context(n, "this prompt")
    return prefill_pass(s, n, b, check_fit(s, b * n, "prefill", allow_overflow))


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
    new_tokens=1,
) -> Cost:
    """Return the Cost of one decode step, in parts: ``batch`` sequences each add ``new_tokens`` tokens (one
    unless told) after ``context_len``.

    The time, in s, is the sum of the three operations' roofline times (the body's weight matmuls, read once
    for the whole batch; attention over each sequence's cache, its new K and V written; the output head) plus
    the overhead; ``parts`` holds each.  Assignment 1 derives the count; docs/formulas.md gives it.  With
    ``new_tokens`` above one (speculation's check pass: the drafts and the target's own token), the body and
    head work on every new token, attention does each new token's FLOPs over the context, and each sequence's
    cache is still read once: its new tokens share it.
    """
    s = setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
    w = lengths(new_tokens, "new_tokens")
    s.model.check_context(c + w, "this decode step")
    return decode_pass(s, c, b, check_fit(s, b * (c + w), "decode step", allow_overflow), w)


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
        """Time of all the decode steps, s."""
        return quantity(self.decode_time_si, "time")

    @property
    def e2e(self) -> pint.Quantity:
        """End-to-end latency, s: the prefill and every decode step."""
        return quantity(self.ttft_si + self.decode_time_si, "time")

    @property
    def prefill_share(self) -> pint.Quantity:
        """Share of the request's wall time spent in prefill (dimensionless)."""
        return quantity(self.ttft_si / (self.ttft_si + self.decode_time_si), "dimensionless")

    @property
    def decode_share(self) -> pint.Quantity:
        """Share of the request's wall time spent decoding (dimensionless)."""
        return quantity(self.decode_time_si / (self.ttft_si + self.decode_time_si), "dimensionless")

    @property
    def output_throughput(self) -> pint.Quantity:
        """Tokens generated per second while decoding, all sequences together, token/s."""
        return quantity(self.batch / self.itl_si, "token_rate")

    @property
    def request_throughput(self) -> pint.Quantity:
        """Output tokens per second over the whole request, prefill included, token/s."""
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
    batch=1,
    precision: str | Precision = "fp16",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead: pint.Quantity | None = None,
    allow_overflow: bool = False,
    efficiency: str | Efficiency = "ideal",
) -> Request:
    """Return the latency of a request: TTFT, mean ITL, end-to-end time and each phase's share.

    The prefill makes the first token and decode steps the others, each at the context the request has
    reached; the ITL is their mean (with one output token, the step a second would take) and the end-to-end
    time the prefill and every step.  The last token is never fed back into the model, which sets the
    context the request reaches (checked against the model's); memory is checked for a slot for every token of
    the prompt and the answer, one more than the cache ever holds.  Assignment 1 derives the
    counts; docs/formulas.md gives them.  Raises ContextTooLong beyond the model's context, and DoesNotFit when
    weights plus that cache exceed 0.9 of the usable memory unless ``allow_overflow``.
    """
    s = setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    n = lengths(prompt_len, "prompt_len")
    out = lengths(output_len, "output_len")
    b = lengths(batch, "batch")
    s.model.check_context(n + out - 1, "this request (prompt_len + output_len - 1)")
    fits = check_fit(s, b * (n + out), "request", allow_overflow)
    pre = prefill_pass(s, n, b, fits)
    steps = out - 1
    averaged = np.maximum(steps, 1) if isinstance(steps, np.ndarray) else max(steps, 1)
    itl = decode_total(s, n, averaged, b) / averaged
    if not isinstance(itl, np.ndarray):
        itl = float(itl)
    return Request(pre, pre.time_si, itl, itl * steps, b, out, fits)


@dataclass(frozen=True)
class MemoryBudget:
    """Where a device's memory goes: weights + KV cache + reserve, against what a process can allocate."""

    weights_si: float
    kv_si: float | np.ndarray
    reserve_si: float
    capacity_si: float
    kv_per_sequence_token_si: float
    batch: int | np.ndarray
    context_len: int | np.ndarray
    allocatable_si: float | None = None  # what a process can allocate; None: the capacity

    @property
    def _allocatable(self) -> float:
        return self.capacity_si if self.allocatable_si is None else self.allocatable_si

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
        """Memory kept from weights and cache, GB: (1 - gpu_memory_utilization) x allocatable, which vLLM
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
    def allocatable(self) -> pint.Quantity:
        """Memory a process can allocate (a little under the reported capacity), GB."""
        return quantity(self._allocatable, "bytes").to("GB")

    @property
    def usable(self) -> pint.Quantity:
        """Memory weights and cache may use, GB: allocatable - reserve."""
        return quantity(self._allocatable - self.reserve_si, "bytes").to("GB")

    @property
    def fits(self) -> bool | np.ndarray:
        """Whether total <= allocatable (element-wise for sweeps)."""
        fits = self.weights_si + self.kv_si + self.reserve_si <= self._allocatable
        return fits if np.ndim(fits) else bool(fits)

    @property
    def kv_room(self) -> pint.Quantity:
        """Memory left for KV cache after weights and reserve, GB (negative if weights alone overflow)."""
        return quantity(self._room, "bytes").to("GB")

    @property
    def _room(self) -> float:
        return self._allocatable - self.reserve_si - self.weights_si

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
                f"allocatable={rounded(self.allocatable):~P}, fits={self.fits}, max_batch={self.max_batch})"
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
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    workspace: pint.Quantity | None = None,
) -> MemoryBudget:
    """Return the memory budget of ``batch`` sequences of ``context_len`` tokens.

    It holds all the weights, every sequence's KV cache and the engine's reserve: the share of what a process
    can allocate (``Hardware.usable_memory``, a little under the total the device reports) that
    ``gpu_memory_utilization`` leaves, plus any ``workspace``; assignment 2 derives it, docs/formulas.md gives
    it.  The
    utilization is vLLM's default, 0.9; the 10% it leaves is for other processes, and its activations
    and CUDA graphs come out of the utilised 90% (pass them as ``workspace``).  The budget answers whether
    it fits (``fits``, ``max_batch`` 0 when the weights alone do not); the functions that price a
    configuration raise DoesNotFit instead.
    """
    s = setup(model, hardware, precision)
    c = lengths(context_len, "context_len", minimum=0)
    b = lengths(batch, "batch")
    u = fraction(gpu_memory_utilization, "gpu_memory_utilization")
    s.model.check_context(c, "this context")
    extra = 0.0 if workspace is None else to_si(workspace, "bytes", "workspace")
    if extra < 0:
        raise ValueError(f"workspace must not be negative, got {workspace}")
    f = footprint(s, b * c, u, extra)
    return MemoryBudget(f.weights, f.kv, f.reserve, f.capacity, s.kv_per_token, b, c, f.usable)
