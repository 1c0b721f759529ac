"""Assignment 6b, one model on several GPUs: its exercises and the explorer's question.

Exercise 1 derives a ring all-reduce's time from the ring the notebook runs in numpy; Exercise 2 builds the
tensor-parallel decode step on it.  The course's ``all_reduce_time`` (:mod:`rooflab.earlier`) stands in where a
student's own is wrong, so that a slip there is charged once.  Each visible case is chosen for the mistakes it
catches (noted beside it); ``tests/test_exercises.py`` feeds every listed mistake to prove it fails.  Hidden cases
live in the instructor's test cells, never here.
"""

from __future__ import annotations

import math

import numpy as np

from ..check import _fail, quantity
from . import DERIVED, exercise, question
from .under_load import TOTAL, _gib

A = "06b_tensor_parallel"
SLA = 0.01  # tp_step_time against the library's tensor-parallel step
RING = 1e-6  # all_reduce_time: one formula, only rounding may differ
ACTIVATIONS = "activations at the weights' bytes per value (they cross the link in 16-bit)"
HEAD_8BIT = "the head stored at 8 bits (8-bit checkpoints keep it in 16-bit)"
HEAD_RATE = "the head multiplied at the 8-bit rate (its weights stay 16-bit, so it multiplies at the 16-bit rate)"


# -- Exercise 1: a ring all-reduce's time -------------------------------------------------------------------

RING_DERIVED = r"""
In a ring of $N$ GPUs each message is cut into $N$ chunks of $M / N$. Summing takes $N - 1$ rounds (each GPU
passes one chunk on and adds the one it receives), sharing the sums another $N - 1$: each GPU sends $2 (N - 1)$
chunks, $2 (N - 1) M / N$ bytes, over its link one way:

$$t = \frac{2 (N - 1)}{N} \times \frac{M}{\text{one-way bandwidth}}.$$

The factor is 1 for two GPUs and approaches 2 as $N$ grows: what one GPU sends hardly depends on how many share the
ring, which is why a ring scales. A group of one sends nothing.
"""
# Both halve the time at every N, so one name for the two.
HALF_RING = ("half the time: the link's two-way figure taken for one way, or only the summing half of the ring "
             "(the sums must also go round to every GPU)")
WHOLE_CHUNKS = "each round sends the whole message, not one chunk of it (M / N)"
NO_RING = "2 M whatever N: a round sends one chunk, so the bytes sent depend on N"


@exercise("all_reduce_time", A, derive=DERIVED[A], derived=RING_DERIVED, visible=[
    # (message bytes on each GPU, GPUs, device)
    # Four L40S over PCIe, Llama-3-8B at batch 256 (256 x 4,096 x 2 B): the factor is 1.5, so every slip below
    # gives its own value: half (x 1/2), the whole message each round (x 4), 2 M whatever N (x 4/3), a factor of
    # 1 (x 2/3).  It comes first so that the first failure names the slip.
    (2_097_152, 4, "L40S"),
    # Two H100s over NVLink, Llama-3-70B's activations at batch 64 (64 x 8,192 x 2 B): the factor is 1.
    (1_048_576, 2, "H100"),
    # Eight A100s over NVLink 3, a small message: the factor is 1.75.
    (65_536, 8, "A100-80GB"),
    # A group of one GPU: nothing to send, 0 s (code that charges it, or divides by N - 1, shows).
    (1_048_576, 1, "H100"),
])
def _all_reduce_time(answers, case, ref, rl):
    __tracebackhide__ = True
    (all_reduce_time,) = answers
    nbytes, gpus, device = case
    expected = ref.all_reduce_time(ref.Q_(nbytes, "B"), gpus, device)
    call = f"all_reduce_time({nbytes:,} B, {gpus}, {device})"
    answer = all_reduce_time(rl.Q_(nbytes, "B"), gpus, rl.hardware(device))
    if gpus == 1:  # nothing to compare a ratio with: the answer must be no time at all
        if not (hasattr(answer, "check") and answer.check("[time]")):
            _fail(f"{call} = {answer!r:.80} should be a time (a quantity in s), even when it is zero.")
        if not np.all(answer.m_as("s") == 0):
            _fail(f"{call} = {answer!r}: a group of one GPU has nothing to sum with, so it sends nothing: 0 s.",
                  "a group of one GPU charged for an all-reduce")
        return
    share = 2 * (gpus - 1) / gpus
    slips = {HALF_RING: (expected / 2,), WHOLE_CHUNKS: (expected * gpus,), NO_RING: (expected * 2 / share,),
             "2 (N - 1) / N left out (a factor of 1)": (expected / share,)}
    quantity(answer, expected, call, rel=RING,
             also_wrong={name: values for name, values in slips.items()
                         if all(abs((v / expected).m_as("") - 1) > 0.01 for v in values)})


# -- Exercise 2: the tensor-parallel step -----------------------------------------------------------------------

def _no_communication(answer, step, call: str) -> None:
    """Fail, naming the mistake, when the answer is the compute alone (the all-reduces left out)."""
    __tracebackhide__ = True
    share = (step.communication / step.compute.time).m_as("")
    if share > 0.01 and hasattr(answer, "check") and answer.check("[time]") and np.ndim(answer.magnitude) == 0:
        if abs(answer.m_as("s") / step.compute.time.m_as("s") - 1) < share / 3:
            _fail(f"{call} = {answer.to('ms'):.4g~P} is each GPU's compute alone; the 2 x layers all-reduces add "
                  f"{step.communication.m_as('ms'):.3g} ms.", "TP speed-up assumed N-fold (communication ignored)")



TP_DERIVED = r"""
Each GPU does $1/N$ of every part's FLOPs and bytes (a mixture of experts: FLOPs from the active parameters, bytes
from every expert the batch picks, all of them at the checked batches), so each part's time divides by $N$, except
the cache's: a GPU reads the cache of $\lceil H_{kv} / N \rceil$ whole KV heads, all of Gemma-2B's one head on
each of two GPUs. A ring all-reduce of $M$ bytes sends $2 (N - 1) M / N$ from
each GPU (your Exercise 1), and a step makes two per layer:

$$\frac{\text{body} + \text{attention} + \text{head}}{N} \;+\; 2L \times \frac{2 (N - 1)}{N} \times
\frac{B \, d_\text{model} \times 2\ \text{B}}{\text{one-way bandwidth}}.$$

The ring's factor is 1 at $N = 2$ and approaches 2 as $N$ grows, while each GPU's share keeps shrinking: splitting
further stops paying.
"""


@exercise("tp_step_time", A, derive=True, derived=TP_DERIVED, visible=[
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
    # FP8 weights over PCIe on two L40S at batch 256: the activations still cross the link in 16-bit, so
    # all-reduces of 1-byte activations (the weights' bytes per value) come out half as long.
    ("Llama-3-8B", "L40S", 500, 256, 2, "fp8"),
    # Qwen2-7B (a 152k-token vocabulary, so a large head) in INT8 on four A100s at batch 256: the head's weights
    # stay 16-bit, and at 256 tokens a 16-bit head is compute-bound on an A100 (its 16-bit ridge is 153 FLOP/B),
    # so multiplying it at the INT8 rate is 4% short, and 4% from the all-reduces' halving.
    ("Qwen2-7B", "A100-80GB", 200, 256, 4, "int8"),
    # A mixture of experts, batch 768 over two A100s: each token runs 2 of Mixtral's 8 experts, so the body's FLOPs
    # use the active parameters while its bytes are every expert's. The body is compute-bound here, so the total
    # for the active makes the step over three times too long.
    ("Mixtral-8x7B", "A100-80GB", 200, 768, 2, "bf16"),
    # Gemma-2B on two A100s: one KV head, which two GPUs cannot split (each holds the whole head, ceil(1 / 2) = 1:
    # 1 / N of a head makes the step 16% short), and an output head tied to the embedding table (model.head_params
    # is 0, yet the head still multiplies by vocab x d_model: 14% short).
    ("Gemma-2B", "A100-80GB", 2000, 32, 2, "bf16"),
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
    if (precision in ("fp8", "int8") and hasattr(answer, "check") and answer.check("[time]")
            and np.ndim(answer.magnitude) == 0):
        halved = step.time - step.communication / 2
        if abs(answer.m_as("s") / halved.m_as("s") - 1) < SLA / 4 and abs(halved / step.time - 1) > SLA:
            _fail(f"{call} = {answer.to('ms'):.4g~P}: the all-reduces are half as long as they should be. The "
                  "weights are stored in FP8, but the activations the GPUs sum are 16-bit: 2 bytes a value.",
                  ACTIVATIONS)
        eight = step.time.m_as("s") - _head_si(ref, name, device, batch, tp, "fp16", 2) + _head_si(
            ref, name, device, batch, tp, precision, 1)
        if abs(answer.m_as("s") / eight - 1) < SLA / 4 and abs(eight / step.time.m_as("s") - 1) > SLA:
            _fail(f"{call} = {answer.to('ms'):.4g~P}: the head's weights are read at 1 byte a value. At 8 bits "
                  "the head stays in 16-bit (2 bytes a value), as in shipped 8-bit checkpoints and the library; "
                  "the course's step_time stores it at 8 bits, so step_time alone does not give it.", HEAD_8BIT)
    quantity(answer, step.time, call, rel=SLA, mistakes=_gib(step.compute) if quiet else None,
             also_wrong=_tp_slips(ref, case, step.time))


FRACTIONAL_HEADS = ("a fraction of a KV head on each GPU (kv_heads / N); a GPU holds whole heads, ceil(kv_heads / N), "
                    "so with fewer KV heads than GPUs each keeps a whole copy")
TIED_HEAD = ("the output head left out where it is tied to the embedding table (model.head_params is 0 there, but "
             "the head still multiplies by vocab x d_model and reads the table)")
# Both halve the all-reduces' time, so one name for the two.
HALF_LINK = ("the all-reduces half as long: the link's two-way figure taken for one way, or one all-reduce per layer "
             "(there are two: after attention and after the MLP)")
# Slips of the tensor-parallel step, each named where a visible case shows it: (mistake, the slip's arguments).
TP_SLIPS = (
    (HALF_LINK, dict(link=1.0)),
    (HALF_LINK, dict(per_layer=1)),
    ("the ring's 2 (N - 1) / N left out", dict(ring=False)),
    ("the weights not split over the GPUs", dict(split_weights=False)),
    ("the caches not split over the GPUs (each GPU holds its share of the KV heads)", dict(split_caches=False)),
    (FRACTIONAL_HEADS, dict(whole_heads=False)),
    (TIED_HEAD, dict(tied_head_left_out=True)),
    (TOTAL, dict(active=False)),
    (HEAD_RATE, dict(head_at_format_rate=True)),
)


def _tp_si(model, hardware, context, batch, tp, precision, link=0.5, per_layer=2, ring=True, split_weights=True,
           active=True, split_caches=True, head_at_format_rate=False, whole_heads=True,
           tied_head_left_out=False) -> float:
    """The course's ideal tensor-parallel step, s, with one slip switched on (the defaults: none): each part's
    max(FLOPs / N / peak, bytes / N / bandwidth), plus 2 L all-reduces of B d_model 16-bit values, each sending
    2 (N - 1) / N of it over the link's one-way bandwidth (``link`` of the two-way figure).  The head stays
    16-bit and multiplies at the 16-bit rate."""
    from ..check import BYTES_PER_VALUE

    size = BYTES_PER_VALUE[precision]
    peak, bandwidth = hardware.peak_flops(precision).m_as("FLOP/s"), hardware.memory_bandwidth.m_as("B/s")
    params = model.active_non_embedding_params if active else model.non_embedding_params
    # A GPU holds whole KV heads: with fewer heads than GPUs, each keeps a copy of one.
    heads = (math.ceil(model.kv_heads / tp) if whole_heads else model.kv_heads / tp) if split_caches else model.kv_heads
    head = model.head_params if tied_head_left_out else model.d_model * model.vocab
    parts = (
        (batch * 2 * params / tp,
         (model.non_embedding_params + batch * model.d_model) * size / (tp if split_weights else 1)),
        (batch * 4 * model.layers * model.attention_width * context / tp,
         batch * (context + 1) * 2 * model.layers * heads * model.head_dim * size),
        (batch * 2 * head / tp, head * max(size, 2) / tp),
    )
    head_peak = peak if size >= 2 or head_at_format_rate else hardware.peak_flops("fp16").m_as("FLOP/s")
    rates = (peak, peak, head_peak)
    compute = sum(max(flops / rate, nbytes / bandwidth) for (flops, nbytes), rate in zip(parts, rates))
    share = 2 * (tp - 1) / tp if ring else 1
    message = batch * model.d_model * 2
    return compute + per_layer * model.layers * share * message / (hardware.interconnect_bandwidth.m_as("B/s") * link)


def _tp_slips(ref, case, expected) -> dict:
    """{mistake: the step it gives} for each slip of TP_SLIPS that moves this case's step by over 1.5%: the
    library's step scaled by the slip's effect on the course's count (the two counts differ by under 1%)."""
    name, device, context, batch, tp, precision = case
    model, hardware = ref.model(name), ref.hardware(device)
    right = _tp_si(model, hardware, context, batch, tp, precision)
    found: dict[str, list] = {}
    for mistake, slip in TP_SLIPS:
        ratio = _tp_si(model, hardware, context, batch, tp, precision, **slip) / right
        if abs(ratio - 1) > 1.5 * SLA:
            found.setdefault(mistake, []).append(expected * ratio)
    return {mistake: tuple(values) for mistake, values in found.items()}


def _head_si(ref, name: str, device: str, batch: int, tp: int, rate: str, bytes_per_value: int) -> float:
    """One GPU's share of the output head's ideal roofline time, s, at the peak of the format ``rate``:
    max(2 d V B / N / peak, d V x bytes / N / bandwidth)."""
    model, hardware = ref.model(name), ref.hardware(device)
    flops = batch * 2 * model.d_model * model.vocab / tp
    nbytes = model.d_model * model.vocab * bytes_per_value / tp
    return max(flops / hardware.peak_flops(rate).m_as("FLOP/s"), nbytes / hardware.memory_bandwidth.m_as("B/s"))


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

    return (f"Per million tokens at ${price.m_as('USD/h'):.2f} per GPU-hour (the catalogue's example on-demand "
            f"price, rl.example_price), Llama-3-8B at 2,000/300 with TTFT <= "
            f"500 ms and ITL <= 50 ms, typical efficiency: {listed}. FP8 halves the bytes every step reads, so one "
            f"L40S runs batch {costs['fp8, tp=1'][1].batch} within 50 ms instead of {costs['fp16, tp=1'][1].batch}. "
            f"Splitting over two GPUs halves each GPU's weight read but adds all-reduces over PCIe (64 GB/s both "
            f"ways), and there are two GPUs to pay for. At FP16 the read is {weights('fp16, tp=1'):.1f} ms of the "
            f"50, and halving it saves {weights('fp16, tp=1') / 2:.1f} ms against {links('fp16, tp=2'):.1f} ms of "
            f"all-reduces an iteration: the step's over the batch and, spread over the steps, the prefills', which carry "
            f"every prompt token's activations (2,000 vectors a prompt against one a sequence in a step), so they "
            f"are most of it. The pair is {_dearer(costs, 'fp16')} per token than one GPU. At "
            f"FP8 the read is only {weights('fp8, tp=1'):.1f} ms, half of it {weights('fp8, tp=1') / 2:.1f} ms, "
            f"against {links('fp8, tp=2'):.1f} ms of all-reduces: the pair is {_dearer(costs, 'fp8')}. "
            f"{_cheapest(costs)} is cheapest.")


def _dearer(costs: dict, precision: str) -> str:
    """'dearer' or 'cheaper': the pair against one GPU at ``precision``, per token."""
    return "dearer" if costs[f"{precision}, tp=2"][0] > costs[f"{precision}, tp=1"][0] else "cheaper"


def _cheapest(costs: dict) -> str:
    """The cheapest of the four settings in words, e.g. 'FP8 on one GPU'."""
    precision, tp = min(costs, key=lambda label: costs[label][0]).split(", tp=")
    return f"{precision.upper()} {'on one GPU' if tp == '1' else f'split over {tp} GPUs'}"
