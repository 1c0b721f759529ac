"""Crossovers: the points where the binding resource, or the dominant cost, changes.

They follow the per-operation model of :mod:`rooflab.serving` and say which
operation crosses: a decode step's weight matmuls (the ``body``) turn
compute-bound at a batch that hardly depends on the context, while attention
over the cache stays memory-bound.  The formulas are in docs/formulas.md
(assignments 4 and 4b derive them).  Each search stays inside the model's context.  The
functions return a plain number (``math.inf`` when nothing crosses); with
``detail=True`` they return a :class:`Crossing` that also names the operation
and says whether the configuration there fits in memory.

>>> import rooflab as rl
>>> round(rl.attention_crossover_len(rl.model("Llama-3-8B")))
53250
>>> rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=4000)
296
>>> b = rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=4000, detail=True)
>>> b.value, b.operation, b.fits
(296, 'body', False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .efficiency import Efficiency
from .hardware import Hardware
from .models import Model, model as _model
from .precision import Precision
from .memory import check_fit
from .operations import decode_pass, decode_terms, decode_total, prefill_pass, setup
from .validation import lengths

__all__ = [
    "Crossing",
    "attention_share",
    "attention_crossover_len",
    "decode_compute_bound_batch",
    "prefill_compute_bound_len",
    "ttft_exceeds_decode_len",
    "balanced_output_len",
]

_OPERATIONS = ("body", "projections", "router", "experts", "attention", "head", "step")


@dataclass(frozen=True)
class Crossing:
    """A crossover point with its explanation: ``value`` (whole tokens or sequences, ``math.inf`` when
    nothing crosses), the ``operation`` that crosses, whether the configuration there ``fits`` in memory,
    and a ``note`` in words."""

    value: float
    operation: str
    fits: bool
    note: str

    def __float__(self) -> float:
        return float(self.value)

    def __str__(self) -> str:
        return self.note


def _per_element(search, values, detail: bool):
    """Apply a scalar search (returning a Crossing) to each element of an array, or to a scalar; return
    the values (an array for an array), or the Crossings themselves (a list for an array) with ``detail``."""
    if np.ndim(values):
        found = [search(int(v)) for v in np.ravel(values)]
        if detail:
            return found
        return np.array([c.value for c in found], dtype=float).reshape(np.shape(values))
    found = search(values)
    return found if detail else found.value


def _first_true(predicate, lo: int, hi: int) -> float:
    """Smallest whole x in [lo, hi] with predicate(x) true, for a predicate false then true; inf if none."""
    if hi < lo or not predicate(hi):
        return math.inf
    if predicate(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid
    return hi


def attention_share(model: Model | str, prompt_len):
    """Fraction of prefill FLOPs spent in causal attention (QK^T and AV), a float or array.

    Attention's FLOPs over the whole prefill's (body, attention and head), counted as :func:`rooflab.prefill`
    does; docs/formulas.md.  Raises ContextTooLong beyond the model's context.
    """
    m = _model(model)
    n = lengths(prompt_len, "prompt_len")
    m.check_context(n, "this prompt")
    n = np.asarray(n, dtype=float)
    attention = 2.0 * m.layers * m.attention_width * n * n
    rest = 2.0 * m.active_non_embedding_params * n + 2.0 * m.d_model * m.vocab
    share = attention / (attention + rest)
    return float(share) if share.ndim == 0 else share


def attention_crossover_len(model: Model | str) -> float:
    """Prompt length (tokens, a float) at which attention FLOPs equal the rest of the prefill.

    Set by the shapes alone (docs/formulas.md), so it may lie
    beyond the model's context (compare with ``model.max_context``).
    """
    m = _model(model)
    a = m.layers * m.attention_width
    p = m.active_non_embedding_params
    c = m.d_model * m.vocab
    return (p + math.sqrt(p * p + 4.0 * a * c)) / (2.0 * a)


def decode_compute_bound_batch(
    model: Model | str,
    hardware: Hardware | str,
    context_len: int = 0,
    precision: str | Precision = "fp16",
    mfu: float | None = None,
    mbu: float | None = None,
    max_batch: int = 1 << 24,
    efficiency: str | Efficiency = "ideal",
    operation: str = "body",
    detail: bool = False,
) -> float | Crossing:
    """Smallest batch at which ``operation`` of a decode step turns compute-bound; ``math.inf`` if none does.

    ``"body"`` (the weight matmuls, the default): where their compute time reaches their memory time, which
    hardly depends on the context; for a mixture of experts, when its last weight matmul turns (the experts;
    ``"projections"``, ``"router"`` and ``"experts"`` ask about one of them).  ``"head"``: likewise for the output
    head.  ``"attention"``: over the cache, which does not turn on today's
    devices.  ``"step"``: the whole step's ``bound`` (compute-bound parts take most of its time).
    With ``detail=True``, a Crossing that also says whether that batch at ``context_len`` fits in memory.
    """
    s = setup(model, hardware, precision, mfu, mbu, efficiency=efficiency)
    _check_operation(operation, s)
    compute, memory = s.peak * s.mfu, s.bandwidth * s.mbu
    body_compute, body_memory = s.peak * s.body_mfu, s.bandwidth * s.body_mbu  # the weight format's factors

    def search(c: int) -> Crossing:
        s.model.check_context(c + 1, "this decode step")

        def compute_bound(batch: int) -> bool:
            t = decode_terms(s, batch)
            if operation == "body":  # every weight matmul (an MoE's experts last)
                return all(w.flops / body_compute >= w.bytes / body_memory for w in t.body.values())
            if operation in t.body:
                return t.body[operation].flops / body_compute >= t.body[operation].bytes / body_memory
            if operation == "head":
                return t.head_flops / (s.head_peak * s.mfu) >= t.head_bytes / memory
            if operation == "attention":
                return (t.attention_flops_per_context * c / compute
                        >= (t.attention_bytes_fixed + t.attention_bytes_per_context * c) / memory)
            return decode_pass(s, c, batch).bound == "compute"

        batch = _first_true(compute_bound, 1, max_batch)
        return _crossing(batch, operation, s, lambda b: b * (c + 1), f"decode at context {c:,}")

    return _per_element(search, lengths(context_len, "context_len", minimum=0), detail)


def _check_operation(operation: str, s) -> None:
    """Raise unless ``operation`` names an operation of this model's pass (MoE parts only for an MoE model)."""
    moe = ("projections", "router", "experts")
    allowed = [o for o in _OPERATIONS if s.model.is_moe or o not in moe]
    if operation not in allowed:
        raise ValueError(f"operation must be one of {', '.join(allowed)} for {s.model.name}, got {operation!r}")


def _crossing(value: float, operation: str, s, tokens_held, what: str) -> Crossing:
    """Wrap a search result with whether the configuration there fits, and a sentence."""
    if value == math.inf:
        return Crossing(value, operation, True, f"{what}: {operation} never crosses within the searched range")
    fits = bool(check_fit(s, tokens_held(int(value)), what, allow_overflow=True))
    note = f"{what}: {operation} crosses at {value:,.0f}" + ("" if fits else ", which does not fit in memory")
    return Crossing(value, operation, fits, note)


def prefill_compute_bound_len(
    model: Model | str,
    hardware: Hardware | str,
    batch: int = 1,
    precision: str | Precision = "fp16",
    mfu: float | None = None,
    mbu: float | None = None,
    efficiency: str | Efficiency = "ideal",
    operation: str = "body",
    detail: bool = False,
) -> float | Crossing:
    """Shortest prompt whose prefill ``operation`` is compute-bound; ``math.inf`` if none within the context.

    ``"body"`` (default): where the weight matmuls' compute time reaches their memory time (a short chat
    prompt is memory-bound).  ``"step"``: the whole prefill's
    ``bound``.  ``"attention"`` and ``"head"`` likewise for those operations.
    """
    s = setup(model, hardware, precision, mfu, mbu, efficiency=efficiency)
    _check_operation(operation, s)
    b = lengths(batch, "batch")
    body = ("projections", "router", "experts") if s.model.is_moe else ("body",)

    def compute_bound(n: int) -> bool:
        cost = prefill_pass(s, n, b)
        if operation == "body":
            return all(cost.parts[name].bound == "compute" for name in body)
        return (cost if operation == "step" else cost.parts[operation]).bound == "compute"

    n = _first_true(compute_bound, 1, s.model.max_context)
    found = _crossing(n, operation, s, lambda k: b * k, f"a prefill of batch {b}")
    return found if detail else found.value


def ttft_exceeds_decode_len(
    model: Model | str,
    hardware: Hardware | str,
    output_len: int,
    batch: int = 1,
    precision: str | Precision = "fp16",
    max_prompt_len: int = 1 << 22,
    efficiency: str | Efficiency = "ideal",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead=None,
    detail: bool = False,
) -> float | Crossing:
    """Smallest prompt length whose TTFT exceeds the decode time of an ``output_len``-token answer.

    Decode time as in :func:`rooflab.request`; ``math.inf`` if no prompt
    whose request fits the model's context (as :func:`rooflab.request` counts it) or ``max_prompt_len``
    gets there.  With ``detail=True`` the Crossing's ``operation`` names the prefill's dominant operation
    there.  An array of answer lengths gives an array.
    """
    s = setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    b = lengths(batch, "batch")

    def search(out: int) -> Crossing:
        def prefill_longer(n: int) -> bool:
            return prefill_pass(s, n, b).time_si > decode_total(s, n, out - 1, b)

        limit = min(max_prompt_len, s.model.max_context - out + 1)
        n = _first_true(prefill_longer, 1, limit)
        operation = prefill_pass(s, int(n), b).dominant if n != math.inf else "prefill"
        return _crossing(n, operation, s, lambda k: b * (k + out), f"a {out:,}-token answer")

    return _per_element(search, lengths(output_len, "output_len", minimum=2), detail)


def balanced_output_len(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len: int,
    batch: int = 1,
    precision: str | Precision = "fp16",
    max_output_len: int = 1 << 24,
    efficiency: str | Efficiency = "ideal",
    mfu: float | None = None,
    mbu: float | None = None,
    overhead=None,
    detail: bool = False,
) -> float | Crossing:
    """Smallest answer length whose decode time reaches the TTFT of a ``prompt_len`` prompt.

    Answers shorter than this spend most of the request in prefill (a summariser); longer
    ones in decode (a chatbot).  Divide by prompt_len for the output/input ratio.  ``math.inf``
    if no answer within the model's context gets there.  With ``detail=True`` the Crossing's
    ``operation`` names the decode step's dominant operation there.
    """
    s = setup(model, hardware, precision, mfu, mbu, overhead, efficiency)
    b = lengths(batch, "batch")

    def search(n: int) -> Crossing:
        s.model.check_context(n, "this prompt")
        ttft = prefill_pass(s, n, b).time_si

        def decode_longer(out: int) -> bool:
            return decode_total(s, n, out - 1, b) >= ttft

        limit = min(max_output_len, s.model.max_context - n + 1)
        out = _first_true(decode_longer, 2, limit)
        operation = decode_pass(s, n + int(out) - 2, b).dominant if out != math.inf else "decode"
        return _crossing(out, operation, s, lambda k: b * (n + k), f"a {n:,}-token prompt")

    return _per_element(search, lengths(prompt_len, "prompt_len"), detail)
