"""rooflab: the roofline of LLM serving, with physical units.

The same model on the same device has two speed limits: peak FLOP/s binds the
prefill, memory bandwidth binds decode.  This package counts FLOPs and bytes
for each operation of each phase, applies the roofline, and answers the
questions that follow (how long, which resource binds, what fits in memory,
where it crosses over), at the ideal bound or at a typical efficiency
calibrated on public measurements.

>>> import rooflab as rl
>>> r = rl.request(rl.model("Llama-3-8B"), rl.hardware("H100"), prompt_len=2000, output_len=300)
>>> round(r.ttft.to("ms").magnitude, 1), round(r.itl.to("ms").magnitude, 2), f"{r.decode_share.magnitude:.1%}"
(29.6, 4.56, '97.9%')
>>> typical = rl.request("Llama-3-8B", "H100", 2000, 300, efficiency="typical")
>>> typical.e2e > r.e2e  # the ideal is a bound that no measurement beats
True

Under load (:mod:`rooflab.fleet`): continuous batching in steady state, the latency-throughput frontier, the
best batch under an SLA, dollars per million tokens, joules per token and tensor parallelism.

>>> best = rl.best_under_sla("Llama-3-8B", "A100-80GB", 2000, 300, itl_limit=rl.Q_(50, "ms"), efficiency="typical")
>>> best.batch, round(best.cost_per_million(rl.example_price("A100-80GB")).m_as("USD/Mtok"), 2)
(61, 0.57)

Measured (:mod:`rooflab.measure`, :mod:`rooflab.profiles`): this machine's roofline as a device record, and the
prefill and decode of a small numpy transformer (:mod:`rooflab.tiny_transformer`) timed against it.

Plots and widgets live in ``rooflab.plots`` and ``rooflab.widgets``, imported
on demand so that ``import rooflab`` stays light.
"""

from .units import Q_, ureg, UnitError
from .precision import FORMATS, Precision, as_precision, bytes_per_element
from .hardware import Hardware, hardware, HARDWARE, UnsupportedPrecision
from .models import ContextTooLong, Model, model, MODELS
from .roofline import Cost, roofline
from .efficiency import Efficiency, efficiency, PRESETS
from .serving import DoesNotFit, MemoryBudget, Request, decode_step, memory_budget, prefill, request
from .fleet import (
    SLAUnmet,
    SteadyState,
    Workload,
    best_under_sla,
    cost_per_million_tokens,
    energy_per_token,
    example_price,
    example_prices,
    frontier,
    max_concurrency,
    steady_state,
    tensor_parallel_step,
    all_reduce_time,
    workload,
)
from .crossover import (
    Crossing,
    attention_crossover_len,
    attention_share,
    balanced_output_len,
    decode_compute_bound_batch,
    prefill_compute_bound_len,
    ttft_exceeds_decode_len,
)

from . import measure, profiles, tiny_transformer  # this machine's roofline, and the two clean profiles held against it

__version__ = "0.1.0"

__all__ = [
    "Q_", "ureg", "UnitError",
    "FORMATS", "Precision", "as_precision", "bytes_per_element",
    "Hardware", "hardware", "HARDWARE", "UnsupportedPrecision",
    "ContextTooLong", "Model", "model", "MODELS",
    "Cost", "roofline",
    "Efficiency", "efficiency", "PRESETS",
    "DoesNotFit", "MemoryBudget", "Request", "decode_step", "memory_budget", "prefill", "request",
    "Crossing", "attention_crossover_len", "attention_share", "balanced_output_len",
    "decode_compute_bound_batch", "prefill_compute_bound_len", "ttft_exceeds_decode_len",
    "SLAUnmet", "SteadyState", "Workload", "best_under_sla", "cost_per_million_tokens", "energy_per_token",
    "example_price", "example_prices", "frontier", "max_concurrency", "steady_state", "tensor_parallel_step",
    "all_reduce_time",
    "workload",
    "measure", "profiles", "tiny_transformer",
]
