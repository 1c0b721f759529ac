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


PER_VALUE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def _gib_weights(s):
    """weight_bytes with the mistake of edsger, the demo class's student: bytes / 2**30 labelled GB."""
    return lambda m, p="fp16": Q_(s["weight_bytes"](m, p).m_as("B") / 2**30, "GB")


def _decode_bytes(s, kv_heads=None, per_value=None, kv_scale=1.0, weights=None):
    """decode_bytes built with one slip: which heads, bytes per cached value, a factor on the cache, the weights."""
    def decode_bytes(m, n, p="fp16"):
        heads = m.kv_heads if kv_heads is None else kv_heads(m)
        value = PER_VALUE[p] if per_value is None else per_value
        cache = Q_(2 * m.layers * heads * m.head_dim * value * n * kv_scale, "B")
        return (weights or s["weight_bytes"])(m, p) + cache
    return decode_bytes


def _ttft_and_itl(s, weights=None, kv=True, prefill_compute_only=False, scale=1.0, swapped=False):
    """ttft_and_itl built from the reference functions with one slip."""
    def ttft_and_itl(m, d, n, p="fp16"):
        w = (weights or s["weight_bytes"])(m, p)
        if prefill_compute_only:
            ttft = (s["prefill_flops"](m, n) / d.peak_flops(p)).to("s")
        else:
            ttft, _ = s["roofline_time"](s["prefill_flops"](m, n), w, d, p)
        cache = s["decode_bytes"](m, n, p) - s["weight_bytes"](m, p) if kv else Q_(0, "B")
        itl, _ = s["roofline_time"](s["decode_flops"](m, n), w + cache, d, p)
        return (itl * scale, ttft * scale) if swapped else (ttft * scale, itl * scale)
    return ttft_and_itl


def _roofline(compute_term, memory_term, combine=max, words=("compute", "memory"), peak=None):
    """roofline_time built from its two terms, how they combine and the words it returns."""
    def roofline_time(flops, nbytes, device, precision="fp16"):
        compute = compute_term(flops, device.peak_flops(peak or precision))
        memory = memory_term(nbytes, device.memory_bandwidth)
        time = combine(compute, memory) if combine is not max else max(compute, memory)
        return time, words[0] if compute >= memory else words[1]
    return roofline_time


_compute = lambda f, peak: (f / peak).to("s")  # noqa: E731
_memory = lambda b, bandwidth: (b / bandwidth).to("s")  # noqa: E731


def _sla(s, budget_len=None, efficiency=None, check_itl=True, bare=False, check_memory=True):
    """sla_verdict with one slip: the context memory is checked at, the efficiency used, the limits compared."""
    import rooflab as rl

    def sla_verdict(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16",
                    efficiency_asked="typical"):
        context = (budget_len or (lambda p, o: p + o))(prompt_len, output_len)
        if check_memory and not rl.memory_budget(model, device, context, precision=precision).fits:
            return "does not fit"
        r = rl.request(model, device, prompt_len, output_len, precision=precision,
                       efficiency=efficiency or efficiency_asked)
        if bare:
            ttft_ok, itl_ok = r.ttft.m_as("ms") < ttft_limit.magnitude, r.itl.m_as("ms") < itl_limit.magnitude
        else:
            ttft_ok, itl_ok = r.ttft < ttft_limit, r.itl < itl_limit
        return "meets" if ttft_ok and (itl_ok or not check_itl) else "too slow"
    return sla_verdict


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
    "weight_bytes": {
        "parameters for bytes": lambda s: (lambda m, p="fp16": Q_(m.total_params, "B"),),
        "GB for GiB": lambda s: (_gib_weights(s),),
        "bits for bytes": lambda s: (_scaled(s["weight_bytes"], 8),),
        "the format ignored (2 bytes a value whatever is asked)": lambda s: (
            lambda m, p="fp16": Q_(m.total_params * 2, "B"),),
        "the embedding table and output head left out": lambda s: (
            lambda m, p="fp16": s["weight_bytes"](m, p) * (m.non_embedding_params / m.total_params),),
        "a bare number where a quantity is asked": lambda s: (lambda m, p="fp16": s["weight_bytes"](m, p).m_as("B"),),
    },
    "decode_bytes": {
        "query heads for KV heads": lambda s: (_decode_bytes(s, kv_heads=lambda m: m.heads),),
        "forgot K and V (or the 2 bytes of an fp16 value)": lambda s: (_decode_bytes(s, kv_scale=0.5),),
        "the KV cache counted in values, not bytes": lambda s: (_decode_bytes(s, per_value=1),),
        "GB for GiB": lambda s: (lambda m, n, p="fp16": Q_(s["decode_bytes"](m, n, p).m_as("B") / 2**30, "GB"),),
        "weights from a weight_bytes in GiB labelled GB": lambda s: (_decode_bytes(s, weights=_gib_weights(s)),),
        "the KV cache left out": lambda s: (lambda m, n, p="fp16": s["weight_bytes"](m, p),),
        "the cache of one token, not of the context": lambda s: (
            lambda m, n, p="fp16": s["decode_bytes"](m, 1, p),),
    },
    "roofline_time": {
        "milliseconds for seconds": lambda s: (
            lambda *a: (Q_(s["roofline_time"](*a)[0].m_as("ms"), "s"), s["roofline_time"](*a)[1]),),
        "a memory-only roofline (B / W, compute ignored)": lambda s: (
            lambda f, b, d, p="fp16": ((b / d.memory_bandwidth).to("s"), "memory"),),
        "a compute-only roofline (F / P, memory ignored)": lambda s: (
            lambda f, b, d, p="fp16": ((f / d.peak_flops(p)).to("s"), "compute"),),
        "compute and memory added, not the larger": lambda s: (_roofline(_compute, _memory, combine=lambda c, m: c + m),),
        "the binding words swapped": lambda s: (_roofline(_compute, _memory, words=("memory", "compute")),),
        "magnitudes without their units (TFLOP and GB assumed)": lambda s: (_roofline(
            lambda f, peak: Q_(f.magnitude / peak.m_as("TFLOP/s"), "s"),
            lambda b, bandwidth: Q_(b.magnitude / bandwidth.m_as("GB/s"), "s")),),
        "the fp16 peak whatever the format": lambda s: (_roofline(_compute, _memory, peak="fp16"),),
    },
    "ttft_and_itl": {
        "milliseconds for seconds": lambda s: (_ttft_and_itl(s, scale=1000),),
        "the KV cache left out of the decode step": lambda s: (_ttft_and_itl(s, kv=False),),
        "the prefill taken as compute-bound whatever the prompt (F / P alone)": lambda s: (
            _ttft_and_itl(s, prefill_compute_only=True),),
        "TTFT and ITL swapped": lambda s: (_ttft_and_itl(s, swapped=True),),
        "weights from a weight_bytes in GiB labelled GB": lambda s: (_ttft_and_itl(s, weights=_gib_weights(s)),),
    },
    "intensities": {
        "the binding words swapped": lambda s: (s["arithmetic_intensities"], lambda i, d, p="fp16": (
            "memory" if i >= d.ridge_point(p) else "compute")),
        "the fp16 ridge point whatever the format": lambda s: (s["arithmetic_intensities"], lambda i, d, p="fp16": (
            "compute" if i >= d.ridge_point("fp16") else "memory")),
        "the H100's ridge point hard-coded": lambda s: (s["arithmetic_intensities"], lambda i, d, p="fp16": (
            "compute" if i.m_as("FLOP/B") >= 295 else "memory")),
        "the prefill's intensity per prompt token": lambda s: (lambda m, n, p="fp16": (
            s["arithmetic_intensities"](m, n, p)[0] / n, s["arithmetic_intensities"](m, n, p)[1]),
            s["binding_resource"]),
        "bytes per FLOP, not FLOPs per byte": lambda s: (lambda m, n, p="fp16": tuple(
            1 / i for i in s["arithmetic_intensities"](m, n, p)), s["binding_resource"]),
        "weights from a weight_bytes in GiB labelled GB": lambda s: (lambda m, n, p="fp16": (
            (s["prefill_flops"](m, n) / _gib_weights(s)(m, p)).to("FLOP/B"),
            s["arithmetic_intensities"](m, n, p)[1]), s["binding_resource"]),
    },
    "speedups": {
        "new / old instead of old / new": lambda s: (lambda m, old, new, n, p="fp16": tuple(
            1 / g for g in s["speedups"](m, old, new, n, p)), s["ttft_follows"], s["itl_follows"]),
        "the TTFT speed-up taken from the bandwidth": lambda s: (lambda m, old, new, n, p="fp16": (
            s["speedups"](m, old, new, n, p)[1],) * 2, s["ttft_follows"], s["itl_follows"]),
        "ttft_follows: memory bandwidth instead of peak FLOP/s": lambda s: (
            s["speedups"], "memory bandwidth", s["itl_follows"]),
        "the two words swapped": lambda s: (s["speedups"], s["itl_follows"], s["ttft_follows"]),
    },
    "sla_verdict": {
        "memory checked at the prompt length, not prompt plus answer": lambda s: (
            _sla(s, budget_len=lambda p, o: p),),
        "memory never checked": lambda s: (_sla(s, check_memory=False),),
        "judged at the ideal, not at typical efficiency": lambda s: (_sla(s, efficiency="ideal"),),
        "the efficiency asked for ignored (always typical)": lambda s: (_sla(s, efficiency="typical"),),
        "only the TTFT limit checked": lambda s: (_sla(s, check_itl=False),),
        "the limits compared as bare numbers (ms assumed)": lambda s: (_sla(s, bare=True),),
    },
    "decode_share": {
        "output_len steps, not output_len - 1": lambda s: (
            lambda ttft, itl, n: (n * itl / (ttft + n * itl)).m_as(""),),
        "a percentage for a fraction": lambda s: (_scaled(s["decode_share"], 100),),
        "the prefill's share": lambda s: (lambda ttft, itl, n: 1 - s["decode_share"](ttft, itl, n),),
        "magnitudes mixed across units": lambda s: (
            lambda ttft, itl, n: (n - 1) * itl.magnitude / (ttft.magnitude + (n - 1) * itl.magnitude),),
        "decode time over prefill time (a ratio, not a share)": lambda s: (
            lambda ttft, itl, n: ((n - 1) * itl / ttft).m_as(""),),
    },
}
