"""The operations of one forward pass and their roofline prices: what serving, fleet and crossover share.

A pass over some decoding sequences and some prompt tokens is three operations
run one after the other, each priced at max(FLOPs / (peak x mfu), bytes /
(bandwidth x mbu)), plus one overhead per pass (:mod:`rooflab.serving`'s
docstring states the counting convention, docs/formulas.md the counts).  A prefill is a pass with no
decoding sequences; a decode step one with no prompt tokens; a step of
continuous batching with chunked prefill carries both.  On a tensor-parallel
group each GPU takes 1/tp of every operation's FLOPs and bytes, and its share
of the KV heads.

This module is internal to the package: its names are public to the other
modules (no leading underscores), not to users, who call :mod:`rooflab.serving`,
:mod:`rooflab.fleet` and :mod:`rooflab.crossover`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .efficiency import efficiency as _efficiency, resolve
from .hardware import Hardware, hardware as _hardware
from .models import Model, model as _model
from .precision import Precision, as_precision
from .roofline import Cost, combine, cost_si

__all__ = ["Setup", "setup", "expected_experts", "body_bytes", "price", "price_body", "forward_pass", "prefill_pass",
           "decode_pass", "DecodeTerms", "decode_terms", "Work", "weight_matmuls", "decode_total"]


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything a pass needs, resolved and converted to SI once."""

    model: Model
    device: Hardware
    precision: Precision
    peak: float  # FLOP/s at the compute precision: the body and attention
    head_peak: float  # FLOP/s the output head multiplies at
    bandwidth: float  # B/s
    bytes_per_weight: float  # body weights, scales included
    embedding_bytes: float  # bytes per embedding or head weight
    kv_per_token: float  # B
    mfu: float  # 16-bit factors: attention and head
    mbu: float
    overhead: float  # s per forward pass
    efficiency: str  # the preset's name
    body_mfu: float = 1.0  # the weight matmuls' factors in this weight format
    body_mbu: float = 1.0


def setup(model, hardware, precision, mfu=None, mbu=None, overhead=None, efficiency="ideal") -> Setup:
    """Resolve a model, a device, a precision and an efficiency (preset, then explicit overrides) into a Setup.

    The body takes the preset's factors for the weight format (Efficiency.body_factors); an explicit ``mfu`` or
    ``mbu`` applies to every operation."""
    m, device, p = _model(model), _hardware(hardware), as_precision(precision)
    preset = _efficiency(efficiency)
    body_mfu, body_mbu = preset.body_factors(p)
    body_mfu = body_mfu if mfu is None else None
    body_mbu = body_mbu if mbu is None else None
    mfu, mbu, overhead = resolve(preset, mfu, mbu, overhead)
    peak = device.peak_flops_for(p.compute)
    return Setup(
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
        efficiency=preset.name,
        body_mfu=mfu if body_mfu is None else body_mfu,
        body_mbu=mbu if body_mbu is None else body_mbu,
    )


def _head_peak(device: Hardware, p: Precision, peak: float) -> float:
    """The head multiplies at the compute peak if quantized with the body, else at the 16-bit peak."""
    if p.embeddings == p.weights or p.compute in ("fp16", "bf16", "fp32", "tf32"):
        return peak
    rates = device.peak_flops_si
    return rates.get(p.embeddings) or rates.get("fp16") or rates.get("bf16") or peak


def expected_experts(experts: int, experts_per_token: int, tokens):
    """Expected number of distinct experts (a float or array) that ``tokens`` tokens route to, each picking
    ``experts_per_token`` of ``experts``, with uniform, independent routing; assignment 4 derives it,
    docs/formulas.md gives it.
    """
    return experts * (1.0 - (1.0 - experts_per_token / experts) ** np.asarray(tokens, dtype=float))


def body_bytes(s: Setup, tokens):
    """Bytes the body reads in one pass over ``tokens`` tokens: its weights (routed experts for MoE) + embedding rows."""
    m = s.model
    if m.is_moe:
        experts = expected_experts(m.experts, m.experts_per_token, tokens)
        weights = m.shared_non_embedding_params + m.layers * experts * m.expert_params_per_layer()
    else:
        weights = m.non_embedding_params
    return weights * s.bytes_per_weight + tokens * m.d_model * s.embedding_bytes


@dataclass(frozen=True, slots=True)
class Work:
    """One weight matmul's FLOPs and bytes (floats, or arrays over the tokens)."""

    flops: float | np.ndarray
    bytes: float | np.ndarray


def weight_matmuls(s: Setup, tokens) -> dict[str, Work]:
    """The body's weight matmuls over ``tokens`` tokens, each priced apart.

    Dense: one operation, ``body`` (2 P_active FLOPs a token; every weight and one embedding row a token read).
    Mixture of experts: ``projections`` (attention projections and norms, read whatever the batch, plus the
    embedding rows), ``router`` (d_model x E per layer) and ``experts`` (2 k L P_e FLOPs a token; the
    L x E[experts read] x P_e weights the batch routes to), since their intensities differ by E / k.
    """
    m = s.model
    if not m.is_moe:
        return {"body": Work(2.0 * m.active_non_embedding_params * tokens, body_bytes(s, tokens))}
    router = m.layers * m.d_model * m.experts
    projections = m.shared_non_embedding_params - router
    expert = m.layers * m.expert_params_per_layer()
    read = expected_experts(m.experts, m.experts_per_token, tokens)
    return {
        "projections": Work(2.0 * projections * tokens,
                            projections * s.bytes_per_weight + tokens * m.d_model * s.embedding_bytes),
        "router": Work(2.0 * router * tokens, router * s.bytes_per_weight),
        "experts": Work(2.0 * m.experts_per_token * expert * tokens, read * expert * s.bytes_per_weight),
    }


def price(s: Setup, flops, nbytes, peak: float) -> Cost:
    """One operation's Cost: max(flops / (peak x mfu), nbytes / (bandwidth x mbu)), at the 16-bit factors."""
    return cost_si(flops, nbytes, peak, s.bandwidth, s.mfu, s.mbu)


def price_body(s: Setup, flops, nbytes) -> Cost:
    """A weight matmul's Cost at the weight format's factors: max(flops / (peak x body_mfu), nbytes /
    (bandwidth x body_mbu))."""
    return cost_si(flops, nbytes, s.peak, s.bandwidth, s.body_mfu, s.body_mbu)


def forward_pass(s: Setup, decode_seqs, context, prefill_tokens, prefill_sq, prefill_seqs, fits=True,
                 tp: int = 1, kv_share: float = 1.0, new_tokens=1) -> Cost:
    """One forward pass on each GPU of a group of ``tp``, as its operations plus one overhead.

    ``decode_seqs`` sequences add ``new_tokens`` tokens each at ``context`` (1 in a decode step, k + 1 in the
    check pass of k speculative drafts); ``prefill_tokens`` prompt tokens (``prefill_seqs`` prompts whose
    squared lengths sum to ``prefill_sq``) are prefilled.  Body: 2 P_active FLOPs a token, the weights read once
    (an MoE body as three operations, see weight_matmuls); attention: 4 L A c FLOPs a decoding token and
    2 L A N^2 a prompt, each cache read once and the new K, V written (``kv_share`` of them on one GPU); head:
    2 d V FLOPs a token that gets logits, V x d weights read.  Each divided by ``tp``.
    """
    m = s.model
    decode_tokens = decode_seqs * new_tokens
    tokens = decode_tokens + prefill_tokens
    width = m.layers * m.attention_width
    parts = {name: price_body(s, w.flops / tp, w.bytes / tp) for name, w in weight_matmuls(s, tokens).items()}
    parts.update({
        # The new tokens of one sequence share its cache: it is read once however many of them there are.
        "attention": price(s, (decode_tokens * 4.0 * width * context + prefill_sq * 2.0 * width) / tp,
                           (decode_seqs * (context + new_tokens) + prefill_tokens) * s.kv_per_token * kv_share,
                           s.peak),
        "head": price(s, (decode_tokens + prefill_seqs) * 2.0 * m.d_model * m.vocab / tp,
                      m.vocab * m.d_model * s.embedding_bytes / tp, s.head_peak),
    })
    return combine(parts, s.overhead, fits)


def prefill_pass(s: Setup, prompt_len, batch, fits=True) -> Cost:
    """The prefill of ``batch`` prompts of ``prompt_len`` tokens: a pass with no decoding sequences."""
    tokens = batch * prompt_len
    return forward_pass(s, 0.0, 0.0, tokens, tokens * prompt_len, batch, fits)


def decode_pass(s: Setup, context_len, batch, fits=True, new_tokens=1) -> Cost:
    """One decode step of ``batch`` sequences at ``context_len``, each adding ``new_tokens``: a pass with no
    prompt tokens."""
    return forward_pass(s, batch, context_len, 0.0, 0.0, 0.0, fits, new_tokens=new_tokens)


@dataclass(frozen=True, slots=True)
class DecodeTerms:
    """A decode step's FLOPs and bytes by operation, attention's as linear functions of the context c:
    attention FLOPs = attention_flops_per_context x c, bytes = attention_bytes_fixed + attention_bytes_per_context
    x c.  ``body`` holds the weight matmuls by name (see weight_matmuls).  Floats, or arrays over the batch."""

    body: dict[str, Work]
    head_flops: float | np.ndarray
    head_bytes: float
    attention_flops_per_context: float | np.ndarray
    attention_bytes_fixed: float | np.ndarray  # the new token's K and V written
    attention_bytes_per_context: float | np.ndarray  # every sequence reads its own cache


def decode_terms(s: Setup, batch) -> DecodeTerms:
    """The operations of a decode step of ``batch`` sequences, as FLOPs and bytes (see DecodeTerms)."""
    m = s.model
    return DecodeTerms(
        body=weight_matmuls(s, batch),
        head_flops=batch * 2.0 * m.d_model * m.vocab,
        head_bytes=m.vocab * m.d_model * s.embedding_bytes,
        attention_flops_per_context=batch * 4.0 * m.layers * m.attention_width,
        attention_bytes_fixed=batch * s.kv_per_token,
        attention_bytes_per_context=batch * s.kv_per_token,
    )


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


def decode_total(s: Setup, prompt_len, steps, batch):
    """Total time of ``steps`` decode steps at contexts prompt_len .. prompt_len + steps - 1, s.

    Body, head and overhead are the same every step; attention's time is the max of two linear
    functions of the context, summed exactly over whole contexts.
    """
    t = decode_terms(s, batch)
    compute, memory = s.peak * s.mfu, s.bandwidth * s.mbu
    body_compute, body_memory = s.peak * s.body_mfu, s.bandwidth * s.body_mbu
    fixed = (sum(_max(w.flops / body_compute, w.bytes / body_memory) for w in t.body.values())
             + _max(t.head_flops / (s.head_peak * s.mfu), t.head_bytes / memory) + s.overhead)
    m0, m1 = t.attention_bytes_fixed / memory, t.attention_bytes_per_context / memory  # memory time = m0 + m1 c
    c1 = t.attention_flops_per_context / compute  # attention compute time = c1 x context
    lo, hi = prompt_len, prompt_len + steps - 1
    memory_sum = steps * m0 + m1 * (lo + hi) * steps / 2
    # max(compute, memory) = memory + max(0, compute - memory), summed exactly over whole contexts.
    return steps * fixed + memory_sum + _sum_relu(-m0, c1 - m1, lo, hi)
