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

import numpy as np

import rooflab as rl
from rooflab import Q_
from rooflab.check import PRECISION_NOT_PASSED, QUANTITY_FOR_NUMBER
from rooflab.exercises import cost as cost06
from rooflab.exercises import crossover as crossover04
from rooflab.exercises import tail as tail07
from rooflab.exercises.tensor_parallel import FRACTIONAL_HEADS, HALF_LINK, HALF_RING, NO_RING, TIED_HEAD, WHOLE_CHUNKS
from rooflab.exercises.under_load import FEW_FLOPS
from rooflab.exercises.two_phases import (DECODE_TIMES_N, EVERY_PARAMETER, FP16_PEAK, KV_WIDTH, MEMORY_AT_FP16,
                                         NO_EMBEDDING, OUTPUT_STEPS, REQUEST_AT_FP16, TIE, TOTAL_FOR_ACTIVE)

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


def _ttft_and_itl(s, weights=None, kv=True, prefill_compute_only=False, scale=1.0, swapped=False, peak_at=None,
                  bytes_at=None):
    """ttft_and_itl built from the reference functions with one slip (``peak_at``, ``bytes_at``: the precision
    roofline_time, or weight_bytes and decode_bytes, are called with instead of the one asked; "default": none)."""
    def at(p, given):
        return () if given == "default" else (given or p,)

    def ttft_and_itl(m, d, n, p="fp16"):
        w = (weights or s["weight_bytes"])(m, *at(p, bytes_at))
        if prefill_compute_only:
            ttft = (s["prefill_flops"](m, n) / d.peak_flops(p)).to("s")
        else:
            ttft, _ = s["roofline_time"](s["prefill_flops"](m, n), w, d, *at(p, peak_at))
        cache = (s["decode_bytes"](m, n, *at(p, bytes_at)) - s["weight_bytes"](m, *at(p, bytes_at)) if kv
                 else Q_(0, "B"))
        itl, _ = s["roofline_time"](s["decode_flops"](m, n), w + cache, d, *at(p, peak_at))
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


def _sla(s, budget_len=None, efficiency=None, check_itl=True, bare=False, check_memory=True, memory_precision=True,
         request_precision=True):
    """sla_verdict with one slip: the context memory is checked at, the efficiency used, the limits compared, the
    precision passed on (or not) to the memory check and to rl.request."""
    import rooflab as rl

    def sla_verdict(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16",
                    efficiency_asked="typical"):
        context = (budget_len or (lambda p, o: p + o))(prompt_len, output_len)
        memory = rl.memory_budget(model, device, context, precision=precision) if memory_precision else \
            rl.memory_budget(model, device, context)
        if check_memory and not memory.fits:
            return "does not fit"
        r = rl.request(model, device, prompt_len, output_len, efficiency=efficiency or efficiency_asked,
                       **({"precision": precision} if request_precision else {}))
        if bare:
            ttft_ok, itl_ok = r.ttft.m_as("ms") < ttft_limit.magnitude, r.itl.m_as("ms") < itl_limit.magnitude
        else:
            ttft_ok, itl_ok = r.ttft < ttft_limit, r.itl < itl_limit
        return "meets" if ttft_ok and (itl_ok or not check_itl) else "too slow"
    return sla_verdict


# -- 05_under_load ---------------------------------------------------------------------------------------------

def _step05(s, kv=2, heads="kv_heads", per_value=True, flops_per_mac=2, cache_batch=True, head_per_sequence=False,
          gib=False, active="active_non_embedding_params", weights_per_sequence=False, flops_batch=True,
          head_batch=True):
    """05's step_time with one slip switched on: the K-and-V factor, the heads the cache is counted for, bytes per
    value, FLOPs per multiply-add, the caches of the batch or of one sequence, the head read per sequence, GiB."""
    def step_time(model, device, context_len, batch, precision="fp16"):
        size = s["BYTES_PER_VALUE"][precision] if per_value else 1
        nbytes = (lambda n: Q_(n / 2**30, "GB")) if gib else (lambda n: Q_(n, "B"))
        per_token = kv * model.layers * getattr(model, heads) * model.head_dim * size
        weights = model.non_embedding_params * (batch if weights_per_sequence else 1)
        flops_of = batch if flops_batch else 1
        body, _ = s["roofline_time"](Q_(flops_of * flops_per_mac * getattr(model, active), "FLOP"),
                                     nbytes((weights + batch * model.d_model) * size), device, precision)
        sequences = batch if cache_batch else 1
        attention, _ = s["roofline_time"](
            Q_(flops_of * 2 * flops_per_mac * model.layers * model.attention_width * context_len, "FLOP"),
            nbytes(sequences * (context_len + 1) * per_token), device, precision)
        head_flops = (flops_of if head_batch else 1) * flops_per_mac * model.d_model * model.vocab
        head, _ = s["roofline_time"](Q_(head_flops, "FLOP"),
                                     nbytes(model.vocab * model.d_model * size * (batch if head_per_sequence else 1)),
                                     device, precision)
        return body + attention + head
    return step_time


def _with_step(s, step_time):
    """(step_time, tokens_per_second) with tokens_per_second built on the given step_time, as the student's is."""
    def tokens_per_second(model, device, prompt_len, output_len, batch, precision="fp16"):
        return (Q_(batch, "token") / step_time(model, device, s["mean_context"](prompt_len, output_len), batch,
                                                precision)).to("token/s")
    return step_time, tokens_per_second


def _engine(s, efficiency="typical", prefills=True, first_tokens=True, steps=lambda o: o - 1, wait=0.5,
            context=None, precision_used=True, per_user=False, ms_for_s=False):
    """05's engine_state with one slip: the prefills, the prefills' first tokens, the steps a slot is held, the
    share of an iteration a new request waits, the context of the step, the precision, one user's tokens/s."""
    def engine_state(model, device, prompt_len, output_len, batch, precision="fp16"):
        precision = precision if precision_used else "fp16"
        finishing = batch / steps(output_len)
        at = s["mean_context"](prompt_len, output_len) if context is None else context(prompt_len, output_len)
        decode = rl.decode_step(model, device, at, batch, precision, efficiency=efficiency, allow_overflow=True).time
        prefill = rl.prefill(model, device, prompt_len, 1, precision, efficiency=efficiency,
                             allow_overflow=True).time
        iteration = decode + (finishing * prefill if prefills else 0 * prefill)
        made = Q_(1 if per_user else batch + (finishing if first_tokens else 0), "token")
        itl = Q_(iteration.m_as("s"), "ms") if ms_for_s else iteration.to("ms")
        return itl, (made / iteration).to("token/s"), (prefill + wait * iteration).to("ms")
    return engine_state


def _most05(s, tokens=lambda p, o: p + o, precision_used=True, cap=None):
    """The most sequences that fit, as a student reads them off the memory budget (with one slip)."""
    def most(model, device, prompt_len, output_len, precision):
        if cap is not None:
            return cap
        options = dict(precision=precision) if precision_used else {}
        return rl.memory_budget(model, device, tokens(prompt_len, output_len), **options).max_batch
    return most


def _frontier(s, engine=None, most=None, per_user=False):
    def frontier_curve(model, device, prompt_len, output_len, precision="fp16"):
        states = [(engine or s["engine_state"])(model, device, prompt_len, output_len, b, precision)
                  for b in range(1, (most or _most05(s))(model, device, prompt_len, output_len, precision) + 1)]
        itl = Q_([state[0].m_as("ms") for state in states], "ms")
        throughput = Q_([(Q_(1, "token") / state[0] if per_user else state[1]).m_as("token/s") for state in states],
                        "token/s")
        return itl, throughput
    return frontier_curve


def _bend(s, pick, efficiency="typical"):
    """bend_batch that picks from the batches (1 .. most) and whether each one's body is compute-bound."""
    def bend_batch(model, device, prompt_len, output_len, precision="fp16"):
        batches = np.arange(1, _most05(s)(model, device, prompt_len, output_len, precision) + 1)
        bound = np.array([rl.decode_step(model, device, s["mean_context"](prompt_len, output_len), int(b), precision,
                                         efficiency=efficiency).parts["body"].bound for b in batches])
        return pick(batches, np.flatnonzero(bound == "compute"))
    return bend_batch


def _best05(s, engine=None, most=None, meets=None, none_for_zero=False, raise_if_none_fit=False, pick="best"):
    """05's best_batch with one slip: the steady state, the memory, the test of the targets, what comes back."""
    meets = meets or (lambda itl, ttft, itl_limit, ttft_limit: itl <= itl_limit and ttft <= ttft_limit)

    def best_batch(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16"):
        top = (most or _most05(s))(model, device, prompt_len, output_len, precision)
        if top == 0 and raise_if_none_fit:
            raise rl.DoesNotFit("not one sequence fits")
        best, first_miss = 0, None
        for batch in range(1, top + 1):
            itl, _, ttft = (engine or s["engine_state"])(model, device, prompt_len, output_len, batch, precision)
            if meets(itl, ttft, itl_limit, ttft_limit):
                best = batch
            elif first_miss is None:
                first_miss = batch
        if pick == "first miss" and first_miss is not None:
            return first_miss
        return None if (none_for_zero and best == 0) else best
    return best_batch


def _cost_at_sla(s, throughput=lambda state: state[1], price_of=lambda p: p, ttft=True, precision_used=True,
                 batch_one=False):
    def cost_at_sla(model, device, prompt_len, output_len, ttft_limit, itl_limit, price, precision="fp16"):
        batch = 1 if batch_one else s["best_batch"](model, device, prompt_len, output_len,
                                                     ttft_limit if ttft else Q_(1, "h"), itl_limit, precision)
        state = s["engine_state"](model, device, prompt_len, output_len, batch,
                                  precision if precision_used else "fp16")  # passed to the search only
        return s["cost_per_million"](price_of(price), throughput(state))
    return cost_at_sla


def _prices(s, efficiency="typical", precision_used=True, blended=False, decode_tokens=lambda b, k: b,
            price_of=lambda p: p, swapped=False, prefill_at_batch=False):
    """06's token_prices with one slip."""
    def token_prices(model, device, prompt_len, output_len, batch, price, precision="fp16"):
        precision = precision if precision_used else "fp16"
        price = price_of(price)
        prefill = rl.prefill(model, device, prompt_len, batch if prefill_at_batch else 1, precision,
                             efficiency=efficiency, allow_overflow=True).time
        decode = rl.decode_step(model, device, s["mean_context"](prompt_len, output_len), batch, precision,
                                efficiency=efficiency, allow_overflow=True).time
        into = s["cost_per_million"](price, Q_(prompt_len, "token") / prefill)
        if blended:
            out = s["cost_per_million"](price, s["engine_state"](model, device, prompt_len, output_len, batch,
                                                                 precision)[1])
        else:
            out = s["cost_per_million"](price, Q_(decode_tokens(batch, batch / (output_len - 1)), "token") / decode)
        return (out, into) if swapped else (into, out)
    return token_prices


def _tp(s, gib=False, communication=True, link_both_ways=False, all_reduces_per_layer=2, ring=True,
        weights_split=True, activation_bytes=lambda precision: 2, active="active_non_embedding_params",
        head_bytes=lambda precision: 2, head_rate=lambda precision: "fp16", caches_split=True, whole_heads=True,
        head_from="d_model x vocab"):
    def tp_step_time(model, device, context_len, batch, tp, precision="fp16"):
        size = s["BYTES_PER_VALUE"][precision]
        heads = model.kv_heads if not caches_split else (
            math.ceil(model.kv_heads / tp) if whole_heads else model.kv_heads / tp)
        per_token = 2 * model.layers * heads * model.head_dim * size
        head_params = model.head_params if head_from == "head_params" else model.d_model * model.vocab
        weights = (model.non_embedding_params + batch * model.d_model) * size / (tp if weights_split else 1)
        body, _ = s["roofline_time"](Q_(batch * 2 * getattr(model, active) / tp, "FLOP"),
                                     Q_(weights / 2**30, "GB") if gib else Q_(weights, "B"), device, precision)
        attention, _ = s["roofline_time"](
            Q_(batch * 4 * model.layers * model.attention_width * context_len / tp, "FLOP"),
            Q_(batch * (context_len + 1) * per_token, "B"), device, precision)
        head, _ = s["roofline_time"](Q_(batch * 2 * head_params / tp, "FLOP"),
                                     Q_(head_params * head_bytes(precision) / tp, "B"), device,
                                     head_rate(precision))
        compute = body + attention + head
        if not communication:
            return compute
        link = device.interconnect_bandwidth if link_both_ways else device.interconnect_bandwidth / 2
        share = 2 * (tp - 1) / tp if ring else 1
        allreduce = (share * Q_(batch * model.d_model * activation_bytes(precision), "B") / link).to("s")
        return compute + all_reduces_per_layer * model.layers * allreduce
    return tp_step_time



# The hint (mistake tag) each of these mistakes must get, beyond the checker's own names (test_exercises.py).
HINTS = {
    "prefill_flops": {
        TOTAL_FOR_ACTIVE: TOTAL_FOR_ACTIVE,
        "attention counted in full, not causal": "the attention term doubled",
        "attention left out": "the attention term left out",
        "logits left out": "the logits term left out",
        "logits for every prompt token": "the logits term multiplied by prompt_len",
        "the prompt's tokens counted from 0 (n - 1 through the weights)": "off by one in prompt_len",
        # The routes of a count derived without a recipe (the exercise gives the method, not the formula).
        "a decode step's count times prompt_len": DECODE_TIMES_N,
        "KV heads for query heads in attention": KV_WIDTH,
        "the embedding table and head multiplied too": EVERY_PARAMETER,
    },
    "weight_bytes": {"the format ignored (2 bytes a value whatever is asked)": "2 bytes a value whatever the format",
                     "the embedding table and output head left out": NO_EMBEDDING},
    "decode_bytes": {
        "weights from a weight_bytes in GiB labelled GB": "GB for GiB in the weights term",
        "bits for bytes in the KV cache": "bits for bytes",
        "the cache at 2 bytes a value whatever the format": PRECISION_NOT_PASSED,
    },
    "roofline_time": {
        "the fp16 peak whatever the format": FP16_PEAK,
        "> where the rule says >= (a tie called memory)": TIE,
    },
    "ttft_and_itl": {
        "the precision not passed on to roofline_time": PRECISION_NOT_PASSED,
        "the precision not passed on to weight_bytes and decode_bytes": PRECISION_NOT_PASSED,
        "the precision passed on to nothing": PRECISION_NOT_PASSED,
    },
    "intensities": {
        "the precision not passed on to weight_bytes and decode_bytes": PRECISION_NOT_PASSED,
        "> where the rule says >= (the ridge point itself called memory)": TIE,
    },
    "speedups": {
        "the precision not passed on (the times at fp16)": PRECISION_NOT_PASSED,
        "quantities returned, not plain numbers": QUANTITY_FOR_NUMBER,
    },
    "sla_verdict": {
        "the precision not passed on to the memory check": MEMORY_AT_FP16,
        "the precision not passed on to rl.request": REQUEST_AT_FP16,
    },
    "decode_share": {
        "output_len steps, not output_len - 1": OUTPUT_STEPS,
        "magnitudes mixed across units": "seconds added to milliseconds",
        "a quantity returned, not a plain number": QUANTITY_FOR_NUMBER,
    },
    # 05_under_load: every slip of the step and of the steady state is named (issue 24: Exercise 1 asks which costs
    # are per step and which per sequence, Exercise 2 gives no step list).
    "step_time": {
        "forgot K and V in the cache": "forgot K and V in the cache",
        "query heads for KV heads": "query heads for KV heads",
        "values for bytes (no BYTES_PER_VALUE)": "values for bytes (no BYTES_PER_VALUE)",
        "one FLOP per multiply-add": FEW_FLOPS,
        "the FLOPs of one sequence for the batch's": FEW_FLOPS,
        "one sequence's cache for the batch's (per sequence for per batch)":
            "one sequence's cache for the batch's (per sequence for per batch)",
        "the head read once per sequence": "the head read once per sequence",
        "the weights read once per sequence": "the weights read once per sequence",
        "the prompt length for the mean context": "the prompt length for the mean context",
        "the head's FLOPs once per step":
            "the head's FLOPs for one sequence, not the batch's (each sequence's token is multiplied by the head)",
    },
    "engine_state": {
        "a whole iteration of waiting in the TTFT, not half": "a whole iteration of waiting in the TTFT, not half",
        "ideal for typical efficiency": "ideal for typical efficiency",
        "B tokens an iteration, not B + k (the prefills' first tokens left out)":
            "B tokens an iteration, not B + k (the prefills' first tokens left out)",
        "O steps a slot, not O - 1 (off by one)": "O steps a slot, not O - 1 (off by one)",
        "the precision left at its default": PRECISION_NOT_PASSED + " (the step and the prefill at fp16)",
        "the prompt length for the mean context": "the prompt length for the mean context",
    },
    # 06_cost: Exercises 2 and 3 give the quantities and one question.
    "token_prices": {
        "B + k tokens for the decode step's B": "B + k tokens for the decode step's B",
        "the two prices swapped": "the two prices swapped",
        "ideal for typical efficiency": "ideal for typical efficiency",
        "the precision left at its default": PRECISION_NOT_PASSED + " (the prefill and the step at fp16)",
        "the prefill priced at the whole batch": cost06.PREFILL_AT_BATCH,
    },
    "cost_at_sla": {
        "ideal for typical efficiency": "ideal for typical efficiency",
        "the TTFT target left out": "the TTFT target left out",
        "the precision left at its default": PRECISION_NOT_PASSED + " (to engine_state, or to both)",
        "batch 1, not the best batch": "batch 1, not the best batch",
    },
    # 06b: the ring's time is derived from the ring's counts, the split step from it.
    "all_reduce_time": {
        "the link's two-way bandwidth for one way": HALF_RING,
        "only the summing half of the ring ((N - 1) / N)": HALF_RING,
        "the whole message sent each round": WHOLE_CHUNKS,
        "2 M whatever N": NO_RING,
        "2 (N - 1) / N left out": "2 (N - 1) / N left out (a factor of 1)",
        "a group of one GPU charged for an all-reduce": "a group of one GPU charged for an all-reduce",
    },
    "tp_step_time": {
        "the link's two-way bandwidth for one way": HALF_LINK,
        "one all-reduce per layer, not two": HALF_LINK,
        "the ring's 2 (N - 1) / N left out": "the ring's 2 (N - 1) / N left out",
        "the weights not split over the GPUs": "the weights not split over the GPUs",
        "the caches not split over the GPUs": "the caches not split over the GPUs (each GPU holds its share of the KV heads)",
        "total for active parameters (a mixture of experts)": "total for active parameters (a mixture of experts)",
        "kv_heads / N, not whole heads": FRACTIONAL_HEADS,
        "model.head_params for a tied head": TIED_HEAD,
    },
}


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
        TOTAL_FOR_ACTIVE: lambda s: (lambda m, n: Q_(
            2 * m.non_embedding_params * n + 2 * m.layers * m.attention_width * n * n + 2 * m.d_model * m.vocab,
            "FLOP"),),
        "the prompt's tokens counted from 0 (n - 1 through the weights)": lambda s: (
            lambda m, n: s["prefill_flops"](m, n) - Q_(2 * m.active_non_embedding_params, "FLOP"),),
        "a decode step's count times prompt_len": lambda s: (lambda m, n: n * s["decode_flops"](m, n),),
        "KV heads for query heads in attention": lambda s: (lambda m, n: s["prefill_flops"](m, n) - Q_(
            2 * m.layers * (m.heads - m.kv_heads) * m.head_dim * n * n, "FLOP"),),
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
        "bits for bytes in the KV cache": lambda s: (_decode_bytes(s, kv_scale=8),),
        "the cache at 2 bytes a value whatever the format": lambda s: (_decode_bytes(s, per_value=2),),
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
        "> where the rule says >= (a tie called memory)": lambda s: (lambda f, b, d, p="fp16": (
            max((f / d.peak_flops(p)).to("s"), (b / d.memory_bandwidth).to("s")),
            "compute" if f / d.peak_flops(p) > b / d.memory_bandwidth else "memory"),),
    },
    "ttft_and_itl": {
        "milliseconds for seconds": lambda s: (_ttft_and_itl(s, scale=1000),),
        "the KV cache left out of the decode step": lambda s: (_ttft_and_itl(s, kv=False),),
        "the prefill taken as compute-bound whatever the prompt (F / P alone)": lambda s: (
            _ttft_and_itl(s, prefill_compute_only=True),),
        "TTFT and ITL swapped": lambda s: (_ttft_and_itl(s, swapped=True),),
        "weights from a weight_bytes in GiB labelled GB": lambda s: (_ttft_and_itl(s, weights=_gib_weights(s)),),
        "the precision not passed on to roofline_time": lambda s: (_ttft_and_itl(s, peak_at="default"),),
        "the precision not passed on to weight_bytes and decode_bytes": lambda s: (
            _ttft_and_itl(s, bytes_at="default"),),
        "the precision passed on to nothing": lambda s: (_ttft_and_itl(s, peak_at="default", bytes_at="default"),),
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
        "the decode step's intensity over the weights alone (no KV cache)": lambda s: (lambda m, n, p="fp16": (
            s["arithmetic_intensities"](m, n, p)[0], (s["decode_flops"](m, n) / s["weight_bytes"](m, p)).to("FLOP/B")),
            s["binding_resource"]),
        "the precision not passed on to weight_bytes and decode_bytes": lambda s: (lambda m, n, p="fp16": (
            (s["prefill_flops"](m, n) / s["weight_bytes"](m)).to("FLOP/B"),
            (s["decode_flops"](m, n) / s["decode_bytes"](m, n)).to("FLOP/B")), s["binding_resource"]),
        "> where the rule says >= (the ridge point itself called memory)": lambda s: (
            s["arithmetic_intensities"], lambda i, d, p="fp16": "compute" if i > d.ridge_point(p) else "memory"),
    },
    "speedups": {
        "a ratio upside down": lambda s: (lambda m, old, new, n, p="fp16": tuple(
            1 / g for g in s["speedups"](m, old, new, n, p)), s["ttft_follows"], s["itl_follows"]),
        "the TTFT speed-up taken from the bandwidth": lambda s: (lambda m, old, new, n, p="fp16": (
            s["speedups"](m, old, new, n, p)[1],) * 2, s["ttft_follows"], s["itl_follows"]),
        "ttft_follows: memory bandwidth instead of peak FLOP/s": lambda s: (
            s["speedups"], "memory bandwidth", s["itl_follows"]),
        "the two words swapped": lambda s: (s["speedups"], s["itl_follows"], s["ttft_follows"]),
        "the precision not passed on (the times at fp16)": lambda s: (
            lambda m, old, new, n, p="fp16": s["speedups"](m, old, new, n), s["ttft_follows"], s["itl_follows"]),
        "quantities returned, not plain numbers": lambda s: (lambda m, old, new, n, p="fp16": tuple(
            t_old / t_new for t_old, t_new in zip(s["ttft_and_itl"](m, old, n, p), s["ttft_and_itl"](m, new, n, p))),
            s["ttft_follows"], s["itl_follows"]),
    },
    "sla_verdict": {
        "memory checked at the prompt length, not prompt plus answer": lambda s: (
            _sla(s, budget_len=lambda p, o: p),),
        "memory never checked": lambda s: (_sla(s, check_memory=False),),
        "the cache counted one token short (prompt_len + output_len - 1)": lambda s: (
            _sla(s, budget_len=lambda p, o: p + o - 1),),
        "judged at the ideal, not at typical efficiency": lambda s: (_sla(s, efficiency="ideal"),),
        "the efficiency asked for ignored (always typical)": lambda s: (_sla(s, efficiency="typical"),),
        "only the TTFT limit checked": lambda s: (_sla(s, check_itl=False),),
        "the limits compared as bare numbers (ms assumed)": lambda s: (_sla(s, bare=True),),
        "the precision not passed on to the memory check": lambda s: (_sla(s, memory_precision=False),),
        "the precision not passed on to rl.request": lambda s: (_sla(s, request_precision=False),),
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
        "a quantity returned, not a plain number": lambda s: (
            lambda ttft, itl, n: (n - 1) * itl / (ttft + (n - 1) * itl),),
    },

    # 05_under_load
    "step_time": {
        "milliseconds for seconds": lambda s: _with_step(s, lambda *a: Q_(s["step_time"](*a).m_as("ms"), "s")),
        "GB for GiB": lambda s: _with_step(s, _step05(s, gib=True)),
        "forgot K and V in the cache": lambda s: _with_step(s, _step05(s, kv=1)),
        "query heads for KV heads": lambda s: _with_step(s, _step05(s, heads="heads")),
        "values for bytes (no BYTES_PER_VALUE)": lambda s: _with_step(s, _step05(s, per_value=False)),
        "one FLOP per multiply-add": lambda s: _with_step(s, _step05(s, flops_per_mac=1)),
        "one sequence's cache for the batch's (per sequence for per batch)": lambda s: _with_step(
            s, _step05(s, cache_batch=False)),
        "the head read once per sequence": lambda s: _with_step(s, _step05(s, head_per_sequence=True)),
        "the weights read once per sequence": lambda s: _with_step(s, _step05(s, weights_per_sequence=True)),
        "the FLOPs of one sequence for the batch's": lambda s: _with_step(s, _step05(s, flops_batch=False)),
        "the head's FLOPs once per step": lambda s: _with_step(s, _step05(s, head_batch=False)),
        "tokens/s per request taken for per GPU": lambda s: (
            s["step_time"],
            lambda m, d, p, o, b, precision="fp16": (Q_(1, "token") / s["step_time"](
                m, d, s["mean_context"](p, o), b, precision)).to("token/s")),
        "the prompt length for the mean context": lambda s: (
            s["step_time"],
            lambda m, d, p, o, b, precision="fp16": (Q_(b, "token") / s["step_time"](m, d, p, b, precision)).to(
                "token/s")),
        "a bare number where a quantity is asked": lambda s: _with_step(s, lambda *a: s["step_time"](*a).m_as("s")),
        "total for active parameters (a mixture of experts)": lambda s: _with_step(
            s, _step05(s, active="non_embedding_params")),
    },
    "engine_state": {
        "prefills left out of the step": lambda s: (_engine(s, prefills=False),),
        "TTFT without the half step a new request waits": lambda s: (_engine(s, wait=0),),
        "a whole iteration of waiting in the TTFT, not half": lambda s: (_engine(s, wait=1),),
        "tokens/s per request taken for per GPU": lambda s: (_engine(s, per_user=True),),
        "ideal for typical efficiency": lambda s: (_engine(s, efficiency="ideal"),),
        "B tokens an iteration, not B + k (the prefills' first tokens left out)": lambda s: (
            _engine(s, first_tokens=False),),
        "O steps a slot, not O - 1 (off by one)": lambda s: (_engine(s, steps=lambda o: o),),
        "the precision left at its default": lambda s: (_engine(s, precision_used=False),),
        "the prompt length for the mean context": lambda s: (_engine(s, context=lambda p, o: p),),
        "milliseconds for seconds": lambda s: (_engine(s, ms_for_s=True),),
    },
    "frontier_curve": {
        "ideal for typical efficiency": lambda s: (
            _frontier(s, engine=_engine(s, efficiency="ideal")),
            _bend(s, lambda b, bent: int(b[bent[0]]) if bent.size else None, efficiency="ideal")),
        "tokens/s per request taken for per GPU": lambda s: (_frontier(s, per_user=True), s["bend_batch"]),
        "milliseconds for seconds": lambda s: (_frontier(s, engine=_engine(s, ms_for_s=True)), s["bend_batch"]),
        "the precision left at its default": lambda s: (_frontier(s, engine=_engine(s, precision_used=False)),
                                                        s["bend_batch"]),
        "the memory budget in fp16 whatever the precision": lambda s: (
            _frontier(s, most=_most05(s, precision_used=False)), s["bend_batch"]),
        "batch beyond memory": lambda s: (_frontier(s, most=_most05(s, cap=512)), s["bend_batch"]),
        "memory for the prompt only, not prompt plus answer": lambda s: (
            _frontier(s, most=_most05(s, tokens=lambda p, o: p)), s["bend_batch"]),
        "the batch's index for the batch (off by one)": lambda s: (
            s["frontier_curve"], _bend(s, lambda b, bent: int(bent[0]) if bent.size else None)),
        "the last memory-bound batch for the first compute-bound one": lambda s: (
            s["frontier_curve"], _bend(s, lambda b, bent: int(b[bent[0] - 1]) if bent.size else None)),
        "0 for a frontier that never bends": lambda s: (
            s["frontier_curve"], _bend(s, lambda b, bent: int(b[bent[0]]) if bent.size else 0)),
        "the last batch for a frontier that never bends": lambda s: (
            s["frontier_curve"], _bend(s, lambda b, bent: int(b[bent[0]]) if bent.size else int(b[-1]))),
    },
    "best_batch": {
        "batch beyond memory": lambda s: (_best05(s, most=_most05(s, cap=400)),),
        "memory for the prompt only, not prompt plus answer": lambda s: (
            _best05(s, most=_most05(s, tokens=lambda p, o: p)),),
        "ideal for typical efficiency": lambda s: (_best05(s, engine=_engine(s, efficiency="ideal")),),
        "the first batch over the target": lambda s: (_best05(s, pick="first miss"),),
        "the TTFT target left out": lambda s: (_best05(s, meets=lambda itl, ttft, i, t: itl <= i),),
        "the ITL target left out": lambda s: (_best05(s, meets=lambda itl, ttft, i, t: ttft <= t),),
        "the targets compared in the wrong unit": lambda s: (
            _best05(s, meets=lambda itl, ttft, i, t: itl.m_as("s") <= i.m_as("ms") and ttft.m_as("s") <= t.m_as("ms")),),
        "an error for a model that does not fit": lambda s: (_best05(s, raise_if_none_fit=True),),
        "None, not 0, where no batch fits or meets the targets": lambda s: (_best05(s, none_for_zero=True),),
        "None, not 0, where it fits but no batch meets the targets": lambda s: (
            lambda m, d, p, o, t, i, precision="fp16": (lambda n: None if n == 0 and rl.memory_budget(
                m, d, p + o, precision=precision).max_batch > 0 else n)(s["best_batch"](m, d, p, o, t, i, precision)),),
    },

    # 06_cost
    "cost_per_million": {
        "price per hour used as per second": lambda s: (
            lambda price, tps: (Q_(price.m_as("USD/h"), "USD/s") / tps).to("USD/Mtok"),),
        "an hourly price assumed, whatever its unit": lambda s: (
            lambda price, tps: Q_(price.magnitude / (3600 * tps.magnitude / 1e6), "USD/Mtok"),),
        "per thousand tokens for per million": lambda s: (
            lambda price, tps: Q_((price / tps).m_as("USD/token") * 1e3, "USD/Mtok"),),
        "a bare number where a quantity is asked": lambda s: (
            lambda price, tps: (price / tps).m_as("USD/Mtok"),),
    },
    "token_prices": {
        "the blended price for the generated tokens'": lambda s: (_prices(s, blended=True),),
        "price per hour used as per second": lambda s: (_prices(s, price_of=lambda p: Q_(p.m_as("USD/h"), "USD/s")),),
        "B + k tokens for the decode step's B": lambda s: (_prices(s, decode_tokens=lambda b, k: b + k),),
        "tokens/s per request taken for per GPU": lambda s: (_prices(s, decode_tokens=lambda b, k: 1),),
        "the two prices swapped": lambda s: (_prices(s, swapped=True),),
        "ideal for typical efficiency": lambda s: (_prices(s, efficiency="ideal"),),
        "the precision left at its default": lambda s: (_prices(s, precision_used=False),),
        "the prefill priced at the whole batch": lambda s: (_prices(s, prefill_at_batch=True),),
    },
    "cost_at_sla": {
        "tokens/s per request taken for per GPU": lambda s: (
            _cost_at_sla(s, throughput=lambda state: Q_(1, "token") / state[0]),),
        "price per hour used as per second": lambda s: (
            _cost_at_sla(s, price_of=lambda p: Q_(p.m_as("USD/h"), "USD/s")),),
        "ideal for typical efficiency": lambda s: (
            lambda m, d, p, o, t, i, price, precision="fp16": s["cost_per_million"](price, rl.best_under_sla(
                m, d, p, o, t, i, precision, efficiency="ideal").output_throughput),),
        "the TTFT target left out": lambda s: (_cost_at_sla(s, ttft=False),),
        "the precision left at its default": lambda s: (_cost_at_sla(s, precision_used=False),),
        "batch 1, not the best batch": lambda s: (_cost_at_sla(s, batch_one=True),),
    },
    # 06b_tensor_parallel
    "all_reduce_time": {
        "the link's two-way bandwidth for one way": lambda s: (
            lambda message, n, device: (2 * (n - 1) / n * message / device.interconnect_bandwidth).to("s"),),
        "only the summing half of the ring ((N - 1) / N)": lambda s: (
            lambda message, n, device: ((n - 1) / n * message / (device.interconnect_bandwidth / 2)).to("s"),),
        "the whole message sent each round": lambda s: (
            lambda message, n, device: (2 * (n - 1) * message / (device.interconnect_bandwidth / 2)).to("s"),),
        "2 M whatever N": lambda s: (
            lambda message, n, device: (2 * message / (device.interconnect_bandwidth / 2)).to("s"),),
        "2 (N - 1) / N left out": lambda s: (
            lambda message, n, device: (message / (device.interconnect_bandwidth / 2)).to("s") * int(n > 1),),
        "a group of one GPU charged for an all-reduce": lambda s: (
            lambda message, n, device: (max(2 * (n - 1) / n, 1) * message / (device.interconnect_bandwidth / 2)
                                        ).to("s"),),
        "milliseconds for seconds": lambda s: (
            lambda message, n, device: Q_(s["all_reduce_time"](message, n, device).m_as("ms"), "s"),),
        "a bare number where a quantity is asked": lambda s: (
            lambda message, n, device: s["all_reduce_time"](message, n, device).m_as("s"),),
    },
    "tp_step_time": {
        "TP speed-up assumed N-fold (communication ignored)": lambda s: (_tp(s, communication=False),),
        "GB for GiB": lambda s: (_tp(s, gib=True),),
        "the link's two-way bandwidth for one way": lambda s: (_tp(s, link_both_ways=True),),
        "one all-reduce per layer, not two": lambda s: (_tp(s, all_reduces_per_layer=1),),
        "the ring's 2 (N - 1) / N left out": lambda s: (_tp(s, ring=False),),
        "the weights not split over the GPUs": lambda s: (_tp(s, weights_split=False),),
        "the caches not split over the GPUs": lambda s: (_tp(s, caches_split=False),),
        "activations at the weights' bytes per value (they cross the link in 16-bit)": lambda s: (
            _tp(s, activation_bytes=lambda precision: PER_VALUE[precision]),),
        "total for active parameters (a mixture of experts)": lambda s: (_tp(s, active="non_embedding_params"),),
        "the head stored at 8 bits (8-bit checkpoints keep it in 16-bit)": lambda s: (
            _tp(s, head_bytes=lambda precision: PER_VALUE[precision], head_rate=lambda precision: precision),),
        "the head multiplied at the 8-bit rate": lambda s: (_tp(s, head_rate=lambda precision: precision),),
        "kv_heads / N, not whole heads": lambda s: (_tp(s, whole_heads=False),),
        "model.head_params for a tied head": lambda s: (_tp(s, head_from="head_params"),),
    },
}


# -- 03_quantization ---------------------------------------------------------------------------------------------

def _bits(rule):
    """bits_per_weight with the per-weight overhead ``rule(scale_bits, zero_bits, group_size)`` in place of the
    group's share."""
    return lambda s: lambda fmt, group_size=None, scale_bits=16, zero_bits=0: (
        s["BITS"][fmt] + (rule(scale_bits, zero_bits, group_size) if group_size else 0))


def _weight_bytes(s, bits=None, edges=None, unit=lambda b: Q_(b, "B")):
    """quantized_weight_bytes built on ``bits`` (default: the reference), the embedding table and head stored
    at ``edges(body_bits, quantize_embeddings)`` bits, the byte count wrapped by ``unit``."""
    bits = bits or s["bits_per_weight"]
    edges = edges or (lambda body, quantized: body if quantized else 16)

    def quantized_weight_bytes(model, fmt, group_size=None, zero_bits=0, quantize_embeddings=False):
        body = bits(fmt, group_size, zero_bits=zero_bits)
        total = model.non_embedding_params * body + model.embedding_and_head_params * edges(body, quantize_embeddings)
        return unit(total / 8)
    return quantized_weight_bytes


def _with_bits(rule):
    def answers(s):
        wrong = _bits(rule)(s)
        return s["quantize_int4"], wrong, _weight_bytes(s, bits=wrong)
    return answers


def _bytes_slip(s, quantized_weight_bytes):
    """Exercise 1's answers with the reference quantize_int4 and bits_per_weight and a slipped byte count."""
    return s["quantize_int4"], s["bits_per_weight"], quantized_weight_bytes


def _quantize(scale_of=None, row=False, rounding=np.round):
    """Exercise 1's answers with a quantize_int4 that takes each group's scale from ``scale_of(groups)``, one scale
    a row (``row``), or codes made by ``rounding`` in place of rounding to the nearest."""
    def answers(s):
        def quantize_int4(w, group_size):
            groups = w.astype(np.float32).reshape(-1, w.shape[1] if row else group_size)
            scale = (scale_of or (lambda g: np.abs(g).max(axis=1, keepdims=True) / 7))(groups).astype(np.float16)
            codes = np.clip(rounding(groups / scale.astype(np.float32)), -8, 7)
            return codes.reshape(-1, group_size), scale
        return quantize_int4, s["bits_per_weight"], s["quantized_weight_bytes"]
    return answers


def _step(s, weights=None, cache=1.0, flops_batch=True, caches_batch=True, memory_only=False, peak=None,
          seconds=True, added=False):
    """decode_step_time with one mistake: the weights' bytes from ``weights``, the cache scaled by ``cache``
    (a function of fmt and group_size), FLOPs or caches of one sequence, a memory-only step, another peak."""
    def decode_step_time(model, device, context_len, batch, fmt="fp16", group_size=None):
        flops = (batch if flops_batch else 1) * s["decode_flops"](model, context_len)
        scale = cache(fmt, group_size) if callable(cache) else cache
        caches = (batch if caches_batch else 1) * context_len * s["kv_bytes_per_token"](model) * scale
        nbytes = (weights or s["quantized_weight_bytes"])(model, fmt, group_size) + caches
        if memory_only:
            time = (nbytes / device.memory_bandwidth).to("s")
        elif added:
            time = (flops / device.peak_flops("fp16") + nbytes / device.memory_bandwidth).to("s")
        else:
            time, _ = s["roofline_time"](flops, nbytes, device, peak(fmt) if peak else "fp16")
        return time if seconds else Q_(time.m_as("ms"), "s")
    return decode_step_time


def _weights_ratio(s, model, fmt, group_size=None):
    """FP16 weights' bytes over ``fmt``'s: a speed-up from the weights alone."""
    return (s["quantized_weight_bytes"](model, "fp16") / s["quantized_weight_bytes"](model, fmt, group_size)).m_as("")


def _every_weight_quantized(s):
    """quantized_weight_bytes that stores the embedding table and head like the body, whatever it is told."""
    return lambda model, fmt, group_size=None: s["quantized_weight_bytes"](model, fmt, group_size,
                                                                          quantize_embeddings=True)


def _speedup_of(step):
    def decode_speedup(model, device, context_len, batch, fmt, group_size=None):
        fp16 = step(model, device, context_len, batch)
        return (fp16 / step(model, device, context_len, batch, fmt, group_size)).m_as("")
    return decode_speedup


def _decode(**mistake):
    def answers(s):
        step = _step(s, **mistake)
        return step, _speedup_of(step)
    return answers


def _ttft(weights=None, peak=None, inverted=False):
    def answers(s):
        def ttft_speedup(model, device, prompt_len, fmt, group_size=None):
            flops = s["prefill_flops"](model, prompt_len)
            fp16, _ = s["roofline_time"](flops, s["quantized_weight_bytes"](model, "fp16"), device)
            stored = (weights or s["quantized_weight_bytes"])(model, fmt, group_size)
            quantized, _ = s["roofline_time"](flops, stored, device, peak(fmt) if peak else "fp16")
            return (quantized / fp16 if inverted else fp16 / quantized).m_as("")
        return (ttft_speedup,)
    return answers


def _w8a8(peak=lambda compute: compute, weights=None):
    def answers(s):
        def w8a8_prefill_speedup(model, device, prompt_len, compute="fp8"):
            flops = s["prefill_flops"](model, prompt_len)
            fp16, _ = s["roofline_time"](flops, s["quantized_weight_bytes"](model, "fp16"), device, "fp16")
            stored = (weights or s["quantized_weight_bytes"])(model, compute)
            eight, _ = s["roofline_time"](flops, stored, device, peak(compute))
            return (fp16 / eight).m_as("")
        return (w8a8_prefill_speedup,)
    return answers


def _caught(w8a8_prefill_speedup):
    """The answer with device.peak_flops's error swallowed: no gain where the format is missing."""
    def caught(model, device, prompt_len, compute="fp8"):
        try:
            return w8a8_prefill_speedup(model, device, prompt_len, compute)
        except ValueError:
            return 1.0
    return caught


def _fits(capacity=lambda device: device.usable_memory, per_sequence=1.0, whole=int, clamp=True, utilization=None):
    """(largest_batch, extra_sequences) with one mistake in largest_batch."""
    def answers(s):
        def largest_batch(model, device, context_len, fmt, group_size, kv_precision, gpu_memory_utilization=0.9):
            u = gpu_memory_utilization if utilization is None else utilization
            room = u * capacity(device) - s["quantized_weight_bytes"](model, fmt, group_size)
            sequence = context_len * s["kv_bytes_per_token"](model, kv_precision) * per_sequence
            count = whole((room / sequence).m_as(""))
            return max(0, count) if clamp else count

        def extra_sequences(model, device, context_len, gpu_memory_utilization=0.9):
            return (largest_batch(model, device, context_len, "int4", 128, "fp8", gpu_memory_utilization)
                    - largest_batch(model, device, context_len, "fp16", None, "fp16", gpu_memory_utilization))
        return largest_batch, extra_sequences
    return answers


def _fp16_cache_extra(s):
    largest_batch = s["largest_batch"]

    def extra_sequences(model, device, context_len, gpu_memory_utilization=0.9):
        return (largest_batch(model, device, context_len, "int4", 128, "fp16", gpu_memory_utilization)
                - largest_batch(model, device, context_len, "fp16", None, "fp16", gpu_memory_utilization))
    return largest_batch, extra_sequences


def _cheapest(time=None, fits="steady", meets=lambda s, ttft, itl: s.meets(ttft, itl), pick=min,
              efficiency_used=lambda asked: asked, default="typical"):
    """cheapest_config with one mistake: how each configuration is timed, how its fit is checked, which limits
    are compared, which price is picked, which efficiency is used."""
    import rooflab as rl

    def cheapest_config(model, configs, prompt_len, output_len, batch, ttft_limit, itl_limit, efficiency=default):
        good = []
        for name, (device, precision, price) in configs.items():
            e = efficiency_used(efficiency)
            if fits == "prompt" and not rl.memory_budget(model, device, prompt_len, batch, precision=precision).fits:
                continue
            try:
                if time is not None:
                    s = time(rl, model, device, prompt_len, output_len, batch, precision, e)
                else:
                    s = rl.steady_state(model, device, prompt_len, output_len, batch, precision=precision,
                                        efficiency=e, allow_overflow=fits != "steady")
            except rl.DoesNotFit:
                continue
            if meets(s, ttft_limit, itl_limit):
                good.append((price, name))
        return pick(good)[1] if good else None
    return lambda s: (cheapest_config,)


def _at_batch_one(rl, model, device, prompt_len, output_len, batch, precision, efficiency):
    return rl.steady_state(model, device, prompt_len, output_len, 1, precision=precision, efficiency=efficiency)


def _old_request(rl, model, device, prompt_len, output_len, batch, precision, efficiency):
    """The batch-1 decision of the old exercise: one request alone, its memory checked at batch 1."""
    return rl.request(model, device, prompt_len, output_len, precision=precision, efficiency=efficiency)


def _request_batch(rl, model, device, prompt_len, output_len, batch, precision, efficiency):
    """rl.request with batch: all the prompts prefilled at once, then decoded together (no arrivals)."""
    return rl.request(model, device, prompt_len, output_len, precision=precision, batch=batch, efficiency=efficiency)


def _within(ttft=True, itl=True):
    return lambda s, ttft_limit, itl_limit: ((not ttft or s.ttft <= ttft_limit) and (not itl or s.itl <= itl_limit))


# Exercise 2 of 03 is the notebook's undictated derivation: every route listed gets the hint that names its term.
_MEMORY_OR_ONE = "a memory-only step (the FLOPs left out); or one sequence's FLOPs, not the batch's"
_CACHE_SLIP = ("the cache quantized with the weights (weight-only formats leave it FP16); or the caches left out of "
               "the step's bytes")
_TOTAL_OR_ROUNDED = ("the reported total (memory_capacity) for what a process can allocate (usable_memory); or "
                     "rounded, not rounded down (a sequence that does not fit whole does not fit)")
HINTS.update({
    "w8a8_prefill_speedup": {  # a round-9 novice's likeliest slip, which got "matches no slip"
        "the peak alone, the weights kept at 16 bits":
            "the peak alone (the weights kept at 16 bits: W8A8 ships them in 8, so a short prompt reads half)",
    },
    # On the visible case both slips give 58 for 57: both are named, in the tag too (round 9's novice got only
    # "rounded", round 13's only "the reported total")
    "extra_sequences": {
        "the reported total for the usable memory": _TOTAL_OR_ROUNDED,
        "rounded, not floored": _TOTAL_OR_ROUNDED,
    },
})
HINTS.update({
    "quantized_weight_bytes": {  # Exercise 1 (a), quantize_int4: each slip named by what its scales or codes show
        "scale from the group's largest weight, not its largest magnitude":
            "the group's largest weight, not its largest magnitude",
        "scale = largest magnitude / 8": "scale = largest magnitude / 8 (the code 8 does not exist)",
        "the scale inverted": "the scale inverted (a weight is code x scale)",
        "one scale per row": "one scale per row (group_size not used)",
        "codes truncated, not rounded": "codes truncated toward zero, not rounded to the nearest",
        "codes not rounded at all": "codes not rounded to integers",
    },
    "decode_speedup": {
        "the speed-up from the weights alone": "the weights' bytes alone (the FP16 caches and the FLOPs left out)",
        "the ratio of bits (16 / bits per weight)":
            "the ratio of bits (the 16-bit embedding table and head, and the caches, left out)",
        "the speed-up inverted": "a ratio upside down",
        "the embedding table and head quantized too":
            "the embedding table and head quantized too (as shipped they stay 16-bit)",
        "the cache quantized with the weights": _CACHE_SLIP,
        "the caches left out of the step": _CACHE_SLIP,
        "one sequence's cache, not the batch's": "one sequence's cache, not the batch's",
        "one sequence's FLOPs, not the batch's": _MEMORY_OR_ONE,
        "a memory-only step": _MEMORY_OR_ONE,
        "compute and memory times added": "compute and memory times added (the roofline takes the larger)",
        "group_size not passed on to quantized_weight_bytes": "group_size not passed on (the group's scales left out)",
        "INT8 weights multiplied at the INT8 rate":
            "the INT8 peak (weight-only formats still multiply in FP16); or " + _MEMORY_OR_ONE,
    },
})

MISTAKES.update({
    "quantized_weight_bytes": {
        "scale from the group's largest weight, not its largest magnitude": _quantize(
            lambda groups: groups.max(axis=1, keepdims=True) / 7),
        "scale = largest magnitude / 8": _quantize(lambda groups: np.abs(groups).max(axis=1, keepdims=True) / 8),
        "the scale inverted": _quantize(lambda groups: 7 / np.abs(groups).max(axis=1, keepdims=True)),
        "one scale per row": _quantize(row=True),
        "codes truncated, not rounded": _quantize(rounding=np.trunc),
        "codes not rounded at all": _quantize(rounding=lambda x: x),
        "bits for bytes": lambda s: _bytes_slip(s, _weight_bytes(s, unit=lambda b: Q_(b * 8, "B"))),
        "GB for GiB": lambda s: _bytes_slip(s, _weight_bytes(s, unit=lambda b: Q_(b / 2**30, "GB"))),
        "a bare number where a quantity is asked": lambda s: _bytes_slip(s, _weight_bytes(s, unit=float)),
        "forgot the group scales and zero points": _with_bits(lambda scale, zero, group: 0),
        "forgot the zero points": _with_bits(lambda scale, zero, group: scale / group),
        "a group's scale and zero point charged to every weight": _with_bits(lambda scale, zero, group: scale + zero),
        "scale_bits ignored (always 16)": _with_bits(lambda scale, zero, group: (16 + zero) / group),
        "quantized the embedding table and head as well": lambda s: _bytes_slip(
            s, _weight_bytes(s, edges=lambda body, quantized: body)),
        "the embedding table and head always in 16 bits": lambda s: _bytes_slip(
            s, _weight_bytes(s, edges=lambda body, quantized: 16)),
        "every weight counted as a body weight": lambda s: _bytes_slip(
            s, lambda model, fmt, group_size=None, zero_bits=0, quantize_embeddings=False: Q_(
                model.total_params * s["bits_per_weight"](fmt, group_size, zero_bits=zero_bits) / 8, "B")),
    },
    "decode_speedup": {
        "milliseconds for seconds": lambda s: (_step(s, seconds=False), s["decode_speedup"]),
        "the speed-up from the weights alone": lambda s: (
            s["decode_step_time"], lambda model, device, context_len, batch, fmt, group_size=None: _weights_ratio(
                s, model, fmt, group_size)),
        "the ratio of bits (16 / bits per weight)": lambda s: (
            s["decode_step_time"], lambda model, device, context_len, batch, fmt, group_size=None: 16 / s[
                "bits_per_weight"](fmt, group_size)),
        "the speed-up inverted": lambda s: (s["decode_step_time"], lambda *args: 1 / s["decode_speedup"](*args)),
        "the embedding table and head quantized too": lambda s: _decode(weights=_every_weight_quantized(s))(s),
        "the cache quantized with the weights": _decode(
            cache=lambda fmt, group_size: {"fp16": 16, "int8": 8, "int4": 4}[fmt] / 16),
        "one sequence's cache, not the batch's": _decode(caches_batch=False),
        "one sequence's FLOPs, not the batch's": _decode(flops_batch=False),
        "a memory-only step": _decode(memory_only=True),
        "the caches left out of the step": _decode(cache=0.0),
        "compute and memory times added": _decode(added=True),
        "group_size not passed on to quantized_weight_bytes": lambda s: _decode(
            weights=lambda model, fmt, group_size=None: s["quantized_weight_bytes"](model, fmt))(s),
        # the same code raises the device's own error for INT4 on the H100 (it has no INT4 tensor cores)
        "INT8 weights multiplied at the INT8 rate": _decode(peak=lambda fmt: "int8" if fmt == "int8" else "fp16"),
    },
    "ttft_speedup": {
        "a prefill timed by its bytes alone": lambda s: (
            lambda model, device, prompt_len, fmt, group_size=None: _weights_ratio(s, model, fmt, group_size),),
        "the math does not change, so 1x": lambda s: (lambda model, device, prompt_len, fmt, group_size=None: 1.0,),
        # the same code raises the device's own error for INT4 on the H100 (it has no INT4 tensor cores)
        "INT8 weights multiplied at the INT8 rate": _ttft(peak=lambda fmt: "int8" if fmt == "int8" else "fp16"),
        "the embedding table and head quantized too": lambda s: _ttft(weights=_every_weight_quantized(s))(s),
        "the speed-up inverted": _ttft(inverted=True),
    },
    "w8a8_prefill_speedup": {
        "the FP16 peak kept (weight-only)": _w8a8(peak=lambda compute: "fp16"),
        "the peak alone, the weights kept at 16 bits": lambda s: _w8a8(
            weights=lambda model, compute: s["quantized_weight_bytes"](model, "fp16"))(s),
        "the bytes alone": lambda s: (lambda model, device, prompt_len, compute="fp8": (
            s["quantized_weight_bytes"](model, "fp16") / s["quantized_weight_bytes"](model, compute)).m_as(""),),
        "twice the peak, so 2x": lambda s: (lambda model, device, prompt_len, compute="fp8": (
            device.peak_flops(compute) / device.peak_flops("fp16")).m_as(""),),
        "the embedding table and head in 8 bits too": lambda s: _w8a8(
            weights=lambda model, compute: s["quantized_weight_bytes"](model, compute, quantize_embeddings=True))(s),
        "the error caught and 1x returned on a device without the format": lambda s: (_caught(s["w8a8_prefill_speedup"]),),
    },
    "extra_sequences": {
        "forgot the FP8 cache": _fp16_cache_extra,
        "forgot the utilization": _fits(utilization=1.0),
        "a utilization fixed at 0.9": _fits(utilization=0.9),
        "half the cache per sequence (forgot K and V)": _fits(per_sequence=0.5),
        "rounded, not floored": _fits(whole=round),
        "no clamp at 0 when the weights do not fit": _fits(clamp=False),
        "the capacity read in GiB": _fits(capacity=lambda device: Q_(device.usable_memory.m_as("GiB"), "GB")),
        "the reported total for the usable memory": _fits(capacity=lambda device: device.memory_capacity),
    },
    "cheapest_config": {
        "decided at batch 1": _cheapest(time=_at_batch_one),
        "decided at batch 1, one request alone (rl.request)": _cheapest(time=_old_request, meets=_within()),
        "rl.request with the batch (all prompts prefilled at once)": _cheapest(time=_request_batch, meets=_within()),
        "typical efficiency whatever is asked": _cheapest(efficiency_used=lambda asked: "typical"),
        "the ideal by default": _cheapest(default="ideal"),
        "no memory check": _cheapest(fits="none", meets=_within()),
        "memory checked at the prompt's length": _cheapest(fits="prompt", meets=_within()),
        "the TTFT limit ignored": _cheapest(meets=_within(ttft=False)),
        "the ITL limit ignored": _cheapest(meets=_within(itl=False)),
        "the most expensive": _cheapest(pick=max),
        "the first that qualifies, in the order listed (not sorted by price)": _cheapest(pick=lambda good: good[0]),
        "the smallest name, not the smallest price": _cheapest(
            pick=lambda good: min((name, price) for price, name in good)[::-1]),
    },
})


# -- 02_kv_cache ------------------------------------------------------------------------------

def _fits02(s, room=None, batch_of=None, cache_format=True, floor=True, none_below_zero=True, per_batch=True):
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


def _step02(s, flops=None, nbytes=None, combine=max, peak_format=True):
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


def _rate02(s, step=None, batch_format=None):
    """A max_throughput whose step or whose batch is computed with the given slip."""
    def max_throughput(m, d, c, p="fp16", u=0.9):
        f = batch_format or p
        batch = s["max_batch"](m, d, c, f, f, u)
        return (batch / (step or s["decode_step_time"])(m, d, c, batch, p)).m_as("1/s") if batch else 0.0
    return max_throughput


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
        "GB for GiB": lambda s: _fits02(s, room=lambda m, d, w="fp16", u=1.0: Q_(
            u * d.usable_memory.m_as("GiB"), "GB") - s["weight_bytes"](m, w)),
        "the reported total for what a process can allocate": lambda s: _fits02(
            s, room=lambda m, d, w="fp16", u=1.0: u * d.memory_capacity - s["weight_bytes"](m, w)),
        "the label for the capacity": lambda s: _fits02(
            s, room=lambda m, d, w="fp16", u=1.0: u * Q_(80, "GB") - s["weight_bytes"](m, w)),
        "the reserve taken from what the weights leave": lambda s: _fits02(
            s, room=lambda m, d, w="fp16", u=1.0: u * (d.usable_memory - s["weight_bytes"](m, w))),
        "the weights left out": lambda s: _fits02(s, room=lambda m, d, w="fp16", u=1.0: u * d.usable_memory),
        "16-bit weights whatever the format": lambda s: _fits02(
            s, room=lambda m, d, w="fp16", u=1.0: u * d.usable_memory - s["weight_bytes"](m)),
        "the cache's format not passed on": lambda s: _fits02(s, cache_format=False),
        "rounded to the nearest, not down": lambda s: _fits02(s, floor=False),
        "a negative count when the weights do not fit": lambda s: _fits02(s, none_below_zero=False),
        "longest context per sequence, not per batch": lambda s: _fits02(s, per_batch=False),
    },
    "decode_step_time": {
        "milliseconds for seconds": lambda s: (
            lambda m, d, c, b=1, p="fp16": Q_(s["decode_step_time"](m, d, c, b, p).m_as("ms"), "s"),),
        "a memory-only step": lambda s: (_step02(s, combine=lambda compute, memory: memory),),
        "a compute-only step": lambda s: (_step02(s, combine=lambda compute, memory: compute),),
        "compute and memory times added": lambda s: (_step02(s, combine=lambda compute, memory: compute + memory),),
        "the FLOPs of one sequence": lambda s: (_step02(s, flops=lambda m, c, b, p: s["decode_flops"](m, c)),),
        "the weights read once per sequence": lambda s: (_step02(s, nbytes=lambda m, c, b, p: b * s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, c, b, p)),),
        "per sequence for per batch (one cache)": lambda s: (_step02(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, c, 1, p)),),
        "KV in values, not bytes": lambda s: (_step02(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, c, b, p) / s["BYTES_PER_VALUE"][p]),),
        "the 16-bit peak whatever the format": lambda s: (_step02(s, peak_format=False),),
        "16-bit bytes whatever the format": lambda s: (_step02(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m) + s["kv_cache_bytes"](m, c, b)),),
        "only the new token's cache": lambda s: (_step02(s, nbytes=lambda m, c, b, p: s["weight_bytes"](
            m, p) + s["kv_cache_bytes"](m, 1, b, p)),),
        "a prefill's FLOPs per sequence": lambda s: (_step02(s, flops=lambda m, c, b, p: b * s["prefill_flops"](
            m, c)),),
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
        "an embedding row for every context token": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s[
            "step_bytes"](m, c, b, p) + Q_(b * (c - 1) * m.d_model * s["BYTES_PER_VALUE"][p], "B")),
        "only the new token's cache": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s[
            "step_bytes"](m, c, b, p) - s["kv_cache_bytes"](m, c - 1, b, p)),
        "16-bit bytes whatever the format": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": s[
            "step_bytes"](m, c, b)),
        "the weights read once per sequence": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16": b * s[
            "weight_bytes"](m, p) + s["kv_cache_bytes"](m, c, b, p)),
        "the weights at 2 bytes, the cache in the format": lambda s: _profile(s, step_bytes=lambda m, c, b=1, p="fp16":
            s["step_bytes"](m, 0, b) + s["kv_cache_bytes"](m, c, b, p)),
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
        "a memory-only step": lambda s: (_gain(_step02(s, combine=lambda compute, memory: memory)),),
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
    "max_throughput": {
        "one sequence's tokens per second, not the batch's": lambda s: (lambda m, d, c, p="fp16", u=0.9: (
            1 / s["decode_step_time"](m, d, c, 1, p)).m_as("1/s") if s["max_batch"](m, d, c, p, p, u) else 0.0,),
        "the step time for a rate": lambda s: (lambda m, d, c, p="fp16", u=0.9: (
            s["decode_step_time"](m, d, c, max(1, s["max_batch"](m, d, c, p, p, u)), p)).m_as("s")
            if s["max_batch"](m, d, c, p, p, u) else 0.0,),
        "tokens per millisecond": lambda s: (lambda m, d, c, p="fp16", u=0.9: s["max_throughput"](m, d, c, p, u) / 1e3,),
        "a memory-only step": lambda s: (_rate02(s, step=_step02(s, combine=lambda compute, memory: memory)),),
        "16-bit weights and cache in the batch whatever the format": lambda s: (_rate02(s, batch_format="fp16"),),
        "the reserve written in (0.9)": lambda s: (
            lambda m, d, c, p="fp16", u=0.9: s["max_throughput"](m, d, c, p, 0.9),),
        "a rate as a quantity where a plain number is asked": lambda s: (lambda m, d, c, p="fp16", u=0.9: Q_(
            s["max_throughput"](m, d, c, p, u), "1/s"),),
    },
})


# -- 04_crossover ---------------------------------------------------------------------------------------------------

def _decode_parts(s, kv_values=2, per_batch=True, body="non_embedding", head_batch=True, memory_only=False,
                  per_value=None, peak=None, added=False, weights_per_sequence=False, body_batch=True,
                  weight_bytes=None, head_bytes=None):
    """decode_parts as a student with one of the listed slips writes it (the reference with every default)."""
    def parts(model, device, context_len, batch=1, precision="fp16"):
        def roofline(flops, nbytes):
            memory = (nbytes / device.memory_bandwidth).to("s")
            compute = (flops / device.peak_flops(peak or precision)).to("s")
            return memory if memory_only else compute + memory if added else max(compute, memory)

        per_value_ = per_value or s["BYTES_PER_VALUE"][precision]
        kv = Q_(kv_values * model.layers * model.kv_heads * model.head_dim * per_value_, "B")
        weights = {"non_embedding": model.non_embedding_params, "total": model.total_params,
                   "active": model.active_non_embedding_params}[body]
        sequences = batch if per_batch else 1
        head_tokens = batch if head_batch else 1
        reads = batch if weights_per_sequence else 1
        return {
            "body": roofline(Q_((batch if body_batch else 1) * 2 * model.active_non_embedding_params, "FLOP"),
                             Q_(reads * weights * (weight_bytes or per_value_), "B")),
            "attention": roofline(Q_(batch * 4 * model.layers * model.attention_width * context_len, "FLOP"),
                                  sequences * context_len * kv),
            "head": roofline(Q_(head_tokens * 2 * model.d_model * model.vocab, "FLOP"),
                             Q_(reads * model.d_model * model.vocab * (head_bytes or weight_bytes or per_value_), "B")),
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
        # the experts priced apart: their FLOPs against the experts' bytes (the body's less the shared weights)
        per_expert = model.layers * model.expert_params_per_layer()
        params = per_expert * (model.experts_per_token if flop_params == "active" else model.experts)
        shared = Q_(model.shared_non_embedding_params * (per_value or s["BYTES_PER_VALUE"][precision]), "B")
        for batch in range(1, 1 << 16):  # a slip can make the bytes outgrow the FLOPs: give up then
            if (Q_(batch * 2 * params, "FLOP") / device.peak_flops(precision)
                    >= (body_bytes(model, batch, precision) - shared) / device.memory_bandwidth):
                return batch
        return None

    return count, body_bytes, compute_bound_batch


def _moe_lumped(s):
    """moe_compute_bound_batch pricing the whole body as one operation: every active FLOP against every byte read."""
    def batch(model, device, precision="fp16"):
        b = 1
        while (Q_(b * 2 * model.active_non_embedding_params, "FLOP") / device.peak_flops(precision)
               < s["moe_body_bytes"](model, b, precision) / device.memory_bandwidth):
            b += 1
        return b

    return batch


def _attention_share(s, attention=2, params="active", logits=True):
    def share(model, prompt_len):
        n = s["np"].asarray(prompt_len, dtype=float)
        p = {"active": model.active_non_embedding_params, "non_embedding": model.non_embedding_params,
             "total": model.total_params}[params]
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


def _spec(s, at_batch_1=False, ideal=False, one_step=False, one_prefill=False, per_sequence=False, swapped=False,
          all_steps=False, fixed_context=False):
    """(prefill_share, spec_to_buy) with one slip, from rl.prefill and rl.decode_step as the exercise asks; the
    reference with every default."""
    rl = s["rl"]

    def share(model, device, prompt_len, output_len, batch, efficiency="typical"):
        efficiency = "ideal" if ideal else efficiency
        b = 1 if at_batch_1 else batch
        prefill = rl.prefill(model, device, prompt_len, 1 if one_prefill else b, efficiency=efficiency,
                             allow_overflow=True).time
        steps = output_len if all_steps else output_len - 1
        contexts = np.full(steps, prompt_len) if fixed_context else np.arange(prompt_len, prompt_len + steps)
        if one_step:
            contexts = np.array([prompt_len])
        decode = rl.decode_step(model, device, contexts, b, efficiency=efficiency, allow_overflow=True).time.sum()
        decode = decode / (batch if per_sequence else 1)
        value = (prefill / (prefill + decode)).m_as("")
        return 1 - value if swapped else value

    def spec(model, device, prompt_len, output_len, batch, efficiency="typical"):
        return "peak FLOP/s" if share(model, device, prompt_len, output_len, batch, efficiency) > 0.5 \
            else "memory bandwidth"

    return share, spec


# The hint each 04 mistake must get, where an exercise names it itself (beyond the checker's own names).
_FLOPS_OR_MEMORY = "a memory-only roofline (the FLOPs left out); or one sequence's FLOPs, not the batch's"
HINTS.update({
    "tp_step_time": {
        "the head stored at 8 bits (8-bit checkpoints keep it in 16-bit)":
            "the head stored at 8 bits (8-bit checkpoints keep it in 16-bit)",
        "the head multiplied at the 8-bit rate":
            "the head multiplied at the 8-bit rate (its weights stay 16-bit, so it multiplies at the 16-bit rate)",
        "activations at the weights' bytes per value (they cross the link in 16-bit)":
            "activations at the weights' bytes per value (they cross the link in 16-bit)",
    },
    "decode_step_time": {
        "only the new token's cache": "only the new token's cache",
        "a prefill's FLOPs per sequence": "a prefill's FLOPs per sequence",
    },
    "profile": {
        "an embedding row for every context token": "an embedding row for every context token",
        "only the new token's cache": "only the new token's cache",
        # The routes of a step_bytes derived without a recipe.
        "the whole embedding table": "the whole embedding table",
        "the output head left out": "the output head left out",
        "the weights read once per sequence": "the weights read once per sequence",
        "the weights at 2 bytes, the cache in the format": "the weights at 2 bytes whatever the format",
    },
    "compute_bound_batch": {
        "the FP16 peak with 8-bit weights": PRECISION_NOT_PASSED,
        "2 bytes a weight at any precision": PRECISION_NOT_PASSED,
        "the active parameters read, not every expert": "the active parameters read, not every expert",
        "the head's FLOPs left out": "the head's FLOPs left out of a token's count",
    },
    "decode_parts": {  # 04's undictated derivation: every route gets the hint that names its term
        "the active parameters read in the body (a mixture of experts)":
            "the active parameters read, not every expert (a batch this large reads them all)",
        "every weight in the body (the embedding table and head too)":
            "every weight read in the body (the embedding table and head belong to other operations)",
        "the head's FLOPs for one token, not the batch": _FLOPS_OR_MEMORY,
        "the body's FLOPs for one token, not the batch": _FLOPS_OR_MEMORY,
        "a memory-only roofline": _FLOPS_OR_MEMORY,
        "the FP16 peak at every precision": "the FP16 peak at 8 bits (pass the precision to device.peak_flops)",
        "only QK^T counted in attention (2 FLOPs a cached value, not 4)":
            "one of attention's two products (QK^T or AV) left out",
        "compute and memory times added": "compute and memory times added (the roofline takes the larger)",
        "the weights read once per sequence":
            "the weights read once per sequence (one read serves the whole batch)",
        "2 bytes a value at any precision (the precision not passed on)": PRECISION_NOT_PASSED,
        "the intensity at 2 bytes a value whatever the precision": PRECISION_NOT_PASSED,
        "query heads for KV heads": "query heads for KV heads",
        "forgot K or V in the cache": "forgot K or V in the cache",
        "the cache of one sequence, not the batch": "per sequence for per batch",
        "the head at 4 bytes a weight": crossover04.FP32_WEIGHTS,
        "every weight at 4 bytes": crossover04.FP32_WEIGHTS,
    },
    "moe_decode": {
        "projections and experts lumped into one body": "projections and experts lumped into one body",
        "FLOPs of every expert, not the active ones": "the experts priced like a dense matrix",
        "the compute-bound batch of the active weights alone": "the experts priced like a dense matrix",
        "the experts of one layer only": "the experts read term divided by layers",
        "2 bytes a value at any precision": PRECISION_NOT_PASSED,
        "min(E, k x B) (overlap ignored)":
            "min(E, k x B): as if no two tokens of the batch ever picked the same expert",
        "k x B experts (no overlap)": "k x B: every token's picks counted, the same expert more than once",
        "routing with replacement (1 - 1/E)^(k B)": "routing with replacement, (1 - 1/E)^(kB): a token's k experts are "
            "k different ones, so one token misses a given expert with chance 1 - k/E",
    },
    "spec_to_buy": {
        "decided at batch 1": "decided at batch 1, not at the batch served",
        "decided at the ideal": "at the ideal roofline, not the efficiency asked for",
        "TTFT against one decode step": "one decode step for the whole answer",
        "one prompt's prefill against the batch's decode":
            "one prompt's prefill against the batch's decode (the batch prefills every prompt)",
        "decode time per sequence (divided by the batch)":
            "the decode time per sequence (divided by the batch): the batch's answers share each step",
        "output_len decode steps, not output_len - 1":
            "output_len decode steps, not output_len - 1 (the prefill makes the first token)",
        "every step at the prompt's context": "every step at the prompt's context (each step's cache is a token longer)",
        "the two answers swapped": "the decode's share, not the prefill's",
    },
    "attention_share": {"every expert in P, not the active ones": TOTAL_FOR_ACTIVE,
                        "logits left out": "the last token's logits left out of the total"},
})

MISTAKES.update({
    "compute_bound_batch": {
        "GB for GiB": lambda s: (_scaled(s["compute_bound_batch"], 1e9 / 2**30),),
        # one token's FLOPs without the head's 2 d V: 7.5% off on Llama-3-8B, as near as the GiB ratio
        "the head's FLOPs left out": lambda s: (lambda m, d, p="fp16": (
            Q_(m.total_params * s["BYTES_PER_VALUE"][p], "B") / d.memory_bandwidth
            / ((s["decode_flops"](m, 0) - Q_(2 * m.d_model * m.vocab, "FLOP")) / d.peak_flops(p))).m_as(""),),
        "FLOPs without the 2 of a multiply-add": lambda s: (_scaled(s["compute_bound_batch"], 2),),
        "parameters for bytes (one byte a weight)": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) / s["BYTES_PER_VALUE"][p],),
        "the FP16 peak with 8-bit weights": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) * (d.peak_flops("fp16") / d.peak_flops(p)).m_as(""),),
        "2 bytes a weight at any precision": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) * 2 / s["BYTES_PER_VALUE"][p],),
        "the active parameters read, not every expert": lambda s: (
            lambda m, d, p="fp16": s["compute_bound_batch"](m, d, p) * m.active_params / m.total_params,),
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
        "the active parameters read in the body (a mixture of experts)": lambda s: (
            s["attention_intensity"], _decode_parts(s, body="active")),
        "the head's FLOPs for one token, not the batch": lambda s: (
            s["attention_intensity"], _decode_parts(s, head_batch=False)),
        "a memory-only roofline": lambda s: (s["attention_intensity"], _decode_parts(s, memory_only=True)),
        "2 bytes a value at any precision (the precision not passed on)": lambda s: (
            s["attention_intensity"], _decode_parts(s, per_value=2)),
        "the intensity at 2 bytes a value whatever the precision": lambda s: (
            lambda m, p="fp16": s["attention_intensity"](m, "fp16"), s["decode_parts"]),
        "the FP16 peak at every precision": lambda s: (s["attention_intensity"], _decode_parts(s, peak="fp16")),
        "milliseconds for seconds": lambda s: (s["attention_intensity"], lambda *a: {
            k: Q_(v.m_as("ms"), "s") for k, v in s["decode_parts"](*a).items()}),
        "a bare number where a quantity is asked": lambda s: (s["attention_intensity"], lambda *a: {
            k: v.m_as("s") for k, v in s["decode_parts"](*a).items()}),
        "only QK^T counted in attention (2 FLOPs a cached value, not 4)": lambda s: (
            _scaled(s["attention_intensity"], 0.5), s["decode_parts"]),
        "compute and memory times added": lambda s: (s["attention_intensity"], _decode_parts(s, added=True)),
        "the weights read once per sequence": lambda s: (
            s["attention_intensity"], _decode_parts(s, weights_per_sequence=True)),
        "the body's FLOPs for one token, not the batch": lambda s: (
            s["attention_intensity"], _decode_parts(s, body_batch=False)),
        "the head at 4 bytes a weight": lambda s: (s["attention_intensity"], _decode_parts(s, head_bytes=4)),
        "every weight at 4 bytes": lambda s: (s["attention_intensity"], _decode_parts(s, weight_bytes=4)),
    },
    "moe_decode": {
        "the last memory-bound batch, not the first compute-bound one": lambda s: (
            s["experts_read"], s["moe_body_bytes"], lambda m, d, p="fp16": s["moe_compute_bound_batch"](m, d, p) - 1),
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
        "projections and experts lumped into one body": lambda s: (
            s["experts_read"], s["moe_body_bytes"], _moe_lumped(s)),
    },
    "attention_share": {
        "attention counted in full, not causal": lambda s: (_attention_share(s, attention=4), s["attention_half_len"]),
        "logits left out": lambda s: (_attention_share(s, logits=False), s["attention_half_len"]),
        "the embedding table and head in P": lambda s: (
            _attention_share(s, params="total"),
            lambda m: m.total_params / (m.layers * m.attention_width)),
        "a percentage for a fraction": lambda s: (_scaled(s["attention_share"], 100), s["attention_half_len"]),
        "every expert in P, not the active ones": lambda s: (
            _attention_share(s, params="non_embedding"),
            lambda m: m.non_embedding_params / (m.layers * m.attention_width)),
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
    "spec_to_buy": {
        "decided at batch 1": lambda s: _spec(s, at_batch_1=True),
        "decided at the ideal": lambda s: _spec(s, ideal=True),
        "TTFT against one decode step": lambda s: _spec(s, one_step=True),
        "one prompt's prefill against the batch's decode": lambda s: _spec(s, one_prefill=True),
        "decode time per sequence (divided by the batch)": lambda s: _spec(s, per_sequence=True),
        "output_len decode steps, not output_len - 1": lambda s: _spec(s, all_steps=True),
        "every step at the prompt's context": lambda s: _spec(s, fixed_context=True),
        "short answers taken to mean FLOP/s": lambda s: (s["prefill_share"],
            lambda m, d, n, o, b, e="typical": "memory bandwidth" if o > n else "peak FLOP/s"),
        "the two answers swapped": lambda s: _spec(s, swapped=True),
        "a percentage for a share": lambda s: (_scaled(s["prefill_share"], 100), s["spec_to_buy"]),
    },
})


# -- 07_tail -----------------------------------------------------------------------------------------------------

def _wait(factor_of_rho, infinite=True):
    """mean_wait with one slip: the wait as rho x service x factor_of_rho(rho)."""
    def mean_wait(service_time, rate):
        rho = (rate * service_time).m_as("")
        if infinite and rho >= 1:
            return Q_(math.inf, "s")
        return (service_time * factor_of_rho(rho)).to("s")
    return mean_wait


def _stall(s, efficiency="typical", with_step=True, share=lambda b, o: min(1.0, b / (o - 1)), at_prompt=False):
    def stall(model, device, prompt_len, output_len, batch):
        context = prompt_len if at_prompt else s["mean_context"](prompt_len, output_len)
        step = rl.decode_step(model, device, context, batch, efficiency=efficiency)
        pre = rl.prefill(model, device, prompt_len, efficiency=efficiency)
        return (step.time + pre.time) if with_step else pre.time, share(batch, output_len)
    return stall


def _pool(tokens_of=lambda p, o: p + o - 1, whole_blocks=True, utilization=None, per_sequence=math.ceil):
    def sequences_in_pool(model, device, prompt_len, output_len, block_size=16, gpu_memory_utilization=0.9):
        u = gpu_memory_utilization if utilization is None else utilization
        tokens = rl.memory_budget(model, device, 1, gpu_memory_utilization=u).max_tokens
        if not whole_blocks:
            return int(tokens // tokens_of(prompt_len, output_len))
        return int(tokens // block_size // per_sequence(tokens_of(prompt_len, output_len) / block_size))
    return sequences_in_pool


def _saved(first_counts=False, whole=True):
    def prefix_tokens_saved(requests, share, prefix_len, block_size=16):
        carriers = round(requests * share)
        cached = prefix_len // block_size * block_size if whole else prefix_len
        return (carriers if first_counts else max(carriers - 1, 0)) * cached
    return prefix_tokens_saved


def _speedup(s, check=lambda step, model, b, k: step(model, b, k + 1), drafts=True, draft_steps=lambda k: k,
             draft_is_target=False):
    def spec_speedup(model, device, draft, context_len, batch, draft_len, acceptance):
        def step(m, b, w=1):
            return rl.decode_step(m, device, context_len, b, efficiency="ideal", allow_overflow=True,
                                  new_tokens=w).time
        proposer = model if draft_is_target else draft
        cost = check(step, model, batch, draft_len) + (
            draft_steps(draft_len) * step(proposer, batch) if drafts else 0 * step(draft, batch))
        return (s["tokens_per_step"](acceptance, draft_len) * step(model, batch) / cost).m_as("")
    return spec_speedup


def _highest(s, read):
    def highest_rate(model, device, prompt_len, output_len, p99_itl_limit, rates, prefill="separate",
                     token_budget=8192):
        e = s["engine"](model, device, prefill=prefill, token_budget=token_budget)
        best = 0.0
        for rate in rates.m_as("1/s"):  # rates: a quantity array of request rates
            run = s["simulate"](e, rate=Q_(rate, "1/s"), prompt_len=prompt_len, output_len=output_len,
                                requests=s["REQUESTS"], seed=0)
            if read(run) <= p99_itl_limit:
                best = max(best, float(rate))
        return Q_(best, "1/s")
    return highest_rate


MISTAKES.update({
    "mean_wait": {
        "exponential service (M/M/1) for fixed service": lambda s: (_wait(lambda r: r / (1 - r)),),
        "1 - rho forgotten": lambda s: (_wait(lambda r: r / 2),),
        "the residual not weighted by rho (a request is in service only a share rho of the time)": lambda s: (
            _wait(lambda r: 1 / (2 * (1 - r))),),
        "a finite wait past capacity": lambda s: (_wait(lambda r: r / (2 * abs(1 - r)), infinite=False),),
        "milliseconds for seconds": lambda s: (
            lambda t, r: Q_(s["mean_wait"](t, r).m_as("ms"), "s"),),
    },
    "stall": {
        "the prefill alone, without the step it stalls": lambda s: (_stall(s, with_step=False),),
        "ideal for typical efficiency": lambda s: (_stall(s, efficiency="ideal"),),
        "O for O - 1 in the share": lambda s: (_stall(s, share=lambda b, o: min(1.0, b / o)),),
        "the share not capped at 1": lambda s: (_stall(s, share=lambda b, o: b / (o - 1)),),
        "the Poisson share of steps with an arrival, 1 - e^-x": lambda s: (
            _stall(s, share=lambda b, o: 1 - math.exp(-b / (o - 1))),),
        "the step priced at the prompt length, not the mean context (mean_context)": lambda s: (
            _stall(s, at_prompt=True),),
    },
    "sequences_in_pool": {
        "tokens not rounded up to whole blocks": lambda s: (_pool(whole_blocks=False),),
        "a sequence's blocks rounded down": lambda s: (_pool(per_sequence=math.floor),),
        "all the memory (utilisation 1)": lambda s: (_pool(utilization=1.0),),
        "prompt + answer (the last token is never cached)": lambda s: (_pool(tokens_of=lambda p, o: p + o),),
        "the prompt alone": lambda s: (_pool(tokens_of=lambda p, o: p),),
    },
    "prefix_tokens_saved": {
        "the first request counted as a hit": lambda s: (_saved(first_counts=True),),
        "the prefix not rounded down to whole blocks": lambda s: (_saved(whole=False),),
    },
    "speculation": {
        "a^k for a^(k+1): the target's own token forgotten": lambda s: (
            lambda a, k: (1 - a ** k) / (1 - a), s["spec_speedup"]),
        "1 + k a: drafts after a rejection counted": lambda s: (lambda a, k: 1 + k * a, s["spec_speedup"]),
        "the target's own token left out": lambda s: (lambda a, k: (a - a ** (k + 1)) / (1 - a), s["spec_speedup"]),
        "every draft kept: k + 1": lambda s: (lambda a, k: k + 1.0, s["spec_speedup"]),
        "the series summed without end: 1 / (1 - a)": lambda s: (lambda a, k: 1 / (1 - a), s["spec_speedup"]),
        "the draft's steps left out": lambda s: (s["tokens_per_step"], _speedup(s, drafts=False)),
        "the check priced as a plain step": lambda s: (
            s["tokens_per_step"], _speedup(s, check=lambda step, model, b, k: step(model, b))),
        "the check priced as B(k + 1) sequences": lambda s: (
            s["tokens_per_step"], _speedup(s, check=lambda step, model, b, k: step(model, b * (k + 1)))),
        "the draft run once, not k times": lambda s: (s["tokens_per_step"], _speedup(s, draft_steps=lambda k: 1)),
        "the draft run k + 1 times": lambda s: (s["tokens_per_step"], _speedup(s, draft_steps=lambda k: k + 1)),
        "the draft priced as the target": lambda s: (s["tokens_per_step"], _speedup(s, draft_is_target=True)),
        "the speed-up upside down": lambda s: (
            s["tokens_per_step"], lambda *args: 1 / s["spec_speedup"](*args)),
    },
    "highest_rate": {
        "p50 for p99": lambda s: (_highest(s, lambda run: run.itl.p50),),
        "TPOT for ITL": lambda s: (_highest(s, lambda run: run.tpot.p99),),
        "the mean gap for p99": lambda s: (_highest(s, lambda run: run.itl.mean),),
    },
})


# The hints 07's checks must give (the derivation's likely slips, each named by its tag; the others listed above
# are named by the checker's own factors or by none).
HINTS.update({
    "mean_wait": {
        "exponential service (M/M/1) for fixed service": "exponential service (M/M/1) for fixed service",
        "1 - rho forgotten": "1 - rho forgotten",
        "the residual not weighted by rho (a request is in service only a share rho of the time)":
            "the residual not weighted by rho (a request is in service only a share rho of the time)",
    },
    "stall": {
        "the prefill alone, without the step it stalls": "the prefill alone, without the step it stalls",
        "the step priced at the prompt length, not the mean context (mean_context)":
            "the step priced at the prompt length, not the mean context (mean_context)",
        "the Poisson share of steps with an arrival, 1 - e^-x": tail07.POISSON,
        "O for O - 1 in the share":
            "O for O - 1: a request spends O - 1 steps in the batch (its first token comes from the prefill)",
        "the share not capped at 1":
            "the share not capped at 1: a step carries a prefill or not, so at most every step is stalled",
    },
    # The undictated derivation: every likely route off the formula gets its own name.
    "speculation": {
        "a^k for a^(k+1): the target's own token forgotten": tail07.SERIES_SHORT,
        "1 + k a: drafts after a rejection counted":
            "1 + k a: a draft counted after a rejected one (the j-th counts only if all before it were right)",
        "the target's own token left out": tail07.OWN_TOKEN,
        "every draft kept: k + 1": tail07.ALL_OR_ENDLESS,  # the visible a = 0.8, k = 4 gives 5 either way
        "the series summed without end: 1 / (1 - a)": tail07.ALL_OR_ENDLESS,
        "the draft's steps left out": "the draft's steps left out",
        "the check priced as a plain step": tail07.CHECK_AS_PLAIN,
        "the check priced as B(k + 1) sequences": tail07.CHECK_AS_SEQUENCES,
        "the draft run once, not k times": "the draft run once; it proposes its k tokens one step each",
        "the draft run k + 1 times": tail07.DRAFT_EXTRA_STEP,
        "the draft priced as the target": "the draft's steps priced with the target model",
        "the speed-up upside down": "a ratio upside down",
    },
    "sequences_in_pool": {
        "tokens not rounded up to whole blocks": "tokens not rounded up to whole blocks",
        "a sequence's blocks rounded down": "tokens not rounded up to whole blocks",
        "prompt + answer (the last token is never cached)": "off by one (the last answer token kept in the cache)",
    },
})


# -- 08_measure ----------------------------------------------------------------------------------------------

def _parts07(m, d, parts, combine="sum", peak="fp32"):
    """The time of (FLOPs, bytes) operations on a device: summed maxima, or one max over the totals."""
    compute_rate, bandwidth = d.peak_flops(peak), d.memory_bandwidth
    if combine == "one":
        flops, nbytes = sum(f for f, _ in parts), sum(b for _, b in parts)
        return max((Q_(flops, "FLOP") / compute_rate).to("s"), (Q_(nbytes, "B") / bandwidth).to("s"))
    return sum(max((Q_(f, "FLOP") / compute_rate).to("s"), (Q_(b, "B") / bandwidth).to("s")) for f, b in parts)


def _ttft07(per_value=4, attention=1.0, head=True, head_every_token=False, combine="sum", weights="body",
            peak="fp32"):
    """ttft_roofline with one slip."""
    def ttft_roofline(m, d, n):
        read = m.non_embedding_params if weights == "body" else m.total_params
        kv = 2 * m.layers * m.kv_heads * m.head_dim
        parts = [(2 * m.active_non_embedding_params * n, per_value * (read + n * m.d_model)),
                 (attention * 2 * m.layers * m.attention_width * n * n, per_value * n * kv)]
        if head:
            parts.append((2 * m.d_model * m.vocab * (n if head_every_token else 1), per_value * m.vocab * m.d_model))
        return _parts07(m, d, parts, combine, peak)
    return ttft_roofline


def _step07(per_value=4, weights_per_sequence=False, flops_batch=True, caches_batch=True, head_per_sequence=False,
            peak="fp32"):
    """step_roofline with one slip."""
    def step_roofline(m, d, c, b):
        kv = 2 * m.layers * m.kv_heads * m.head_dim
        tokens = b if flops_batch else 1
        parts = [(tokens * 2 * m.active_non_embedding_params,
                  per_value * (m.non_embedding_params * (b if weights_per_sequence else 1) + b * m.d_model)),
                 (tokens * 4 * m.layers * m.attention_width * c, per_value * (b if caches_batch else 1) * (c + 1) * kv),
                 (tokens * 2 * m.d_model * m.vocab, per_value * m.vocab * m.d_model * (b if head_per_sequence else 1))]
        return _parts07(m, d, parts, peak=peak)
    return step_roofline


def _mfu07(body_only=False, ms_as_s=False):
    def mfu(m, d, n, ttft):
        flops = 2 * m.active_non_embedding_params * n
        if not body_only:
            flops += 2 * m.layers * m.attention_width * n * n + 2 * m.d_model * m.vocab
        seconds = Q_(ttft.magnitude, "s") if ms_as_s else ttft
        return (Q_(flops, "FLOP") / seconds / d.peak_flops("fp32")).m_as("")
    return mfu


def _mbu07(caches=True, weights_per_sequence=False):
    def mbu(m, d, c, b, tpot):
        kv = 2 * m.layers * m.kv_heads * m.head_dim
        nbytes = (4 * (m.non_embedding_params * (b if weights_per_sequence else 1) + b * m.d_model)
                  + (4 * b * (c + 1) * kv if caches else 0) + 4 * m.vocab * m.d_model)
        return (Q_(nbytes, "B") / tpot / d.memory_bandwidth).m_as("")
    return mbu


def _profiles07(s, ttft=None, tpot=None):
    return (s["PROMPT_LENS"], s["ttft"] if ttft is None else ttft(s), s["BATCHES"],
            s["tpot"] if tpot is None else tpot(s), s["peak"], s["bandwidth"])


def _own07(s, prefill_mfu=None, decode_mbu=None):
    return (s["PROMPT_LENS"], s["ttft"], s["prefill_mfu"] if prefill_mfu is None else prefill_mfu(s), s["BATCHES"],
            s["tpot"], s["decode_mbu"] if decode_mbu is None else decode_mbu(s), s["peak"], s["bandwidth"])


def _crossover07(per_value=4, rows=True, rounding=math.ceil, never=True, context=True):
    def compute_bound_len(m, d):
        ridge = (d.peak_flops("fp32") / d.memory_bandwidth).m_as("FLOP/B")
        p, w = m.active_non_embedding_params, m.non_embedding_params
        row = per_value * m.d_model * ridge if rows else 0
        if never and 2 * p - row <= 0:
            return math.inf
        n = int(rounding(per_value * w * ridge / (2 * p - row)))
        return math.inf if context and n > m.max_context else n
    return compute_bound_len


MISTAKES.update({
    "ttft_roofline": {
        "one max over the whole pass, not a sum over its operations": lambda s: (_ttft07(combine="one"),),
        "2 bytes a value (fp16), not 4": lambda s: (_ttft07(per_value=2),),
        "the head left out": lambda s: (_ttft07(head=False),),
        "logits for every prompt token": lambda s: (_ttft07(head_every_token=True),),
        "attention left out": lambda s: (_ttft07(attention=0),),
        "attention counted in full, not causal": lambda s: (_ttft07(attention=2),),
        "attention's scores counted, its weighted values left out": lambda s: (_ttft07(attention=0.5),),
        "the embedding table and head read with the body": lambda s: (_ttft07(weights="all"),),
        "the fp16 peak": lambda s: (_ttft07(peak="fp16"),),
        "a bare number where a quantity is asked": lambda s: (lambda m, d, n: s["ttft_roofline"](m, d, n).m_as("s"),),
    },
    "step_roofline": {
        "weights read once per sequence": lambda s: (_step07(weights_per_sequence=True),),
        "FLOPs of one sequence for the batch": lambda s: (_step07(flops_batch=False),),
        "one sequence's cache for the batch's": lambda s: (_step07(caches_batch=False),),
        "2 bytes a value (fp16), not 4": lambda s: (_step07(per_value=2),),
        "the head read once per sequence": lambda s: (_step07(head_per_sequence=True),),
        "the fp16 peak": lambda s: (_step07(peak="fp16"),),
    },
    "profiles": {
        "seconds written as milliseconds": lambda s: _profiles07(s, ttft=lambda s: Q_(s["ttft"].m_as("s"), "ms")),
        "time per prompt token for the TTFT": lambda s: _profiles07(
            s, ttft=lambda s: s["ttft"] / np.array(s["PROMPT_LENS"])),
        "a bare number where a quantity is asked": lambda s: _profiles07(s, ttft=lambda s: s["ttft"].m_as("s")),
        "the step's time divided by the batch": lambda s: _profiles07(
            s, tpot=lambda s: s["tpot"] / np.array(s["BATCHES"])),
        # plausible times typed in from a machine 50x slower: every law holds, only the re-timing disagrees.  The
        # check allows 8x slower than its own timing (exercises.measure.LOADED); a typed-in time passes only if load
        # slows every one of the checker's re-timings 6x or more, which a test run beside this one does not.
        "prefill times typed in from another machine": lambda s: _profiles07(s, ttft=lambda s: s["ttft"] * 50),
        "decode times typed in from another machine": lambda s: _profiles07(s, tpot=lambda s: s["tpot"] * 50),
    },
    "utilisation": {
        "a percentage for a fraction": lambda s: (_scaled(s["mfu"], 100), s["mbu"]),
        "milliseconds for seconds": lambda s: (_mfu07(ms_as_s=True), s["mbu"]),
        "FLOPs of the body alone": lambda s: (_mfu07(body_only=True), s["mbu"]),
        "the caches left out": lambda s: (s["mfu"], _mbu07(caches=False)),
        "weights read once per sequence": lambda s: (s["mfu"], _mbu07(weights_per_sequence=True)),
    },
    "own_utilisation": {
        "a percentage for a fraction": lambda s: _own07(s, prefill_mfu=lambda s: s["prefill_mfu"] * 100),
        "MBU for the prefill": lambda s: _own07(s, prefill_mfu=lambda s: np.array(
            [s["mbu"](s["TINY"], s["machine"], n, 1, t) for n, t in zip(s["PROMPT_LENS"], s["ttft"])])),
        "the first profile's MBU for every batch": lambda s: _own07(
            s, decode_mbu=lambda s: np.full(len(s["BATCHES"]), s["decode_mbu"][0])),
    },
    "compute_bound_len": {
        "the embedding rows left out": lambda s: (_crossover07(rows=False),),
        "2 bytes a value (fp16), not 4": lambda s: (_crossover07(per_value=2),),
        "rounded down": lambda s: (_crossover07(rounding=math.floor),),
        "a negative length where it never turns compute-bound": lambda s: (_crossover07(never=False),),
        "the model's context not checked": lambda s: (_crossover07(context=False),),
        "the ridge point taken for the length": lambda s: (
            lambda m, d: math.ceil((d.peak_flops("fp32") / d.memory_bandwidth).m_as("FLOP/B")),),
    },
})


# 08: the derivations are undictated, so each route through the count is named by the check (also_wrong=); where
# the first case that fails cannot tell two routes apart, both are named.
HINTS.update({
    "ttft_roofline": {m: m for m in (
        "2 bytes a value (fp16), not 4", "the head left out", "logits for every prompt token", "attention left out",
        "attention counted in full, not causal", "attention's scores counted, its weighted values left out",
        "the embedding table and head read with the body")} | {
        "one max over the whole pass, not a sum over its operations":
            "one max over the whole pass, not a sum over its operations; or the head left out"},
    "step_roofline": {m: m for m in (
        "weights read once per sequence", "FLOPs of one sequence for the batch", "one sequence's cache for the batch's",
        "2 bytes a value (fp16), not 4", "the head read once per sequence")},
    "utilisation": {m: m for m in ("FLOPs of the body alone", "the caches left out", "weights read once per sequence")},
    "compute_bound_len": {m: m for m in ("2 bytes a value (fp16), not 4", "the ridge point taken for the length")} | {
        "a negative length where it never turns compute-bound": "never compute-bound: inf",
        "the model's context not checked": "never compute-bound: inf"},
})
