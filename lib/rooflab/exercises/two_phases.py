"""Assignment 1, two phases, one request: its exercises and predictions.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
Counting conventions: where the notebook asks for the back-of-envelope count
(every weight read once, all stored in the format asked for), the library's
careful count (the embedding table read one row per token; 8-bit checkpoints
keeping the embedding and head in 16 bits) is accepted too.
"""

from __future__ import annotations

from ..check import PRECISION_NOT_PASSED, _fail, choice, number, quantity
from . import exercise, question

A = "01_two_phases"
EXACT = 1e-3  # FLOP and byte counts are exact arithmetic: only rounding may differ
BOUNDS = {"compute": (), "memory": ()}
VERDICTS = {"does not fit": (), "too slow": (), "meets": ()}
PHASES = {"prefill": ("the prefill", "prompt"), "decode": ("decoding", "the decode", "generation")}
SPECS = {"peak FLOP/s": ("flops", "peak flops", "flop/s", "compute", "tflop/s"),
         "memory bandwidth": ("bandwidth", "memory", "hbm bandwidth", "hbm")}


# The mistakes these exercises name from values they compute themselves (check's also_wrong=).
TOTAL_FOR_ACTIVE = "total instead of active parameters (every expert counted)"
TIE = "a tie broken the wrong way (> where the rule says >=)"
FP16_PEAK = "the fp16 peak for another format"
MEMORY_AT_FP16 = f"{PRECISION_NOT_PASSED} to the memory check"
REQUEST_AT_FP16 = f"{PRECISION_NOT_PASSED} to rl.request"
OUTPUT_STEPS = "off by one in output_len - 1"
NO_EMBEDDING = "the embedding table and output head left out (non_embedding_params counts neither)"
DECODE_TIMES_N = ("a decode step's count times prompt_len (every token attending to all prompt_len, where attention "
                  "is causal, and logits for every token, where only the last needs them)")
KV_WIDTH = "KV heads for query heads in the attention term (every query head attends: heads x head_dim)"
EVERY_PARAMETER = ("total_params for the weights a token passes through (the embedding table is a lookup, and the "
                   "head is the logits term)")
UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
TIE_HINT = ("The two are exactly equal here, and the rule for a tie is stated: at or above (>=), compute binds.")

RIDGE_HINT = ("Compare the intensity with the device's ridge point at the precision asked "
              "(device.ridge_point(precision)): at or above it, compute binds; below it, memory.")


def _pair(result, label: str):
    """The two items of a function that must return a pair, or a failure saying what came back."""
    __tracebackhide__ = True
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        _fail(f"{label} should return two things, as a tuple (first, second); it returned {result!r}.")
    return result


@exercise("prefill_flops", A, derive=True, derived=r"""
With $P_a$ the active non-embedding parameters, $L$ layers, attention width $w$ = `heads * head_dim`, `d_model` $d$
and vocabulary $V$:

$$ F_\text{prefill} = 2 P_a N \;+\; 2 L w N^2 \;+\; 2 d V. $$

Every prompt token passes through every active weight. The $i$-th token attends to $i$ tokens, so a layer has about
$N^2/2$ query-key pairs at $4w$ FLOPs each ($N(N+1)/2$ exactly: either is accepted). Only the last token needs
logits. For Llama-3-8B at 2,000 tokens the first term is over 95% of the total: 2 FLOPs per parameter per token.
""", visible=[
    ("Llama-3-8B", 2000),  # attention is 3.6% of it: a missing or doubled (non-causal) attention term shows
    ("Llama-3-8B", 16),    # the logits are 0.5% of it: forgetting them (or counting them per token) shows
    # A mixture of experts: a token passes through 2 of Mixtral's 8 experts, so every parameter counted (total
    # instead of active) gives 3.7x the FLOPs (47.6 TFLOP for 13.0 at 512 tokens).
    ("Mixtral-8x7B", 512),
])
def _prefill_flops(answers, case, ref, rl):
    __tracebackhide__ = True
    (prefill_flops,) = answers
    name, prompt_len = case
    m = ref.model(name)
    expected = ref.prefill(name, "H100", prompt_len, allow_overflow=True).flops
    # The notebook's three parts, so that a slip in one of them is named with its part.
    terms = {"linear": ref.Q_(2 * m.active_non_embedding_params * prompt_len, "FLOP"),
             "attention": ref.Q_(2 * m.layers * m.attention_width * prompt_len**2, "FLOP"),
             "logits": ref.Q_(2 * m.d_model * m.vocab, "FLOP")}
    every_expert = ref.Q_(2 * (m.non_embedding_params - m.active_non_embedding_params) * prompt_len, "FLOP")
    # The routes of a count derived without a recipe that no single term's slip explains.
    n, logits = prompt_len, terms["logits"]
    step = terms["linear"] / n + ref.Q_(4 * m.layers * m.attention_width * n, "FLOP") + logits
    narrow = ref.Q_(2 * m.layers * m.kv_heads * m.head_dim * n**2, "FLOP")
    every_parameter = ref.Q_(2 * m.total_params * n, "FLOP") + terms["attention"]
    wrong = {DECODE_TIMES_N: n * step, KV_WIDTH: terms["linear"] + narrow + logits,
             EVERY_PARAMETER: (every_parameter, every_parameter + logits)}
    if every_expert.magnitude:
        wrong[TOTAL_FOR_ACTIVE] = expected + every_expert
    quantity(prefill_flops(rl.model(name), prompt_len), expected, f"prefill_flops({name}, {prompt_len})", rel=EXACT,
             also_wrong={k: v for k, v in wrong.items() if k != KV_WIDTH or m.kv_heads != m.heads},
             terms=terms, counts={"prompt_len": prompt_len})


def _every_weight(ref, name, precision):
    """Bytes of every weight stored in ``precision`` (what the exercise asks), and as shipped (also right)."""
    m = ref.model(name)
    return ref.Q_(m.total_params * ref.bytes_per_element(precision), "B").to("GB"), m.weight_bytes(precision)


@exercise("weight_bytes", A, derive=True, derived=r"""
$B_\text{weights} = b P$: $b$ bytes a value (4 at FP32, 2 at FP16 and BF16, 1 at FP8 and INT8) times all $P$
parameters, the embedding table and output head included: 16.06 GB for Llama-3-8B at FP16.
""", visible=[
    ("Llama-3-8B", "fp16"),  # parameters for bytes (x2), GB for GiB, the embedding and output head left out (13%)
    ("Mistral-7B", "fp32"),  # the format ignored (2 bytes whatever is asked), parameters for bytes (x4)
])
def _weight_bytes(answers, case, ref, rl):
    __tracebackhide__ = True
    (weight_bytes,) = answers
    name, precision = case
    every_weight, as_shipped = _every_weight(ref, name, precision)
    per_value = ref.bytes_per_element(precision)
    mistakes = {"parameters for bytes": per_value} if per_value != 1 else {}
    if per_value != 2:  # checked before the generic factor of 2, which would blame K and V
        mistakes["2 bytes a value whatever the format"] = 2 / per_value
    # The likeliest slip of all (novices reach for non_embedding_params): named, not "matches no slip".
    body_only = ref.Q_(ref.model(name).non_embedding_params * per_value, "B")
    quantity(weight_bytes(rl.model(name), precision), every_weight, f"weight_bytes({name}, {precision!r})",
             rel=EXACT, accept=(as_shipped,), mistakes=mistakes, precision=precision,
             also_wrong={NO_EMBEDDING: body_only})


@exercise("decode_bytes", A, derive=True, derived=r"""
With $b$ bytes a value, $P$ all the parameters, $L$ layers, $h_{kv}$ KV heads, head size $d_h$ and $c$ tokens of
context:

$$ B_\text{decode} = b P \;+\; 2 L\, h_{kv}\, d_h\, b\, c. $$

The 2 is K and V. The cache holds the KV heads, not the query heads: Llama-3-8B's 8 KV heads make its cache 4 times
smaller than its 32 query heads would. At FP16 that is 131 kB a token, so 2,000 tokens of context add 0.26 GB to
16.06 GB of weights.
""", visible=[
    # The KV part is checked apart from the weights, so a slip in it shows however small the cache is:
    # query heads for KV heads (x4), forgot K and V or values for bytes (x2), GB for GiB.
    ("Llama-3-8B", 2000, "fp16"),
    # fp32: the cache counted in values, not bytes (x4, apart from query heads' x8); weights from a
    # weight_bytes in GiB labelled GB (this model's embedding is a small share, so the careful count is no cover).
    ("Llama-3-70B", 4000, "fp32"),
])
def _decode_bytes(answers, case, ref, rl):
    __tracebackhide__ = True
    (decode_bytes,) = answers
    name, context_len, precision = case
    m = ref.model(name)
    per_value = ref.bytes_per_element(precision)
    kv = (context_len * ref.Q_(1, "token") * m.kv_bytes_per_token(precision)).to("GB")
    every_weight, as_shipped = _every_weight(ref, name, precision)
    careful = ref.decode_step(name, "H100", context_len, precision=precision, allow_overflow=True).bytes
    label = f"decode_bytes({name}, {context_len}, {precision!r})"
    total = decode_bytes(rl.model(name), context_len, precision)
    cache = total - decode_bytes(rl.model(name), 0, precision)
    mistakes = {"query heads for KV heads": m.heads / m.kv_heads}
    if per_value > 2 and per_value != m.heads / m.kv_heads:
        mistakes["the KV cache counted in values, not bytes"] = per_value
    if not isinstance(cache, (int, float)) and getattr(cache, "magnitude", None) == 0:
        _fail(f"{label} is the same as at a context of 0 tokens: a decode step also reads the KV cache of the "
              f"{context_len} tokens of context, which should add {kv.to('GB'):.4g~P}.", "the KV cache left out")
    quantity(cache, kv, f"the KV cache in {label} (its value less that at context 0)", rel=EXACT, mistakes=mistakes,
             precision=precision)
    quantity(total, every_weight + kv, label, rel=EXACT, accept=(as_shipped + kv, careful),
             terms={"weights": every_weight, "KV cache": kv}, precision=precision)


@exercise("roofline_time", A, derive=True, derived=r"""
$$t = \max\left(\frac{F}{P_\text{format}},\ \frac{B}{W}\right),$$
the work waits on whichever roof is slower; it is compute-bound when $F / P \ge B / W$, that is when its intensity
$F / B$ is at or above the ridge point $P / W$. The peak is the format's (FP8 tensor cores run at twice the FP16
rate); the bandwidth is the same whatever the format.
""", visible=[
    # Memory-bound, F and B in odd units: a compute-only time, compute + memory instead of the max (+8%),
    # a magnitude taken without its unit (TFLOP against MB), milliseconds for seconds, the wrong word.
    ((0.3, "TFLOP"), (12_000, "MB"), "H100", "fp16"),
    # Compute-bound on another device: a memory-only roofline (B / W, 16x too short), the wrong word.
    ((40, "TFLOP"), (16, "GB"), "A100-80GB", "bf16"),
    # Compute-bound at fp8: the fp16 peak used whatever the format (2x too long).
    ((900, "GFLOP"), (0.5, "GB"), "H100", "fp8"),
    # A tie: 65 TFLOP take 1 s at the T4's 65 TFLOP/s, and so do 320 GB at its 320 GB/s. The stated rule says
    # "compute"; a strict > (compute > memory) says "memory".
    ((65, "TFLOP"), (320, "GB"), "T4", "fp16"),
])
def _roofline_time(answers, case, ref, rl):
    __tracebackhide__ = True
    (roofline_time,) = answers
    flops, nbytes, device, precision = case
    expected = ref.roofline(ref.Q_(*flops), ref.Q_(*nbytes), device, precision)
    label = f"roofline_time(Q_({flops[0]}, {flops[1]!r}), Q_({nbytes[0]}, {nbytes[1]!r}), {device}, {precision!r})"
    time, bound = _pair(roofline_time(rl.Q_(*flops), rl.Q_(*nbytes), rl.hardware(device), precision), label)
    d = ref.hardware(device)
    compute, memory = ref.Q_(*flops) / d.peak_flops(precision), ref.Q_(*nbytes) / d.memory_bandwidth
    at_fp16 = max(ref.Q_(*flops) / d.peak_flops("fp16"), memory).to("s")
    quantity(time, expected.time, f"the time of {label}", precision=precision,
             also_wrong={FP16_PEAK: at_fp16} if d.peak_flops(precision) != d.peak_flops("fp16") else {})
    tie = compute.m_as("s") == memory.m_as("s")
    choice(bound, expected.bound, f"what binds in {label}", BOUNDS,
           why=TIE_HINT if tie else "The resource that binds is the one whose time is the larger: F / peak FLOP/s "
                                    "at this precision, or B / memory bandwidth.",
           also_wrong={TIE: "memory"} if tie else {})


@exercise("ttft_and_itl", A, derive=True, visible=[
    ("Llama-3-8B", "H100", 2000, "fp16"),  # the running example: milliseconds for seconds, TTFT and ITL swapped
    # A long context on a model without grouped-query attention: the cache is 13% of a step's bytes, so a decode
    # step that ignores it fails; its embedding is small, so weights in GiB labelled GB fail too.
    ("Llama-2-7B", "A100-80GB", 4000, "fp16"),
    ("Llama-3-8B", "H100", 100, "fp16"),  # a short prompt is memory-bound: a TTFT from the FLOPs alone fails
    # fp8: the precision not passed on to roofline_time (the fp16 peak doubles this compute-bound TTFT), or to
    # weight_bytes and decode_bytes (twice the bytes double the memory-bound ITL).
    ("Llama-3-8B", "H100", 2000, "fp8"),
])
def _ttft_and_itl(answers, case, ref, rl):
    __tracebackhide__ = True
    (ttft_and_itl,) = answers
    name, device, prompt_len, precision = case
    m, d = ref.model(name), ref.hardware(device)
    peak, bandwidth = d.peak_flops(precision), d.memory_bandwidth
    weights = _every_weight(ref, name, precision)
    kv = prompt_len * ref.Q_(1, "token") * m.kv_bytes_per_token(precision)
    prefill = ref.prefill(name, device, prompt_len, precision=precision, allow_overflow=True)
    step = ref.decode_step(name, device, prompt_len, precision=precision, allow_overflow=True)
    # Accepted: every weight read once (what the exercise asks), as shipped, or the library's careful count.
    ttfts = [max(prefill.flops / peak, w / bandwidth).to("s") for w in weights] + [prefill.time]
    itls = [max(step.flops / peak, (w + kv) / bandwidth).to("s") for w in weights] + [step.time]
    label = f"ttft_and_itl({name}, {device}, {prompt_len}, {precision!r})"
    ttft, itl = _pair(ttft_and_itl(rl.model(name), rl.hardware(device), prompt_len, precision), label)
    # The same counts with fp16 somewhere the precision asked belongs: its peak, its bytes, or both.
    slips = [(peak_at, bytes_at) for peak_at, bytes_at in (("fp16", precision), (precision, "fp16"), ("fp16", "fp16"))
             if (peak_at, bytes_at) != (precision, precision)]
    wrong = [_times(ref, name, device, prompt_len, peak_at, bytes_at) for peak_at, bytes_at in slips]
    quantity(ttft, ttfts[0], f"the TTFT of {label}", accept=tuple(ttfts[1:]), precision=precision,
             also_wrong={PRECISION_NOT_PASSED: tuple(t for t, _ in wrong)} if wrong else {})
    quantity(itl, itls[0], f"the ITL of {label}", accept=tuple(itls[1:]), precision=precision,
             also_wrong={PRECISION_NOT_PASSED: tuple(i for _, i in wrong)} if wrong else {})


def _times(ref, name, device, prompt_len, peak_at, bytes_at):
    """(TTFT, ITL) as this notebook counts them (every weight read once), with the peak FLOP/s of ``peak_at`` and
    the bytes a value of ``bytes_at``: what a precision not passed on gives."""
    m, d = ref.model(name), ref.hardware(device)
    peak, bandwidth = d.peak_flops(peak_at), d.memory_bandwidth
    weights = _every_weight(ref, name, bytes_at)[0]
    kv = prompt_len * ref.Q_(1, "token") * m.kv_bytes_per_token(bytes_at)
    prefill = ref.prefill(name, device, prompt_len, allow_overflow=True).flops
    step = ref.decode_step(name, device, prompt_len, allow_overflow=True).flops
    return max(prefill / peak, weights / bandwidth).to("s"), max(step / peak, (weights + kv) / bandwidth).to("s")


@exercise("intensities", A, derive=True, derived=r"""
The prefill's intensity is $F_\text{prefill} / (b P)$: at FP16 about $N P_a / P$ FLOP/B, in step with the prompt.
A decode step's is $F_\text{decode} / B_\text{decode}$: about 1 FLOP/B at FP16, far below any ridge point. It creeps up
at long contexts on a model with fewer KV heads than heads: each cached K or V value serves heads / kv_heads query
heads (4 on Llama-3-8B), so the cache's part of the step runs at about that many FLOP/B. At FP8 the peak and the
bytes both change, so both sides move.
""", visible=[
    ("intensities", "Llama-3-8B", 2000, "fp16", "H100"),  # the running example: prefill compute-, decode memory-bound
    # A short prompt's prefill is memory-bound (the words swapped show); this model's small embedding makes
    # weights in GiB labelled GB fail; an intensity per token (N times too small) fails.
    ("intensities", "Llama-2-7B", 150, "fp16", "H100"),
    # 4,000 tokens of a model without grouped-query attention: the cache is 13% of the step's bytes, so a decode
    # intensity over the weights alone fails.
    ("intensities", "Llama-2-7B", 4000, "fp16", "A100-80GB"),
    ("bound", 400, "H100", "fp8"),       # memory-bound at fp8: the fp16 ridge point used whatever the format
    ("bound", 200, "A100-80GB", "bf16"),  # compute-bound on the A100: the H100's ridge point (295) hard-coded
    # fp8: the precision not passed on to weight_bytes or decode_bytes (twice the bytes halve both intensities).
    ("intensities", "Llama-3-8B", 2000, "fp8", "H100"),
    # Exactly the T4's ridge point (65 TFLOP/s over 320 GB/s is 203.125 FLOP/B, exact in binary): "at or above"
    # says compute; a strict > says memory.
    ("bound", 203.125, "T4", "fp16"),
])
def _intensities(answers, case, ref, rl):
    __tracebackhide__ = True
    arithmetic_intensities, binding_resource = answers
    if case[0] == "bound":
        _, intensity, device, precision = case
        ridge = ref.hardware(device).ridge_point(precision).m_as("FLOP/B")
        expected = "compute" if intensity >= ridge else "memory"
        answer = binding_resource(rl.Q_(intensity, "FLOP/B"), rl.hardware(device), precision)
        tie = intensity == ridge
        choice(answer, expected, f"binding_resource(Q_({intensity}, 'FLOP/B'), {device}, {precision!r})", BOUNDS,
               why=TIE_HINT if tie else RIDGE_HINT, also_wrong={TIE: "memory"} if tie else {})
        return
    _, name, prompt_len, precision, device = case
    m = ref.model(name)
    every_weight, as_shipped = _every_weight(ref, name, precision)
    prefill = ref.prefill(name, device, prompt_len, precision=precision, allow_overflow=True)
    step = ref.decode_step(name, device, prompt_len, precision=precision, allow_overflow=True)
    expected = (prefill.flops / every_weight).to("FLOP/B")
    label = f"arithmetic_intensities({name}, {prompt_len}, {precision!r})"
    prefill_i, decode_i = _pair(arithmetic_intensities(rl.model(name), prompt_len, precision), label)
    quantity(prefill_i, expected, f"the prefill intensity of {label}",
             accept=((prefill.flops / as_shipped).to("FLOP/B"), prefill.intensity), precision=precision)
    # Accepted: this notebook's decode_flops over its decode_bytes (every weight, or as shipped), or the careful
    # count; at 2% a step that leaves out the KV cache fails on a long context.
    simple_flops = ref.Q_(2 * m.active_non_embedding_params + 4 * m.layers * m.attention_width * prompt_len
                          + 2 * m.d_model * m.vocab, "FLOP")
    kv = prompt_len * ref.Q_(1, "token") * m.kv_bytes_per_token(precision)
    quantity(decode_i, (simple_flops / (every_weight + kv)).to("FLOP/B"), f"the decode intensity of {label}",
             accept=((simple_flops / (as_shipped + kv)).to("FLOP/B"), step.intensity), precision=precision)
    ridge = ref.hardware(device).ridge_point(precision)
    for phase, intensity, right in (("prefill", prefill_i, expected), ("decode", decode_i, step.intensity)):
        choice(binding_resource(intensity, rl.hardware(device), precision), "compute" if right >= ridge else "memory",
               f"binding_resource(the {phase} intensity of {name} at {prompt_len} tokens, {device}, {precision!r})",
               BOUNDS, why=RIDGE_HINT)


@exercise("speedups", A, derive=True, visible=[
    ("Llama-3-8B", "A100-80GB", "H100", 2000),  # 3.2x and 1.6x: old / new inverted, TTFT from the bandwidth
    ("Llama-3-8B", "H100", "H200", 2000),       # same FLOP/s, 1.4x bandwidth: a TTFT that moves with bandwidth
    # fp32: the H100 has 3.4x the A100's fp32 FLOP/s but 3.2x its fp16 FLOP/s, so a precision not passed on (the
    # times computed at fp16) gives the wrong TTFT speed-up.
    ("Llama-3-8B", "A100-80GB", "H100", 2000, "fp32"),
])
def _speedups(answers, case, ref, rl):
    __tracebackhide__ = True
    speedups, ttft_follows, itl_follows = answers
    name, old, new, prompt_len, *asked = case
    precision = asked[0] if asked else "fp16"

    def gains(at):
        return (ref.prefill(name, old, prompt_len, precision=at).time
                / ref.prefill(name, new, prompt_len, precision=at).time).m_as(""), \
               (ref.decode_step(name, old, prompt_len, precision=at).time
                / ref.decode_step(name, new, prompt_len, precision=at).time).m_as("")

    (ttft, itl), (ttft16, itl16) = gains(precision), gains("fp16")
    label = f"speedups({name}, {old}, {new}, {prompt_len}" + (f", {precision!r})" if asked else ")")
    ttft_gain, itl_gain = _pair(speedups(rl.model(name), rl.hardware(old), rl.hardware(new), prompt_len,
                                         *asked), label)
    number(ttft_gain, ttft, f"the TTFT speed-up of {label}",
           also_wrong={PRECISION_NOT_PASSED: ttft16} if abs(ttft16 / ttft - 1) > 0.02 else {})
    number(itl_gain, itl, f"the ITL speed-up of {label}", rel=0.03,
           also_wrong={PRECISION_NOT_PASSED: itl16} if abs(itl16 / itl - 1) > 0.03 else {})
    hint = ("Compare your two pairs of speed-ups with the ratios of the devices' peak FLOP/s and memory bandwidths "
            "(device.peak_flops('fp16'), device.memory_bandwidth): the figure a phase follows is the one whose ratio "
            "its speed-up matches.")
    choice(ttft_follows, "peak FLOP/s", "ttft_follows", SPECS, why=hint)
    choice(itl_follows, "memory bandwidth", "itl_follows", SPECS, why=hint)


@exercise("sla_verdict", A, visible=[
    ("Llama-3-8B", "T4", 4096, 256, (200, "ms"), (50, "ms"), "fp16", None),  # memory never checked: "does not fit"
    # Typical is the default: judged at the ideal, the A100 meets the TTFT limit (198 ms), at typical it misses.
    ("Llama-3-8B", "A100-80GB", 4096, 256, (200, "ms"), (50, "ms"), "fp16", None),
    ("Llama-3-8B", "A100-80GB", 4096, 256, (200, "ms"), (50, "ms"), "fp16", "ideal"),  # the efficiency ignored
    ("Llama-3-8B", "H100", 4096, 256, (0.2, "s"), (0.05, "s"), "fp16", None),  # limits in s: bare magnitudes compared
    # only the TTFT limit checked: an ITL limit between the ideal's (4.6 ms) and typical's (7.0 ms)
    ("Llama-3-8B", "H100", 4096, 256, (200, "ms"), (6, "ms"), "fp16", "typical"),
    # Llama-2-7B's 13.5 GB of weights leave about 1,450 tokens of cache in 0.9 of the 15.8 GB a process gets on a
    # T4: this prompt fits, the prompt and its answer do not.
    ("Llama-2-7B", "T4", 1000, 1000, (2, "s"), (200, "ms"), "fp16", None),
    # The cache counted as rl.request counts it, prompt_len + output_len tokens, not the one fewer the last step
    # holds: 0.9 x 15,826,954,486 B (the T4's usable memory) - 13,476,831,232 B of weights = 767,427,805 B, or
    # 1,463.75 tokens at 524,288 B a token (2 x 32 layers x 32 KV heads x 128 x 2 B). 1,264 + 200 = 1,464 tokens
    # do not fit; 1,463 would, and then rl.request refuses the request.
    ("Llama-2-7B", "T4", 1264, 200, (5, "s"), (500, "ms"), "fp16", None),
    # int8 halves Llama-3-8B's weights to 8 GB, which fit the T4 with room for the cache: the memory checked at
    # fp16 (the precision not passed on) says "does not fit", and rl.request asked at fp16 refuses the request.
    ("Llama-3-8B", "T4", 4096, 256, (2, "s"), (100, "ms"), "int8", None),
])
def _sla_verdict(answers, case, ref, rl):
    __tracebackhide__ = True
    (sla_verdict,) = answers
    name, device, prompt_len, output_len, ttft_limit, itl_limit, precision, efficiency = case
    limits = ref.Q_(*ttft_limit), ref.Q_(*itl_limit)
    asked = (name, device, prompt_len, output_len, limits, efficiency or "typical")
    expected = _verdict(ref, *asked, precision, precision)
    slips = {MEMORY_AT_FP16: _verdict(ref, *asked, "fp16", precision),
             REQUEST_AT_FP16: _verdict(ref, *asked, precision, "fp16")}
    arguments = [rl.model(name), rl.hardware(device), prompt_len, output_len, rl.Q_(*ttft_limit), rl.Q_(*itl_limit),
                 precision] + ([efficiency] if efficiency else [])
    label = (f"sla_verdict({name}, {device}, {prompt_len}, {output_len}, TTFT < {ttft_limit[0]} {ttft_limit[1]}, "
             f"ITL < {itl_limit[0]} {itl_limit[1]}, {precision!r}"
             + (f", {efficiency!r})" if efficiency else ") (typical by default)"))
    try:
        answer = sla_verdict(*arguments)
    except rl.DoesNotFit as error:
        if expected != "does not fit":
            _fail(f"{label} asked the library for the latency of a request that fits at {precision}, but at another "
                  f"precision ({error}): pass precision= on to rl.request.", REQUEST_AT_FP16)
        short = ref.memory_budget(name, device, prompt_len + output_len - 1, precision=precision).fits
        _fail(f"{label} asked the library for the latency of a request that does not fit ({error}). Check memory "
              "for the whole request first, counting the cache as rl.request does: prompt_len + output_len tokens."
              + (" Here the request misses by one token: prompt_len + output_len - 1 tokens would fit." if short
                 else ""),
              "latency asked of a request that does not fit")
    choice(answer, expected, label, VERDICTS, also_wrong={k: v for k, v in slips.items() if v}, why=(
        "Check in this order: memory for the whole request (the weights and the cache of prompt_len + output_len "
        "tokens, as rl.request counts it, at the precision asked); then the TTFT and the ITL at the efficiency asked for (typical when none "
        "is given), each against its limit, as quantities rather than bare numbers."))


def _verdict(ref, name, device, prompt_len, output_len, limits, efficiency, memory_at, request_at):
    """The verdict with memory checked at ``memory_at`` and the latencies at ``request_at`` (None: refused)."""
    if not ref.memory_budget(name, device, prompt_len + output_len, precision=memory_at).fits:
        return "does not fit"
    try:
        r = ref.request(name, device, prompt_len, output_len, precision=request_at, efficiency=efficiency)
    except ref.DoesNotFit:
        return None
    return "meets" if r.ttft < limits[0] and r.itl < limits[1] else "too slow"


@exercise("decode_share", A, derived=r"""
An answer of $O$ tokens takes $\text{TTFT} + (O - 1)\,\text{ITL}$: the prefill makes the first token, each step one
more. The decode share is $(O - 1)\,\text{ITL} / (\text{TTFT} + (O - 1)\,\text{ITL})$. For a chatbot's short prompt
and long answer it is nearly 1: the stream, and so memory bandwidth, is what users wait on.
""", visible=[
    ("Llama-3-8B", 2000, 300, "ms", "ms"),  # the running example: a percentage for a fraction, the prefill's share
    # A 5-token answer to a 4,000-token document: output_len steps instead of output_len - 1 (+15%); the TTFT
    # in s and the ITL in ms, so bare magnitudes mixed fail.
    ("Llama-3-8B", 4000, 5, "s", "ms"),
])
def _decode_share(answers, case, ref, rl):
    __tracebackhide__ = True
    (decode_share,) = answers
    name, prompt_len, output_len, ttft_unit, itl_unit = case
    r = ref.request(name, "H100", prompt_len, output_len)
    ttft, itl = rl.Q_(r.ttft.m_as(ttft_unit), ttft_unit), rl.Q_(r.itl.m_as(itl_unit), itl_unit)
    steps = output_len - 1
    slips = {OUTPUT_STEPS: (output_len * r.itl / (r.ttft + output_len * r.itl)).m_as("")}
    if ttft_unit != itl_unit:  # the magnitudes added as they come: the TTFT's seconds counted as milliseconds
        slips[f"{UNIT_WORDS[ttft_unit]} added to {UNIT_WORDS[itl_unit]}"] = steps * itl.magnitude / (ttft.magnitude + steps * itl.magnitude)
    number(decode_share(ttft, itl, output_len), r.decode_share.m_as(""),
           f"decode_share(Q_({ttft.magnitude:.4g}, {ttft_unit!r}), Q_({itl.magnitude:.4g}, {itl_unit!r}), {output_len})",
           rel=0.005, also_wrong=slips)


@question("compute_bound_phase", A, "prefill", PHASES, revisited_in="Exercise 3")
def _compute_bound_phase(ref):
    long = ref.prefill("Llama-3-8B", "H100", 2000)
    step = ref.decode_step("Llama-3-8B", "H100", 2000)
    turn = ref.prefill_compute_bound_len("Llama-3-8B", "H100")
    ridge = ref.hardware("H100").ridge_point("fp16")
    m = ref.model("Llama-3-8B")
    every_weight = ref.Q_(m.total_params * 2, "B")
    # the same turn by the simple count (every weight read once), as the student's bisection finds it
    simple_turn = next(n for n in range(1, 8193) if ref.prefill(m.name, "H100", n).flops / every_weight >= ridge)
    yours = (long.flops / every_weight).m_as("FLOP/B")
    step_flops = 2 * m.active_non_embedding_params + 4 * m.layers * m.attention_width * 2000 + 2 * m.d_model * m.vocab
    step_bytes = every_weight + 2000 * ref.Q_(1, "token") * m.kv_bytes_per_token("fp16")
    yours_step = (ref.Q_(step_flops, "FLOP") / step_bytes).m_as("FLOP/B")
    return (f"The H100's ridge point is {ridge.m_as('FLOP/B'):.0f} FLOP/B. The prefill of a 2,000-token prompt of "
            f"Llama-3-8B does {yours:,.0f} FLOP per byte it reads by your count ({long.intensity.m_as('FLOP/B'):,.0f} "
            f"by the library's, which reads the embedding table one row per token), so it waits on the arithmetic; a "
            f"decode step does {yours_step:.2f} ({step.intensity.m_as('FLOP/B'):.2f}): one token passes through each "
            "weight it loads, about 1 FLOP per byte at FP16, far below any GPU's ridge point, so it waits on memory. "
            f"A prompt shorter than about {turn} tokens by the library's count ({simple_turn} by yours, which reads "
            "the whole embedding table) is memory-bound in the prefill too: its intensity is about one FLOP/B per "
            "token.")


@question("chatbot_spec", A, "memory bandwidth", SPECS, revisited_in="Exercise 4")
def _chatbot_spec(ref):
    ttft = ref.prefill("Llama-3-8B", "H100", 2000).time / ref.prefill("Llama-3-8B", "H200", 2000).time
    itl = ref.decode_step("Llama-3-8B", "H100", 2000).time / ref.decode_step("Llama-3-8B", "H200", 2000).time
    chat = ref.request("Llama-3-8B", "H100", 50, 500)
    h100, h200 = ref.hardware("H100"), ref.hardware("H200")
    flops = (h200.peak_flops("fp16") / h100.peak_flops("fp16")).m_as("")
    bandwidth = (h200.memory_bandwidth / h100.memory_bandwidth).m_as("")
    return (f"The H200 has {flops:.2f} times the H100's peak FLOP/s and {bandwidth:.2f} times its bandwidth: the "
            f"TTFT of a 2,000-token prompt "
            f"improves {ttft.m_as(''):.2f}x, the ITL {itl.m_as(''):.2f}x. A chatbot turn of a 50-token question and "
            f"a 500-token answer spends {chat.decode_share.m_as(''):.1%} of its time decoding (Llama-3-8B, H100), "
            "and its short prompts are memory-bound too: memory bandwidth sets how fast it answers.")


PREFILL_IN_STEPS = {
    "about 1": ("1", "1x", "about 1x", "the same", "about the same"),
    "about 6": ("6", "6x", "about 6x"),
    "about 60": ("60", "60x", "about 60x"),
    "about 2000": ("2000", "2,000", "2000x", "2,000x", "about 2,000", "about 2000x", "about 2,000x"),
}


@question("prefill_in_steps", A, "about 6", PREFILL_IN_STEPS, revisited_in="Exercise 2")
def _prefill_in_steps(ref):
    h100 = ref.hardware("H100")
    long = ref.prefill("Llama-3-8B", "H100", 2000)
    step = ref.decode_step("Llama-3-8B", "H100", 2000)
    compute = (long.flops / h100.peak_flops("fp16")).to("ms")
    steps = (long.time / step.time).m_as("")
    return (f"The 2,000-token prefill takes {long.time.m_as('ms'):.1f} ms and one decode step at that context "
            f"{step.time.m_as('ms'):.2f} ms (Llama-3-8B, H100, ideal, the library's count): {steps:.1f} steps' time "
            f"for 2,000 tokens. A step is paid for in bytes: it moves {step.bytes.m_as('GB'):.1f} GB, nearly all of "
            "it weights, for one token. The prefill reads the weights once for all 2,000 tokens and waits instead on "
            f"its FLOPs, {compute.m_as('ms'):.0f} ms at the peak. Per token, the prefill is about "
            f"{2000 / steps:.0f} times cheaper than a decode step.")


TURN_OPTIONS = {
    "under 100 tokens": ("under 100", "below 100", "less than 100", "< 100"),
    "100 to 250 tokens": ("100 to 250", "100-250", "100 250", "between 100 and 250"),
    "250 to 500 tokens": ("250 to 500", "250-500", "250 500", "between 250 and 500"),
    "over 500 tokens": ("over 500", "above 500", "more than 500", "> 500"),
}


def _first_compute_bound(ref, name: str, device: str) -> int:
    """The shortest prompt whose prefill intensity, by the notebook's count (every weight read once, FP16),
    reaches the device's ridge point."""
    m, ridge = ref.model(name), ref.hardware(device).ridge_point("fp16").m_as("FLOP/B")
    n = 1
    while (2 * m.active_non_embedding_params * n + 2 * m.layers * m.attention_width * n * n
           + 2 * m.d_model * m.vocab) / (2 * m.total_params) < ridge:
        n += 1
    return n


@question("a100_prefill_turn", A, "100 to 250 tokens", TURN_OPTIONS)
def _a100_prefill_turn(ref):
    turns = {d: ref.prefill_compute_bound_len("Llama-3-8B", d) for d in ("A100-80GB", "H100")}
    devices = {d: ref.hardware(d) for d in turns}
    ridges = {d: devices[d].ridge_point("fp16").m_as("FLOP/B") for d in turns}
    m = ref.model("Llama-3-8B")
    share = m.active_non_embedding_params / m.total_params
    yours = _first_compute_bound(ref, "Llama-3-8B", "A100-80GB")
    flops = (devices["H100"].peak_flops("fp16") / devices["A100-80GB"].peak_flops("fp16")).m_as("")
    bandwidth = (devices["H100"].memory_bandwidth / devices["A100-80GB"].memory_bandwidth).m_as("")
    # Only the ideal here: the typical preset is introduced in Exercise 5, and a turn printed from it before then
    # is a number the student cannot rebuild.
    return (f"Each prompt token adds about one FLOP per byte of weights read: 2 FLOPs for each weight it passes "
            f"through, 2 bytes a weight at FP16. By your count it is {share:.2f} FLOP/B a token, because the "
            f"embedding table is read but does no FLOPs. So the prefill turns compute-bound near the ridge point "
            f"counted in tokens: {ridges['A100-80GB']:.0f} / {share:.2f} gives a {yours}-token prompt by your count, "
            f"and the library, which reads one row of the table per token, finds {turns['A100-80GB']}. The H100's "
            f"ridge point is {ridges['H100']:.0f} FLOP/B (its turn {turns['H100']} tokens): it has {flops:.1f} times "
            f"the A100's FLOP/s but only {bandwidth:.1f} times its bandwidth, so it needs a longer prompt to keep "
            "its cores busy.")
