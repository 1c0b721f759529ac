"""The course's mistakes, written as a student would make them, for every exercise.

``MISTAKES[exercise][mistake]`` takes the namespace of the reference solutions
(the source notebook's answers run) and returns the wrong answers a student
with that mistake hands in, in the order the test cell passes them.
``tests/test_exercises.py`` proves each fails at least one visible case, so a
student sees the mistake before the hidden tests do.  Keys that name one of
the checker's mistakes ("forgot 2 FLOPs per multiply-add") must also be named
in the failure message.
"""

import math

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


# -- 04_crossover ---------------------------------------------------------------------------------------------------

def _decode_parts(s, kv_values=2, per_batch=True, body="non_embedding", head_batch=True, memory_only=False):
    """decode_parts as a student with one of the listed slips writes it (the reference with every default)."""
    def parts(model, device, context_len, batch=1, precision="fp16"):
        def roofline(flops, nbytes):
            memory = (nbytes / device.memory_bandwidth).to("s")
            return memory if memory_only else max((flops / device.peak_flops(precision)).to("s"), memory)

        per_value = s["BYTES_PER_VALUE"][precision]
        kv = Q_(kv_values * model.layers * model.kv_heads * model.head_dim * per_value, "B")
        weights = model.non_embedding_params if body == "non_embedding" else model.total_params
        sequences = batch if per_batch else 1
        head_tokens = batch if head_batch else 1
        return {
            "body": roofline(Q_(batch * 2 * model.active_non_embedding_params, "FLOP"), Q_(weights * per_value, "B")),
            "attention": roofline(Q_(batch * 4 * model.layers * model.attention_width * context_len, "FLOP"),
                                  sequences * context_len * kv),
            "head": roofline(Q_(head_tokens * 2 * model.d_model * model.vocab, "FLOP"),
                             Q_(model.d_model * model.vocab * per_value, "B")),
        }

    return parts


def _moe(s, experts_read=None, all_experts=False, layers=True, per_value=None, flop_params="active",
         read_params=None):
    """(experts_read, moe_body_bytes, moe_compute_bound_batch) with one slip; the reference with every default."""
    count = experts_read or s["experts_read"]

    def body_bytes(model, batch, precision="fp16"):
        if read_params == "active":
            values = model.active_non_embedding_params
        elif all_experts:
            values = model.non_embedding_params
        else:
            experts = count(model.experts, model.experts_per_token, batch)
            values = model.shared_non_embedding_params + (model.layers if layers else 1) * experts * \
                model.expert_params_per_layer()
        return Q_(values * (per_value or s["BYTES_PER_VALUE"][precision]), "B")

    def compute_bound_batch(model, device, precision="fp16"):
        params = model.active_non_embedding_params if flop_params == "active" else model.non_embedding_params
        for batch in range(1, 1 << 16):  # a slip can make the bytes outgrow the FLOPs: give up then
            if (Q_(batch * 2 * params, "FLOP") / device.peak_flops(precision)
                    >= body_bytes(model, batch, precision) / device.memory_bandwidth):
                return batch
        return None

    return count, body_bytes, compute_bound_batch


def _attention_share(s, attention=2, params="active", logits=True):
    def share(model, prompt_len):
        n = s["np"].asarray(prompt_len, dtype=float)
        p = model.active_non_embedding_params if params == "active" else model.total_params
        a = attention * model.layers * model.attention_width * n ** 2
        rest = 2 * p * n + (2 * model.d_model * model.vocab if logits else 0)
        return a / (a + rest)

    return share


def _longer(s, step=False, steps=lambda out: out - 1, before=False, all_false_first=False, off_by_one=0):
    """(first_longer_prefill, exact_longer_prefill) with one slip; the reference with every default."""
    rl, np = s["rl"], s["np"]

    def longer(model, device, prompt_len, output_len):
        r = rl.request(model, device, prompt_len, output_len, allow_overflow=True)
        decode = r.itl if step else r.itl * steps(output_len)
        return np.asarray(r.ttft > decode)

    def first(model, device, output_len, prompt_lens):
        crossed = longer(model, device, prompt_lens, output_len)
        if not np.any(crossed) and not all_false_first:
            return None
        index = int(np.argmax(crossed)) - (1 if before else 0)
        return int(np.asarray(prompt_lens)[max(index, 0)])

    def exact(model, device, output_len, lo, hi):
        if not bool(longer(model, device, hi, output_len)):
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            if bool(longer(model, device, mid, output_len)):
                hi = mid
            else:
                lo = mid + 1
        return lo + off_by_one

    return first, exact


def _balanced(s, ideal=False, steps=lambda out: out - 1, none=math.inf, plus=0):
    rl = s["rl"]

    def balanced(model, device, prompt_len, efficiency="ideal"):
        efficiency = "ideal" if ideal else efficiency

        def decode_longer(out):
            r = rl.request(model, device, prompt_len, out, allow_overflow=True, efficiency=efficiency)
            return r.itl * steps(out) >= r.ttft

        lo, hi = 2, model.max_context - prompt_len + 1
        if hi < lo or not decode_longer(hi):
            return none
        while lo < hi:
            mid = (lo + hi) // 2
            if decode_longer(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo + plus

    return balanced


def _spec(s, at_batch_1=False, ideal=False, one_step=False, one_prefill=False, per_sequence=False, swapped=False):
    rl = s["rl"]

    def spec(model, device, prompt_len, output_len, batch, efficiency="typical"):
        efficiency = "ideal" if ideal else efficiency
        b = 1 if at_batch_1 else batch
        r = rl.request(model, device, prompt_len, output_len, batch=b, allow_overflow=True, efficiency=efficiency)
        ttft = rl.request(model, device, prompt_len, output_len, allow_overflow=True,
                          efficiency=efficiency).ttft if one_prefill else r.ttft
        decode = r.itl if one_step else r.decode_time / (batch if per_sequence else 1)
        prefill_side = ttft >= decode
        if swapped:
            prefill_side = not prefill_side
        return "peak FLOP/s" if prefill_side else "memory bandwidth"

    return spec


MISTAKES.update({
    "compute_bound_batch": {
        "GB for GiB": lambda s: (_scaled(s["compute_bound_batch"], 1e9 / 2**30),),
        "FLOPs without the 2 of a multiply-add": lambda s: (_scaled(s["compute_bound_batch"], 2),),
        "parameters for bytes (one byte a weight)": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) / s["BYTES_PER_VALUE"][p],),
        "the FP16 peak with 8-bit weights": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) * (d.peak_flops("fp16") / d.peak_flops(p)).m_as(""),),
        "2 bytes a weight at any precision": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) * 2 / s["BYTES_PER_VALUE"][p],),
    },
    "decode_parts": {
        "query heads for KV heads": lambda s: (
            lambda m, p="fp16": s["attention_intensity"](m, p) * m.kv_heads / m.heads, s["decode_parts"]),
        "forgot K and V (or the 2 bytes of an fp16 value)": lambda s: (
            _scaled(s["attention_intensity"], 2), s["decode_parts"]),
        "forgot K or V in the cache": lambda s: (s["attention_intensity"], _decode_parts(s, kv_values=1)),
        "the cache of one sequence, not the batch": lambda s: (s["attention_intensity"], _decode_parts(s, per_batch=False)),
        "every weight in the body (the embedding table and head too)": lambda s: (
            s["attention_intensity"], _decode_parts(s, body="total")),
        "the head's FLOPs for one token, not the batch": lambda s: (
            s["attention_intensity"], _decode_parts(s, head_batch=False)),
        "a memory-only roofline": lambda s: (s["attention_intensity"], _decode_parts(s, memory_only=True)),
        "milliseconds for seconds": lambda s: (s["attention_intensity"], lambda *a: {
            k: Q_(v.m_as("ms"), "s") for k, v in s["decode_parts"](*a).items()}),
        "a bare number where a quantity is asked": lambda s: (s["attention_intensity"], lambda *a: {
            k: v.m_as("s") for k, v in s["decode_parts"](*a).items()}),
    },
    "moe_decode": {
        "k x B experts (no overlap)": lambda s: _moe(s, experts_read=lambda e, k, b: k * b),
        "min(E, k x B) (overlap ignored)": lambda s: _moe(s, experts_read=lambda e, k, b: min(e, k * b)),
        "k / E x B (a fraction of the experts, without saturation)": lambda s: _moe(
            s, experts_read=lambda e, k, b: k / e * b),
        "experts counted per token, not per batch": lambda s: _moe(s, experts_read=lambda e, k, b: k),
        "routing with replacement (1 - 1/E)^(k B)": lambda s: _moe(
            s, experts_read=lambda e, k, b: e * (1 - (1 - 1 / e) ** (k * b))),
        "the chance an expert is read, not the count": lambda s: _moe(
            s, experts_read=lambda e, k, b: 1 - (1 - k / e) ** b),
        "all the experts read at every batch": lambda s: _moe(s, all_experts=True),
        "only the active weights read (a dense model of the active size)": lambda s: _moe(s, read_params="active"),
        "the experts of one layer only": lambda s: _moe(s, layers=False),
        "2 bytes a value at any precision": lambda s: _moe(s, per_value=2),
        "GB for GiB": lambda s: (s["experts_read"], lambda m, b, p="fp16": Q_(
            s["moe_body_bytes"](m, b, p).m_as("B") / 2**30, "GB"), s["moe_compute_bound_batch"]),
        "FLOPs of every expert, not the active ones": lambda s: _moe(s, flop_params="all"),
        "the compute-bound batch of the active weights alone": lambda s: (
            s["experts_read"], s["moe_body_bytes"], _moe(s, read_params="active")[2]),
    },
    "attention_share": {
        "attention counted in full, not causal": lambda s: (_attention_share(s, attention=4), s["attention_half_len"]),
        "logits left out": lambda s: (_attention_share(s, logits=False), s["attention_half_len"]),
        "the embedding table and head in P": lambda s: (
            _attention_share(s, params="total"),
            lambda m: m.total_params / (m.layers * m.attention_width)),
        "a percentage for a fraction": lambda s: (_scaled(s["attention_share"], 100), s["attention_half_len"]),
        "half-way length of a full attention matrix": lambda s: (
            s["attention_share"], lambda m: m.active_non_embedding_params / (2 * m.layers * m.attention_width)),
        "half-way length without the layers": lambda s: (
            s["attention_share"], lambda m: m.active_non_embedding_params / m.attention_width),
    },
    "longer_prefill": {
        "np.argmax of all-False taken as a crossing": lambda s: _longer(s, all_false_first=True),
        "the grid point before the crossing": lambda s: _longer(s, before=True),
        "TTFT against one decode step": lambda s: _longer(s, step=True),
        "the decode of output_len steps, not output_len - 1": lambda s: _longer(s, steps=lambda out: out),
        "bisection one past the crossing": lambda s: _longer(s, off_by_one=1),
    },
    "balanced_output_len": {
        "efficiency ignored (always the ideal)": lambda s: (_balanced(s, ideal=True),),
        "the decode of output_len steps, not output_len - 1": lambda s: (_balanced(s, steps=lambda out: out),),
        "None instead of math.inf": lambda s: (_balanced(s, none=None),),
        "the search's upper end instead of math.inf": lambda s: (
            lambda m, d, n, e="ideal": min(s["balanced_output_len"](m, d, n, e), m.max_context - n + 1),),
        "one past the crossing": lambda s: (_balanced(s, plus=1),),
    },
    "spec_to_buy": {
        "decided at batch 1": lambda s: (_spec(s, at_batch_1=True),),
        "decided at the ideal": lambda s: (_spec(s, ideal=True),),
        "TTFT against one decode step": lambda s: (_spec(s, one_step=True),),
        "one prompt's prefill against the batch's decode": lambda s: (_spec(s, one_prefill=True),),
        "decode time per sequence (divided by the batch)": lambda s: (_spec(s, per_sequence=True),),
        "short answers taken to mean FLOP/s": lambda s: (
            lambda m, d, n, o, b, e="typical": "memory bandwidth" if o > n else "peak FLOP/s",),
        "the two answers swapped": lambda s: (_spec(s, swapped=True),),
    },
})
