"""The course's mistakes, written as a student would make them, for every exercise.

``MISTAKES[exercise][mistake]`` takes the namespace of the reference solutions
(the source notebook's answers run) and returns the wrong answers a student
with that mistake hands in, in the order the test cell passes them.
``tests/test_exercises.py`` proves each fails at least one visible case, so a
student sees the mistake before the hidden tests do.  Keys that name one of
the checker's mistakes ("forgot 2 FLOPs per multiply-add") must also be named
in the failure message.
"""

from rooflab import Q_


def _scaled(function, factor):
    return lambda *args, **kwargs: function(*args, **kwargs) * factor


MISTAKES = {
    "prefill_flops": {
        "forgot 2 FLOPs per multiply-add": lambda s: (_scaled(s["prefill_flops"], 0.5),),
        "attention counted in full, not causal": lambda s: (
            lambda m, n: s["prefill_flops"](m, n) + Q_(2 * m.layers * m.attention_width * n * n, "FLOP"),),
        "attention left out": lambda s: (
            lambda m, n: s["prefill_flops"](m, n) - Q_(2 * m.layers * m.attention_width * n * n, "FLOP"),),
        "logits left out": lambda s: (lambda m, n: s["prefill_flops"](m, n) - Q_(2 * m.d_model * m.vocab, "FLOP"),),
        "logits for every prompt token": lambda s: (
            lambda m, n: s["prefill_flops"](m, n) + Q_(2 * m.d_model * m.vocab * (n - 1), "FLOP"),),
        "the embedding table and head multiplied too": lambda s: (
            lambda m, n: s["prefill_flops"](m, n) + Q_(2 * (m.total_params - m.non_embedding_params) * n, "FLOP"),),
        "a unit prefix (G for none?)": lambda s: (lambda m, n: Q_(s["prefill_flops"](m, n).m_as("GFLOP"), "FLOP"),),
        "a bare number where a quantity is asked": lambda s: (lambda m, n: s["prefill_flops"](m, n).m_as("FLOP"),),
    },
}


# -- 02_kv_cache ------------------------------------------------------------------------------

def _fits(s, room=None, batch_of=None, cache_format=True, floor=True, none_below_zero=True, per_batch=True):
    """(kv_room, max_batch, longest_context) built on a room function, with the given slips."""
    room = room or s["kv_room"]
    cache = s["kv_cache_bytes"]

    def whole(x):
        x = x if floor else round(x)
        return max(0, int(x)) if none_below_zero else int(x)

    def max_batch(m, d, c, w="fp16", kv="fp16", u=1.0):
        per = cache(m, c, 1, kv) if cache_format else cache(m, c, 1)
        return whole((room(m, d, w, u) / per).m_as(""))

    def longest_context(m, d, b, w="fp16", kv="fp16", u=1.0):
        per = cache(m, 1, b if per_batch else 1, kv) if cache_format else cache(m, 1, b)
        return whole((room(m, d, w, u) / per).m_as(""))

    return room, max_batch, longest_context


def _step(s, flops=None, nbytes=None, combine=max, peak_format=True):
    """A decode_step_time with its FLOPs, bytes or combination of the two times replaced."""
    flops = flops or (lambda m, c, b, p: b * s["decode_flops"](m, c))
    nbytes = nbytes or (lambda m, c, b, p: s["weight_bytes"](m, p) + s["kv_cache_bytes"](m, c, b, p))

    def decode_step_time(m, d, c, b=1, p="fp16"):
        peak = d.peak_flops(p if peak_format else "fp16")
        return combine((flops(m, c, b, p) / peak).to("s"), (nbytes(m, c, b, p) / d.memory_bandwidth).to("s"))

    return decode_step_time


def _gain(step):
    return lambda m, d, c, b, p="fp16": (b * step(m, d, c, 1, p) / step(m, d, c, b, p)).m_as("")


def _profile(s, mfu=None, step_bytes=None, mbu=None):
    return mfu or s["mfu"], step_bytes or s["step_bytes"], mbu or s["mbu"]


def _moved(s, weights):
    """A step_bytes with the weights counted by ``weights(model, batch)`` parameters."""
    return lambda m, c, b=1, p="fp16": (Q_(weights(m, b) * s["BYTES_PER_VALUE"][p], "B")
                                        + s["kv_cache_bytes"](m, c, b, p))


MISTAKES.update({
    "kv_bytes_per_token": {
        "forgot K and V (or the 2 bytes of an fp16 value)": lambda s: (_scaled(s["kv_bytes_per_token"], 0.5),),
        "KV in values, not bytes": lambda s: (lambda m, p="fp16": Q_(2 * m.layers * m.kv_heads * m.head_dim, "B"),),
        "query heads for KV heads": lambda s: (
            lambda m, p="fp16": s["kv_bytes_per_token"](m, p) * m.heads / m.kv_heads,),
        "bits for bytes": lambda s: (_scaled(s["kv_bytes_per_token"], 8),),
        "2 bytes a value whatever the format": lambda s: (lambda m, p="fp16": s["kv_bytes_per_token"](m, "fp16"),),
        "32 layers written in": lambda s: (lambda m, p="fp16": s["kv_bytes_per_token"](m, p) * 32 / m.layers,),
        "a bare number where a quantity is asked": lambda s: (
            lambda m, p="fp16": s["kv_bytes_per_token"](m, p).m_as("B"),),
    },
    "kv_cache_bytes": {
        "per sequence for per batch": lambda s: (lambda m, c, b=1, p="fp16": s["kv_cache_bytes"](m, c, 1, p),),
        "the cache's format not passed on": lambda s: (lambda m, c, b=1, p="fp16": s["kv_cache_bytes"](m, c, b),),
        "GB for GiB": lambda s: (lambda m, c, b=1, p="fp16": Q_(s["kv_cache_bytes"](m, c, b, p).m_as("B") / 2**30, "GB"),),
        "forgot K and V (or the 2 bytes of an fp16 value)": lambda s: (_scaled(s["kv_cache_bytes"], 0.5),),
        "query heads for KV heads": lambda s: (
            lambda m, c, b=1, p="fp16": s["kv_cache_bytes"](m, c, b, p) * m.heads / m.kv_heads,),
    },
    "max_batch": {
        "GB for GiB": lambda s: _fits(s, room=lambda m, d, w="fp16", u=1.0: Q_(
            u * d.memory_capacity.m_as("GiB"), "GB") - s["weight_bytes"](m, w)),
        "the label for the capacity": lambda s: _fits(
            s, room=lambda m, d, w="fp16", u=1.0: u * Q_(80, "GB") - s["weight_bytes"](m, w)),
        "the reserve taken from what the weights leave": lambda s: _fits(
            s, room=lambda m, d, w="fp16", u=1.0: u * (d.memory_capacity - s["weight_bytes"](m, w))),
        "the weights left out": lambda s: _fits(s, room=lambda m, d, w="fp16", u=1.0: u * d.memory_capacity),
        "16-bit weights whatever the format": lambda s: _fits(
            s, room=lambda m, d, w="fp16", u=1.0: u * d.memory_capacity - s["weight_bytes"](m)),
        "the cache's format not passed on": lambda s: _fits(s, cache_format=False),
        "rounded to the nearest, not down": lambda s: _fits(s, floor=False),
        "a negative count when the weights do not fit": lambda s: _fits(s, none_below_zero=False),
        "longest context per sequence, not per batch": lambda s: _fits(s, per_batch=False),
    },
    "decode_step_time": {
        "milliseconds for seconds": lambda s: (
            lambda m, d, c, b=1, p="fp16": Q_(s["decode_step_time"](m, d, c, b, p).m_as("ms"), "s"),),
        "a memory-only step": lambda s: (_step(s, combine=lambda compute, memory: memory),),
        "a compute-only step": lambda s: (_step(s, combine=lambda compute, memory: compute),),
        "compute and memory times added": lambda s: (_step(s, combine=lambda compute, memory: compute + memory),),
        "the FLOPs of one sequence": lambda s: (_step(s, flops=lambda m, c, b, p: s["decode_flops"](m, c)),),
        "the weights read once per sequence": lambda s: (_step(s, nbytes=lambda m, c, b, p: b * s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, c, b, p)),),
        "per sequence for per batch (one cache)": lambda s: (_step(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, c, 1, p)),),
        "KV in values, not bytes": lambda s: (_step(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, c, b, p) / s["BYTES_PER_VALUE"][p]),),
        "the 16-bit peak whatever the format": lambda s: (_step(s, peak_format=False),),
        "16-bit bytes whatever the format": lambda s: (_step(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m) + s["kv_cache_bytes"](m, c, b)),),
    },
    "profile": {
        "a percentage for a fraction": lambda s: _profile(s, mfu=_scaled(s["mfu"], 100)),
        "milliseconds for seconds": lambda s: _profile(s, mfu=lambda f, t, d, p="fp16": (
            f.m_as("FLOP") / t.m_as("ms") / d.peak_flops(p).m_as("FLOP/s"))),
        "the 16-bit peak whatever the precision": lambda s: _profile(s, mfu=lambda f, t, d, p="fp16": s["mfu"](
            f, t, d)),
        "magnitudes without their units": lambda s: _profile(s, mfu=lambda f, t, d, p="fp16": (
            f.magnitude / t.magnitude / d.peak_flops(p).magnitude)),
        "the whole embedding table": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s[
            "weight_bytes"](m, p) + s["kv_cache_bytes"](m, c, b, p)),
        "the caches left out": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s["step_bytes"](
            m, 0, b, p)),
        "one sequence's cache for the batch's": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s[
            "step_bytes"](m, c, b, p) - s["kv_cache_bytes"](m, c, b - 1, p)),
        "the output head left out": lambda s: _profile(s, step_bytes=_moved(
            s, lambda m, b: m.non_embedding_params + b * m.d_model)),
        "16-bit bytes whatever the format": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s[
            "step_bytes"](m, c, b)),
        "a percentage for a fraction in mbu": lambda s: _profile(s, mbu=_scaled(s["mbu"], 100)),
        "milliseconds for seconds in mbu": lambda s: _profile(s, mbu=lambda n, t, d: (
            n.m_as("B") / t.m_as("ms") / d.memory_bandwidth.m_as("B/s"))),
        "GB for GiB": lambda s: _profile(s, mbu=lambda n, t, d: (
            n.m_as("GiB") / t.m_as("s") / d.memory_bandwidth.m_as("GB/s"))),
    },
    "batching_gain": {
        "step time for throughput (forgot that a step makes batch tokens)": lambda s: (
            lambda m, d, c, b, p="fp16": (s["decode_step_time"](m, d, c, 1, p)
                                          / s["decode_step_time"](m, d, c, b, p)).m_as(""),),
        "the gain upside down": lambda s: (lambda m, d, c, b, p="fp16": 1 / s["batching_gain"](m, d, c, b, p),),
        "a memory-only step": lambda s: (_gain(_step(s, combine=lambda compute, memory: memory)),),
        "the caches left out (the gain is the batch)": lambda s: (lambda m, d, c, b, p="fp16": float(b),),
    },
    "kv_equals_weights_batch": {
        "query heads for KV heads": lambda s: (
            lambda m, c, p="fp16": s["kv_equals_weights_batch"](m, c, p) * m.kv_heads / m.heads,),
        "forgot K and V (a factor of 2)": lambda s: (_scaled(s["kv_equals_weights_batch"], 2),),
        "the cache of one token, not of a sequence": lambda s: (
            lambda m, c, p="fp16": s["kv_equals_weights_batch"](m, c, p) * c,),
        "16-bit weights whatever the format": lambda s: (lambda m, c, p="fp16": (
            s["weight_bytes"](m) / s["kv_cache_bytes"](m, c, 1, p)).m_as(""),),
        "a 16-bit cache whatever the format": lambda s: (lambda m, c, p="fp16": (
            s["weight_bytes"](m, p) / s["kv_cache_bytes"](m, c, 1)).m_as(""),),
    },
    "fp8_kv_extra_sequences": {
        "the FP8 count, not the extra": lambda s: (
            lambda m, d, c, u=0.9: s["max_batch"](m, d, c, "fp16", "fp8", u),),
        "the weights in FP8 too": lambda s: (
            lambda m, d, c, u=0.9: s["max_batch"](m, d, c, "fp8", "fp8", u) - s["max_batch"](m, d, c, "fp16", "fp16", u),),
        "twice the FP16 batch": lambda s: (lambda m, d, c, u=0.9: s["max_batch"](m, d, c, "fp16", "fp16", u),),
        "the reserve written in (0.9)": lambda s: (lambda m, d, c, u=0.9: s["fp8_kv_extra_sequences"](m, d, c, 0.9),),
    },
})
