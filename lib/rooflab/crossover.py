"""Crossovers: the points where the binding resource, or the dominant cost, changes.

>>> import rooflab as rl
>>> round(rl.attention_crossover_len(rl.model("Llama-3-8B")))
53250
"""

from __future__ import annotations

import math

import numpy as np

from .hardware import Hardware
from .models import Model, model as _model
from .precision import Precision
from .serving import _decode_linear_si, _decode_total_si, _prefill_si, _setup
from .validation import lengths

__all__ = [
    "attention_share",
    "attention_crossover_len",
    "decode_compute_bound_batch",
    "ttft_exceeds_decode_len",
    "balanced_output_len",
]


def _per_element(search, values):
    """Apply a scalar search to each element of an array (searches do not vectorise), or to a scalar."""
    if np.ndim(values):
        return np.array([search(int(v)) for v in np.ravel(values)], dtype=float).reshape(np.shape(values))
    return search(values)


def _first_true(predicate, lo: int, hi: int) -> float:
    """Smallest whole x in [lo, hi] with predicate(x) true, for a predicate false then true; inf if none."""
    if not predicate(hi):
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

    2 L A N^2 / (2 L A N^2 + 2 P N + 2 d V), with A the attention width and P the
    active non-embedding parameters.
    """
    m = _model(model)
    n = np.asarray(lengths(prompt_len, "prompt_len"), dtype=float)
    attention = 2.0 * m.layers * m.attention_width * n * n
    rest = 2.0 * m.active_non_embedding_params * n + 2.0 * m.d_model * m.vocab
    share = attention / (attention + rest)
    return float(share) if share.ndim == 0 else share


def attention_crossover_len(model: Model | str) -> float:
    """Prompt length (tokens, a float) at which attention FLOPs equal the rest of the prefill.

    Root of L A N^2 = P N + d V; close to P / (L x A).
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
    mfu: float = 1.0,
    mbu: float = 1.0,
    max_batch: int = 1 << 24,
) -> float:
    """Smallest batch at which a decode step becomes compute-bound; ``math.inf`` if it never does.

    With ``context_len=0`` KV reads are left out and the answer sits near the ridge point
    times (weight bytes / FLOPs per token).  Each sequence's own KV read adds bytes at an
    intensity of only about heads / kv_heads FLOP/B, so past a modest context the step stays
    memory-bound at any batch.  Memory capacity is not considered here.
    """
    s = _setup(model, hardware, precision, mfu, mbu)

    def search(c: int) -> float:
        def compute_bound(batch: int) -> bool:
            f0, f1, b0, b1 = _decode_linear_si(s, batch)
            return (f0 + f1 * c) / (s.peak * s.mfu) >= (b0 + b1 * c) / (s.bandwidth * s.mbu)

        return _first_true(compute_bound, 1, max_batch)

    return _per_element(search, lengths(context_len, "context_len", minimum=0))


def ttft_exceeds_decode_len(
    model: Model | str,
    hardware: Hardware | str,
    output_len: int,
    precision: str | Precision = "fp16",
    batch: int = 1,
    max_prompt_len: int = 1 << 22,
) -> float:
    """Smallest prompt length whose TTFT exceeds the decode time of an ``output_len``-token answer.

    Decode time is (output_len - 1) x ITL as in :func:`rooflab.request`; ``math.inf`` if no
    prompt up to ``max_prompt_len`` gets there.  An array of answer lengths gives an array.
    Memory capacity is not considered here.
    """
    s = _setup(model, hardware, precision)
    b = lengths(batch, "batch")

    def search(out: int) -> float:
        def prefill_longer(n: int) -> bool:
            return _prefill_si(s, n, b).time_si > _decode_total_si(s, n, out - 1, b)

        return _first_true(prefill_longer, 1, max_prompt_len)

    return _per_element(search, lengths(output_len, "output_len", minimum=2))


def balanced_output_len(
    model: Model | str,
    hardware: Hardware | str,
    prompt_len: int,
    precision: str | Precision = "fp16",
    batch: int = 1,
    max_output_len: int = 1 << 24,
) -> float:
    """Smallest answer length whose decode time reaches the TTFT of a ``prompt_len`` prompt.

    Answers shorter than this spend most of the request in prefill (a summariser); longer
    ones in decode (a chatbot).  Divide by prompt_len for the output/input ratio.
    """
    s = _setup(model, hardware, precision)
    b = lengths(batch, "batch")

    def search(n: int) -> float:
        ttft = _prefill_si(s, n, b).time_si

        def decode_longer(out: int) -> bool:
            return _decode_total_si(s, n, out - 1, b) >= ttft

        return _first_true(decode_longer, 2, max_output_len)

    return _per_element(search, lengths(prompt_len, "prompt_len"))
