"""Assignment 5, what does a million tokens cost?: its exercises, predictions and the explorer's question.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
Hidden cases live in the instructor's test cells, never here.
"""

from __future__ import annotations

import numpy as np

from ..check import _fail, derive_yourself, number, quantity
from . import exercise, question

A = "05_under_load"
STEP = 0.02  # the old tests' tolerance for a step priced by the student's own roofline (2%)
SWEEP = 0.005  # the library's own frontier, read back: only rounding may differ
SLA = 0.01  # a tensor-parallel step and the throughputs at the SLA
GIB = 2**30 / 1e9  # a byte count in GiB read as GB: a memory-bound time off by this factor
PER_GPU = "tokens/s per request taken for per GPU"  # the course's mistake: one user's stream for the GPU's
HOUR = "price per hour used as per second"


def _mean_context(prompt_len, output_len):
    """The notebook's given mean_context: the mean context of a decoding sequence, tokens."""
    return prompt_len + (output_len - 2) / 2


def _gib(cost) -> dict[str, float] | None:
    """Name "GB for GiB" for a time only where every part is memory-bound: there, and only there, a byte count
    read in the wrong unit moves the time by exactly 1.074 (elsewhere a missing term could land on it by chance)."""
    if all(part.bound == "memory" for part in cost.parts.values()):
        return {"GB for GiB": GIB}
    return None


def _pair(got, call: str):
    """The two values a function returns as a tuple, or a failure that says what came back."""
    __tracebackhide__ = True
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        _fail(f"{call} should return a tuple of two values, got {type(got).__name__} {got!r:.120}.")
    return got


def _same_length(got, expected, call: str, cap: int) -> None:
    """An array answer has one value per batch from 1 to the most that fit; more is a batch beyond memory."""
    __tracebackhide__ = True
    shape = np.shape(getattr(got, "magnitude", got))
    if shape == np.shape(expected.magnitude):
        return
    if len(shape) == 1 and shape[0] > cap:
        _fail(f"{call} has {shape[0]} values, but only {cap} sequences fit in memory: the frontier ends at batch "
              f"{cap}.", "batch beyond memory")
    _fail(f"{call} has the shape {shape}; it should have one value for each batch from 1 to {cap}, "
          f"the shape {np.shape(expected.magnitude)}.")


IMPOSSIBLE = ("Where no batch fits or meets the targets, the exercise asks for 0 (sequences or tokens/s), not an "
              "error: catch it.")


def _calling(function, call: str, rl, *args, why: str = IMPOSSIBLE):
    """The student's answer; a DoesNotFit or SLAUnmet they let through becomes a failure that says ``why``."""
    __tracebackhide__ = True
    try:
        return function(*args)
    except (rl.DoesNotFit, rl.SLAUnmet) as error:
        escaped = f"{type(error).__name__} ({str(error)[:200].rstrip('.')})"
    _fail(f"{call} raised {escaped}. {why}", "an error for an impossible configuration" if why is IMPOSSIBLE else None)


def _within_memory(answer, cap: int, call: str) -> None:
    __tracebackhide__ = True
    if isinstance(answer, (int, float, np.integer, np.floating)) and not isinstance(answer, bool) and answer > cap:
        _fail(f"{call} = {answer}, but only {cap} sequences fit in memory.", "batch beyond memory")


# -- Exercise 1: a step of the batch, and the GPU's tokens per second ---------------------------------------

@exercise("step_time", A, derive=True, visible=[
    # (model, device, prompt_len, output_len, batch, precision)
    # The running example at batch 64: the 64 caches are half the step.  Catches K and V forgotten, query heads
    # for KV heads, one sequence's cache for the batch's, the prompt length for the mean context, milliseconds
    # for seconds, and tokens/s per request for per GPU (off by 64).
    ("Llama-3-8B", "H100", 2000, 300, 64, "fp16"),
    # One short request on an A100: every part is memory-bound, so values for bytes (off by 2) and GiB for GB
    # (off by 1.074) show whole, on a second device.
    ("Llama-3-8B", "A100-80GB", 200, 100, 1, "fp16"),
    # Mistral-7B at batch 512 on the L40S, short requests: the weight matmuls are compute-bound, so a missing
    # 2 FLOPs per multiply-add or FLOPs counted for one sequence show; the head is read once, not per sequence.
    ("Mistral-7B", "L40S", 100, 100, 512, "bf16"),
])
def _step_time(answers, case, ref, rl):
    __tracebackhide__ = True
    step_time, tokens_per_second = answers
    name, device, prompt_len, output_len, batch, precision = case
    context = _mean_context(prompt_len, output_len)
    step = ref.decode_step(name, device, context, batch, precision, allow_overflow=True)
    expected = step.time
    quantity(step_time(rl.model(name), rl.hardware(device), context, batch, precision), expected,
             f"step_time({name}, {device}, {context:g}, {batch}, {precision!r})", rel=STEP, mistakes=_gib(step))
    quantity(tokens_per_second(rl.model(name), rl.hardware(device), prompt_len, output_len, batch, precision),
             ref.Q_(batch, "token") / expected,
             f"tokens_per_second({name}, {device}, {prompt_len}, {output_len}, {batch}, {precision!r})", rel=STEP,
             mistakes={PER_GPU: batch} if batch > 1 else None)


GAINS = {"about 64x": ("64x", "about 64", "64", "64 x", "about 64 x"),
         "less than 64x": ("less", "less than 64", "less than 64 x", "< 64x", "fewer"),
         "not at all": ("none", "no", "not", "the same", "same", "no gain", "1x")}
CHANGES = {"shorter": ("faster", "less", "lower", "smaller"),
           "about the same": ("same", "the same", "unchanged"),
           "longer": ("slower", "more", "higher", "larger")}


@question("throughput_gain", A, "less than 64x", GAINS, revisited_in="The cell after Exercise 1")
def _throughput_gain(ref):
    one = ref.decode_step("Llama-3-8B", "H100", 2149, 1)
    many = ref.decode_step("Llama-3-8B", "H100", 2149, 64)
    gain = 64 * (one.time / many.time).m_as("")
    steady = [ref.steady_state("Llama-3-8B", "H100", 2000, 300, b, efficiency="ideal") for b in (1, 64)]
    cache = many.parts["attention"].time.m_as("ms")
    return (f"A step of 64 sequences makes 64 tokens in {many.time.m_as('ms'):.2f} ms, against one token in "
            f"{one.time.m_as('ms'):.2f} ms at batch 1: {gain:.0f}x the tokens per second, not 64x. The weights are "
            f"read once for the whole batch, but each sequence reads its own cache of 2,149 tokens, "
            f"{cache:.2f} ms of the step at batch 64. With the prefills of the requests that replace finished ones, "
            f"the library's steady state gives "
            f"{(steady[1].output_throughput / steady[0].output_throughput).m_as(''):.1f}x (ideal efficiency).")


@question("itl_change", A, "longer", CHANGES, revisited_in="The cell after Exercise 1")
def _itl_change(ref):
    one, many = (ref.steady_state("Llama-3-8B", "H100", 2000, 300, b, efficiency="ideal") for b in (1, 64))
    return (f"Each user gets one token per step, so the ITL is the step: {one.itl.m_as('ms'):.2f} ms at batch 1, "
            f"{many.itl.m_as('ms'):.1f} ms at batch 64 once the 64 caches and the new prompts' prefills are in it "
            f"(ideal efficiency). Batching buys the GPU throughput with each user's latency: "
            f"{one.per_request_throughput.m_as('token/s'):.0f} tokens/s per user at batch 1, "
            f"{many.per_request_throughput.m_as('token/s'):.0f} at batch 64.")


# -- Exercise 2: the frontier and its bend -----------------------------------------------------------------

@exercise("frontier_curve", A, visible=[
    # (model, device, prompt_len, output_len, precision)
    # The running example: it bends at a batch that fits.  Catches ideal for typical efficiency, one user's
    # tokens/s for the GPU's, the batch index for the batch (off by one), the last memory-bound batch.
    ("Llama-3-8B", "H100", 2000, 300, "fp16"),
    # Long requests: the caches fill the memory before the bend, so bend_batch must say None (not 0, not the
    # last batch), and a frontier that runs past memory has too many points.
    ("Llama-3-8B", "H100", 6000, 2000, "fp16"),
    # FP8 on the L40S: a precision left at its default shows, and a second device.
    ("Llama-3-8B", "L40S", 500, 300, "fp8"),
])
def _frontier_curve(answers, case, ref, rl):
    __tracebackhide__ = True
    frontier_curve, bend_batch = answers
    name, device, prompt_len, output_len, precision = case
    f = ref.frontier(name, device, prompt_len, output_len, precision=precision, efficiency="typical")
    where = f"{name}, {device}, {prompt_len}, {output_len}, {precision!r}"
    call = f"frontier_curve({where})"
    itl, throughput = _pair(frontier_curve(rl.model(name), rl.hardware(device), prompt_len, output_len, precision),
                            call)
    bent = np.flatnonzero(f.bound == "compute")
    # A few batches first (the first, the bend or the middle, the last), so a failure shows numbers, not arrays.
    shown = sorted({0, int(bent[0]) if bent.size else f.max_batch // 2, f.max_batch - 1})
    _same_length(itl, f.itl, f"the ITL of {call}", f.max_batch)
    for i in shown:
        quantity(itl[i], f.itl[i], f"the ITL at batch {i + 1} of {call}", rel=SWEEP)
    quantity(itl, f.itl, f"the ITL of {call}", rel=SWEEP)
    _same_length(throughput, f.output_throughput, f"the throughput of {call}", f.max_batch)
    per_user = f.per_request_throughput
    if (hasattr(throughput, "check") and throughput.check("[text] / [time]")
            and np.allclose(throughput.m_as("token/s"), per_user.m_as("token/s"), rtol=SWEEP)):
        _fail(f"the throughput of {call} is what one user sees (1 / ITL); the GPU makes a token for every "
              "sequence in the batch, and the frontier plots the GPU's tokens per second.", PER_GPU)
    for i in shown:
        quantity(throughput[i], f.output_throughput[i], f"the throughput at batch {i + 1} of {call}", rel=SWEEP,
                 mistakes={PER_GPU: float(f.tokens_per_step[i])} if i else None)
    quantity(throughput, f.output_throughput, f"the throughput of {call}", rel=SWEEP)
    answer = bend_batch(rl.model(name), rl.hardware(device), prompt_len, output_len, precision)
    call = f"bend_batch({where})"
    if not bent.size:
        if answer is not None:
            _fail(f"{call} = {answer!r}, but no batch that fits turns the weight matmuls compute-bound: the caches "
                  f"fill the memory at batch {f.max_batch} first, so the answer is None.")
        return
    _within_memory(answer, f.max_batch, call)
    number(answer, int(f.batch[bent[0]]), call, rel=1e-9)


# -- Exercise 3: the largest batch under an ITL target ------------------------------------------------------

@exercise("largest_batch", A, visible=[
    # (model, device, prompt_len, output_len, itl_limit in ms, precision)
    # The running example at 50 ms: the ITL target binds. Catches ideal for typical efficiency, the first batch
    # over the target for the last one under it, and a target compared in the wrong unit.
    ("Llama-3-8B", "H100", 2000, 300, 50, "fp16"),
    # Shorter requests on an A100 at 150 ms: memory binds first (307 sequences fit), so a batch beyond memory
    # shows.
    ("Llama-3-8B", "A100-80GB", 1000, 500, 150, "fp16"),
    # Llama-3-70B at FP16 does not fit on one H100: the answer is 0, not an error.
    ("Llama-3-70B", "H100", 1000, 200, 100, "fp16"),
    # Llama-3-8B fits on an L4 (51 sequences), but its step takes 66 ms even at batch 1: no batch meets a 20 ms
    # target, and the answer is 0 again (None, or the largest batch that fits, fails).
    ("Llama-3-8B", "L4", 1000, 200, 20, "fp16"),
])
def _largest_batch(answers, case, ref, rl):
    __tracebackhide__ = True
    (largest_batch,) = answers
    name, device, prompt_len, output_len, limit, precision = case
    cap = ref.max_concurrency(name, device, prompt_len, output_len, precision)
    expected = 0
    if cap > 0:
        f = ref.frontier(name, device, prompt_len, output_len, precision=precision, efficiency="typical")
        meets = f.itl <= ref.Q_(limit, "ms")
        expected = int(f.batch[meets][-1]) if np.any(meets) else 0
    call = f"largest_batch({name}, {device}, {prompt_len}, {output_len}, {limit} ms, {precision!r})"
    answer = _calling(largest_batch, call, rl, rl.model(name), rl.hardware(device), prompt_len, output_len,
                      rl.Q_(limit, "ms"), precision)
    _within_memory(answer, cap, call)
    number(answer, expected, call, rel=1e-9)


# -- Exercise 4: dollars per million tokens ----------------------------------------------------------------

@exercise("cost_per_million", A, derive=True, visible=[
    # (price, its unit, output tokens/s per GPU: one number or a list)
    # The example H100 price per hour: a price per hour used as per second is off by 3,600; a bare number shows.
    (3.9492, "USD/h", 2730),
    # A price per second (a serverless platform) and an array of throughputs: code that assumes an hourly price
    # or takes one number only fails.
    (0.000542, "USD/s", [120.0, 1500.0, 9000.0]),
])
def _cost_per_million(answers, case, ref, rl):
    __tracebackhide__ = True
    (cost_per_million,) = answers
    price, unit, throughput = case
    throughput = np.asarray(throughput, dtype=float) if isinstance(throughput, (list, tuple)) else throughput
    expected = ref.cost_per_million_tokens(ref.Q_(price, unit), ref.Q_(throughput, "token/s"))
    quantity(cost_per_million(rl.Q_(price, unit), rl.Q_(throughput, "token/s")), expected,
             f"cost_per_million({price} {unit}, {throughput} token/s)", mistakes={HOUR: 3600})


# -- Exercise 5: the cost at the SLA ----------------------------------------------------------------------

@exercise("cost_at_sla", A, visible=[
    # (model, device, prompt_len, output_len, ttft_limit ms, itl_limit ms, price USD/h, precision)
    # The running example on the H100: the ITL target binds. Catches one user's tokens/s for the GPU's (off by
    # B + k), a price per hour used as per second, ideal for typical efficiency, batch 1 instead of the best.
    ("Llama-3-8B", "H100", 2000, 300, 500, 50, 3.9492, "fp16"),
    # Long prompts at FP8 on the L40S: the TTFT target binds (batch 44) well before the ITL's (90), so the TTFT
    # left out shows, and the precision is not the default.
    ("Llama-3-8B", "L40S", 4000, 300, 180, 100, 1.9512, "fp8"),
])
def _cost_at_sla(answers, case, ref, rl):
    __tracebackhide__ = True
    (cost_at_sla,) = answers
    name, device, prompt_len, output_len, ttft, itl, price, precision = case
    best = ref.best_under_sla(name, device, prompt_len, output_len, ref.Q_(ttft, "ms"), ref.Q_(itl, "ms"), precision,
                               efficiency="typical")
    call = f"cost_at_sla({name}, {device}, {prompt_len}, {output_len}, {ttft} ms, {itl} ms, ${price}/h, {precision!r})"
    answer = _calling(cost_at_sla, call, rl, rl.model(name), rl.hardware(device), prompt_len, output_len,
                      rl.Q_(ttft, "ms"), rl.Q_(itl, "ms"), rl.Q_(price, "USD/h"), precision,
                      why=f"But batch {best.batch} meets both targets here: check what you pass on (the precision?).")
    quantity(answer, best.cost_per_million(ref.Q_(price, "USD/h")), call,
             mistakes={PER_GPU: best.tokens_per_step, HOUR: 3600})


# -- Exercise 6: joules per token ------------------------------------------------------------------------

@exercise("joules_per_token", A, derive=("fleet.energy_per_token",), visible=[
    # (model, device, prompt_len, output_len, batches, precision)
    # The running example at batch 64 alone: one user's tokens/s for the GPU's (off by B + k) is named, and the
    # prefills left out of the step (nearly half of it here) show.
    ("Llama-3-8B", "H100", 2000, 300, (64,), "fp16"),
    # Several batches at once, FP8 on the L40S: an array of batches, another board power, the precision passed
    # on, and ideal for typical efficiency.
    ("Llama-3-8B", "L40S", 1000, 200, (1, 16, 128), "fp8"),
])
def _joules_per_token(answers, case, ref, rl):
    __tracebackhide__ = True
    (joules_per_token,) = answers
    name, device, prompt_len, output_len, batches, precision = case
    batches = np.asarray(batches)
    s = ref.steady_state(name, device, prompt_len, output_len, batches, precision, efficiency="typical")
    # The library's own bound, a property of the steady state, is switched off too.
    with derive_yourself(rl.fleet.SteadyState.energy_per_token):
        answer = joules_per_token(rl.model(name), rl.hardware(device), prompt_len, output_len, batches, precision)
    shown = [int(b) for b in batches]
    quantity(answer, s.energy_per_token,
             f"joules_per_token({name}, {device}, {prompt_len}, {output_len}, batches {shown}, {precision!r})",
             mistakes={PER_GPU: float(s.tokens_per_step[0])} if len(batches) == 1 else None)


# -- Exercise 7: tensor parallelism -----------------------------------------------------------------------

def _no_communication(answer, step, call: str) -> None:
    """Fail, naming the mistake, when the answer is the compute alone (the all-reduces left out)."""
    __tracebackhide__ = True
    share = (step.communication / step.compute.time).m_as("")
    if share > 0.01 and hasattr(answer, "check") and answer.check("[time]") and np.ndim(answer.magnitude) == 0:
        if abs(answer.m_as("s") / step.compute.time.m_as("s") - 1) < share / 3:
            _fail(f"{call} = {answer.to('ms'):.4g~P} is each GPU's compute alone; the 2 x layers all-reduces add "
                  f"{step.communication.m_as('ms'):.3g} ms.", "TP speed-up assumed N-fold (communication ignored)")


@exercise("tp_step_time", A, derive=True, visible=[
    # (model, device, context_len, batch, tp, precision)
    # Llama-3-70B at batch 1 on two A100s: the weight read is nearly all of the step, so GiB for GB (off by
    # 1.074), values for bytes (off by 2) and weights not split over the GPUs show.
    ("Llama-3-70B", "A100-80GB", 1000, 1, 2, "bf16"),
    # Two L40S over PCIe at batch 128: the all-reduces are 15% of the step, so leaving them out, taking the
    # link's two-way figure for one way, or one all-reduce per layer instead of two shows.
    ("Llama-3-8B", "L40S", 500, 128, 2, "fp16"),
    # Four H100s over NVLink at batch 256: the ring's 2 (N - 1) / N is 1.5 here (at N = 2 it is 1, so a factor
    # left out hides), and the caches, split four ways, are most of the step.
    ("Llama-3-8B", "H100", 2000, 256, 4, "fp16"),
])
def _tp_step_time(answers, case, ref, rl):
    __tracebackhide__ = True
    (tp_step_time,) = answers
    name, device, context, batch, tp, precision = case
    step = ref.tensor_parallel_step(name, device, context, batch, tp=tp, precision=precision, allow_overflow=True)
    call = f"tp_step_time({name}, {device}, {context}, {batch}, {tp}, {precision!r})"
    answer = tp_step_time(rl.model(name), rl.hardware(device), context, batch, tp, precision)
    _no_communication(answer, step, call)
    quiet = (step.communication / step.time).m_as("") < 0.002
    quantity(answer, step.time, call, rel=SLA, mistakes=_gib(step.compute) if quiet else None)


@exercise("per_gpu_throughputs", A, visible=[
    # (model, device, prompt_len, output_len, ttft_limit ms, itl_limit ms, precision)
    # Llama-3-70B at FP8 on H100s, ITL <= 40 ms: both fit and meet the targets, tp=2 with twice the tokens per GPU.
    # Catches the pair's tokens/s for one GPU's (off by 2), the two answers swapped, batch 1 for the best batch,
    # and ideal for typical efficiency (2.24 times, so it cannot pass for the pair's factor of 2).
    ("Llama-3-70B", "H100", 2000, 300, 1000, 40, "fp8"),
    # At FP16 one copy does not fit on one H100: its throughput is 0 tokens/s, not an error.
    ("Llama-3-70B", "H100", 1000, 200, 2000, 80, "fp16"),
    # Llama-3-8B on L4s with a tight ITL target: one L4 meets no target (SLAUnmet: 0 tokens/s), two do.
    ("Llama-3-8B", "L4", 1000, 200, 1000, 40, "fp16"),
])
def _per_gpu_throughputs(answers, case, ref, rl):
    __tracebackhide__ = True
    (per_gpu_throughputs,) = answers
    name, device, prompt_len, output_len, ttft, itl, precision = case
    expected = []
    for tp in (2, 1):
        try:
            expected.append(ref.best_under_sla(name, device, prompt_len, output_len, ref.Q_(ttft, "ms"),
                                               ref.Q_(itl, "ms"), precision, tp=tp,
                                               efficiency="typical").output_throughput)
        except (ref.DoesNotFit, ref.SLAUnmet):
            expected.append(ref.Q_(0, "token/s"))
    where = f"{name}, {device}, {prompt_len}, {output_len}, {ttft} ms, {itl} ms, {precision!r}"
    call = f"per_gpu_throughputs({where})"
    got = _pair(_calling(per_gpu_throughputs, call, rl, rl.model(name), rl.hardware(device), prompt_len, output_len,
                         rl.Q_(ttft, "ms"), rl.Q_(itl, "ms"), precision), call)
    pair = got[0].m_as("token/s") if hasattr(got[0], "check") and got[0].check("[text] / [time]") else None
    if pair is not None and np.ndim(pair) == 0 and abs(pair / (2 * expected[0].m_as("token/s") or 1) - 1) < 1e-3:
        _fail(f"tokens/s per GPU with tp=2 ({where}) = {pair:.4g} token/s is what the pair makes together: each of "
              f"the two GPUs makes half, {expected[0].m_as('token/s'):.4g} token/s.", "the pair's tokens/s for one GPU's")
    quantity(got[0], expected[0], f"tokens/s per GPU with tp=2 ({where})", rel=SLA)
    quantity(got[1], expected[1], f"tokens/s per GPU of one replica ({where})", rel=SLA)


# -- the explorer's question -----------------------------------------------------------------------------

CONFIGS = {"fp16, tp=1": ("fp16 tp 1", "fp16 tp=1", "fp16 one gpu", "fp16, one gpu", "fp16 1"),
           "fp16, tp=2": ("fp16 tp 2", "fp16 tp=2", "fp16 two gpus", "fp16, two gpus", "fp16 2"),
           "fp8, tp=1": ("fp8 tp 1", "fp8 tp=1", "fp8 one gpu", "fp8, one gpu", "fp8 1"),
           "fp8, tp=2": ("fp8 tp 2", "fp8 tp=2", "fp8 two gpus", "fp8, two gpus", "fp8 2")}


@question("cheapest_on_l40s", A, "fp8, tp=1", CONFIGS)
def _cheapest_on_l40s(ref):
    price = ref.example_price("L40S")
    costs = {}
    for label in CONFIGS:
        precision, tp = label.split(", tp=")
        best = ref.best_under_sla("Llama-3-8B", "L40S", 2000, 300, ref.Q_(500, "ms"), ref.Q_(50, "ms"), precision,
                                  tp=int(tp), efficiency="typical")
        costs[label] = (best.cost_per_million(price).m_as("USD/Mtok"), best)
    listed = "; ".join(f"{label}: ${cost:.2f} (batch {best.batch}{' over the pair' if best.tp > 1 else ''})"
                       for label, (cost, best) in costs.items())

    def weights(label):  # the weight read of one step on one GPU, ms
        return costs[label][1].decode.parts["body"].time.m_as("ms")

    def links(label):  # the all-reduces of one iteration (the step and its share of prefills), ms
        return costs[label][1].communication_si * 1e3

    return (f"Per million tokens at ${price.m_as('USD/h'):.2f} per GPU-hour, Llama-3-8B at 2,000/300 with TTFT <= "
            f"500 ms and ITL <= 50 ms, typical efficiency: {listed}. FP8 halves the bytes every step reads, so one "
            f"L40S runs batch {costs['fp8, tp=1'][1].batch} within 50 ms instead of {costs['fp16, tp=1'][1].batch}. "
            f"Splitting over two GPUs halves each GPU's weight read but adds all-reduces over PCIe (64 GB/s both "
            f"ways). At FP16 the read is {weights('fp16, tp=1'):.1f} ms of the 50, and halving it saves more than "
            f"the {links('fp16, tp=2'):.1f} ms of all-reduces cost; at FP8 it is only {weights('fp8, tp=1'):.1f} ms, "
            f"and the all-reduces ({links('fp8, tp=2'):.1f} ms, the prefills' included) cost more than they save: "
            "FP8 on one GPU is cheapest.")
