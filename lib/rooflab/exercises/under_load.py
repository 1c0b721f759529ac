"""Assignment 5, a GPU under load: its exercises, predictions and the explorer's question.

The student models continuous batching: a step from the roofline (Exercise 1), then the steady state from
the step and prefill costs of assignment 1 (Exercise 2), the frontier (3) and the best batch under the SLA and
the memory (4).  The library's own steady state, frontier and SLA search are switched off while the student's
code runs (``DERIVED["05_under_load"]``) and give the expected values.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
Hidden cases live in the instructor's test cells, never here.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..check import PRECISION_NOT_PASSED, WrongAnswer, _fail, derive_yourself, number, quantity
from . import DERIVED, exercise, get, question

A = "05_under_load"
STEP = 0.02  # a step priced by the student's own roofline against the library's careful count (2%)
SAME = 0.001  # the steady state built from the library's own step and prefill costs: only rounding may differ
GIB = 2**30 / 1e9  # a byte count in GiB read as GB: a memory-bound time off by this factor
PER_GPU = "tokens/s per request taken for per GPU"  # the course's mistake: one user's stream for the GPU's
PREFILLS = "prefills left out of the step"
HALF_STEP = "TTFT without the half step a new request waits"



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

TOTAL = "total for active parameters (a mixture of experts)"


def _total_for_active(answer, ref, name, device, context, batch, precision, call: str) -> None:
    """Fail, naming the mistake, when a mixture of experts' step is the course's formula with every expert's
    parameters in the body's FLOPs (each token runs only its k experts)."""
    __tracebackhide__ = True
    model, hardware = ref.model(name), ref.hardware(device)
    active, every = model.active_non_embedding_params, model.non_embedding_params
    if active == every or not (hasattr(answer, "check") and answer.check("[time]") and np.ndim(answer.magnitude) == 0):
        return
    earlier = importlib.import_module(f"{ref.__name__}.earlier")
    right = earlier.step_time(model, hardware, context, batch, precision).m_as("s")
    weights = ref.Q_((every + batch * model.d_model) * earlier.BYTES_PER_VALUE[precision], "B")
    body = [earlier.roofline_time(ref.Q_(batch * 2 * n, "FLOP"), weights, hardware, precision)[0].m_as("s")
            for n in (active, every)]
    wrong = right - body[0] + body[1]
    if abs(wrong / right - 1) > 0.05 and abs(answer.m_as("s") / wrong - 1) < 0.01:
        _fail(f"{call} = {answer.to('ms'):.4g~P}, as if every token ran all of {name}'s experts: the body's FLOPs "
              f"count the active parameters (model.active_non_embedding_params, {active / 1e9:.1f} B), its bytes "
              f"every expert's ({every / 1e9:.1f} B).", TOTAL)



STEP_DERIVED = r"""
With $R(\text{FLOPs}, \text{bytes})$ the roofline time, $b$ bytes a value, $c$ the context and $B$ the batch:

- body: $R\big(2B \times \text{active parameters},\ (\text{non-embedding parameters} + B\,d_\text{model})\,b\big)$;
- attention: $R\big(4B\,L\,w_\text{attention}\,c,\ B\,(c + 1) \times 2L\,h_\text{KV}\,d_\text{head}\,b\big)$;
- head: $R\big(2B\,d_\text{model}V,\ d_\text{model}V\,b\big)$.

The weights and the head are read once for the whole batch; the FLOPs, the embedding rows and the caches grow with
$B$. A mixture of experts: FLOPs from the active parameters, bytes from every expert (a large batch touches them all).
The GPU makes $B$ tokens a step: $B$ / step per second, each user 1 / step.
"""

# Where the body is compute-bound with either slip, both land on its memory time: one name for the two.
FEW_FLOPS = "too few FLOPs (one FLOP per multiply-add, or one sequence's FLOPs for the batch's)"
# Slips in the step's count, each named where a visible case shows it: (mistake, the slip's keyword arguments).
STEP_SLIPS = (
    ("forgot K and V in the cache", dict(kv=1)),
    ("query heads for KV heads", dict(heads="heads")),
    ("values for bytes (no BYTES_PER_VALUE)", dict(per_value=1)),
    (FEW_FLOPS, dict(flops_per_mac=1)),
    ("one sequence's cache for the batch's (per sequence for per batch)", dict(caches=False)),
    ("the head read once per sequence", dict(head_per_sequence=True)),
    ("the weights read once per sequence", dict(weights_per_sequence=True)),
    (FEW_FLOPS, dict(flops_batch=False)),
    ("the head's FLOPs for one sequence, not the batch's (each sequence's token is multiplied by the head)",
     dict(head_batch=False)),
)


def _step_si(model, hardware, context, batch, precision, kv=2, heads="kv_heads", per_value=None, flops_per_mac=2,
             caches=True, head_per_sequence=False, weights_per_sequence=False, flops_batch=True,
             head_batch=True) -> float:
    """The course's ideal decode step of ``batch`` sequences, s, with one slip switched on (the defaults: none):
    the sum over body, attention and head of max(FLOPs / peak, bytes / bandwidth)."""
    from ..check import BYTES_PER_VALUE

    size = BYTES_PER_VALUE[precision] if per_value is None else per_value
    peak, bandwidth = hardware.peak_flops(precision).m_as("FLOP/s"), hardware.memory_bandwidth.m_as("B/s")
    b = batch if flops_batch else 1
    parts = (
        (b * flops_per_mac * model.active_non_embedding_params,
         (model.non_embedding_params * (batch if weights_per_sequence else 1) + batch * model.d_model) * size),
        (b * 2 * flops_per_mac * model.layers * model.attention_width * context,
         (batch if caches else 1) * (context + 1) * kv * model.layers * getattr(model, heads) * model.head_dim * size),
        ((b if head_batch else 1) * flops_per_mac * model.d_model * model.vocab,
         model.vocab * model.d_model * size * (batch if head_per_sequence else 1)),
    )
    return sum(max(flops / peak, nbytes / bandwidth) for flops, nbytes in parts)


def _step_slips(ref, name, device, context, batch, precision, rel: float) -> dict:
    """{mistake: the step it gives} for each slip in STEP_SLIPS that moves this case's step by more than 3 x rel
    (one that moves it less cannot be told from a right answer)."""
    model, hardware = ref.model(name), ref.hardware(device)
    right = _step_si(model, hardware, context, batch, precision)
    found: dict[str, list] = {}
    for mistake, slip in STEP_SLIPS:
        wrong = _step_si(model, hardware, context, batch, precision, **slip)
        if abs(wrong / right - 1) > 3 * rel:
            found.setdefault(mistake, []).append(ref.Q_(wrong, "s"))
    return {mistake: tuple(values) for mistake, values in found.items()}


@exercise("step_time", A, derive=True, derived=STEP_DERIVED, visible=[
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
    # A mixture of experts at FP8, batch 512 on the H100: each token runs 2 of Mixtral's 8 experts, so the body's
    # FLOPs use the active parameters (12.9 B), while every expert's weights are read.  Total parameters for the
    # FLOPs turn the body compute-bound and the step 1.5x too slow; the 1-byte values of FP8 show too.
    ("Mixtral-8x7B", "H100", 1000, 300, 512, "fp8"),
    # Gemma-2B's 256,000-token vocabulary at batch 2,048 on the L40S: the head is compute-bound and a sixth of the
    # step, so its FLOPs counted once per step instead of once per sequence show (the other cases' heads are
    # memory-bound, where that slip changes nothing)
    ("Gemma-2B", "L40S", 100, 100, 2048, "bf16"),
])
def _step_time(answers, case, ref, rl):
    __tracebackhide__ = True
    step_time, tokens_per_second = answers
    name, device, prompt_len, output_len, batch, precision = case
    context = _mean_context(prompt_len, output_len)
    step = ref.decode_step(name, device, context, batch, precision, allow_overflow=True)
    expected = step.time
    call = f"step_time({name}, {device}, {context:g}, {batch}, {precision!r})"
    answer = step_time(rl.model(name), rl.hardware(device), context, batch, precision)
    _total_for_active(answer, ref, name, device, context, batch, precision, call)
    quantity(answer, expected, call, rel=STEP, mistakes=_gib(step),
             also_wrong=_step_slips(ref, name, device, context, batch, precision, STEP))
    # The step at the prompt's length: each sequence's cache read as if at the start of its answer.
    at_prompt = ref.Q_(batch, "token") / ref.decode_step(name, device, prompt_len, batch, precision,
                                                        allow_overflow=True).time
    apart = abs((at_prompt * expected / ref.Q_(batch, "token")).m_as("") - 1) > 1.5 * STEP
    quantity(tokens_per_second(rl.model(name), rl.hardware(device), prompt_len, output_len, batch, precision),
             ref.Q_(batch, "token") / expected,
             f"tokens_per_second({name}, {device}, {prompt_len}, {output_len}, {batch}, {precision!r})", rel=STEP,
             mistakes={PER_GPU: batch} if batch > 1 else None,
             also_wrong={"the prompt length for the mean context": at_prompt} if apart else None)


GAINS = {"about 64x": ("64x", "about 64", "64", "64 x", "about 64 x"),
         "less than 64x": ("less", "less than 64", "less than 64 x", "< 64x", "fewer"),
         "not at all": ("none", "no", "not", "the same", "same", "no gain", "1x")}
CHANGES = {"shorter": ("faster", "less", "lower", "smaller"),
           "about the same": ("same", "the same", "unchanged"),
           "longer": ("slower", "more", "higher", "larger")}


@question("throughput_gain", A, "less than 64x", GAINS, revisited_in="The cell after Exercise 2")
def _throughput_gain(ref):
    one = ref.decode_step("Llama-3-8B", "H100", 2149, 1, efficiency="typical")
    many = ref.decode_step("Llama-3-8B", "H100", 2149, 64, efficiency="typical")
    gain = 64 * (one.time / many.time).m_as("")
    steady = [ref.steady_state("Llama-3-8B", "H100", 2000, 300, b, efficiency="typical") for b in (1, 64)]
    cache = many.parts["attention"].time.m_as("ms")
    return (f"On typical efficiency, as in Exercise 2, a decode step of 64 sequences makes 64 tokens in "
            f"{many.time.m_as('ms'):.2f} ms, against one token in {one.time.m_as('ms'):.2f} ms at batch 1: "
            f"{gain:.1f}x the tokens per second, not 64x. The weights are read once for the whole batch, but each "
            f"sequence reads its own cache of 2,149 tokens, {cache:.2f} ms of the step at batch 64. With the prefills "
            f"of the requests that replace finished ones (your engine_state above), the gain is "
            f"{(steady[1].output_throughput / steady[0].output_throughput).m_as(''):.1f}x.")


@question("itl_change", A, "longer", CHANGES, revisited_in="The cell after Exercise 2")
def _itl_change(ref):
    one, many = (ref.steady_state("Llama-3-8B", "H100", 2000, 300, b, efficiency="typical") for b in (1, 64))
    return (f"Each user gets one token per iteration, so the ITL is the iteration: on typical efficiency, as in "
            f"Exercise 2, {one.itl.m_as('ms'):.1f} ms at batch 1, {many.itl.m_as('ms'):.1f} ms at batch 64 once the "
            f"64 caches and the new prompts' prefills are in it. Batching buys the GPU throughput with each user's "
            f"latency: {one.per_request_throughput.m_as('token/s'):.0f} tokens/s per user at batch 1, "
            f"{many.per_request_throughput.m_as('token/s'):.0f} at batch 64.")



ENGINE_DERIVED = r"""
A request's prefill makes its first token, so it then holds its slot for $O - 1$ decode steps, and
$k = B/(O - 1)$ requests finish and start per step. An iteration is one decode step and $k$ prefills:

$$\text{ITL} = T = D + kF, \qquad \text{throughput per GPU} = \frac{B + k}{T}, \qquad
\text{TTFT} = F + \frac{T}{2}, \qquad \text{one user sees } \frac{1}{T}.$$

The $+k$ is the prefills' first tokens; the $T/2$ is the mean wait for the iteration under way. `rl.steady_state`
is this model (when several prompts arrive in one step it prefills them in one pass; these cases never need that).
"""


# -- Exercise 2: the steady state, from the step and the prefill ------------------------------------------

def _triple(got, call: str):
    """The three values engine_state returns, or a failure that says what came back."""
    __tracebackhide__ = True
    if not (isinstance(got, (tuple, list)) and len(got) == 3):
        _fail(f"{call} should return a tuple of three values (ITL, tokens/s per GPU, TTFT), got "
              f"{type(got).__name__} {got!r:.120}.")
    return got


def _engine_si(ref, name, device, prompt_len, output_len, batch, precision, efficiency="typical", steps=None,
               context=None, wait=0.5, first_tokens=True) -> tuple[float, float, float]:
    """(ITL s, tokens/s per GPU, TTFT s) of the course's steady state (one prefill pass per prompt), with one slip
    switched on (the defaults: none): the efficiency, the steps a slot is held, the step's context, the share of an
    iteration a new request waits, the prefills' first tokens."""
    k = batch / (output_len - 1 if steps is None else steps)
    at = _mean_context(prompt_len, output_len) if context is None else context
    decode = ref.decode_step(name, device, at, batch, precision, efficiency=efficiency, allow_overflow=True)
    prefill = ref.prefill(name, device, prompt_len, 1, precision, efficiency=efficiency, allow_overflow=True)
    d, f = decode.time.m_as("s"), prefill.time.m_as("s")
    t = d + k * f
    return t, (batch + (k if first_tokens else 0)) / t, f + wait * t


# Each slip of the steady state, by the value it changes first (the check reads the ITL, then the throughput, then
# the TTFT): (mistake, which of the three, the slip's keyword arguments).
ENGINE_SLIPS = (
    ("ideal for typical efficiency", 0, dict(efficiency="ideal")),
    ("O steps a slot, not O - 1 (off by one)", 0, dict(steps="O")),
    ("the prompt length for the mean context", 0, dict(context="P")),
    (PRECISION_NOT_PASSED + " (the step and the prefill at fp16)", 0, dict(precision="fp16")),
    ("B tokens an iteration, not B + k (the prefills' first tokens left out)", 1, dict(first_tokens=False)),
    ("a whole iteration of waiting in the TTFT, not half", 2, dict(wait=1.0)),
)


def _engine_slips(ref, case) -> list[dict]:
    """For the ITL, the throughput and the TTFT: {mistake: the value it gives} for each slip of ENGINE_SLIPS that
    moves that value on this case."""
    name, device, prompt_len, output_len, batch, precision = case
    right = _engine_si(ref, *case)
    units = ("s", "token/s", "s")
    found: list[dict] = [{}, {}, {}]
    for mistake, which, slip in ENGINE_SLIPS:
        slip = dict(slip)
        if slip.get("steps") == "O":
            slip["steps"] = output_len
        if slip.get("context") == "P":
            slip["context"] = prompt_len
        at = slip.pop("precision", precision)
        wrong = _engine_si(ref, name, device, prompt_len, output_len, batch, at, **slip)[which]
        if abs(wrong / right[which] - 1) > 1.2 * SAME:
            found[which][mistake] = ref.Q_(wrong, units[which])
    return found


@exercise("engine_state", A, derive=DERIVED[A], derived=ENGINE_DERIVED, visible=[
    # (model, device, prompt_len, output_len, batch, precision)
    # The running example at batch 64: the prefills are a large share of the iteration, so leaving them out of the
    # ITL, ideal for typical efficiency, the TTFT without its half iteration of waiting, and one user's tokens/s
    # for the GPU's show.
    ("Llama-3-8B", "H100", 2000, 300, 64, "fp16"),
    # Short answers at FP8 on the L40S, batch 40: k = 40/49 = 0.82 prompts a step, so the tokens the prefills make
    # (B + k, not B) move the throughput by 2%, and O for O - 1 moves k by 2%; the precision passed on shows.
    ("Mistral-7B", "L40S", 1000, 50, 40, "fp8"),
    # A mixture of experts on the H200 at batch 8: a small batch reads few of the experts, which the library's step
    # counts and a step priced by hand does not.
    ("Mixtral-8x7B", "H200", 500, 200, 8, "fp16"),
])
def _engine_state(answers, case, ref, rl):
    __tracebackhide__ = True
    (engine_state,) = answers
    name, device, prompt_len, output_len, batch, precision = case
    s = ref.steady_state(name, device, prompt_len, output_len, batch, precision, efficiency="typical",
                         allow_overflow=True)
    call = f"engine_state({name}, {device}, {prompt_len}, {output_len}, {batch}, {precision!r})"
    itl, throughput, ttft = _triple(engine_state(rl.model(name), rl.hardware(device), prompt_len, output_len, batch,
                                                 precision), call)
    decode = s.decode.time
    share = 1 - (decode / s.itl).m_as("")
    slips = _engine_slips(ref, case)
    quantity(itl, s.itl, f"the ITL of {call}", rel=SAME, mistakes={PREFILLS: 1 / (1 - share)} if share > 0.01 else None,
             also_wrong=slips[0])
    k = batch / (output_len - 1)
    quantity(throughput, s.output_throughput, f"the tokens/s per GPU of {call}", rel=SAME,
             mistakes={PER_GPU: float(s.tokens_per_step)}, also_wrong=slips[1])
    prefill = s.prefill.time
    quantity(ttft, s.ttft, f"the TTFT of {call}", rel=SAME,
             mistakes={HALF_STEP: (s.ttft / prefill).m_as("")} if k < 1 else None, also_wrong=slips[2])


@question("where_time_goes", A, "the prefills", {"the prefills": ("prefills", "prefill", "the prefill"),
                                                   "the weights": ("weights", "the weight read", "weight read"),
                                                   "the caches": ("caches", "the kv caches", "kv caches", "cache")},
          revisited_in="The cell after Exercise 2")
def _where_time_goes(ref):
    s = ref.steady_state("Llama-3-8B", "H100", 2000, 300, 64, efficiency="typical")
    parts = s.decode.parts
    k = 64 / 299
    prefill = k * s.prefill.time.m_as("ms")
    return (f"At batch 64 on typical efficiency an iteration takes {s.itl.m_as('ms'):.1f} ms: the decode step "
            f"{s.decode.time.m_as('ms'):.1f} ms (the weights {parts['body'].time.m_as('ms'):.1f}, the 64 caches "
            f"{parts['attention'].time.m_as('ms'):.1f}, the head {parts['head'].time.m_as('ms'):.1f}, the rest the "
            f"pass's fixed overhead) and k = 64/299 = {k:.3f} of a {s.prefill.time.m_as('ms'):.0f} ms prefill, "
            f"{prefill:.1f} ms. A prompt of 2,000 tokens is as much work as 2,000 decode tokens, so even one prompt "
            f"every five steps is the largest single share.")


# -- Exercise 3: the frontier and its bend -----------------------------------------------------------------


FRONTIER_DERIVED = r"""
The frontier is your steady state at $B = 1, 2, \ldots, B_\text{max}$, with
$B_\text{max} = \lfloor (\text{the engine's memory} - \text{weights}) / ((P + O) \times \text{KV bytes per token})
\rfloor$ (assignment 2). The body turns compute-bound near $B \approx \text{ridge} \times \text{MFU}/\text{MBU}$: the
ridge point moved by how far each roof falls short. Below the bend the weight read is shared, and each extra sequence
adds only its cache read and its prefill share; past it, each adds as much time as it adds tokens, so the throughput
flattens while every user's ITL keeps climbing. `rl.frontier` returns the same sweep as one object.
"""


def _engine_first(run):
    """Wrap an exercise that builds on the student's engine_state: when a case fails and the student's own
    engine_state fails its check too, say so first, so that a slip in Exercise 2 is not hunted for in this code
    (round 14: a wrong engine_state sent a novice to debug a right frontier_curve).  Grading charges the slip
    once either way (course/grading/autograde.py)."""
    def checked(answers, case, ref, rl):
        __tracebackhide__ = True
        try:
            run(answers, case, ref, rl)
        except WrongAnswer as wrong:
            engine = getattr(answers[0], "__globals__", {}).get("engine_state")
            if callable(engine) and not _passes(get("engine_state"), (engine,), ref, rl):
                raise WrongAnswer(f"Your engine_state fails its own check (Exercise 2), and this exercise uses it: "
                                  f"fix Exercise 2 first. Here: {wrong}") from None
            raise
    return checked


def _passes(exercise_, answers, ref, rl) -> bool:
    """Whether ``answers`` pass every visible case of ``exercise_``."""
    try:
        for case in exercise_.visible:
            exercise_.run(answers, case, ref, rl)
    except Exception:  # a failed case, or code that raises: either way not a pass
        return False
    return True


@exercise("frontier_curve", A, derive=DERIVED[A], derived=FRONTIER_DERIVED, visible=[
    # (model, device, prompt_len, output_len, precision).  Every case keeps B <= O - 1 at every batch that fits
    # (at most one prompt a step), where a prompt's prefill is a pass of its own.
    # The notebook's shown frontier, the running model on an H200 with 500-token answers: it bends well inside
    # memory on both typical presets (about half-way).  Catches ideal for typical efficiency, one user's tokens/s
    # for the GPU's, the batch index for the batch (off by one), the last memory-bound batch, and the memory read
    # at the prompt's length instead of prompt + answer (too many points).  (The running example on the H100
    # bends just before its memory ends, or not at all, depending on the fit: too close to teach with.)
    ("Llama-3-8B", "H200", 2000, 500, "fp16"),
    # Long requests: the caches fill the memory before the bend, so bend_batch must say None (not 0, not the
    # last batch), and a frontier that runs past memory has too many points.
    ("Llama-3-8B", "H100", 6000, 2000, "fp16"),
    # Llama-3-8B on an A100 in bf16, longer answers: it bends early (the A100's lower peak), a second device.
    ("Llama-3-8B", "A100-80GB", 2000, 500, "bf16"),
    # FP8 on the L40S: a precision left at its default shows (twice the caches fit).
    ("Llama-3-8B", "L40S", 2000, 300, "fp8"),
])
@_engine_first
def _frontier_curve(answers, case, ref, rl):
    __tracebackhide__ = True
    frontier_curve, bend_batch = answers
    name, device, prompt_len, output_len, precision = case
    f = ref.frontier(name, device, prompt_len, output_len, precision=precision, efficiency="typical")
    assert f.max_batch <= output_len - 1, "a frontier case must keep at most one prompt a step"
    where = f"{name}, {device}, {prompt_len}, {output_len}, {precision!r}"
    call = f"frontier_curve({where})"
    itl, throughput = _pair(frontier_curve(rl.model(name), rl.hardware(device), prompt_len, output_len, precision),
                            call)
    bent = np.flatnonzero(f.bound == "compute")
    # A few batches first (the first, the bend or the middle, the last), so a failure shows numbers, not arrays.
    shown = sorted({0, int(bent[0]) if bent.size else f.max_batch // 2, f.max_batch - 1})
    _same_length(itl, f.itl, f"the ITL of {call}", f.max_batch)
    for i in shown:
        quantity(itl[i], f.itl[i], f"the ITL at batch {i + 1} of {call}", rel=SAME)
    quantity(itl, f.itl, f"the ITL of {call}", rel=SAME)
    _same_length(throughput, f.output_throughput, f"the throughput of {call}", f.max_batch)
    per_user = f.per_request_throughput
    if (hasattr(throughput, "check") and throughput.check("[text] / [time]")
            and np.allclose(throughput.m_as("token/s"), per_user.m_as("token/s"), rtol=SAME)):
        _fail(f"the throughput of {call} is what one user sees (1 / ITL); the GPU makes a token for every "
              "sequence in the batch, and the frontier plots the GPU's tokens per second.", PER_GPU)
    for i in shown:
        quantity(throughput[i], f.output_throughput[i], f"the throughput at batch {i + 1} of {call}", rel=SAME,
                 mistakes={PER_GPU: float(f.tokens_per_step[i])} if i else None)
    quantity(throughput, f.output_throughput, f"the throughput of {call}", rel=SAME)
    answer = bend_batch(rl.model(name), rl.hardware(device), prompt_len, output_len, precision)
    call = f"bend_batch({where})"
    if not bent.size:
        if answer is not None:
            _fail(f"{call} = {answer!r}, but no batch that fits turns the weight matmuls compute-bound: the caches "
                  f"fill the memory at batch {f.max_batch} first, so the answer is None.")
        return
    _within_memory(answer, f.max_batch, call)
    number(answer, int(f.batch[bent[0]]), call, rel=1e-9)



# -- Exercise 4: the best batch under the SLA and the memory ---------------------------------------------


BEST_DERIVED = r"""
$$B^\ast = \arg\max_B \Big\{\frac{B + k}{T(B)} : B \le B_\text{max},\ T(B) \le \text{ITL target},\
\text{TTFT}(B) \le \text{TTFT target}\Big\}, \text{ or } 0 \text{ when the set is empty.}$$

Throughput grows with the batch along the whole frontier, so $B^\ast$ is the largest batch that fits and meets both
targets. `rl.best_under_sla` returns that point (and raises `rl.SLAUnmet` when there is none).
"""


@exercise("best_batch", A, derive=DERIVED[A], derived=BEST_DERIVED, visible=[
    # (model, device, prompt_len, output_len, ttft_limit ms, itl_limit ms, precision)
    # The running example at 500 ms and 50 ms: the ITL target binds. Catches ideal for typical efficiency, the
    # first batch over the target for the last one under it, and a target compared in the wrong unit.
    ("Llama-3-8B", "H100", 2000, 300, 500, 50, "fp16"),
    # Long prompts at FP8 on the L40S: the TTFT target binds (the ITL's alone would allow more), so a TTFT left out
    # shows, and the precision is not the default.
    ("Llama-3-8B", "L40S", 4000, 300, 180, 100, "fp8"),
    # Loose targets on the A100: memory binds first, so a batch beyond memory shows.
    ("Llama-3-8B", "A100-80GB", 2000, 500, 2000, 200, "bf16"),
    # Llama-3-70B at FP16 does not fit on one H100: the answer is 0, not an error.
    ("Llama-3-70B", "H100", 1000, 200, 1000, 100, "fp16"),
    # Llama-3-8B fits on an L4, but no batch meets a 20 ms ITL: 0 again (None, or the largest batch that fits,
    # fails).
    ("Llama-3-8B", "L4", 1000, 200, 1000, 20, "fp16"),
])
@_engine_first
def _best_batch(answers, case, ref, rl):
    __tracebackhide__ = True
    (best_batch,) = answers
    name, device, prompt_len, output_len, ttft, itl, precision = case
    cap = ref.max_concurrency(name, device, prompt_len, output_len, precision)
    try:
        expected = ref.best_under_sla(name, device, prompt_len, output_len, ref.Q_(ttft, "ms"), ref.Q_(itl, "ms"),
                                      precision, efficiency="typical").batch
    except (ref.DoesNotFit, ref.SLAUnmet):
        expected = 0
    assert cap <= output_len - 1, "a best_batch case must keep at most one prompt a step"
    call = f"best_batch({name}, {device}, {prompt_len}, {output_len}, {ttft} ms, {itl} ms, {precision!r})"
    answer = _calling(best_batch, call, rl, rl.model(name), rl.hardware(device), prompt_len, output_len,
                      rl.Q_(ttft, "ms"), rl.Q_(itl, "ms"), precision)
    _within_memory(answer, cap, call)
    number(answer, expected, call, rel=1e-9)


# -- the explorer's question -----------------------------------------------------------------------------

LIMITS = {"the memory": ("memory", "the caches", "caches", "kv cache", "the kv cache"),
          "the ITL target": ("itl", "the itl", "itl target"),
          "the TTFT target": ("ttft", "the ttft", "ttft target")}


@question("long_answers_limit", A, "the memory", LIMITS)
def _long_answers_limit(ref):
    best = ref.best_under_sla("Llama-3-8B", "H100", 2000, 2000, ref.Q_(500, "ms"), ref.Q_(50, "ms"),
                              efficiency="typical")
    short = ref.best_under_sla("Llama-3-8B", "H100", 2000, 300, ref.Q_(500, "ms"), ref.Q_(50, "ms"),
                               efficiency="typical")
    return (f"With 2,000-token answers each sequence holds a cache of 4,000 tokens, so only {best.max_batch} fit "
            f"beside the weights, and the best batch is all of them: {best.batch}, at an ITL of "
            f"{best.itl.m_as('ms'):.1f} ms and a TTFT of {best.ttft.m_as('ms'):.0f} ms, both well inside the "
            f"targets. With 300-token answers {short.max_batch} fit and the ITL target stops the batch at "
            f"{short.batch}. Long answers make the memory, not the latency, the limit: that is why engines fight "
            f"for cache space (paging, FP8 caches, fewer KV heads).")
