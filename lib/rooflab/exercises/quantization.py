"""Assignment 3, quantization is not a free lunch: its exercises, predictions and the explorer's question.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
"""

from __future__ import annotations

import numpy as np

from ..check import _fail, choice, number, quantity
from . import exercise, question

A = "03_quantization"
EXACT = 1e-3  # byte counts are exact arithmetic: only rounding may differ

# The chat product's configurations of Exercise 6, as the notebook lists them: label -> (device, precision, USD per
# GPU-hour).  The prices are round numbers made up for the exercise; "int4-g128" is rl.FORMATS' symmetric INT4 in
# groups of 128 (weights only: cache and compute in FP16).
CHAT_CONFIGS = {
    "T4, FP16": ("T4", "fp16", 0.40),
    "T4, INT4": ("T4", "int4-g128", 0.40),
    "L4, FP16": ("L4", "fp16", 0.80),
    "L4, INT4": ("L4", "int4-g128", 0.80),
    "A100-80GB, FP16": ("A100-80GB", "fp16", 2.00),
    "H100, FP8": ("H100", "fp8", 3.00),
}
# The same offers listed in no order of price (as a provider's price list may be): the first that qualifies is
# not the cheapest, and neither is the first name in alphabetical order.
SHUFFLED_CONFIGS = {label: CHAT_CONFIGS[label] for label in
                    ("A100-80GB, FP16", "H100, FP8", "L4, INT4", "T4, FP16", "L4, FP16", "T4, INT4")}


def _weights(ref, fmt, group=None, zero_bits=0, embeddings=False, scale_bits=None):
    """The reference's Precision for weights in ``fmt`` (cache and compute in FP16)."""
    return ref.Precision(weights=fmt, kv="fp16", compute="fp16", group_size=group, scale_bits=scale_bits,
                         zero_point=zero_bits > 0, zero_bits=zero_bits or None, quantize_embeddings=embeddings)


# -- Exercise 1: quantize a matrix, then count its bytes ------------------------------------------------------

def _test_matrix(group_size: int) -> np.ndarray:
    """A small random layer (16 rows of 4 groups) with outlier columns ten times larger, FP16 as trained: small
    enough to cross the grading boundary, and each group's largest weight is sometimes negative."""
    rng = np.random.default_rng(group_size)
    w = rng.normal(0, 0.02, size=(16, 4 * group_size))
    w[:, rng.choice(w.shape[1], 3, replace=False)] *= 10
    return w.astype(np.float16)


def _check_quantize(quantize_int4, group_size: int) -> None:
    """quantize_int4's codes and scales on a test matrix, by property (ties may round either way): one scale a group,
    no coarser than the largest magnitude over 7, whole codes in -8..7, each weight on its nearest code."""
    __tracebackhide__ = True
    w = _test_matrix(group_size)
    call = f"quantize_int4(w, {group_size}) on a {w.shape[0]} x {w.shape[1]} matrix"
    result = quantize_int4(w.copy(), group_size)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        _fail(f"{call} should return a pair (codes, scale), got {type(result).__name__}.")
    groups = w.astype(np.float64).reshape(-1, group_size)
    try:
        codes = np.asarray(result[0], dtype=np.float64)
        scale = np.asarray(result[1], dtype=np.float64)
    except (TypeError, ValueError):
        _fail(f"{call}: codes and scale should be numpy arrays of numbers.")
    if codes.size != w.size:
        _fail(f"{call}: codes should hold one code per weight ({w.size}), got {codes.size}.")
    if scale.size != len(groups):
        mistake = "one scale per row (group_size not used)" if scale.size == w.shape[0] else None
        _fail(f"{call}: scale should hold one value per group of {group_size} ({len(groups)} groups), "
              f"got {scale.size}.", mistake)
    codes, scale = codes.reshape(groups.shape), scale.reshape(-1, 1)
    if not np.all(np.isfinite(codes)) or not np.all(np.isfinite(scale)):
        _fail(f"{call}: the codes or scales are not all finite numbers.", "not a number")
    if np.any(codes != np.round(codes)):
        _fail(f"{call}: the codes are not whole numbers. A weight is stored as an integer code.",
              "codes not rounded to integers")
    absmax = np.abs(groups).max(axis=1, keepdims=True)
    ratio = float(np.median(scale / (absmax / 7)))
    named = _scale_slip(scale, groups, absmax)
    if codes.min() < -8 or codes.max() > 7:
        _fail(f"{call}: codes run from {codes.min():.0f} to {codes.max():.0f}; INT4 has -8..7 only.", named)
    if np.any(scale <= 0):
        _fail(f"{call}: a scale is zero or negative; each group's scale should be a positive step size.", named)
    # Any scale passes that puts every weight within half a step of a code in -8..7 and is no coarser than the
    # largest magnitude over 7: max(largest / 7, -smallest / 8), which also uses the code -8, is as good.
    worst = float(np.max(np.abs(codes * scale - groups) / scale))
    if worst > 0.51:
        truncated = np.all(codes == np.trunc(groups / scale))
        mistake = named or ("codes truncated toward zero, not rounded to the nearest" if truncated else None)
        _fail(f"{call}: a weight is {worst:.2f} of a step from code x scale; each weight should take its nearest "
              "code (at most half a step away), none clipped.", mistake)
    if np.any(scale > absmax / 7 * (1 + 2e-3)):
        _fail(f"{call}: the scales are {ratio:.3g} times the group's largest magnitude over 7 (median over the "
              "groups): coarser steps than the codes need, so the weights are rounded more than they must be.", named)


def _scale_slip(scale: np.ndarray, groups: np.ndarray, absmax: np.ndarray) -> str | None:
    """The named slip whose scales these are, if any."""
    slips = {"the group's largest weight, not its largest magnitude": groups.max(axis=1, keepdims=True) / 7,
             "scale = largest magnitude / 8 (the code 8 does not exist)": absmax / 8,
             "the scale inverted (a weight is code x scale)": 7 / absmax}
    return next((name for name, value in slips.items() if np.allclose(scale, value, rtol=2e-3)), None)


@exercise("quantized_weight_bytes", A, derive=True, derived=r"""
Symmetric INT4 in groups: a group's scale is its largest magnitude over 7, $\max|w| / 7$, so that weight lands on
the code 7 and no code needs clipping; each weight's code is $\mathrm{round}(w / \text{scale})$, at most half a
step from it. (A group whose largest magnitude is negative may use the code -8 for it, a scale of
$\max(\max w / 7, -\min w / 8)$: a step as fine or finer, and the check takes it.) A weight of a $b$-bit format
in groups of $g$, with an $s$-bit scale and a $z$-bit zero point per group, costs $b + (s + z)/g$ bits. INT4 in groups of 128 with 16-bit scales is 4.125 bits: the matrix above stored
1,048,576 B of codes and 32,768 B of scales, times 8 bits, over its 2,097,152 weights. AWQ's 4-bit zero points make
it 4.156. The model's bytes are $(P_{body} \times bits + P_{table+head} \times 16)/8$, with $bits$ in place of 16
when the table and head are quantized too. Llama-3-8B's table and head are 1.05 B of its 8.03 B weights: left in 16
bits, they are over a third of the INT4 file.
""", visible=[
    # Each case with a group size first quantizes a small test matrix in groups of that size with quantize_int4:
    # a scale from the signed maximum, over 8 or inverted, one scale a row, codes truncated or not whole each fail.
    # AWQ's layout (4-bit weights, a 16-bit scale and a 4-bit zero point per group of 128), embedding table and head
    # in 16 bits: forgetting the scales or the zero points, a group's overhead charged to every weight, bits for
    # bytes, GB for GiB and quantizing the embedding table and head as well each fail it
    ("Llama-3-8B", "int4", 128, 16, 4, False),
    # INT8 in groups of 32 with 32-bit scales, the embedding table and head quantized too (as GGUF files do), on a
    # model whose embedding table is a fifth of it: ignoring scale_bits or quantize_embeddings fails it
    ("Gemma-2B", "int8", 32, 32, 0, True),
])
def _quantized_weight_bytes(answers, case, ref, rl):
    __tracebackhide__ = True
    quantize_int4, bits_per_weight, quantized_weight_bytes = answers
    name, fmt, group, scale_bits, zero_bits, embeddings = case
    if group:
        _check_quantize(quantize_int4, group)
    grouped = _weights(ref, fmt, group, zero_bits, scale_bits=scale_bits)
    bits = grouped.bits_per_weight
    own = {"int4": 4, "int8": 8, "fp8": 8}.get(fmt, 16)
    extras = {"forgot the group's scale and zero point": own,
              "the group's scale and zero point charged to every weight (the group shares them)":
                  own + scale_bits + zero_bits}
    if group:
        extras["scale_bits not used (a 16-bit scale written in)"] = own + (16 + zero_bits) / group
        extras["forgot the zero point"] = own + scale_bits / group
    number(bits_per_weight(fmt, group, scale_bits, zero_bits), bits,
           f"bits_per_weight({fmt!r}, {group}, scale_bits={scale_bits}, zero_bits={zero_bits})", rel=EXACT,
           mistakes=_named({label: value / bits for label, value in extras.items()}, EXACT))
    m = ref.model(name)
    stored = _weights(ref, fmt, group, zero_bits, embeddings)  # 16-bit scales, as quantized_weight_bytes counts
    expected = m.weight_bytes(stored)
    base = {"int4": 4, "int8": 8, "fp8": 8}.get(fmt, 16)
    mistakes = {
        "forgot the group scales (and zero points)": stored.bits_per_weight / base,
        "embedding table and head in the wrong format": (
            m.weight_bytes(_weights(ref, fmt, group, zero_bits, not embeddings)) / expected).m_as(""),
    }
    if zero_bits:
        no_zero = m.weight_bytes(_weights(ref, fmt, group, 0, embeddings))
        mistakes["forgot the zero points"] = (expected / no_zero).m_as("")
    quantity(quantized_weight_bytes(rl.model(name), fmt, group, zero_bits, embeddings), expected,
             f"quantized_weight_bytes({name}, {fmt!r}, {group}, zero_bits={zero_bits}, "
             f"quantize_embeddings={embeddings})", rel=EXACT, mistakes=mistakes)


# -- Exercise 2: decode with quantized weights -------------------------------------------------------------------

def _decode_times(ref, name, device, context, batch, precision):
    """(the roofline of the step's totals, as the exercise counts it; the library's per-operation time), in s."""
    m, d = ref.model(name), ref.hardware(device)
    step = ref.decode_step(name, device, context, batch, precision, allow_overflow=True)
    caches = batch * context * ref.Q_(1, "token") * m.kv_bytes_per_token("fp16")
    simple = max(step.flops / d.peak_flops("fp16"), (m.weight_bytes(precision) + caches) / d.memory_bandwidth)
    return simple.to("s"), step.time.to("s")


@exercise("decode_speedup", A, derive=True, derived=r"""
With $B$ sequences of $n$ tokens, weights of $W_{fmt}$ bytes as shipped and $c$ bytes of FP16 cache per token,
$$t_{fmt} = \max\left(\frac{B \, F_{decode}(n)}{\text{FP16 peak}},\ \frac{W_{fmt} + B\,n\,c}{\text{bandwidth}}\right),
\qquad \text{speed-up} = t_{FP16} / t_{fmt}.$$
Only $W_{fmt}$ shrinks: the multiplies stay at the FP16 peak, the caches in FP16, and the embedding table and head
in 16 bits. So the speed-up nears the ratio of the weights' bytes only while $B\,n\,c$ is small beside them, and
falls to 1 once the batch is large enough for the FLOPs to bind (a few hundred short sequences on an A100).
""", visible=[
    # short context, batch 1: the weights are nearly all the bytes, so a speed-up of whole-model bits (16 / 4.125,
    # the embedding table and head quantized too) or an inverted ratio fails; the INT4 step catches GB for GiB and
    # milliseconds for seconds
    ("Llama-3-8B", "H100", 100, 1, "int4", 128),
    # 8,000 tokens, batch 16: the FP16 caches are three quarters of the INT4 step's bytes, so a speed-up from the
    # weights alone, a cache quantized with the weights, or the cache of one sequence instead of 16 fails
    ("Llama-3-8B", "H100", 8000, 16, "int4", 128),
    # batch 256, short context, on another device: the step is compute-bound, so a memory-only step, FLOPs of one
    # sequence instead of the batch, or the quantized format's peak (INT8 tensor cores) fails
    ("Llama-3-8B", "A100-80GB", 200, 256, "int8", None),
])
def _decode_speedup(answers, case, ref, rl):
    __tracebackhide__ = True
    decode_step_time, decode_speedup = answers
    name, device, context, batch, fmt, group = case
    simple16, careful16 = _decode_times(ref, name, device, context, batch, "fp16")
    quantized = _weights(ref, fmt, group)
    simple_q, careful_q = _decode_times(ref, name, device, context, batch, quantized)
    m, d = rl.model(name), rl.hardware(device)
    quantity(decode_step_time(m, d, context, batch), simple16,
             f"decode_step_time({name}, {device}, {context}, batch {batch}) in FP16", accept=(careful16,), rel=EXACT,
             mistakes=_step_slips(ref, name, device, context, batch, "fp16", simple16))
    quantity(decode_step_time(m, d, context, batch, fmt, group), simple_q,
             f"decode_step_time({name}, {device}, {context}, batch {batch}, {fmt!r}, {group})", accept=(careful_q,),
             rel=EXACT,
             mistakes=_step_slips(ref, name, device, context, batch, quantized, simple_q, fmt))
    gain = (simple16 / simple_q).m_as("")
    weights_only = (ref.model(name).weight_bytes("fp16") / ref.model(name).weight_bytes(quantized)).m_as("")
    number(decode_speedup(m, d, context, batch, fmt, group), gain,
           f"decode_speedup({name}, {device}, {context}, batch {batch}, {fmt!r}, {group})",
           accept=((careful16 / careful_q).m_as(""),), rel=EXACT,
           mistakes=_named({"the weights' bytes alone (the FP16 caches and the FLOPs left out)": weights_only / gain,
                            "the ratio of bits (the 16-bit embedding table and head, and the caches, left out)":
                                16 / quantized.bits_per_weight / gain}, EXACT))


def _step_slips(ref, name, device, context, batch, precision, expected, fmt=None):
    """Named slips of a decode step's roofline time, each as its factor against ``expected`` (a time)."""
    m, d = ref.model(name), ref.hardware(device)
    flops = ref.decode_step(name, device, context, batch, precision, allow_overflow=True).flops
    cache = batch * context * ref.Q_(1, "token") * m.kv_bytes_per_token("fp16")
    weights = m.weight_bytes(precision)

    def time(f=flops, w=weights, c=cache, peak="fp16", memory_only=False, added=False):
        memory = (w + c) / d.memory_bandwidth
        compute = f / d.peak_flops(peak)
        return (memory if memory_only else compute + memory if added else max(compute, memory)).to("s")

    # Exact slips (rel=EXACT): a step's caches are 0.2% of its bytes at batch 1 and 100 tokens, and a group's
    # scales 2% of INT4's, so leaving either out is told, not let through as rounding.
    slips = {"the caches left out of the step's bytes": time(c=0 * cache),
             "compute and memory times added (the roofline takes the larger)": time(added=True),
             "one sequence's cache, not the batch's": time(c=cache / batch),
             "one sequence's FLOPs, not the batch's": time(f=flops / batch),
             "a memory-only step (the FLOPs left out)": time(memory_only=True)}
    if fmt is not None:
        bits = {"int4": 4, "int8": 8, "fp8": 8}[fmt]
        slips["the cache quantized with the weights (weight-only formats leave it FP16)"] = time(c=cache * bits / 16)
        if fmt in d.precisions:
            slips[f"the {fmt.upper()} peak (weight-only formats still multiply in FP16)"] = time(peak=fmt)
        everything = _weights(ref, fmt, precision.group_size, embeddings=True)
        slips["the embedding table and head quantized too (as shipped they stay 16-bit)"] = time(
            w=m.weight_bytes(everything))
        if precision.group_size:
            bare = ref.Q_((m.non_embedding_params * bits + m.embedding_and_head_params * 16) / 8, "B")
            slips["group_size not passed on (the group's scales left out)"] = time(w=bare)
    return _named({label: (value / expected).m_as("") for label, value in slips.items()}, EXACT)


def _named(factors: dict[str, float], rel: float = 0.02) -> dict[str, float]:
    """The checker's ``mistakes=`` from slips' factors: those that give the right answer here dropped, those that
    give the same wrong one named together (the answer cannot tell them apart), the later-listed first."""
    named: dict[float, list[str]] = {}
    for label, factor in reversed(list(factors.items())):
        if abs(factor - 1) <= rel:
            continue
        same = next((f for f in named if abs(f / factor - 1) < 0.005), factor)
        named.setdefault(same, []).append(label)
    return {"; or ".join(labels): factor for factor, labels in named.items()}


# -- Exercise 3: and the prefill? ----------------------------------------------------------------------------------

def _prefill_times(ref, name, device, prompt_len, precision, compute="fp16"):
    """(max(FLOPs / peak, one read of the weights / bandwidth); the library's per-operation time), in s."""
    m, d = ref.model(name), ref.hardware(device)
    p = ref.prefill(name, device, prompt_len, precision=precision, allow_overflow=True)
    simple = max(p.flops / d.peak_flops(compute), m.weight_bytes(precision) / d.memory_bandwidth)
    return simple.to("s"), p.time.to("s")


@exercise("ttft_speedup", A, derive=True, derived=r"""
With $t(W) = \max(F_{prefill}/\text{FP16 peak},\ W/\text{bandwidth})$, the speed-up is $t(W_{16}) / t(W_{fmt})$.
It is the ratio of the weights' bytes for a prompt short enough to be memory-bound, and 1 once the FLOPs bind.
Smaller weights only lower the prompt length at which the prefill turns compute-bound.
""", visible=[
    # a 2,000-token prompt is compute-bound: a prefill timed by its bytes alone (a 2.8x "gain") fails
    ("Llama-3-8B", "H100", 2000, "int4", 128),
    # a 32-token prompt is memory-bound: "the math does not change, so 1x" fails, and so does quantizing the
    # embedding table and head with the body (3.9x instead of 2.8x)
    ("Llama-3-8B", "H100", 32, "int4", 128),
    # INT8 weights on the A100 at 100 tokens, memory-bound in FP16 and compute-bound in INT8: multiplying at the
    # INT8 tensor-core rate (weight-only quantization still multiplies in FP16) fails
    ("Mistral-7B", "A100-80GB", 100, "int8", None),
])
def _ttft_speedup(answers, case, ref, rl):
    __tracebackhide__ = True
    (ttft_speedup,) = answers
    name, device, prompt_len, fmt, group = case
    simple16, careful16 = _prefill_times(ref, name, device, prompt_len, "fp16")
    quantized = _weights(ref, fmt, group)
    simple_q, careful_q = _prefill_times(ref, name, device, prompt_len, quantized)
    gain = (simple16 / simple_q).m_as("")
    m = ref.model(name)
    slips = {"the bytes alone (a long prompt waits on the FP16 math, which weight-only formats leave alone)":
                 (m.weight_bytes("fp16") / m.weight_bytes(quantized)).m_as("") / gain,
             "1x, the math unchanged (a short prompt waits on reading the weights, which shrink)": 1 / gain,
             "the embedding table and head quantized too (as shipped they stay 16-bit)": (simple16 / _prefill_times(
                 ref, name, device, prompt_len, _weights(ref, fmt, group, embeddings=True))[0]).m_as("") / gain}
    if fmt in ref.hardware(device).precisions:
        slips[f"the {fmt.upper()} peak (weight-only formats still multiply in FP16)"] = (simple16 / _prefill_times(
            ref, name, device, prompt_len, quantized, fmt)[0]).m_as("") / gain
    number(ttft_speedup(rl.model(name), rl.hardware(device), prompt_len, fmt, group), gain,
           f"ttft_speedup({name}, {device}, {prompt_len}, {fmt!r}, {group})",
           accept=((careful16 / careful_q).m_as(""),), mistakes=_named(slips))


# -- Exercise 4: 8-bit compute ------------------------------------------------------------------------------------

@exercise("w8a8_prefill_speedup", A, derive=True, derived=r"""
Both change: the weights take 8 bits (the embedding table and head stay 16-bit) and the FLOPs run at
`device.peak_flops(compute)`, twice the FP16 rate on the H100 and the A100. A long prompt waits on the math, so it
gains the ratio of the peaks, 2x; a short one waits on the weights, so it gains their byte ratio, a little under 2x.
""", visible=[
    # a 2,000-token prompt is compute-bound: keeping the FP16 peak (1x) or timing the bytes alone (1.8x) fails
    ("Llama-3-8B", "H100", 2000, "fp8"),
    # a 16-token prompt is memory-bound: "twice the peak, so 2x" fails (the bytes shrink 1.8x, the embedding table
    # and head staying 16-bit), and so does storing the embedding table and head in FP8 too (exactly 2x)
    ("Llama-3-8B", "H100", 16, "fp8"),
    # INT8 on the A100, whose tensor cores have no FP8: the FP8 format written in (it raises there) fails
    ("Mistral-7B", "A100-80GB", 2000, "int8"),
    # FP8 asked of the A100: the error device.peak_flops raises must reach the caller, so catching it and returning
    # 1x (or the FP16 time) fails
    ("Llama-3-8B", "A100-80GB", 2000, "fp8"),
])
def _w8a8_prefill_speedup(answers, case, ref, rl):
    __tracebackhide__ = True
    (w8a8_prefill_speedup,) = answers
    name, device, prompt_len, compute = case
    said = f"w8a8_prefill_speedup({name}, {device}, {prompt_len}, {compute!r})"
    m, d = rl.model(name), rl.hardware(device)
    if compute not in ref.hardware(device).precisions:
        try:
            answer = w8a8_prefill_speedup(m, d, prompt_len, compute)
        except ValueError:
            return
        _fail(f"{said} = {answer!r}, but the {device} has no {compute} tensor cores: it should raise the error "
              f"device.peak_flops({compute!r}) raises, not return a number.")
    eight = ref.Precision(weights=compute, kv="fp16", compute=compute)
    simple16, careful16 = _prefill_times(ref, name, device, prompt_len, "fp16")
    simple8, careful8 = _prefill_times(ref, name, device, prompt_len, eight, compute)
    gain = (simple16 / simple8).m_as("")
    model = ref.model(name)
    everything = ref.Precision(weights=compute, kv="fp16", compute=compute, quantize_embeddings=True)
    slips = {"the FP16 peak kept (W8A8 multiplies at the 8-bit rate)":
                 (simple16 / _prefill_times(ref, name, device, prompt_len, eight)[0]).m_as("") / gain,
             "the bytes alone (a long prompt waits on the math, which runs twice as fast)":
                 (model.weight_bytes("fp16") / model.weight_bytes(eight)).m_as("") / gain,
             "twice the peak, so 2x (a short prompt waits on reading the weights, and the embedding table and head "
             "stay 16-bit)": 2 / gain,
             "the peak alone (the weights kept at 16 bits: W8A8 ships them in 8, so a short prompt reads half)":
                 (simple16 / _prefill_times(ref, name, device, prompt_len, "fp16", compute)[0]).m_as("") / gain,
             "the embedding table and head in 8 bits too (as shipped they stay 16-bit)": (simple16 / _prefill_times(
                 ref, name, device, prompt_len, everything, compute)[0]).m_as("") / gain}
    number(w8a8_prefill_speedup(m, d, prompt_len, compute), gain, said,
           accept=((careful16 / careful8).m_as(""),), mistakes=_named(slips))


# -- Exercise 5: memory freed is room for sequences --------------------------------------------------------------

@exercise("extra_sequences", A, derive=True, derived=r"""
With a share $u$ of the usable memory $M$, weights of $W$ bytes and $c$ bytes of cache per token,
$$\text{batch} = \max\left(0,\ \left\lfloor \frac{u\,M - W}{n\,c} \right\rfloor\right).$$
INT4 weights free their bytes once; an FP8 cache halves every sequence's share, which at long context is the
larger gain.
""", visible=[
    # the running example: forgetting the FP8 cache, the utilization, K and V, the capacity read in GiB, or rounding
    # instead of taking the floor fails it
    ("Llama-3-8B", "H100", 8000, 0.9),
    # FP16 weights of Llama-3-70B do not fit an H100 at all: a negative batch (no clamp at 0) fails, and so does a
    # utilization fixed at 0.9 (the running example asks for 0.9)
    ("Llama-3-70B", "H100", 4000, 0.95),
])
def _extra_sequences(answers, case, ref, rl):
    __tracebackhide__ = True
    largest_batch, extra_sequences = answers
    name, device, context, utilization = case
    small = ref.Precision(weights="int4", kv="fp8", compute="fp16", group_size=128)
    fits = {p: ref.memory_budget(name, device, context, 1, p, utilization).max_batch
            for p in ("fp16", small)}
    m, d = rl.model(name), rl.hardware(device)
    for (fmt, group, kv), precision in [(("fp16", None, "fp16"), "fp16"), (("int4", 128, "fp8"), small)]:
        said = f"largest_batch({name}, {device}, {context}, {fmt!r}, {group}, {kv!r}, {utilization})"
        answer = largest_batch(m, d, context, fmt, group, kv, utilization)
        if _negative(answer):
            _fail(f"{said} = {answer!r}: a count of sequences is never negative. When the weights alone do not fit, "
                  "no sequence fits: the answer is 0.", "a negative count when the weights do not fit")
        if fits[precision] and answer != fits[precision]:
            slips = _batch_slips(ref, name, device, context, precision, kv, utilization)
            match = [label for label, count in slips.items() if count == answer and count != fits[precision]]
            if match:
                # several slips may give this count: all are named, the tag too (round 13: a rounding slip was
                # tagged as the reported total, the first of two that matched)
                _fail(f"{said} = {answer!r}, expected {fits[precision]}: your count matches "
                      f"{' or '.join(match)}.", "; or ".join(match))
        number(answer, fits[precision], said, rel=1e-9)
    without_fp8 = ref.memory_budget(name, device, context, 1, ref.Precision(
        weights="int4", kv="fp16", compute="fp16", group_size=128), utilization).max_batch - fits["fp16"]
    expected = fits[small] - fits["fp16"]
    answer = extra_sequences(m, d, context, utilization)
    if answer == without_fp8 != expected:
        _fail(f"extra_sequences({name}, {device}, {context}, {utilization}) = {answer!r}, expected {expected}: your "
              "count matches INT4 weights with an FP16 cache; the comparison asks for an FP8 cache too.",
              "forgot the FP8 cache")
    number(answer, expected, f"extra_sequences({name}, {device}, {context}, {utilization})", rel=1e-9)


def _negative(answer) -> bool:
    """Whether ``answer`` is a number below zero (anything else is left to the checker's own messages)."""
    try:
        return float(answer) < 0
    except (TypeError, ValueError, AttributeError):
        return False


def _batch_slips(ref, name, device, context, precision, kv, utilization):
    """The counts of sequences that known slips give (label -> count)."""
    m, d = ref.model(name), ref.hardware(device)
    usable = d.usable_memory

    def count(share=utilization, memory=usable, per_sequence=1.0, kv_format=kv, whole=int):
        room = share * memory - m.weight_bytes(precision)
        sequence = context * ref.Q_(1, "token") * m.kv_bytes_per_token(kv_format) * per_sequence
        return max(0, whole((room / sequence).m_as("")))

    # First, so that it is the one named when it gives the same count as another: the total the device reports
    # (nvidia-smi's figure) is the likeliest slip, as that is the figure a data sheet gives.
    return {"the reported total (memory_capacity) for what a process can allocate (usable_memory)":
                count(memory=d.memory_capacity),
            "the utilization left out (all the usable memory)": count(share=1.0),
            "a utilization of 0.9 written in": count(share=0.9),
            "the usable memory read in GiB for GB": count(memory=ref.Q_(usable.m_as("GiB"), "GB")),
            "half the cache per sequence (K or V left out)": count(per_sequence=0.5),
            "the cache's format not passed on (an FP16 cache)": count(kv_format="fp16"),
            "rounded, not rounded down (a sequence that does not fit whole does not fit)": count(whole=round)}


# -- Exercise 6: the cheapest configuration that meets the target, at the load it serves -------------------------

def _cheapest(ref, name, configs, prompt_len, output_len, batch, ttft_ms, itl_ms, efficiency):
    """The labels of the cheapest configurations that fit ``batch`` sequences and meet both limits (empty: none)."""
    good = []
    for label, (device, precision, price) in configs.items():
        try:
            s = ref.steady_state(name, device, prompt_len, output_len, batch, precision=precision,
                                 efficiency=efficiency or "typical")
        except ref.DoesNotFit:
            continue
        if s.meets(ref.Q_(ttft_ms, "ms"), ref.Q_(itl_ms, "ms")):
            good.append((price, label))
    return [label for price, label in good if price == min(good)[0]]


@exercise("cheapest_config", A, visible=[
    # a chat product at batch 1 (250 ms, 35 ms), efficiency left to its default: the ideal's answer (T4, INT4),
    # ignoring the TTFT limit (T4, INT4 again), ignoring the ITL limit (L4, FP16) or the most expensive (H100, FP8)
    # fails
    ("Llama-3-8B", CHAT_CONFIGS, 1000, 300, 1, 250, 35, None),
    # the same product under its load, 16 sequences at once: deciding at batch 1 (L4, INT4) fails, and so does
    # rl.request with batch 16, which prefills all 16 prompts at once (H100, FP8)
    ("Llama-3-8B", CHAT_CONFIGS, 1000, 300, 16, 300, 30, "typical"),
    # 64 sequences with loose limits, at the ideal: the cheap configurations do not fit 64 caches of 1,300 tokens,
    # so skipping the memory check or checking it at the prompt's length (T4, INT4), typical efficiency whatever is
    # asked (A100-80GB, FP16) or batch 1 (T4, INT4) fails
    ("Llama-3-8B", CHAT_CONFIGS, 1000, 300, 64, 500, 100, "ideal"),
    # the same load with the offers in no order of price: the A100 is listed first and qualifies, the L4 with INT4
    # is cheaper and qualifies too, so taking the first that qualifies, or the smallest name, fails
    ("Llama-3-8B", SHUFFLED_CONFIGS, 1000, 300, 64, 500, 100, "ideal"),
])
def _cheapest_config(answers, case, ref, rl):
    __tracebackhide__ = True
    (cheapest_config,) = answers
    name, configs, prompt_len, output_len, batch, ttft_ms, itl_ms, efficiency = case
    said = (f"cheapest_config({name}, {prompt_len}/{output_len} tokens, batch {batch}, TTFT <= {ttft_ms} ms, "
            f"ITL <= {itl_ms} ms, {efficiency or 'efficiency left to its default'})")
    args = (rl.model(name), dict(configs), prompt_len, output_len, batch, rl.Q_(ttft_ms, "ms"), rl.Q_(itl_ms, "ms"))
    answer = cheapest_config(*args) if efficiency is None else cheapest_config(*args, efficiency)
    cheapest = _cheapest(ref, name, configs, prompt_len, output_len, batch, ttft_ms, itl_ms, efficiency)
    if not cheapest:
        if answer is not None:
            _fail(f"{said} = {answer!r}, but no configuration fits and meets both limits: it should return None. "
                  + _verdict(ref, name, configs, answer, prompt_len, output_len, batch, efficiency, ttft_ms, itl_ms),
                  "a configuration that does not fit or misses a limit")
        return
    if answer is None:
        _fail(f"{said} = None, but at least one configuration fits and meets both limits.", "None for a configuration")
    if answer not in configs:  # not one of the names (or the right one spelled otherwise): the checker says which
        choice(answer, cheapest[0], said, {label: () for label in configs})
        return
    if answer not in cheapest:
        _fail(f"{said} = {answer!r} is not the cheapest configuration that fits and meets both limits: "
              + _verdict(ref, name, configs, answer, prompt_len, output_len, batch, efficiency, ttft_ms, itl_ms),
              f"cheapest_config: picked {answer}")


def _verdict(ref, name, configs, label, prompt_len, output_len, batch, efficiency, ttft_ms, itl_ms):
    """What the configuration ``label`` gives at this load, in one sentence (why it is not the answer)."""
    device, precision, _ = configs[label]
    s = ref.steady_state(name, device, prompt_len, output_len, batch, precision=precision,
                         efficiency=efficiency or "typical", allow_overflow=True)
    if not s.fits:
        return (f"{label} cannot hold {batch} sequences of {prompt_len + output_len:,} tokens (at most "
                f"{s.max_batch} fit).")
    load = (f"with {batch} sequence{'s' if batch > 1 else ''} at once and {efficiency or 'typical'} efficiency, "
            f"{label} gives TTFT {s.ttft.m_as('ms'):.0f} ms and ITL {s.itl.m_as('ms'):.1f} ms")
    if s.meets(ref.Q_(ttft_ms, "ms"), ref.Q_(itl_ms, "ms")):
        cheaper = sorted(other for other, (_, _, price) in configs.items() if price < configs[label][2])
        return (f"{load}, within both limits, but a cheaper configuration is within them too (compare the prices: "
                f"{', '.join(map(repr, cheaper))} cost less an hour, and the configurations need not be listed in order of "
                "price).")
    return f"{load}, outside the limits."


# -- predictions and the explorer's question -----------------------------------------------------------------------

PHASES = {"prefill": ("the prefill", "prompt"), "decode": ("decoding", "the decode", "generation"),
          "both": ("both phases", "prefill and decode"), "neither": ("none", "no phase")}


@question("int4_speeds_up", A, "decode", PHASES, revisited_in="The cell after Exercise 3")
def _int4_speeds_up(ref):
    int4 = _weights(ref, "int4", 128)
    prefill = [_prefill_times(ref, "Llama-3-8B", "H100", 2000, p) for p in ("fp16", int4)]
    step = [_decode_times(ref, "Llama-3-8B", "H100", 2000, 1, p) for p in ("fp16", int4)]
    short = [_prefill_times(ref, "Llama-3-8B", "H100", 32, p) for p in ("fp16", int4)]

    def gain(pair, which):  # which: 0 your count, 1 the library's
        return (pair[0][which] / pair[1][which]).m_as("")

    return (f"Weight-only INT4 leaves the prefill of a 2,000-token prompt at {prefill[0][0].m_as('ms'):.1f} ms against "
            f"{prefill[1][0].m_as('ms'):.1f} ms (Llama-3-8B, H100, ideal, your count): it was waiting on FP16 math, "
            f"which INT4 weights do not change. A decode step at 2,000 tokens drops from "
            f"{step[0][0].m_as('ms'):.2f} to {step[1][0].m_as('ms'):.2f} ms, {gain(step, 0):.2f}x faster, because it "
            f"waits on the bytes it reads. The exception is a prompt short enough to be memory-bound: 32 tokens "
            f"prefill {gain(short, 0):.2f}x faster. The library's careful count says {gain(step, 1):.2f}x and "
            f"{gain(short, 1):.2f}x: it reads one embedding row per token where your count reads the whole table "
            "(16-bit in both formats), so fewer of its bytes are left unshrunk and its speed-ups run higher.")


GAINS = {"more": ("more than", "larger", "greater"), "the same": ("same", "equal", "about the same"),
         "less": ("less than", "smaller", "lower")}


@question("long_context_gain", A, "less", GAINS, revisited_in="The cell after Exercise 2")
def _long_context_gain(ref):
    m = ref.model("Llama-3-8B")
    int4 = _weights(ref, "int4", 128)
    times = [_decode_times(ref, "Llama-3-8B", "H100", 8000, 16, p) for p in ("fp16", int4)]
    caches = (16 * 8000 * ref.Q_(1, "token") * m.kv_bytes_per_token("fp16")).to("GB")
    return (f"INT4 in groups of 128 reads {16 / int4.bits_per_weight:.2f}x fewer bytes per body weight, but at 8,000 "
            f"tokens and batch 16 a step also reads {caches.m_as('GB'):.1f} GB of FP16 caches, which weight-only "
            f"INT4 leaves alone, next to {m.weight_bytes(int4).m_as('GB'):.1f} GB of INT4 weights (the embedding "
            f"table and head still 16-bit). The step goes from {times[0][0].m_as('ms'):.1f} to "
            f"{times[1][0].m_as('ms'):.1f} ms (Llama-3-8B, H100, ideal, your count): "
            f"{(times[0][0] / times[1][0]).m_as(''):.2f}x, less than the ratio of bits. The library's careful count "
            f"(one embedding row read per sequence) says {times[0][1].m_as('ms'):.1f} to "
            f"{times[1][1].m_as('ms'):.1f} ms, {(times[0][1] / times[1][1]).m_as(''):.2f}x.")


CHANGES = {"int4 weights": ("int4", "weights", "int4 weight"),
           "fp8 cache": ("fp8 kv cache", "fp8 kv", "kv cache", "cache", "kv", "fp8 cache"),
           "fp8 compute": ("compute", "fp8 compute", "w8a8")}


@question("long_context_change", A, "fp8 cache", CHANGES)
def _long_context_change(ref):
    options = {"FP16 everywhere": "fp16",
               "INT4 weights": ref.Precision(weights="int4", kv="fp16", compute="fp16"),
               "an FP8 cache": ref.Precision(weights="fp16", kv="fp8", compute="fp16"),
               "FP8 compute": ref.Precision(weights="fp16", kv="fp16", compute="fp8")}
    itl = {label: ref.request("Llama-3.1-8B", "H100", 32000, 256, 8, p).itl for label, p in options.items()}
    one = {label: ref.request("Llama-3.1-8B", "H100", 32000, 256, precision=options[label]).itl
           for label in ("INT4 weights", "an FP8 cache")}
    shown = ", ".join(f"{label} {t.m_as('ms'):.1f} ms" for label, t in itl.items())
    m = ref.model("Llama-3.1-8B")
    caches = (8 * 32000 * ref.Q_(1, "token") * m.kv_bytes_per_token("fp16")).to("GB")
    return (f"At 32,000 tokens and batch 8 the ideal ITL is: {shown} (Llama-3.1-8B, H100). Eight caches of 32,000 "
            f"FP16 tokens are {caches.m_as('GB'):.0f} GB, against {m.weight_bytes('fp16').m_as('GB'):.0f} GB of "
            "weights, so halving the cache saves more bytes than INT4 weights do; FP8 compute changes no "
            "byte, and a decode step waits on bytes. At batch 1 the order flips: INT4 weights "
            f"{one['INT4 weights'].m_as('ms'):.1f} ms, an FP8 cache {one['an FP8 cache'].m_as('ms'):.1f} ms. "
            "Quantize what dominates the bytes.")


WAITS = {"flops at 2000, weights at 16": ("the flops at 2000, the weights at 16", "flops then weights"),
         "flops at both": ("the flops at both", "flops"),
         "weights at both": ("the weights at both", "weights"),
         "weights at 2000, flops at 16": ("the weights at 2000, the flops at 16", "weights then flops")}


@question("prefill_waits_on", A, "flops at 2000, weights at 16", WAITS, revisited_in="The cell after Exercise 3")
def _prefill_waits_on(ref):
    h100 = ref.hardware("H100")
    lines = []
    for prompt_len in (2000, 16):
        cost = ref.prefill("Llama-3-8B", h100, prompt_len)  # ideal, FP16: the paper estimate's terms
        compute = (cost.flops / h100.peak_flops("fp16")).to("ms")
        memory = (cost.bytes / h100.memory_bandwidth).to("ms")
        lines.append(f"{prompt_len:,} tokens: the FLOPs take {compute.m_as('ms'):.2g} ms at the FP16 peak, moving "
                     "its bytes (nearly all of them weights; the prompt's cache writes make the rest) "
                     f"{memory.m_as('ms'):.2g} ms")
    return (f"{'; '.join(lines)} (Llama-3-8B, H100, ideal, the library's careful count). A prefill does about "
            "2 x parameters FLOPs per prompt token but reads the weights once, so a long prompt waits on the math, "
            "which INT4 weights leave in FP16, and a short one on the bytes, which INT4 shrinks: Exercise 3's "
            "speed-up is near 1 at 2,000 tokens and large at 16.")
