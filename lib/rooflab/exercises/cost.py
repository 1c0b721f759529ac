"""Assignment 6, what does a million tokens cost?: its exercises and its prediction.

Built on assignment 5's steady state: the course's versions (:mod:`rooflab.earlier`: ``engine_state``,
``best_batch``) stand in where a student's own is wrong.  The energy bound and tensor parallelism against replicas
are printed by the notebook's code cells, not graded (tensor parallelism is assignment 6b's,
:mod:`.tensor_parallel`).  Each visible case is chosen for the mistakes it catches
(noted beside it); ``tests/test_exercises.py`` feeds every listed mistake to prove it fails.  Hidden cases live in
the instructor's test cells, never here.
"""

from __future__ import annotations

import numpy as np

from ..check import PRECISION_NOT_PASSED, _fail, quantity
from . import DERIVED, exercise, question
from .under_load import PER_GPU, _calling, _mean_context, _pair

A = "06_cost"
SAME = 0.001  # built from the same library costs: only rounding may differ
HOUR = "price per hour used as per second"


# -- Exercise 1: dollars per million tokens ----------------------------------------------------------------


COST_DERIVED = r"""
$$\$\text{ per million tokens} = \frac{\text{price per hour}}{3600 \times \text{tokens per second} / 10^6}.$$
A price per hour used as per second is off by 3,600. The price per hour is fixed, so the cost per token falls as fast
as the batch raises the throughput.
"""

PREFILL_AT_BATCH = ("the prefill priced at the whole batch: a prompt is prefilled alone (batch 1) as it arrives, and "
                    "its time buys its own prompt_len tokens")


@exercise("cost_per_million", A, derive=DERIVED[A], derived=COST_DERIVED, visible=[
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


# -- Exercise 2: prompt tokens and generated tokens priced apart ------------------------------------------


PRICES_DERIVED = r"""
Input: price $\times F / P$ (one prefill's time $F$ for its $P$ prompt tokens). Output: price $\times D / B$ (one
decode step's time $D$ for its $B$ tokens). A prefill pushes $P$ tokens through each weight it reads; a decode step
makes only $B$ tokens for the same read, plus every cache.

The blended price is dearer than both because each generated token also carries its request's prefill, shared by
$O - 1$ decoded tokens: blended $\approx$ output $+ \frac{P}{O - 1} \times$ input (the cell below checks it).
"""


@exercise("token_prices", A, derive=DERIVED[A], derived=PRICES_DERIVED, visible=[
    # (model, device, prompt_len, output_len, batch, price USD/h, precision)
    # The running example at batch 64: a prompt token costs a small fraction of a generated one.  Catches the
    # blended figure for the output price (the prefills' time charged to the generated tokens), B + k tokens for
    # the decode step's B, a price per hour used as per second, and one user's tokens/s for the GPU's.
    ("Llama-3-8B", "H100", 2000, 300, 64, 3.9492, "fp16"),
    # FP8 on the L40S, short answers at batch 40: k = 0.82 prompts a step, the precision passed on.
    ("Mistral-7B", "L40S", 1000, 50, 40, 1.9512, "fp8"),
])
def _token_prices(answers, case, ref, rl):
    __tracebackhide__ = True
    (token_prices,) = answers
    name, device, prompt_len, output_len, batch, price, precision = case
    s = ref.steady_state(name, device, prompt_len, output_len, batch, precision, efficiency="typical",
                         allow_overflow=True)
    hourly = ref.Q_(price, "USD/h")
    call = f"token_prices({name}, {device}, {prompt_len}, {output_len}, {batch}, ${price}/h, {precision!r})"
    got = _pair(token_prices(rl.model(name), rl.hardware(device), prompt_len, output_len, batch,
                             rl.Q_(price, "USD/h"), precision), call)
    slips = _price_slips(ref, case)
    quantity(got[0], s.cost_per_million_input(hourly), f"the price of a million prompt tokens of {call}", rel=SAME,
             mistakes={HOUR: 3600}, also_wrong=slips[0])
    output = s.cost_per_million_output(hourly)
    blended = s.cost_per_million(hourly)
    if hasattr(got[1], "check") and got[1].check("[currency] / [text]") and np.ndim(got[1].magnitude) == 0:
        apart = abs(blended.m_as("USD/Mtok") / output.m_as("USD/Mtok") - 1) > 10 * SAME  # k large enough to tell
        if apart and abs(got[1].m_as("USD/Mtok") / blended.m_as("USD/Mtok") - 1) < SAME:
            _fail(f"the price of a million generated tokens of {call} = {got[1].to('USD/Mtok'):.4g~P} is the blended "
                  "figure: it charges the prefills' GPU time to the generated tokens too. Charge the generated "
                  "tokens only the decode step's time.", "the blended price for the generated tokens'")
    quantity(got[1], output, f"the price of a million generated tokens of {call}", rel=SAME,
             mistakes={HOUR: 3600, PER_GPU: batch}, also_wrong=slips[1])


def _prices_of(ref, name, device, prompt_len, output_len, batch, price, precision, efficiency="typical",
               decode_tokens=None, prefill_batch=1):
    """(input, output) USD/Mtok of the course's token prices: price x F / P and price x D / (tokens a step)."""
    f = ref.prefill(name, device, prompt_len, prefill_batch, precision, efficiency=efficiency,
                    allow_overflow=True).time
    d = ref.decode_step(name, device, _mean_context(prompt_len, output_len), batch, precision, efficiency=efficiency,
                        allow_overflow=True).time
    hourly = ref.Q_(price, "USD/h")
    made = batch if decode_tokens is None else decode_tokens
    return ((hourly * f / ref.Q_(prompt_len, "token")).to("USD/Mtok"),
            (hourly * d / ref.Q_(made, "token")).to("USD/Mtok"))


def _price_slips(ref, case) -> list[dict]:
    """For the prompt price and the generated price: {mistake: the value it gives}, each slip that moves it here."""
    name, device, prompt_len, output_len, batch, price, precision = case
    right = _prices_of(ref, *case)
    variants = {"ideal for typical efficiency": _prices_of(ref, *case, efficiency="ideal"),
                PRECISION_NOT_PASSED + " (the prefill and the step at fp16)": _prices_of(ref, *case[:-1], "fp16"),
                "B + k tokens for the decode step's B": _prices_of(
                    ref, *case, decode_tokens=batch + batch / (output_len - 1)),
                PREFILL_AT_BATCH: _prices_of(ref, *case, prefill_batch=batch)}
    found: list[dict] = [{"the two prices swapped": right[1]}, {"the two prices swapped": right[0]}]
    for mistake, values in variants.items():
        for which in (0, 1):
            if abs((values[which] / right[which]).m_as("") - 1) > 3 * SAME:
                found[which][mistake] = values[which]
    return found


ORDERS = {"prompt tokens": ("prompt", "input", "input tokens", "prompts", "the prompt tokens"),
          "generated tokens": ("generated", "output", "output tokens", "the generated tokens", "answer tokens"),
          "about the same": ("same", "the same", "equal")}


@question("dearer_tokens", A, "generated tokens", ORDERS, revisited_in="The cell after Exercise 2")
def _dearer_tokens(ref):
    s = ref.steady_state("Llama-3-8B", "H100", 2000, 300, 64, efficiency="typical")
    price = ref.example_price("H100")
    into, out = s.cost_per_million_input(price), s.cost_per_million_output(price)
    return (f"At batch 64 on an H100 at ${price.m_as('USD/h'):.2f} an hour (typical efficiency): a million prompt "
            f"tokens cost {into.m_as('USD/Mtok'):.3f} dollars, a million generated ones "
            f"{out.m_as('USD/Mtok'):.3f}, {(out / into).m_as(''):.1f}x as much. A prefill pushes 2,000 tokens "
            f"through each weight it reads, so it runs near the compute peak; a decode step makes 64 tokens for "
            f"the same weight read and every sequence's cache. API price sheets charge generated tokens several "
            f"times prompt tokens for this reason.")


# -- Exercise 3: the cost at the SLA ----------------------------------------------------------------------


SLA_DERIVED = r"""
Cost per token = price / throughput, and the price is fixed: the cheapest token is at the highest throughput that
meets both targets, the best batch's, $(B^\ast + k)/T(B^\ast)$ (assignment 5: $B^\ast$ sequences decoding make a token
each per step, and the $k = B^\ast/(O - 1)$ requests that finish in a step have their first tokens from their prefills). A GPU dearer per hour is cheaper per token when its
throughput under the SLA rises by more than its price.
"""


@exercise("cost_at_sla", A, derive=DERIVED[A], derived=SLA_DERIVED, visible=[
    # (model, device, prompt_len, output_len, ttft_limit ms, itl_limit ms, price USD/h, precision)
    # The running example on the H100: the ITL target binds. Catches one user's tokens/s for the GPU's (off by
    # B + k), a price per hour used as per second, ideal for typical efficiency, batch 1 instead of the best.
    ("Llama-3-8B", "H100", 2000, 300, 500, 50, 3.9492, "fp16"),
    # Long prompts at FP8 on the L40S: the TTFT target binds well before the ITL's, so the TTFT left out shows,
    # and the precision is not the default.
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
             mistakes={PER_GPU: best.tokens_per_step, HOUR: 3600}, also_wrong=_sla_slips(ref, case, best))


def _sla_slips(ref, case, best) -> dict:
    """{mistake: the cost it gives} for each slip of the search that moves the cost on this case by over 2%."""
    name, device, prompt_len, output_len, ttft, itl, price, precision = case
    hourly = ref.Q_(price, "USD/h")

    def at(batch, at_precision=precision):
        return ref.steady_state(name, device, prompt_len, output_len, batch, at_precision, efficiency="typical",
                                allow_overflow=True).cost_per_million(hourly)

    def searched(ttft_limit=ttft, at_precision=precision, efficiency="typical"):
        try:
            return ref.best_under_sla(name, device, prompt_len, output_len, ref.Q_(ttft_limit, "ms"),
                                      ref.Q_(itl, "ms"), at_precision, efficiency=efficiency)
        except (ref.DoesNotFit, ref.SLAUnmet):
            return None

    right = best.cost_per_million(hourly)
    wrong = {"batch 1, not the best batch": (at(1),),
             "the TTFT target left out": (at(searched(ttft_limit=3.6e6).batch),),
             "ideal for typical efficiency": (searched(efficiency="ideal").cost_per_million(hourly),),
             PRECISION_NOT_PASSED + " (to engine_state, or to both)": tuple(
                 v for v in (at(best.batch, "fp16"), searched(at_precision="fp16") and
                             searched(at_precision="fp16").cost_per_million(hourly)) if v)}
    return {mistake: values for mistake, values in wrong.items()
            if values and all(abs((v / right).m_as("") - 1) > 0.02 for v in values)}
