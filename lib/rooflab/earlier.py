"""The functions students wrote in earlier assignments, as the course writes them.

A later notebook imports what it builds on (``from rooflab.earlier import
decode_step_time``) instead of retyping it.  These are the back-of-envelope
versions of the exercises, not the library's careful counts: every weight is
read once per pass, and all of them, the output head's included, are stored in
the one format asked for.  The library (and assignment 6b's ``tp_step_time``)
keeps the head in 16-bit at FP8, as shipped FP8 checkpoints do, so at FP8 its
step comes out a little slower than :func:`step_time`; at 16-bit they agree.

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
           "decode_bytes", "roofline_time", "ttft_and_itl", "decode_step_time", "mean_context", "step_time",
           "tokens_per_second", "engine_state", "frontier_curve", "bend_batch", "best_batch", "cost_per_million",
           "all_reduce_time"]

# The assignment whose exercise each function answers.
WRITTEN_IN = {
    "decode_flops": "01_two_phases", "prefill_flops": "01_two_phases", "weight_bytes": "01_two_phases",
    "decode_bytes": "01_two_phases", "roofline_time": "01_two_phases", "ttft_and_itl": "01_two_phases",
    "kv_bytes_per_token": "02_kv_cache", "decode_step_time": "02_kv_cache",
    "step_time": "05_under_load", "tokens_per_second": "05_under_load", "engine_state": "05_under_load",
    "frontier_curve": "05_under_load", "bend_batch": "05_under_load", "best_batch": "05_under_load",
    "cost_per_million": "06_cost", "all_reduce_time": "06b_tensor_parallel",
}

# Bytes per stored value of each 16- and 8-bit format (assignment 1).
BYTES_PER_VALUE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def decode_flops(model, context_len):
    """FLOPs, in FLOP, of one decode step at batch 1 with ``context_len`` earlier tokens in the cache: the body's
    matmuls over the active non-embedding parameters, attention over the context, and the output head
    (assignment 1; docs/formulas.md, "The course's own versions")."""
    linear = 2 * model.active_non_embedding_params
    attention = 4 * model.layers * model.attention_width * context_len
    logits = 2 * model.d_model * model.vocab
    return Q_(linear + attention + logits, "FLOP")


def prefill_flops(model, prompt_len):
    """FLOPs, in FLOP, of prefilling one prompt of ``prompt_len`` tokens: the body's matmuls for every token,
    causal attention, and the output head for the last token only (assignment 1; docs/formulas.md)."""
    n = prompt_len
    return Q_(2 * model.active_non_embedding_params * n + 2 * model.layers * model.attention_width * n * n
              + 2 * model.d_model * model.vocab, "FLOP")


def weight_bytes(model, precision="fp16"):
    """Bytes, in B, of every weight (the embedding table and head included) stored in ``precision``, at
    :data:`BYTES_PER_VALUE` (assignment 1; docs/formulas.md)."""
    return Q_(model.total_params * BYTES_PER_VALUE[precision], "B")


def kv_bytes_per_token(model, precision="fp16"):
    """KV-cache bytes per token of context, in B (assignment 2's Exercise 1: its formula is left to the notebook)."""
    return Q_(2 * model.layers * model.kv_heads * model.head_dim * BYTES_PER_VALUE[precision], "B")


def decode_bytes(model, context_len, precision="fp16"):
    """Bytes one decode step moves at batch 1: every weight plus the cache of ``context_len`` tokens, in B."""
    return weight_bytes(model, precision) + context_len * kv_bytes_per_token(model, precision)


def roofline_time(flops, nbytes, device, precision="fp16"):
    """(time in s, "compute" or "memory"): the roofline time of ``flops`` and ``nbytes`` on ``device`` and which
    roof sets it, a tie going to compute; the peak is the device's at ``precision`` (``device.peak_flops(precision)``:
    pass "int8" or "fp8" for 8-bit math) (assignment 1; docs/formulas.md)."""
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


def mean_context(prompt_len, output_len):
    """Mean context of a decoding sequence, tokens (given in assignment 5): P + (O - 2) / 2."""
    return prompt_len + (output_len - 2) / 2


def step_time(model, device, context_len, batch, precision="fp16"):
    """Roofline time in s of one decode step of ``batch`` sequences: body, attention and head each timed with
    roofline_time, then added (assignment 5's Exercise 1).  The body's bytes include ``batch x d_model`` values:
    the one embedding-table row each sequence looks up for its new token."""
    value = BYTES_PER_VALUE[precision]
    kv = kv_bytes_per_token(model, precision).m_as("B")
    body, _ = roofline_time(Q_(batch * 2 * model.active_non_embedding_params, "FLOP"),
                            Q_((model.non_embedding_params + batch * model.d_model) * value, "B"), device, precision)
    attention, _ = roofline_time(Q_(batch * 4 * model.layers * model.attention_width * context_len, "FLOP"),
                                 Q_(batch * (context_len + 1) * kv, "B"), device, precision)
    head, _ = roofline_time(Q_(batch * 2 * model.d_model * model.vocab, "FLOP"),
                            Q_(model.vocab * model.d_model * value, "B"), device, precision)
    return body + attention + head


def tokens_per_second(model, device, prompt_len, output_len, batch, precision="fp16"):
    """Output tokens/s per GPU of ``batch`` sequences decoding at the mean context, prefills left out."""
    step = step_time(model, device, mean_context(prompt_len, output_len), batch, precision)
    return (Q_(batch, "token") / step).to("token/s")


def engine_state(model, device, prompt_len, output_len, batch, precision="fp16"):
    """(ITL, output tokens/s per GPU, TTFT) of continuous batching in steady state at ``batch``, typical
    efficiency, at most one prompt a step (assignment 5's Exercise 2)."""
    from .serving import decode_step, prefill

    share = batch / (output_len - 1)
    decode = decode_step(model, device, mean_context(prompt_len, output_len), batch, precision,
                         efficiency="typical", allow_overflow=True).time
    one = prefill(model, device, prompt_len, 1, precision, efficiency="typical", allow_overflow=True).time
    iteration = decode + share * one
    return iteration.to("ms"), (Q_(batch + share, "token") / iteration).to("token/s"), (one + iteration / 2).to("ms")


def _most(model, device, prompt_len, output_len, precision):
    from .serving import memory_budget

    return memory_budget(model, device, prompt_len + output_len, precision=precision).max_batch


def frontier_curve(model, device, prompt_len, output_len, precision="fp16"):
    """(ITL, output tokens/s per GPU) as arrays at every batch from 1 to the most that fit, typical efficiency."""
    states = [engine_state(model, device, prompt_len, output_len, batch, precision)
              for batch in range(1, _most(model, device, prompt_len, output_len, precision) + 1)]
    return (Q_([s[0].m_as("ms") for s in states], "ms"), Q_([s[1].m_as("token/s") for s in states], "token/s"))


def bend_batch(model, device, prompt_len, output_len, precision="fp16"):
    """The first batch that fits whose decode step's weight matmuls are compute-bound (typical), or None."""
    from .serving import decode_step

    for batch in range(1, _most(model, device, prompt_len, output_len, precision) + 1):
        step = decode_step(model, device, mean_context(prompt_len, output_len), batch, precision,
                           efficiency="typical")
        if step.parts["body"].bound == "compute":
            return batch
    return None


def best_batch(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16"):
    """The batch that fits and meets both targets with the most tokens/s per GPU (typical), 0 if none."""
    best, most = 0, 0.0
    for batch in range(1, _most(model, device, prompt_len, output_len, precision) + 1):
        itl, tokens, ttft = engine_state(model, device, prompt_len, output_len, batch, precision)
        if itl <= itl_limit and ttft <= ttft_limit and tokens.m_as("token/s") > most:
            best, most = batch, tokens.m_as("token/s")
    return best


def cost_per_million(price, tokens_per_second):
    """Dollars per million output tokens, USD/Mtok, of a GPU rented at ``price`` making ``tokens_per_second``."""
    return (price / tokens_per_second).to("USD/Mtok")


def all_reduce_time(message, gpus, device):
    """Seconds of one ideal ring all-reduce of ``message`` bytes on each of ``gpus`` GPUs of ``device``, over the
    link's one-way bandwidth (assignment 6b's Exercise 1: its formula is left to the notebook)."""
    if gpus == 1:
        return Q_(0.0, "s")  # a group of one sends nothing
    return (2 * (gpus - 1) / gpus * message / (device.interconnect_bandwidth / 2)).to("s")
