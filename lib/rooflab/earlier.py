"""The functions students wrote in earlier assignments, as the course writes them.

A later notebook imports what it builds on (``from rooflab.earlier import
decode_step_time``) instead of retyping it.  These are the back-of-envelope
versions of the exercises, not the library's careful counts: every weight is
read once per pass, and all of them are stored in the one format asked for.

The docstrings of the functions a later assignment asks for (:data:`WRITTEN_IN`) do not give their formula:
a student of that assignment reads this help.  Inside an exercise that asks for a derivation, the functions of that
assignment and later ones (:data:`WRITTEN_IN`) are switched off like the rest
of the library's answers; those of earlier assignments stay on, to build on.

>>> from rooflab import model, hardware
>>> time, bound = roofline_time(prefill_flops(model("Llama-3-8B"), 2000), weight_bytes(model("Llama-3-8B")),
...                             hardware("H100"))
>>> f"{time.m_as('ms'):.1f} ms, {bound}"
'29.3 ms, compute'
"""

from __future__ import annotations

from .units import Q_

__all__ = ["BYTES_PER_VALUE", "decode_flops", "prefill_flops", "weight_bytes", "kv_bytes_per_token",
           "decode_bytes", "roofline_time", "ttft_and_itl", "decode_step_time"]

# The assignment whose exercise each function answers.
WRITTEN_IN = {
    "decode_flops": "01_two_phases", "prefill_flops": "01_two_phases", "weight_bytes": "01_two_phases",
    "decode_bytes": "01_two_phases", "roofline_time": "01_two_phases", "ttft_and_itl": "01_two_phases",
    "kv_bytes_per_token": "02_kv_cache", "decode_step_time": "02_kv_cache",
}

# Bytes per stored value of each 16- and 8-bit format (assignment 1).
BYTES_PER_VALUE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def decode_flops(model, context_len):
    """FLOPs of one token attending to ``context_len`` earlier tokens: 2 P + 4 L A n + 2 d V, in FLOP."""
    linear = 2 * model.active_non_embedding_params
    attention = 4 * model.layers * model.attention_width * context_len
    logits = 2 * model.d_model * model.vocab
    return Q_(linear + attention + logits, "FLOP")


def prefill_flops(model, prompt_len):
    """FLOPs of prefilling one prompt of N tokens: 2 P N + 2 L A N^2 + 2 d V, in FLOP (assignment 1)."""
    n = prompt_len
    return Q_(2 * model.active_non_embedding_params * n + 2 * model.layers * model.attention_width * n * n
              + 2 * model.d_model * model.vocab, "FLOP")


def weight_bytes(model, precision="fp16"):
    """Bytes of every weight stored in ``precision``: total_params x bytes per value, in B (assignment 1)."""
    return Q_(model.total_params * BYTES_PER_VALUE[precision], "B")


def kv_bytes_per_token(model, precision="fp16"):
    """KV-cache bytes per token of context, in B (assignment 2's Exercise 1: its formula is left to the notebook)."""
    return Q_(2 * model.layers * model.kv_heads * model.head_dim * BYTES_PER_VALUE[precision], "B")


def decode_bytes(model, context_len, precision="fp16"):
    """Bytes one decode step moves at batch 1: every weight plus the cache of ``context_len`` tokens, in B."""
    return weight_bytes(model, precision) + context_len * kv_bytes_per_token(model, precision)


def roofline_time(flops, nbytes, device, precision="fp16"):
    """(time in s, "compute" or "memory"): max(F / peak FLOP/s, B / bandwidth) and the term that wins."""
    compute = (flops / device.peak_flops(precision)).to("s")
    memory = (nbytes / device.memory_bandwidth).to("s")
    return (compute, "compute") if compute >= memory else (memory, "memory")


def ttft_and_itl(model, device, prompt_len, precision="fp16"):
    """(TTFT, ITL) at batch 1 in s: the prefill's roofline time, and one decode step's at ``prompt_len`` tokens."""
    ttft, _ = roofline_time(prefill_flops(model, prompt_len), weight_bytes(model, precision), device, precision)
    itl, _ = roofline_time(decode_flops(model, prompt_len), decode_bytes(model, prompt_len, precision), device,
                           precision)
    return ttft, itl


def decode_step_time(model, device, context_len, batch=1, precision="fp16"):
    """Roofline time in s of one decode step of ``batch`` sequences (assignment 2's Exercise 4: its formula is left
    to the notebook)."""
    flops = batch * decode_flops(model, context_len)
    nbytes = weight_bytes(model, precision) + batch * context_len * kv_bytes_per_token(model, precision)
    time, _ = roofline_time(flops, nbytes, device, precision)
    return time
