"""The course's mistakes, written as a student would make them, for every exercise.

``MISTAKES[exercise][mistake]`` takes the namespace of the reference solutions
(the source notebook's answers run) and returns the wrong answers a student
with that mistake hands in, in the order the test cell passes them.
``tests/test_exercises.py`` proves each fails at least one visible case, so a
student sees the mistake before the hidden tests do.  Keys that name one of
the checker's mistakes ("forgot 2 FLOPs per multiply-add") must also be named
in the failure message.
"""

import numpy as np

import rooflab as rl
from rooflab import Q_


def _scaled(function, factor):
    return lambda *args, **kwargs: function(*args, **kwargs) * factor


# -- 05_under_load ---------------------------------------------------------------------------------------------

def _step(s, kv=2, heads="kv_heads", per_value=True, flops_per_mac=2, cache_batch=True, head_per_sequence=False,
          gib=False):
    """05's step_time with one slip switched on: the K-and-V factor, the heads the cache is counted for, bytes per
    value, FLOPs per multiply-add, the caches of the batch or of one sequence, the head read per sequence, GiB."""
    def step_time(model, device, context_len, batch, precision="fp16"):
        size = s["BYTES_PER_VALUE"][precision] if per_value else 1
        nbytes = (lambda n: Q_(n / 2**30, "GB")) if gib else (lambda n: Q_(n, "B"))
        per_token = kv * model.layers * getattr(model, heads) * model.head_dim * size
        body, _ = s["roofline_time"](Q_(batch * flops_per_mac * model.active_non_embedding_params, "FLOP"),
                                     nbytes((model.non_embedding_params + batch * model.d_model) * size), device,
                                     precision)
        sequences = batch if cache_batch else 1
        attention, _ = s["roofline_time"](
            Q_(batch * 2 * flops_per_mac * model.layers * model.attention_width * context_len, "FLOP"),
            nbytes(sequences * (context_len + 1) * per_token), device, precision)
        head, _ = s["roofline_time"](Q_(batch * flops_per_mac * model.d_model * model.vocab, "FLOP"),
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


def _frontier(s, efficiency="typical", per_user=False, precision_used=True, beyond_memory=False, ms_for_s=False):
    def frontier_curve(model, device, prompt_len, output_len, precision="fp16"):
        options = dict(precision=precision if precision_used else "fp16", efficiency=efficiency)
        if beyond_memory:
            options.update(batch=np.arange(1, 513), allow_overflow=True)
        f = rl.frontier(model, device, prompt_len, output_len, **options)
        itl = Q_(f.itl.m_as("s"), "ms") if ms_for_s else f.itl
        return itl, (f.per_request_throughput if per_user else f.output_throughput)
    return frontier_curve


def _bend(pick, efficiency="typical"):
    def bend_batch(model, device, prompt_len, output_len, precision="fp16"):
        f = rl.frontier(model, device, prompt_len, output_len, precision=precision, efficiency=efficiency)
        return pick(f, np.flatnonzero(f.bound == "compute"))
    return bend_batch


def _largest(pick, efficiency="typical", beyond_memory=False, catch=True):
    def largest_batch(model, device, prompt_len, output_len, itl_limit, precision="fp16"):
        options = dict(precision=precision, efficiency=efficiency)
        if beyond_memory:
            options.update(batch=np.arange(1, 1025), allow_overflow=True)
        try:
            f = rl.frontier(model, device, prompt_len, output_len, **options)
        except rl.DoesNotFit:
            if not catch:
                raise
            return 0
        return pick(f, itl_limit)
    return largest_batch


def _cost_at_sla(s, throughput=lambda best: best.output_throughput, price_of=lambda p: p, ttft=True,
                 precision_used=True, **options):
    def cost_at_sla(model, device, prompt_len, output_len, ttft_limit, itl_limit, price, precision="fp16"):
        best = rl.best_under_sla(model, device, prompt_len, output_len, ttft_limit if ttft else None, itl_limit,
                                 precision if precision_used else "fp16", **options)
        return s["cost_per_million"](price_of(price), throughput(best))
    return cost_at_sla


def _joules(energy, efficiency="typical", precision_used=True):
    def joules_per_token(model, device, prompt_len, output_len, batches, precision="fp16"):
        steady = rl.steady_state(model, device, prompt_len, output_len, batches,
                                 precision if precision_used else "fp16", efficiency=efficiency)
        return energy(device, steady, batches)
    return joules_per_token


def _tp(s, gib=False, communication=True, link_both_ways=False, all_reduces_per_layer=2, ring=True,
        weights_split=True):
    def tp_step_time(model, device, context_len, batch, tp, precision="fp16"):
        size = s["BYTES_PER_VALUE"][precision]
        per_token = 2 * model.layers * model.kv_heads * model.head_dim * size
        weights = (model.non_embedding_params + batch * model.d_model) * size / (tp if weights_split else 1)
        body, _ = s["roofline_time"](Q_(batch * 2 * model.active_non_embedding_params / tp, "FLOP"),
                                     Q_(weights / 2**30, "GB") if gib else Q_(weights, "B"), device, precision)
        attention, _ = s["roofline_time"](
            Q_(batch * 4 * model.layers * model.attention_width * context_len / tp, "FLOP"),
            Q_(batch * (context_len + 1) * per_token / tp, "B"), device, precision)
        head, _ = s["roofline_time"](Q_(batch * 2 * model.d_model * model.vocab / tp, "FLOP"),
                                     Q_(model.vocab * model.d_model * size / tp, "B"), device, precision)
        compute = body + attention + head
        if not communication:
            return compute
        link = device.interconnect_bandwidth if link_both_ways else device.interconnect_bandwidth / 2
        share = 2 * (tp - 1) / tp if ring else 1
        allreduce = (share * Q_(batch * model.d_model * 2, "B") / link).to("s")
        return compute + all_reduces_per_layer * model.layers * allreduce
    return tp_step_time


def _per_gpu(pick=lambda tp2, one: (tp2, one), value=lambda best: best.output_throughput, catch=True,
             at_batch_one=False, **options):
    def per_gpu_throughputs(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16"):
        found = []
        for tp in (2, 1):
            try:
                if at_batch_one:
                    best = rl.steady_state(model, device, prompt_len, output_len, 1, precision, tp=tp)
                else:
                    best = rl.best_under_sla(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision,
                                             tp=tp, **options)
                found.append(value(best))
            except (rl.DoesNotFit, rl.SLAUnmet):
                if not catch:
                    raise
                found.append(Q_(0, "token/s"))
        return pick(*found)
    return per_gpu_throughputs



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

    # 05_under_load
    "step_time": {
        "milliseconds for seconds": lambda s: _with_step(s, lambda *a: Q_(s["step_time"](*a).m_as("ms"), "s")),
        "GB for GiB": lambda s: _with_step(s, _step(s, gib=True)),
        "forgot K and V in the cache": lambda s: _with_step(s, _step(s, kv=1)),
        "query heads for KV heads": lambda s: _with_step(s, _step(s, heads="heads")),
        "values for bytes (no BYTES_PER_VALUE)": lambda s: _with_step(s, _step(s, per_value=False)),
        "one FLOP per multiply-add": lambda s: _with_step(s, _step(s, flops_per_mac=1)),
        "one sequence's cache for the batch's (per sequence for per batch)": lambda s: _with_step(
            s, _step(s, cache_batch=False)),
        "the head read once per sequence": lambda s: _with_step(s, _step(s, head_per_sequence=True)),
        "tokens/s per request taken for per GPU": lambda s: (
            s["step_time"],
            lambda m, d, p, o, b, precision="fp16": (Q_(1, "token") / s["step_time"](
                m, d, s["mean_context"](p, o), b, precision)).to("token/s")),
        "the prompt length for the mean context": lambda s: (
            s["step_time"],
            lambda m, d, p, o, b, precision="fp16": (Q_(b, "token") / s["step_time"](m, d, p, b, precision)).to(
                "token/s")),
        "a bare number where a quantity is asked": lambda s: _with_step(s, lambda *a: s["step_time"](*a).m_as("s")),
    },
    "frontier_curve": {
        "ideal for typical efficiency": lambda s: (
            _frontier(s, efficiency="ideal"),
            _bend(lambda f, bent: int(f.batch[bent[0]]) if bent.size else None, efficiency="ideal")),
        "tokens/s per request taken for per GPU": lambda s: (_frontier(s, per_user=True), s["bend_batch"]),
        "milliseconds for seconds": lambda s: (_frontier(s, ms_for_s=True), s["bend_batch"]),
        "the precision left at its default": lambda s: (_frontier(s, precision_used=False), s["bend_batch"]),
        "batch beyond memory": lambda s: (_frontier(s, beyond_memory=True), s["bend_batch"]),
        "the batch's index for the batch (off by one)": lambda s: (
            s["frontier_curve"], _bend(lambda f, bent: int(bent[0]) if bent.size else None)),
        "the last memory-bound batch for the first compute-bound one": lambda s: (
            s["frontier_curve"], _bend(lambda f, bent: int(f.batch[bent[0] - 1]) if bent.size else None)),
        "0 for a frontier that never bends": lambda s: (
            s["frontier_curve"], _bend(lambda f, bent: int(f.batch[bent[0]]) if bent.size else 0)),
        "the last batch for a frontier that never bends": lambda s: (
            s["frontier_curve"], _bend(lambda f, bent: int(f.batch[bent[0]]) if bent.size else int(f.batch[-1]))),
    },
    "largest_batch": {
        "batch beyond memory": lambda s: (_largest(lambda f, limit: int(f.batch[f.itl <= limit][-1]),
                                                   beyond_memory=True),),
        "ideal for typical efficiency": lambda s: (_largest(lambda f, limit: int(f.batch[f.itl <= limit][-1]),
                                                            efficiency="ideal"),),
        "the first batch over the target": lambda s: (
            _largest(lambda f, limit: int(f.batch[f.itl > limit][0]) if np.any(f.itl > limit) else f.max_batch),),
        "the target compared in the wrong unit": lambda s: (
            _largest(lambda f, limit: int(f.batch[f.itl.m_as("s") <= limit.m_as("ms")][-1])),),
        "an error for a model that does not fit": lambda s: (
            _largest(lambda f, limit: int(f.batch[f.itl <= limit][-1]), catch=False),),
        "None, not 0, for a model that does not fit": lambda s: (
            lambda *a: (lambda n: None if n == 0 else n)(s["largest_batch"](*a)),),
    },
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
    "cost_at_sla": {
        "tokens/s per request taken for per GPU": lambda s: (
            _cost_at_sla(s, throughput=lambda best: best.per_request_throughput),),
        "price per hour used as per second": lambda s: (
            _cost_at_sla(s, price_of=lambda p: Q_(p.m_as("USD/h"), "USD/s")),),
        "ideal for typical efficiency": lambda s: (_cost_at_sla(s, efficiency="ideal"),),
        "the TTFT target left out": lambda s: (_cost_at_sla(s, ttft=False),),
        "the precision left at its default": lambda s: (_cost_at_sla(s, precision_used=False),),
        "batch 1, not the best batch": lambda s: (
            lambda m, d, p, o, t, i, price, precision="fp16": s["cost_per_million"](
                price, rl.steady_state(m, d, p, o, 1, precision).output_throughput),),
    },
    "joules_per_token": {
        "tokens/s per request taken for per GPU": lambda s: (
            _joules(lambda device, st, b: (device.power / st.per_request_throughput).to("J/token")),),
        "prefill left out of the steady state": lambda s: (
            _joules(lambda device, st, b: (device.power * Q_(st.decode.time_si, "s") / Q_(b, "token")).to(
                "J/token")),),
        "ideal for typical efficiency": lambda s: (
            _joules(lambda device, st, b: (device.power / st.output_throughput).to("J/token"), efficiency="ideal"),),
        "the precision left at its default": lambda s: (
            _joules(lambda device, st, b: (device.power / st.output_throughput).to("J/token"), precision_used=False),),
        "energy per step for per token": lambda s: (
            _joules(lambda device, st, b: (device.power * st.itl).to("J")),),
    },
    "tp_step_time": {
        "TP speed-up assumed N-fold (communication ignored)": lambda s: (_tp(s, communication=False),),
        "GB for GiB": lambda s: (_tp(s, gib=True),),
        "the link's two-way bandwidth for one way": lambda s: (_tp(s, link_both_ways=True),),
        "one all-reduce per layer, not two": lambda s: (_tp(s, all_reduces_per_layer=1),),
        "the ring's 2 (N - 1) / N left out": lambda s: (_tp(s, ring=False),),
        "the weights not split over the GPUs": lambda s: (_tp(s, weights_split=False),),
    },
    "per_gpu_throughputs": {
        "the pair's tokens/s for one GPU's": lambda s: (_per_gpu(value=lambda best: best.group_throughput),),
        "the two answers swapped": lambda s: (_per_gpu(pick=lambda tp2, one: (one, tp2)),),
        "an error for a copy that does not fit": lambda s: (_per_gpu(catch=False),),
        "ideal for typical efficiency": lambda s: (_per_gpu(efficiency="ideal"),),
        "batch 1, not the best batch": lambda s: (_per_gpu(at_batch_one=True),),
    },
}
