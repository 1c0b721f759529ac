"""ipywidgets explorers built on the library and its plots.

Imported on demand (``from rooflab import widgets``).  Each explorer returns
a widget box; display it as the last line of a cell.
"""

from __future__ import annotations

import functools
import math

import ipywidgets as w
import numpy as np
from matplotlib.figure import Figure

from . import plots
from .hardware import HARDWARE, hardware as _hardware
from .precision import Precision
from .serving import DoesNotFit, decode_step, memory_budget, prefill, request

__all__ = ["serving_explorer", "explain", "decode_explorer", "explain_decode", "memory_explorer", "explain_memory",
           "precision_explorer", "crossover_explorer", "explain_crossovers", "load_explorer", "explain_load",
           "tail_explorer", "explain_tail", "tail_sweep"]


def explain(model: str, device: str, precision: str, prompt_len: int, output_len: int, batch: int):
    """One line on a configuration (TTFT and ITL, ideal and typical, each with what binds at that
    efficiency), and its phase costs (ideal) for a roofline plot.

    A configuration that does not fit, needs more context than the model has, or asks for a
    precision the device lacks, gets a line saying so and no costs.
    """
    try:
        r = request(model, device, prompt_len, output_len, batch, precision)
    except DoesNotFit:
        budget = memory_budget(model, device, prompt_len + output_len, batch, precision)  # as request() checks it
        return (f"Does not fit: weights {budget.weights:.1f~P} + KV cache {budget.kv:.1f~P} + what the engine holds "
                f"back {budget.reserve:.1f~P} = {budget.total:.1f~P}, but a process can allocate "
                f"{budget.allocatable:.1f~P} of the {device}."), {}
    except ValueError as error:  # a context the model lacks, a precision the device has no rate for
        return f"Not possible: {error}", {}
    typical = request(model, device, prompt_len, output_len, batch, precision, efficiency="typical")
    p = prefill(model, device, prompt_len, batch, precision)
    d = decode_step(model, device, prompt_len, batch=batch, precision=precision)
    # Each figure carries its own bound: at typical efficiency a short prefill can turn compute-bound sooner.
    p_typical = prefill(model, device, prompt_len, batch, precision, efficiency="typical")
    d_typical = decode_step(model, device, prompt_len, batch=batch, precision=precision, efficiency="typical")
    text = (f"TTFT {_time(r.ttft)} ideal ({p.bound}-bound), {_time(typical.ttft)} typical ({p_typical.bound}-bound)   "
            f"ITL {_time(r.itl)} ideal ({d.bound}-bound), {_time(typical.itl)} typical ({d_typical.bound}-bound)   "
            f"request {_time(typical.e2e)} typical, {typical.decode_share.magnitude:.0%} of it decoding")
    return text, {"prefill": p, "decode step": d}


def serving_explorer(model: str = "Llama-3-8B", devices: tuple[str, ...] = ("T4", "L4", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X")):
    """Sliders for GPU, precision, prompt length, answer length and batch; shows TTFT, ITL,
    which resource binds in each phase, and both phases on the device's roofline."""
    device = w.Dropdown(options=[d for d in devices if d in HARDWARE], value="H100-SXM", description="GPU")
    precision = w.Dropdown(options=["fp16", "bf16", "fp8", "int8"], value="fp16", description="precision")
    prompt = _length_slider("prompt", 2000, 16, _context(model, 32000))
    output = _length_slider("answer", 300, 2, 4096)
    batch = w.IntSlider(value=1, min=1, max=256, description="batch", continuous_update=False)

    def render():
        text, costs = explain(model, device.value, precision.value, prompt.value, output.value, batch.value)
        print(text)
        if costs:
            figure = Figure(figsize=(6.4, 4.0))
            plots.roofline_figure(device.value, costs, precision=precision.value, ax=figure.subplots())
            _show(figure)

    return _explorer([[device, precision], [prompt, output, batch]], render)


def explain_memory(model: str, device: str, context_len: int, batch: int, kv: str) -> str:
    """One line on what ``batch`` sequences of ``context_len`` tokens hold and, if they fit, what a decode
    step costs (ideal and typical); a configuration that does not fit gets no time."""
    precision = Precision(weights="fp16", kv=kv, compute="fp16")
    try:
        budget = memory_budget(model, device, context_len, batch, precision)
    except ValueError as error:  # a context the model lacks
        return f"Not possible: {error}"
    held = (f"weights {budget.weights:.1f~P} + KV {budget.kv:.1f~P} + reserve {budget.reserve:.1f~P} = "
            f"{budget.total:.1f~P} of the {budget.allocatable:.1f~P} a process can allocate")
    if not budget.fits:
        return f"{held}: DOES NOT FIT (largest batch {budget.max_batch}), so there is no step time to give."
    step = decode_step(model, device, context_len, batch, precision)
    typical = decode_step(model, device, context_len, batch, precision, efficiency="typical")
    return (f"{held}: fits (largest batch {budget.max_batch}).  Step {step.time:.3g~P} ideal, "
            f"{typical.time:.3g~P} typical: {_three(batch / typical.time.m_as('s'))} tokens/s typical.")


def memory_explorer(model: str = "Llama-3-8B", devices: tuple[str, ...] = ("L4", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X")):
    """Sliders for device, context, batch and KV-cache format: memory against capacity, and the
    decode step's time and throughput."""
    device = w.Dropdown(options=[d for d in devices if d in HARDWARE], value="H100-SXM", description="GPU")
    kv = w.Dropdown(options=["fp16", "fp8"], value="fp16", description="KV cache")
    context = _length_slider("context", 2000, 128, _context(model, 32000))
    batch = w.IntSlider(value=64, min=1, max=512, description="batch", continuous_update=False)

    def render():
        print(explain_memory(model, device.value, context.value, batch.value, kv.value))
        figure = Figure(figsize=(6.4, 3.6))
        ax = figure.subplots()
        plots.memory_figure(model, device.value, context.value, max(batch.value, 2),
                            Precision(weights="fp16", kv=kv.value, compute="fp16"), ax=ax)
        _show(figure)

    return _explorer([[device, kv], [context, batch]], render)


def precision_explorer(model: str = "Llama-3-8B", devices: tuple[str, ...] = ("L4", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X")):
    """Weight, KV-cache and compute formats chosen apart, with device, context and batch: TTFT, ITL,
    what binds, memory, and both phases on the roofline of the compute format."""
    device = w.Dropdown(options=[d for d in devices if d in HARDWARE], value="H100-SXM", description="GPU")
    weights = w.Dropdown(options=["fp16", "fp8", "int8", "int4"], value="int4", description="weights")
    kv = w.Dropdown(options=["fp16", "fp8"], value="fp16", description="KV cache")
    compute = w.Dropdown(options=["fp16", "fp8", "int8", "int4"], value="fp16", description="compute")
    context = _length_slider("context", 2000, 16, _context(model, 32000, answer=256))
    batch = w.IntSlider(value=1, min=1, max=256, description="batch", continuous_update=False)

    def render():
        try:
            precision = Precision(weights=weights.value, kv=kv.value, compute=compute.value)
        except ValueError as error:
            print(f"Not possible: {error}")
            return
        text, costs = explain(model, device.value, precision, context.value, 256, batch.value)
        print(text)
        if costs:
            budget = memory_budget(model, device.value, context.value + 255, batch.value, precision)
            print(f"memory: weights {budget.weights:.1f~P} + KV {budget.kv:.1f~P} of the {budget.usable:.0f~P} an "
                  f"engine gets")
            figure = Figure(figsize=(6.4, 3.8))
            ax = figure.subplots()
            plots.roofline_figure(device.value, costs, precision=compute.value, ax=ax)
            _show(figure)

    return _explorer([[device, weights, kv, compute], [context, batch]], render)


def explain_crossovers(model: str, device: str, output_len: int, context_len: int) -> str:
    """The crossovers of one model on one device at the ideal roofline, in lines that say which operation crosses."""
    from .crossover import attention_crossover_len, decode_compute_bound_batch, ttft_exceeds_decode_len
    from .models import model as _model

    limit = _model(model).max_context
    try:
        batch = decode_compute_bound_batch(model, device, context_len, detail=True)
        prompt = ttft_exceeds_decode_len(model, device, output_len)
    except ValueError as error:  # a context the model lacks
        return f"Not possible: {error}"
    half = attention_crossover_len(model)
    fits = "" if batch.fits else f" (but {batch.value:,.0f} sequences of {context_len:,} tokens do not fit in memory)"
    matmuls = "weight matmuls (the experts last)" if _model(model).is_moe else "weight matmuls"
    return "\n".join([
        "at the ideal roofline (a bound, not a typical figure):",
        f"attention is half the prefill from {half:,.0f} tokens"
        + ("" if half <= limit else f", beyond the model's {limit:,}-token context"),
        f"in a decode step at {context_len:,} tokens of context the {matmuls} turn compute-bound "
        + (f"at batch {batch.value:,.0f}{fits}" if batch.value != float("inf") else "at no batch")
        + "; attention over the cache stays memory-bound",
        f"the prefill outlasts a {output_len}-token answer from a "
        + (f"{prompt:,.0f}-token prompt" if prompt != float("inf")
           else f"prompt longer than the model's {limit:,}-token context allows"),
    ])


def crossover_explorer(devices: tuple[str, ...] = ("L4", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X")):
    """Model, device, answer length and context: where each crossover falls, and the three-panel figure."""
    from .models import MODELS

    model = w.Dropdown(options=list(MODELS), value="Llama-3-8B", description="model")
    device = w.Dropdown(options=[d for d in devices if d in HARDWARE], value="H100-SXM", description="GPU")
    output = _length_slider("answer", 64, 2, 2048)
    context = _length_slider("context", 0, 16, 8192 - 64, zero=True)

    def render():
        text = explain_crossovers(model.value, device.value, output.value, context.value)
        print(text)
        if not text.startswith("Not possible"):
            figure = Figure(figsize=(14, 4.0))
            plots.crossover_figure(model.value, device.value, output_lens=(output.value,), contexts=(context.value,),
                                   figure=figure)
            _show(figure)

    return _explorer([[model, device], [output, context]], render)


def explain_decode(model: str, device: str, precision: str, context_len: int) -> str:
    """Where a decode step's operations turn compute-bound at ``context_len`` tokens, at the ideal roofline, in lines."""
    from .crossover import decode_compute_bound_batch
    from .models import model as _model

    m, d = _model(model), _hardware(device)  # a catalogue name or an alias; an unknown one is named
    try:
        matmuls = decode_compute_bound_batch(model, device, context_len, precision=precision, detail=True)
        attention = decode_compute_bound_batch(model, device, context_len, precision=precision, operation="attention")
    except ValueError as error:  # a context the model lacks
        return f"Not possible: {error}"
    most = memory_budget(model, device, context_len, precision=precision).max_batch
    which = "the experts (the last of its weight matmuls to turn)" if m.is_moe else "the body's weight matmuls"
    lines = ["at the ideal roofline (a bound, not a typical figure):",
             f"ridge point of the {d.name} at {precision}: {d.ridge_point(precision).m_as('FLOP/B'):,.0f} FLOP/B"]
    if matmuls.value == math.inf:
        lines.append(f"{which} turn compute-bound at no batch")
    else:
        lines.append(f"{which} turn compute-bound from batch {matmuls.value:,.0f}"
                     + ("" if matmuls.fits else f", more sequences of {context_len:,} tokens than fit"))
    lines.append("attention over the cache " + ("stays memory-bound at every batch" if attention == math.inf
                                                else f"turns compute-bound from batch {attention:,.0f}"))
    lines.append(f"at most {most:,} sequences of {context_len:,} tokens fit in the engine's memory" if most
                 else f"not even one sequence of {context_len:,} tokens fits in memory at {precision}")
    return "\n".join(lines)


def decode_explorer(devices: tuple[str, ...] = ("L4", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X")):
    """Model, device, precision and context: a decode step's operations against the batch, and where they cross."""
    from .models import MODELS

    model = w.Dropdown(options=list(MODELS), value="Llama-3-8B", description="model")
    device = w.Dropdown(options=[d for d in devices if d in HARDWARE], value="H100-SXM", description="GPU")
    precision = w.Dropdown(options=["fp16", "fp8"], value="fp16", description="precision")
    context = _length_slider("context", 1000, 16, 8192 - 1)

    def render():
        text = explain_decode(model.value, device.value, precision.value, context.value)
        print(text)
        if not text.startswith("Not possible"):
            figure = Figure(figsize=(9, 4.5))
            plots.decode_figure(model.value, device.value, contexts=(context.value,), precision=precision.value,
                                figure=figure)
            _show(figure)

    return _explorer([[model, device, precision], [context]], render)


def explain_load(model: str, device: str, precision: str, tp: int, prompt_len: int, output_len: int,
                 ttft_limit_ms: float, itl_limit_ms: float) -> str:
    """The best operating point under an SLA (typical efficiency) in three lines: the batch and its latencies,
    throughput, cost at the example price and energy, and what binds; or why there is none."""
    from .fleet import SLAUnmet, best_under_sla, example_price
    from .units import Q_

    try:
        best = best_under_sla(model, device, prompt_len, output_len, Q_(ttft_limit_ms, "ms"), Q_(itl_limit_ms, "ms"),
                              precision, tp, efficiency="typical")
    except SLAUnmet as error:
        return f"No batch meets the targets: {str(error).split(': ', 1)[1]}"
    except ValueError as error:  # does not fit, no such precision, too long for the model
        return f"Not possible: {error}"
    gpus = f"{tp} GPUs" if tp > 1 else "one GPU"
    try:
        price = example_price(device)
        cost = (f"${_three(best.cost_per_million(price).m_as('USD/Mtok'))} per million tokens at "
                f"${price.m_as('USD/h'):.2f} per GPU-hour (an example price)")
    except KeyError:
        cost = "no example price for this GPU"
    energy = (f"at most {_three(best.energy_per_token.m_as('J/token'))} J per token" if best.power_si else
              "no published board power")
    return "\n".join([
        f"best batch {best.batch:,} of the {best.max_batch:,} that fit on {gpus}: ITL {_three(best.itl.m_as('ms'))} ms, "
        f"TTFT {_three(best.ttft.m_as('ms'))} ms",
        f"{_three(best.output_throughput.m_as('token/s'))} tokens/s per GPU "
        f"({_three(best.per_request_throughput.m_as('token/s'))} per user); {cost}; {energy}",
        _what_stops(best, model, device, precision, tp, prompt_len, output_len, ttft_limit_ms, itl_limit_ms),
        f"the decode step's weight matmuls are {best.bound}-bound at this batch "
        f"({'held by bandwidth' if best.bound == 'memory' else 'held by arithmetic'})",
    ])


def _what_stops(best, model, device, precision, tp, prompt_len, output_len, ttft_limit_ms, itl_limit_ms) -> str:
    """Which limit keeps the batch from growing: the cache space (every sequence that fits already runs) or the
    target that one more sequence would miss."""
    from .fleet import steady_state

    if best.batch >= best.max_batch:
        return f"what stops the batch: cache space (all {best.max_batch:,} sequences that fit are running)"
    more = steady_state(model, device, prompt_len, output_len, best.batch + 1, precision, tp,
                        efficiency="typical")
    itl, ttft = more.itl.m_as("ms"), more.ttft.m_as("ms")
    missed = []  # four digits: one sequence more may miss a target by a hair
    if itl > itl_limit_ms:
        missed.append(f"the ITL target ({itl:.4g} ms > {itl_limit_ms:g} ms)")
    if ttft > ttft_limit_ms:
        missed.append(f"the TTFT target ({ttft:.4g} ms > {ttft_limit_ms:g} ms)")
    reason = " and ".join(missed) or "its throughput, which would not grow"
    return f"what stops the batch: {reason} at batch {best.batch + 1:,}"


def load_explorer(devices: tuple[str, ...] = ("L4", "L40S", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X")):
    """Model, GPU, precision, tensor parallelism, workload and SLA: the best operating point and the frontier."""
    model = w.Dropdown(options=["Llama-3-8B", "Llama-3.1-8B", "Mistral-7B", "Llama-3-70B", "Llama-3.1-70B"],
                       value="Llama-3-8B", description="model")
    device = w.Dropdown(options=[d for d in devices if d in HARDWARE], value="H100-SXM", description="GPU")
    precision = w.Dropdown(options=["fp16", "fp8"], value="fp16", description="precision")
    tp = w.Dropdown(options=[1, 2, 4, 8], value=1, description="GPUs (tp)")
    prompt = _length_slider("prompt", 2000, 16, 6000)
    output = _length_slider("answer", 300, 2, 2000)
    ttft = w.IntSlider(value=500, min=20, max=5000, step=20, description="TTFT ms", continuous_update=False)
    itl = w.IntSlider(value=50, min=5, max=200, step=1, description="ITL ms", continuous_update=False)

    def render():
        text = explain_load(model.value, device.value, precision.value, tp.value, prompt.value, output.value,
                            ttft.value, itl.value)
        print(text)
        if text.startswith("Not possible"):
            return  # nothing fits: an empty frontier would only draw axes
        figure = Figure(figsize=(7.5, 4.2))
        ax = figure.subplots()
        from .units import Q_
        plots.frontier_figure(model.value, [(device.value, precision.value, tp.value)], prompt.value, output.value,
                              Q_(ttft.value, "ms"), Q_(itl.value, "ms"), efficiency="typical", ax=ax)
        _show(figure)

    return _explorer([[model, device], [precision, tp], [prompt, output], [ttft, itl]], render)


_TAIL_RATES = (1, 3, 5, 7, 9)  # requests/s the tail explorer's curves are drawn at
_TAIL_REQUESTS = 300  # per point: a p99 of 90,000 gaps, and a first draw of a second or two


def tail_sweep(mode: str, rates: tuple[float, ...] = _TAIL_RATES, requests: int = _TAIL_REQUESTS):
    """Percentiles against load for the tail explorer (Llama-3-8B on an H100, 2,000-token prompts, 300-token
    answers, prefill ``"separate"`` or ``"chunked"`` at 512 tokens a step): {metric: array of ms}, one value per
    rate, for p50 and p99 of TTFT and ITL.  Cached: the slider only redraws."""
    return _tail_sweep(mode, tuple(rates), requests)


@functools.lru_cache(maxsize=8)
def _tail_sweep(mode: str, rates: tuple[float, ...], requests: int):
    runs = [_tail_run(mode, rate, requests) for rate in rates]
    return {name: np.array([getattr(getattr(r, kind), stat).m_as("ms") for r in runs])
            for name, kind, stat in (("TTFT p50", "ttft", "p50"), ("TTFT p99", "ttft", "p99"),
                                     ("ITL p50", "itl", "p50"), ("ITL p99", "itl", "p99"))}


@functools.lru_cache(maxsize=64)
def _tail_run(mode: str, rate: float, requests: int = _TAIL_REQUESTS):
    from .simulate import engine, simulate
    from .units import Q_

    e = engine("Llama-3-8B", "H100", prefill=mode, token_budget=512 if mode == "chunked" else 8192)
    return simulate(e, rate=Q_(rate, "1/s"), prompt_len=2000, output_len=300, requests=requests, seed=0)


def explain_tail(mode: str, rate: float, requests: int = _TAIL_REQUESTS) -> str:
    """Two lines on the engine at ``rate`` requests/s: its TTFT and ITL percentiles, throughput and pre-emptions."""
    run = _tail_run(mode, float(rate), requests)
    return (f"{rate:g} requests/s, prefill {'apart' if mode == 'separate' else 'chunked (512 tokens a step)'}: "
            f"TTFT p50 {_three(run.ttft.p50.m_as('ms'))} ms, p99 {_three(run.ttft.p99.m_as('ms'))} ms; "
            f"ITL p50 {_three(run.itl.p50.m_as('ms'))} ms, p99 {_three(run.itl.p99.m_as('ms'))} ms\n"
            f"{_three(run.output_throughput.m_as('token/s'))} tokens/s, {run.mean_batch:.0f} sequences a step on "
            f"average, {run.preemptions} pre-emptions ({requests} simulated requests, seed 0)")


def tail_explorer():
    """Prefill apart or chunked, and a request rate: p50 and p99 of TTFT and ITL against the load (Llama-3-8B on an
    H100, 2,000-token prompts, 300-token answers), the chosen rate marked."""
    mode = w.Dropdown(options=[("apart", "separate"), ("chunked", "chunked")], value="separate", description="prefill")
    rate = w.SelectionSlider(options=list(_TAIL_RATES), value=3, description="requests/s", continuous_update=False)

    def render():
        print(explain_tail(mode.value, rate.value))
        curves = tail_sweep(mode.value)
        figure = Figure(figsize=(8.0, 3.6))
        axes = figure.subplots(1, 2)
        for ax, kind in zip(axes, ("TTFT", "ITL")):
            for stat, style in (("p50", "o-"), ("p99", "s--")):
                ax.plot(_TAIL_RATES, curves[f"{kind} {stat}"], style, label=stat)
            ax.axvline(rate.value, color="grey", lw=1)
            ax.set_yscale("log")
            ax.set_xlabel("requests per second")
            ax.set_ylabel(f"{kind} (ms)")
            ax.set_title(kind)
            ax.legend()
        figure.tight_layout()
        _show(figure)

    return _explorer([[mode, rate]], render)


def _show(figure: Figure) -> None:
    """Render ``figure`` to PNG here, and display the image.

    The explorers draw on figures of their own, outside pyplot, and render them
    with the Agg canvas: with ``plt.show()`` the first redraw after a change in
    JupyterLab came out blank (four times in four), as pyplot's global state is
    shared with the inline backend's own handling of the notebook's figures.
    """
    import io

    from IPython.display import Image, display
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    display(Image(data=buffer.getvalue(), format="png"))


def _time(t) -> str:
    """A time to three significant figures, in ms below a second and in s from one (5,780 ms -> '5.78 s')."""
    seconds = t.m_as("s")
    return f"{_three(seconds)} s" if seconds >= 1 else f"{_three(seconds * 1e3)} ms"


def _three(x: float) -> str:
    """``x`` to three significant figures, with thousands separators (11,335 -> '11,300')."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = 2 - math.floor(math.log10(abs(x)))
    return f"{round(x, digits):,.{max(digits, 0)}f}"


# Mantissas of the lengths a slider offers in each decade: about twelve steps per factor of ten.
_STEPS = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)


def _lengths(low: int, high: int, keep: tuple[int, ...] = ()) -> list[int]:
    """Token counts from ``low`` to ``high`` spaced evenly on a log scale (1, 1.2, 1.5, 2, ... per decade),
    with the ends and ``keep`` included."""
    found = {low, high, *keep}
    decade = 1
    while decade <= high:
        found.update(int(round(m * decade)) for m in _STEPS if low <= m * decade <= high)
        decade *= 10
    return sorted(found)


def _length_slider(description: str, value: int, low: int, high: int, zero: bool = False) -> w.SelectionSlider:
    """A slider over token counts on a log scale, so that a few dozen tokens and a few thousand are both
    within reach of the mouse (a linear 16-32,768 slider moves 64 tokens a pixel); ``zero`` adds 0 first."""
    options = _lengths(low, high, keep=(value,) if value else ())
    return w.SelectionSlider(options=([0] if zero else []) + options, value=value, description=description,
                             continuous_update=False)


def _context(model: str, largest: int, answer: int = 1) -> int:
    """A slider's top: ``largest``, or the model's context less the answer, whichever is smaller."""
    from .models import model as _model

    return min(largest, _model(model).max_context - answer)


def _explorer(rows: list[list], render) -> w.VBox:
    """Lay out rows of controls above an output area that ``render`` redraws on every change."""
    shown = w.Output()

    def update(*_):
        with shown:
            shown.clear_output(wait=True)
            render()

    for row in rows:
        for control in row:
            control.observe(update, names="value")
    update()
    return w.VBox([w.HBox(row) for row in rows] + [shown])
