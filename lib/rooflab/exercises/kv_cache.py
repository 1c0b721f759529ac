"""Assignment 2, the KV cache: its exercises, its prediction and the explorer's question.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
Expected values follow the course's back-of-envelope convention (every weight
stored in the format asked for, ``rooflab.earlier``), and accept the library's
careful count where the old tests did.
"""

from __future__ import annotations

import importlib

from ..check import MISTAKE_TAG, _fail, number, quantity
from . import exercise, question

A = "02_kv_cache"
EXACT = 1e-3  # FLOP and byte counts are exact arithmetic: only rounding may differ
WHOLE = 1e-9  # counts of sequences and tokens are whole numbers
SLIP = 2e-3  # how close an answer must come to a mistake's value for the mistake to be named


def _shown(value, like=None) -> str:
    """A value as the checker prints it, in the unit of ``like`` when it has one."""
    try:
        if hasattr(value, "units"):
            if like is not None and hasattr(like, "units"):
                value = value.to(format(like.units, "D"))
            return format(value, ".4g~P")
        return format(value, ".4g")
    except Exception:  # an answer of another dimension or type: the check's own message describes it
        return repr(value)


def _checked(check, answer, expected, name, slips=(), **options):
    """``check(answer, expected, name, **options)``; when it fails and the answer is what a known structural
    mistake gives, name that mistake.  ``slips`` are (mistake, the value it gives, what it is)."""
    __tracebackhide__ = True
    try:
        check(answer, expected, name, **options)
        return
    except AssertionError:
        for mistake, value, what in slips:
            try:
                check(answer, value, name, rel=SLIP)
            except AssertionError:
                continue
            raise AssertionError(f"{name} = {_shown(answer, expected)}, expected {_shown(expected)}: your value "
                                 f"matches {what}. {MISTAKE_TAG}{mistake}]") from None
        raise


def _earlier(ref):
    """The course's versions of the exercises (``rooflab.earlier``) in the checker's private copy."""
    return importlib.import_module(f"{ref.__name__}.earlier")


def _cache(ref, name, context_len, batch, precision):
    """Bytes of ``batch`` caches of ``context_len`` tokens, from the private copy."""
    return batch * context_len * ref.Q_(1, "token") * ref.model(name).kv_bytes_per_token(precision)


# -- Exercise 1 ---------------------------------------------------------------------

@exercise("kv_bytes_per_token", A, derive=True, derived=r"""
A token's cache is $2 \times \text{layers} \times \text{KV heads} \times \text{head\_dim} \times
\text{bytes per value}$: 128 KiB for Llama-3-8B in FP16 ($2 \times 32 \times 8 \times 128 \times 2$ B). Llama-2-7B,
with a KV head per query head, keeps four times as much. Without the cache, token 2,000 would redo the key and
value projections of all 1,999 earlier tokens in every layer; with it, that work becomes bytes to read.
""", visible=[
    # GQA at 16 bits: values for bytes and a forgotten K or V (2x), query heads for KV heads (4x), bits (8x)
    ("Llama-3-8B", "fp16"),
    # 80 layers at 8 bits: a layer count or a 2-byte value written in rather than read from the model
    # and the format; query heads for KV heads is 8x here
    ("Llama-3-70B", "fp8"),
])
def _kv_bytes_per_token(answers, case, ref, rl):
    __tracebackhide__ = True
    (kv_bytes_per_token,) = answers
    name, precision = case
    m = ref.model(name)
    expected = m.kv_bytes_per_token(precision) * ref.Q_(1, "token")
    quantity(kv_bytes_per_token(rl.model(name), precision), expected, f"kv_bytes_per_token({name}, {precision!r})",
             rel=EXACT, mistakes={"query heads for KV heads": m.heads / m.kv_heads})


# -- Exercise 2 ---------------------------------------------------------------------

@exercise("kv_cache_bytes", A, derive=True, visible=[
    # 64 sequences: one sequence's cache for the batch's (64x); the running example's 16.8 GB
    ("Llama-3-8B", 2000, 64, "fp16"),
    # an 8-bit cache: the format not passed on (2x); 3 sequences of another model
    ("Llama-3-70B", 4096, 3, "fp8"),
])
def _kv_cache_bytes(answers, case, ref, rl):
    __tracebackhide__ = True
    (kv_cache_bytes,) = answers
    name, context_len, batch, precision = case
    m = ref.model(name)
    expected = ref.memory_budget(name, "B200", context_len, batch, precision).kv
    quantity(kv_cache_bytes(rl.model(name), context_len, batch, precision), expected,
             f"kv_cache_bytes({name}, {context_len}, batch={batch}, {precision!r})", rel=EXACT,
             mistakes={"per sequence for per batch": batch, "query heads for KV heads": m.heads / m.kv_heads})


# -- Exercise 3 ---------------------------------------------------------------------

@exercise("max_batch", A, derive=True, derived=r"""
The room is $u \times M_{usable} - W$ for a share $u$ and weights of $W$ bytes. The largest batch is
$\lfloor \text{room} / (n\,c) \rfloor$ for $n$ tokens of $c$ bytes each, and the longest context is
$\lfloor \text{room} / (B\,c) \rfloor$; both are 0 when the room is negative. Engines count whole sequences
(vLLM admits a request only when its blocks fit).
""", visible=[
    # (model, device, context, batch, weights, kv, gpu_memory_utilization)
    # the running example: the "80GB" label, nvidia-smi's total for the 79.11 GiB a process gets, or the usable
    # memory read in GiB for GB (fewer bytes), rounding up (262.8 sequences), the weights left out
    ("Llama-3-8B", "H100", 2000, 1, "fp16", "fp16", 1.0),
    # an engine's reserve, applied to the capacity (not to what the weights leave); 8-bit weights and cache
    # (formats not passed on: 16-bit weights do not even fit); batch 8 in longest_context (not per sequence)
    ("Llama-3-70B", "H100", 4096, 8, "fp8", "fp8", 0.9),
    # 141 GB of weights on an 84.9 GB device: 0 sequences and 0 tokens, not a negative count
    ("Llama-3-70B", "H100", 4096, 8, "fp16", "fp16", 1.0),
])
def _max_batch(answers, case, ref, rl):
    __tracebackhide__ = True
    kv_room, max_batch, longest_context = answers
    name, device, context_len, batch, weights, kv, utilization = case
    # The exercise stores every weight in `weights`; as shipped, 8-bit weights keep the embedding and head in 16 bits.
    every = ref.Precision(weights=weights, kv=kv, compute="fp16", quantize_embeddings=True)
    shipped = ref.Precision(weights=weights, kv=kv, compute="fp16")
    budgets = [ref.memory_budget(name, device, context_len, batch, p, utilization)
               for p in (every, shipped)]
    m, d = rl.model(name), rl.hardware(device)
    usable, reported, weight_bytes = budgets[0].allocatable, budgets[0].capacity, budgets[0].weights
    label = ref.Q_(float(ref.hardware(device).memory_label.removesuffix("GB")), "GB")
    slips = [("GB for GiB", utilization * ref.Q_(usable.m_as("GiB"), "GB") - weight_bytes,
              f"the usable memory read in GiB and written as GB (it is {usable.to('GiB'):.2f~P}, or {usable:.2f~P})"),
             ("the label for the capacity", utilization * label - weight_bytes,
              f"the name the device is sold under, {label:.0f~P}, where a process can allocate {usable:.2f~P}"),
             ("the reported total for what a process can allocate", utilization * reported - weight_bytes,
              f"nvidia-smi's total, {reported:.2f~P}, of which a process can allocate only {usable:.2f~P}"),
             ("the reserve taken from what the weights leave", utilization * (usable - weight_bytes),
              "the reserve taken from what the weights leave, not from the usable memory")]
    _checked(quantity, kv_room(m, d, weights, utilization), budgets[0].kv_room,
             f"kv_room({name}, {device}, {weights!r}, {utilization})", slips, rel=EXACT, accept=(budgets[1].kv_room,))
    sizes = [ref.memory_budget(name, device, context_len, 1, p, utilization).max_batch
             for p in (every, shipped)]
    number(max_batch(m, d, context_len, weights, kv, utilization), sizes[0],
           f"max_batch({name}, {device}, {context_len}, {weights}/{kv}, {utilization})", rel=WHOLE, accept=sizes[1:])
    lengths = [ref.memory_budget(name, device, 1, batch, p, utilization).max_context
               for p in (every, shipped)]
    number(longest_context(m, d, batch, weights, kv, utilization), lengths[0],
           f"longest_context({name}, {device}, batch={batch}, {weights}/{kv}, {utilization})", rel=WHOLE,
           accept=lengths[1:])


# -- Exercise 4 ---------------------------------------------------------------------

def _step_times(ref, name, device, context_len, batch, precision):
    """(the course's roofline step, the same with the library's weight bytes, the library's careful step)."""
    m, d = ref.model(name), ref.hardware(device)
    course = _earlier(ref).decode_step_time(m, d, context_len, batch, precision)
    flops = batch * _earlier(ref).decode_flops(m, context_len)
    nbytes = m.weight_bytes(precision) + _cache(ref, name, context_len, batch, precision)
    shipped = max(flops / d.peak_flops(precision), nbytes / d.memory_bandwidth).to("s")
    careful = ref.decode_step(name, device, context_len, batch, precision, allow_overflow=True).time
    return course, shipped, careful


def _memory_time(ref, name, device, context_len, batch, precision):
    """The course's step with its compute term left out."""
    nbytes = _earlier(ref).weight_bytes(ref.model(name), precision) + _cache(ref, name, context_len, batch, precision)
    return (nbytes / ref.hardware(device).memory_bandwidth).to("s")


@exercise("decode_step_time", A, derive=True, derived=r"""
With $B$ sequences of $n$ tokens, weights of $W$ bytes and $c$ bytes of cache per token, all in one format,
$$t = \max\left(\frac{B \, F_{decode}(n)}{\text{peak}},\ \frac{W + B\,n\,c}{\text{bandwidth}}\right).$$
The weights are shared by the batch and the caches are not: the rest of this assignment follows from that one
difference.
""", visible=[
    # (model, device, context, batch, precision)
    # 64 sequences of 2,000 tokens, memory-bound, the caches half the bytes: ms for s, one cache for all, the
    # weights read once per sequence, a compute-only step, F/P + B/W for the max, KV values for bytes
    ("Llama-3-8B", "H100", 2000, 64, "fp16"),
    # 512 short sequences at 8 bits: the matmuls bind (3.9 ms against 2.4 ms of reads), so a memory-only step,
    # the FLOPs of one sequence, or the 16-bit peak fails
    ("Llama-3-8B", "H200", 100, 512, "fp8"),
    # memory-bound at 8 bits: 16-bit bytes (the format not passed to the weights or the cache) fail
    ("Llama-3-70B", "H200", 1000, 32, "fp8"),
])
def _decode_step_time(answers, case, ref, rl):
    __tracebackhide__ = True
    (decode_step_time,) = answers
    name, device, context_len, batch, precision = case
    course, shipped, careful = _step_times(ref, name, device, context_len, batch, precision)
    answer = decode_step_time(rl.model(name), rl.hardware(device), context_len, batch, precision)
    slips = [("a memory-only step", _memory_time(ref, name, device, context_len, batch, precision),
              "the bytes' time alone, but at this batch the FLOPs take longer (count them for every sequence, "
              "and keep the larger of the two times)")]
    # Two slips of counting a decode step as if it were a prefill (the phase assignment 1 taught first).
    m, d, early = ref.model(name), ref.hardware(device), _earlier(ref)
    new_cache_only = (early.weight_bytes(m, precision) + _cache(ref, name, 1, batch, precision)) / d.memory_bandwidth
    prefill_flops = batch * early.prefill_flops(m, context_len) / d.peak_flops(precision)
    slips += [("only the new token's cache", max(batch * early.decode_flops(m, context_len) / d.peak_flops(precision),
                                                  new_cache_only).to("s"),
               "the weights and one token's cache per sequence, as a prefill writes it, where a decode step reads "
               "each sequence's whole cache of context_len tokens"),
              ("a prefill's FLOPs per sequence", max(prefill_flops, _memory_time(
                  ref, name, device, context_len, batch, precision)).to("s"),
               "each sequence doing a prefill of context_len tokens, where a decode step computes one new token "
               "per sequence (decode_flops)")]
    _checked(quantity, answer, course,
             f"decode_step_time({name}, {device}, {context_len}, batch={batch}, {precision!r})", slips,
             accept=(shipped, careful))


# -- Exercise 5: reading a profile -------------------------------------------------------

@exercise("profile", A, derive=True, derived=r"""
MFU $= \dfrac{\text{FLOPs} / t}{\text{peak FLOP/s at the format}}$ and MBU $= \dfrac{\text{bytes} / t}{\text{bandwidth}}$.
A decode step of $B$ sequences at $n$ tokens of context, $b$ bytes a value and $c$ bytes of cache a token, moves
$$\text{bytes} = \big(N_{body} + V d + B\,d\big)\,b + B\,n\,c:$$
the body and the output head read whole (every token is multiplied by them), one embedding row of $d$ values per
sequence (the table is only indexed), and every sequence's own cache. Reading the whole embedding table instead
would count 1 GB too many for Llama-3-8B; the course's `weight_bytes` counts it whole, as a checkpoint stores it.
""", visible=[
    # ("mfu", FLOPs, unit, time, unit, device, precision): the prefill TensorRT-LLM measured (Llama-2-7B, 2,048
    # tokens, A100): a percentage, ms for s, magnitudes taken without their units (TFLOP and ms)
    ("mfu", 27.63, "TFLOP", 133, "ms", "A100-80GB", "fp16"),
    # FP8 on the H100: the 16-bit peak (2x) for the precision asked
    ("mfu", 3000, "GFLOP", 0.002, "s", "H100", "fp8"),
    # ("step_bytes", model, context, batch, precision): TensorRT-LLM's batch of 60 (128-token prompts, 2,048-token
    # answers, 1,152 tokens of context on average), where the caches are 73% of the bytes: the caches left out,
    # one sequence's cache for the batch's, KV values for bytes
    ("step_bytes", "Llama-2-7B", 1152, 60, "fp16"),
    # Llama-3-8B at batch 1: its 1.05 GB input embedding table is 7% of the bytes, so counting it whole fails
    # (read one row per token), and so does leaving out the output head
    ("step_bytes", "Llama-3-8B", 2000, 1, "fp16"),
    # 8-bit weights and cache: 16-bit bytes whatever the format
    ("step_bytes", "Llama-3-8B", 4000, 16, "fp8"),
    # ("mbu", bytes, unit, time, unit, device): the batch-60 step, 60 / 1,928 tokens/s: a percentage, ms for s
    ("mbu", 49.49, "GB", 31.12, "ms", "A100-80GB"),
    # another device, bytes in GiB and time in s: the A100's bandwidth written in, units dropped
    ("mbu", 14.0, "GiB", 0.004, "s", "H200"),
])
def _profile(answers, case, ref, rl):
    __tracebackhide__ = True
    mfu, step_bytes, mbu = answers
    kind, *args = case
    slip = {"milliseconds for seconds": 1e3}
    if kind == "mfu":
        flops, flop_unit, time, time_unit, device, precision = args
        expected = (ref.Q_(flops, flop_unit) / ref.Q_(time, time_unit) / ref.hardware(device).peak_flops(precision))
        answer = mfu(rl.Q_(flops, flop_unit), rl.Q_(time, time_unit), rl.hardware(device), precision)
        number(answer, expected.m_as(""), f"mfu({flops} {flop_unit}, {time} {time_unit}, {device}, {precision!r})",
               mistakes=slip)
    elif kind == "step_bytes":
        name, context_len, batch, precision = args
        m = ref.model(name)
        careful = ref.decode_step(name, "H100", context_len, batch, precision, allow_overflow=True).bytes
        # Every value in `precision`, the output head included (the library keeps an 8-bit model's head in 16 bits).
        every = (ref.Q_((m.non_embedding_params + m.vocab * m.d_model + batch * m.d_model)
                        * ref.bytes_per_element(precision), "B") + _cache(ref, name, context_len, batch, precision))
        table = ref.Q_((m.embedding_params - batch * m.d_model) * ref.bytes_per_element(precision), "B")
        row = ref.Q_(m.d_model * ref.bytes_per_element(precision), "B")
        # Two slips of counting a decode step's bytes as a prefill's (one row per token, only the cache written).
        slips = [("the whole embedding table", every + table, "the whole input embedding table read, where a step reads one row of it per sequence"),
                 ("an embedding row for every context token", every + batch * (context_len - 1) * row,
                  "an embedding row looked up for every token of context, where a decode step looks up one row per "
                  "sequence, for its new token"),
                 ("only the new token's cache", every - _cache(ref, name, context_len - 1, batch, precision),
                  "one token's cache per sequence, as a prefill writes it, where a decode step reads each sequence's "
                  "whole cache of context_len tokens")]
        # The likely routes of a count derived without a recipe: the head forgotten (non_embedding_params leaves it
        # out), the weights read once per sequence, the weights kept at 2 bytes whatever the format.
        weights = every - _cache(ref, name, context_len, batch, precision)
        head = ref.Q_(m.vocab * m.d_model * ref.bytes_per_element(precision), "B")
        slips += [("the output head left out", every - head,
                   "the step without the output head: non_embedding_params leaves out the vocab x d_model head, "
                   "which multiplies every sequence's new token, so it is read whole")]
        if batch > 1:
            whole = ref.Q_(m.total_params * ref.bytes_per_element(precision), "B")  # the table read whole, too
            slips += [("the weights read once per sequence", every + (batch - 1) * weights,
                       "the weights read once for every sequence, where a step reads them once for the whole batch"),
                      ("the weights read once per sequence", batch * whole + _cache(ref, name, context_len, batch,
                                                                                      precision),
                       "every weight, the whole embedding table too, read once for every sequence, where a step reads "
                       "the weights once for the whole batch and one embedding row per sequence")]
        if ref.bytes_per_element(precision) != 2:
            slips += [("the weights at 2 bytes whatever the format", every + weights * (
                2 / ref.bytes_per_element(precision) - 1), f"the weights counted at 2 bytes a value, where every "
                       f"value is in {precision}")]
        _checked(quantity, step_bytes(rl.model(name), context_len, batch, precision), careful,
                 f"step_bytes({name}, {context_len}, batch={batch}, {precision!r})", slips, rel=0.005,
                 accept=(every,))
    else:
        nbytes, byte_unit, time, time_unit, device = args
        expected = ref.Q_(nbytes, byte_unit) / ref.Q_(time, time_unit) / ref.hardware(device).memory_bandwidth
        answer = mbu(rl.Q_(nbytes, byte_unit), rl.Q_(time, time_unit), rl.hardware(device))
        number(answer, expected.m_as(""), f"mbu({nbytes} {byte_unit}, {time} {time_unit}, {device})",
               mistakes={**slip, "GB for GiB": 2**30 / 1e9})


# -- Exercise 6 ---------------------------------------------------------------------

@exercise("batching_gain", A, derive=True, derived=r"""
The gain is $B \, t(1) / t(B)$: $B$ tokens a step against one. While the step is memory-bound it is
$B\,(W + n c) / (W + B n c)$: near $B$ while the caches $B n c$ are small against the weights $W$, and bending away
once they are not.
""", visible=[
    # (model, device, context, batch): 2,000-token contexts, memory-bound: a step time for a throughput
    # (64x), the gain upside down, the caches left out (it would say 64)
    ("Llama-3-8B", "H100", 2000, 64),
    # 512 short sequences: the matmuls bind, so a memory-only step says 367, not 320
    ("Llama-3-8B", "H100", 100, 512),
])
def _batching_gain(answers, case, ref, rl):
    __tracebackhide__ = True
    (batching_gain,) = answers
    name, device, context_len, batch = case
    one = _step_times(ref, name, device, context_len, 1, "fp16")
    many = _step_times(ref, name, device, context_len, batch, "fp16")
    course, _, careful = [(batch * a / b).m_as("") for a, b in zip(one, many)]
    answer = batching_gain(rl.model(name), rl.hardware(device), context_len, batch)
    memory = [_memory_time(ref, name, device, context_len, b, "fp16") for b in (1, batch)]
    slips = [("a memory-only step", (batch * memory[0] / memory[1]).m_as(""),
              "steps timed by their bytes alone, but at this batch the FLOPs take longer")]
    _checked(number, answer, course, f"batching_gain({name}, {device}, {context_len}, batch={batch})", slips,
             accept=(careful,), mistakes={"step time for throughput (forgot that a step makes batch tokens)": batch})


# -- Exercise 7 ---------------------------------------------------------------------

@exercise("kv_equals_weights_batch", A, derive=True, derived=r"""
$B_{=} = W / (n\,c)$: the weights over one sequence's cache. For Llama-3-8B in FP16 at 2,000 tokens,
$16.06\ \text{GB} / (2{,}000 \times 131{,}072\ \text{B})$ is about 61. Past it, every step reads more cache than
weights, which is why the batch of 64 gained about half its size.
""", visible=[
    # (model, context, precision): GQA at 16 bits: query heads for KV heads (4x), KV values or a forgotten
    # K or V (2x), the cache of one token (2000x)
    ("Llama-3-8B", 2000, "fp16"),
    # 8 bits: the weights or the cache left at 16 bits (2x) while the other follows the format
    ("Llama-3-70B", 8000, "fp8"),
])
def _kv_equals_weights_batch(answers, case, ref, rl):
    __tracebackhide__ = True
    (kv_equals_weights_batch,) = answers
    name, context_len, precision = case
    m = ref.model(name)
    cache = _cache(ref, name, context_len, 1, precision)
    every_weight = _earlier(ref).weight_bytes(m, precision)  # the exercise: every weight in `precision`
    answer = kv_equals_weights_batch(rl.model(name), context_len, precision)
    number(answer, (every_weight / cache).m_as(""), f"kv_equals_weights_batch({name}, {context_len}, {precision!r})",
           rel=0.005, accept=((m.weight_bytes(precision) / cache).m_as(""),),
           mistakes={"query heads for KV heads": m.heads / m.kv_heads})


# -- Exercise 8 ---------------------------------------------------------------------

@exercise("max_throughput", A, derive=True, derived=r"""
The rate is $B_{max} / t(B_{max})$. At the largest batch a memory-bound step reads nearly the whole share (weights
once, every cache), so it takes about the same time at any context: 0.9 x 84.9 GB / 3.35 TB/s, about 23 ms on the
H100 (ideal). The rate is then about proportional to the sequences that fit (the next cell prints them). With
short sequences so many fit that the matmuls bind instead: at 200 tokens of context (the check's second
case) 2,303 sequences fit on the H100, and the body and head are compute-bound.
""", visible=[
    # (model, device, context, precision, gpu_memory_utilization)
    # the running example, memory-bound at the largest batch: one sequence's tokens per second, a step time for a
    # rate, tokens per millisecond
    ("Llama-3-8B", "H100", 8000, "fp16", 0.9),
    # short sequences: thousands fit and the matmuls bind, so a memory-only step fails
    ("Llama-3-8B", "H100", 200, "fp16", 0.9),
    # 8-bit weights and cache on an H200: 16-bit ones do not even fit, so the precision not passed on to max_batch
    # (or to the step) fails
    ("Llama-3-70B", "H200", 4000, "fp8", 0.9),
    # Llama-3-70B's FP16 weights do not fit an H100: 0 tokens per second, not an error or a negative rate
    ("Llama-3-70B", "H100", 4000, "fp16", 0.9),
    # all of the usable memory: the reserve written in (0.9) gives 66 sequences for 75
    ("Qwen2-7B", "H100", 16000, "fp16", 1.0),
])
def _max_throughput(answers, case, ref, rl):
    __tracebackhide__ = True
    (max_throughput,) = answers
    name, device, context_len, precision, utilization = case
    rates = []
    # The exercise stores every weight in `precision` (the course's count); as shipped, 8-bit weights keep the
    # embedding table and head in 16 bits: both are accepted, each with its own step time.
    for embeddings in (True, False):
        p = ref.Precision(weights=precision, kv=precision, compute="fp16", quantize_embeddings=embeddings)
        batch = ref.memory_budget(name, device, context_len, 1, p, utilization).max_batch
        steps = _step_times(ref, name, device, context_len, max(batch, 1), precision)
        rates.append([batch / step.m_as("s") if batch > 0 else 0.0 for step in steps])
    expected, *others = rates[0] + rates[1]
    said = f"max_throughput({name}, {device}, {context_len}, {precision!r}, {utilization})"
    answer = max_throughput(rl.model(name), rl.hardware(device), context_len, precision, utilization)
    if expected == 0:
        number(answer, 0.0, said + ": no sequence fits, so no token is made", rel=WHOLE)
        return
    batch = ref.memory_budget(name, device, context_len, 1, ref.Precision(
        weights=precision, kv=precision, compute="fp16", quantize_embeddings=True), utilization).max_batch
    if answer == 0:
        _fail(f"{said} = 0, but {batch} sequences fit with weights and cache in {precision}: pass the precision "
              "on to max_batch and to the step.", "the precision not passed on")
    alone = 1 / _step_times(ref, name, device, context_len, 1, precision)[0].m_as("s")
    number(answer, expected, said + " in tokens per second", rel=0.002, accept=tuple(others),
           mistakes={"tokens per millisecond": 1e-3, "one sequence's tokens per second, not the batch's": alone / expected})


# -- Predictions and the explorer's question -------------------------------------------------

GAINS = {"about 60": ("60", "60x", "about 60x", "close to 60", "64", "64x"),
         "about 30": ("30", "30x", "about 30x", "close to 30"),
         "about 10": ("10", "10x", "about 10x", "close to 10")}


@question("batch64_gain", A, "about 30", GAINS, revisited_in="The cell after Exercise 6's printed gains")
def _batch64_gain(ref):
    def gain(context_len):
        one = ref.decode_step("Llama-3-8B", "H100", context_len, 1).time
        many = ref.decode_step("Llama-3-8B", "H100", context_len, 64).time
        return (64 * one / many).m_as("")

    budget = ref.memory_budget("Llama-3-8B", "H100", 2000, 64)
    return (f"At 2,000 tokens of context a batch of 64 gives {gain(2000):.0f} times the tokens per second of one "
            f"sequence (Llama-3-8B, H100, the library's careful count): the weights ({budget.weights:.1f~P}) are "
            f"read once for all, but the 64 caches add {budget.kv:.1f~P} to every step, so a step takes about twice "
            f"as long while it makes 64 tokens. With 128-token contexts the caches are small and the gain is "
            f"{gain(128):.0f}, close to 64.")


THROUGHPUT = {"about the same": ("same", "1x", "about 1x", "no change"),
              "about 1.5x": ("1.5x", "1.5", "one and a half"),
              "about 2x": ("2x", "2", "twice", "double", "about twice"),
              "about 4x": ("4x", "4", "four times")}


@question("fp8_cache_throughput", A, "about 2x", THROUGHPUT)
def _fp8_cache_throughput(ref):
    name, device, context_len = "Llama-3.1-8B", "H100", 32000
    shown = []
    for kv in ("fp16", "fp8"):
        precision = ref.Precision(weights="fp16", kv=kv, compute="fp16")
        batch = ref.memory_budget(name, device, context_len, 1, precision).max_batch
        step = ref.decode_step(name, device, context_len, batch, precision, efficiency="typical").time
        shown.append((batch, step, batch / step.m_as("s")))
    (b16, t16, r16), (b8, t8, r8) = shown
    gpu = ref.hardware(device)
    full = (0.9 * gpu.usable_memory / gpu.memory_bandwidth).to("ms")  # the engine's share, read once at the roofline
    return (f"At 32,000 tokens an FP16 cache lets {b16} sequences run ({r16:,.0f} tokens/s typical, {t16.m_as('ms'):.1f} "
            f"ms a step) and an FP8 cache {b8} ({r8:,.0f} tokens/s, {t8.m_as('ms'):.1f} ms a step): {r8 / r16:.1f} "
            f"times the throughput. With the memory full, a step reads about all of it whatever the format (the ideal "
            f"bound: 0.9 of the H100's usable memory over its bandwidth, {full:.1f~P}, as in the cell after "
            f"Exercise 8; the typical steps above add the preset's MBU and overheads), so the step time barely moves "
            f"and the tokens per step double with the batch. At the same batch the FP8 cache only shortens the step, a smaller gain.")
