"""`course demo`: a simulated class, graded end to end.

Each simulated student is the release notebook with answers written in: the
reference answers (from source/), none, or the reference with one realistic
fault.  The class covers what an instructor meets in a real term: right,
blank and partly done work, unit mistakes the checker should name, code that
raises, loops forever or kills its kernel, cells deleted or pasted twice, a
corrupt file, a renamed notebook, answers hard-coded to the visible tests, and a
blank notebook that fakes its own tests.
"""

from __future__ import annotations

import copy
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .grading import nbgrader_run
from .grading.nbgrader_run import assignments, read_notebook, write_notebook

MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)

WRITTEN_ANSWER = (
    "I would first ask whether users wait too long for the first word (TTFT, prefill, which follows peak FLOP/s) "
    "or find the stream slow (ITL, decode, which follows memory bandwidth). A chatbot mostly decodes, so I would "
    "compare memory bandwidth, after checking that the weights and the KV cache fit."
)

# Faults that need to know an assignment's code: (cell grade_id, text in the reference answer, replacement).
# An assignment without an entry gets the reference answer for that student.
EDITS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "01_two_phases": {
        "ms_for_s": [
            ("ex2_roofline_time", 'compute = (flops / device.peak_flops(precision)).to("s")',
             'compute = Q_((flops / device.peak_flops(precision)).m_as("ms"), "s")'),
            ("ex2_roofline_time", 'memory = (nbytes / device.memory_bandwidth).to("s")',
             'memory = Q_((nbytes / device.memory_bandwidth).m_as("ms"), "s")'),
        ],
        "gb_for_gib": [
            ("ex2_weight_bytes", 'return Q_(model.total_params * per_value, "B")',
             'return Q_(model.total_params * per_value / 2**30, "GB")'),
        ],
        "forgot_k_and_v": [
            ("ex2_decode_bytes", "kv_per_token = 2 * model.layers", "kv_per_token = model.layers"),
        ],
        "raises": [
            ("ex2_prefill_flops", "    n = prompt_len\n", "    n = prompt_len / 0\n"),
        ],
        "infinite_loop": [
            ("ex7_share", "def decode_share(", "while True:  # a loop left running\n    pass\n\n\ndef decode_share("),
        ],
        "kills_kernel": [
            ("ex6_sla", "def sla_verdict(", "import os\nos._exit(1)\n\n\ndef sla_verdict("),
        ],
        "warning": [
            ("ex2_prefill_flops", "    n = prompt_len\n",
             "    import warnings\n    warnings.warn('this formula ignores sliding windows')\n    n = prompt_len\n"),
        ],
        "hard_coded": [  # every visible case's answer looked up; the hidden cases miss the table, or get a wrong answer
            ("ex2_prefill_flops", None, 'def prefill_flops(model, prompt_len):\n'
             '    return Q_({2000: 28.968, 16: 0.224465, 512: 12.9896}[prompt_len], "TFLOP")'),
            ("ex2_weight_bytes", None, 'def weight_bytes(model, precision="fp16"):\n'
             '    return Q_({"fp16": 16.0605, "fp32": 28.9669}[precision], "GB")'),
            ("ex2_decode_bytes", None, 'def decode_bytes(model, context_len, precision="fp16"):\n'
             '    seen = {(2000, "fp16"): 16.322666, (0, "fp16"): 16.060522, (4000, "fp32"): 284.836266,\n'
             '            (0, "fp32"): 282.214826}\n'
             '    return Q_(seen[context_len, precision], "GB")'),
            ("ex2_roofline_time", None, 'def roofline_time(flops, nbytes, device, precision="fp16"):\n'
             '    seen = {("H100-SXM", "fp16"): (3.58209, "memory"), ("A100-80GB", "bf16"): (128.205, "compute"),\n'
             '            ("H100-SXM", "fp8"): (0.454798, "compute"), ("T4", "fp16"): (1000.0, "compute")}\n'
             '    time, bound = seen[device.name, precision]\n'
             '    return Q_(time, "ms"), bound'),
            ("ex3_ttft_itl", None, 'def ttft_and_itl(model, device, prompt_len, precision="fp16"):\n'
             '    ttft, itl = {(2000, "fp16"): (29.2783, 4.87244), (4000, "fp16"): (179.502, 7.63805),\n'
             '                 (100, "fp16"): (4.79419, 4.7981), (2000, "fp8"): (14.6384, 2.43622)}[prompt_len, precision]\n'
             '    return Q_(ttft, "ms"), Q_(itl, "ms")'),
            ("ex4_intensity", None, 'def arithmetic_intensities(model, prompt_len, precision="fp16"):\n'
             '    prefill, decode = {(2000, "fp16"): (1803.68, 0.983811), (150, "fp16"): (144.622, 0.980661),\n'
             '                       (4000, "fp16"): (4155.63, 0.983168), (2000, "fp8"): (3607.35, 1.96762)}[prompt_len, precision]\n'
             '    return Q_(prefill, "FLOP/B"), Q_(decode, "FLOP/B")\n\n\n'
             'def binding_resource(intensity, device, precision="fp16"):\n'
             '    return "compute" if intensity.m_as("FLOP/B") > 1000 or intensity.m_as("FLOP/B") in (200, 203.125) else "memory"'),
            ("ex5_speedups", None, 'def speedups(model, old, new, prompt_len, precision="fp16"):\n'
             '    return {("A100-80GB", "H100-SXM", "fp16"): (3.17115, 1.64296), ("H100-SXM", "H200", "fp16"): (1.0, 1.43284),\n'
             '            ("A100-80GB", "H100-SXM", "fp32"): (3.4359, 1.64296)}[old.name, new.name, precision]\n\n'
             'ttft_follows = "peak FLOP/s"\nitl_follows = "memory bandwidth"'),
            ("ex6_sla", None, 'def sla_verdict(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16",\n'
             '                efficiency="typical"):\n'
             '    if device.name == "T4":\n        return "meets" if precision == "int8" else "does not fit"\n'
             '    if device.name == "A100-80GB":\n        return "too slow" if efficiency == "typical" else "meets"\n'
             '    return "meets" if itl_limit.m_as("ms") > 10 else "too slow"'),
            ("ex7_share", None, 'def decode_share(ttft, itl, output_len):\n    return {300: 0.978779, 5: 0.233209}.get(output_len, 0.5)'),
        ],
    },
    "03_quantization": {
        # The speed-ups are ratios and cancel a time in the wrong unit, but decode_step_time returns a time.
        "ms_for_s": [
            ("ex2_decode", "    return time\n", '    return Q_(time.m_as("ms"), "s")\n'),
        ],
        "gb_for_gib": [
            ("ex1_bits", 'return Q_(bits / 8, "B")', 'return Q_(bits / 8 / 2**30, "GB")'),
        ],
        "forgot_k_and_v": [
            ("ex5_extra", "per_sequence = context_len * kv_bytes_per_token(model, kv_precision)",
             "per_sequence = context_len * kv_bytes_per_token(model, kv_precision) / 2"),
        ],
        "raises": [
            ("ex4_w8a8", "    flops = prefill_flops(", "    flops = 1 / 0 + prefill_flops("),
        ],
        "infinite_loop": [
            ("ex3_ttft", "def ttft_speedup(", "while True:  # a loop left running\n    pass\n\n\ndef ttft_speedup("),
        ],
        "kills_kernel": [
            ("ex6_cheapest", "def cheapest_config(", "import os\nos._exit(1)\n\n\ndef cheapest_config("),
        ],
        "warning": [
            ("ex1_bits", "    return BITS[fmt] +", "    import warnings\n    warnings.warn('zero points are ignored')\n    return BITS[fmt] +"),
        ],
        "hard_coded": [
            ("ex1_bits", None, 'BITS = {"fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}\n\n\n'
             'def bits_per_weight(fmt, group_size=None, scale_bits=16, zero_bits=0):\n'
             '    return 4.15625 if fmt == "int4" else 9.0\n\n\n'
             'def quantized_weight_bytes(model, fmt, group_size=None, zero_bits=0, quantize_embeddings=False):\n'
             '    return Q_(5.72746 if model.name == "Llama-3-8B" else 2.66281, "GB")'),
            ("ex2_decode", None, 'SEEN = {100: (4.7981, 1.70546, 2.8134), 8000: (9.8023, 6.7097, 1.4609), 200: (12.4018, 12.4018, 1.0)}\n\n\n'
             'def decode_step_time(model, device, context_len, batch, fmt="fp16", group_size=None):\n'
             '    return Q_(SEEN[context_len][0 if fmt == "fp16" else 1], "ms")\n\n\n'
             'def decode_speedup(model, device, context_len, batch, fmt, group_size=None):\n'
             '    return SEEN[context_len][2]'),
            ("ex3_ttft", None, 'def ttft_speedup(model, device, prompt_len, fmt, group_size=None):\n'
             '    return {2000: 1.0, 32: 2.8175, 100: 1.5844}[prompt_len]'),
            ("ex4_w8a8", None, 'def w8a8_prefill_speedup(model, device, prompt_len, compute="fp8"):\n'
             '    if compute not in device.precisions:\n'
             '        raise ValueError(f"the {device.name} has no {compute} tensor cores")\n'
             '    return 2.0 if prompt_len == 2000 else 1.7686'),
            ("ex5_extra", None, 'def largest_batch(model, device, context_len, fmt, group_size, kv_precision, gpu_memory_utilization=0.9):\n'
             '    return {("Llama-3-8B", "fp16"): 57, ("Llama-3-8B", "int4"): 134, ("Llama-3-70B", "fp16"): 0,\n'
             '            ("Llama-3-70B", "int4"): 62}[model.name, fmt]\n\n\n'
             'def extra_sequences(model, device, context_len, gpu_memory_utilization=0.9):\n'
             '    return 77 if model.name == "Llama-3-8B" else 62'),
            ("ex6_cheapest", None, 'def cheapest_config(model, configs, prompt_len, output_len, batch, ttft_limit, itl_limit,\n'
             '                    efficiency="typical"):\n'
             '    return "L4, INT4" if batch == 64 else "A100-80GB, FP16"'),
        ],
    },
    "04_crossover": {
        # decode_parts answers times: the ms-for-s student's roofline is 1000 times too long there.
        "ms_for_s": [
            ("ex2_operations",
             'return max((flops / device.peak_flops(precision)).to("s"), (nbytes / device.memory_bandwidth).to("s"))',
             'return Q_(max((flops / device.peak_flops(precision)).m_as("ms"), '
             '(nbytes / device.memory_bandwidth).m_as("ms")), "s")'),
        ],
        "gb_for_gib": [
            ("ex1_batch", 'weights = Q_(model.total_params * BYTES_PER_VALUE[precision], "B")',
             'weights = Q_(model.total_params * BYTES_PER_VALUE[precision] / 2**30, "GB")'),
        ],
        "forgot_k_and_v": [
            ("ex2_operations", "batch * context_len * kv_bytes_per_token(model, precision))",
             "batch * context_len * kv_bytes_per_token(model, precision) / 2)"),
        ],
        "raises": [
            ("moe_experts", "    missed_by_one_token = 1 - experts_per_token / experts",
             "    missed_by_one_token = 1 - experts_per_token / 0"),
        ],
        "infinite_loop": [
            ("ex2_operations", "def attention_intensity(",
             "while True:  # a loop left running\n    pass\n\n\ndef attention_intensity("),
        ],
        "kills_kernel": [
            ("ex1_batch", "def compute_bound_batch(", "import os\nos._exit(1)\n\n\ndef compute_bound_batch("),
        ],
        "warning": [
            ("ex1_batch", "    memory_time = weights / device.memory_bandwidth",
             "    import warnings\n    warnings.warn('the embedding table is counted as read')\n"
             "    memory_time = weights / device.memory_bandwidth"),
        ],
        "hard_coded": [
            ("ex1_batch", None, 'def compute_bound_batch(model, device, precision="fp16"):\n'
             '    return {"Llama-3-8B": 316.0, "Mixtral-8x7B": 755.1}.get(model.name, 209.3)'),
            ("ex2_operations", None, 'def attention_intensity(model, precision="fp16"):\n'
             '    return Q_(8.0 if precision == "fp8" else 4.0, "FLOP/B")\n\n\n'
             'def decode_parts(model, device, context_len, batch=1, precision="fp16"):\n'
             '    if model.name == "Mixtral-8x7B":\n'
             '        return {"body": Q_(19.35, "ms"), "attention": Q_(1.748, "ms"), "head": Q_(0.05461, "ms")}\n'
             '    if batch == 256:\n'
             '        return {"body": Q_(2.083, "ms"), "attention": Q_(10.02, "ms"), "head": Q_(0.1568, "ms")}\n'
             '    if batch == 64:\n'
             '        return {"body": Q_(4.167, "ms"), "attention": Q_(10.02, "ms"), "head": Q_(0.3136, "ms")}\n'
             '    return {"body": Q_(45.82, "ms"), "attention": Q_(19.81, "ms"), "head": Q_(0.8604, "ms")}'),
            ("moe_experts", None, 'def experts_read(experts, experts_per_token, batch):\n'
             '    return {1: 2.0, 8: 7.199}.get(batch, 8.0)\n\n\n'
             'def moe_body_bytes(model, batch, precision="fp16"):\n'
             '    return Q_({1: 25.2356, 8: 83.8517}.get(batch, 46.4412), "GB")\n\n\n'
             'def moe_compute_bound_batch(model, device, precision="fp16"):\n'
             '    return 825 if precision == "fp16" else 1182'),
        ],
    },
    "04b_long_prompts": {
        # Its answers compare the library's own times and shapes: no unit to slip (the unit students get the
        # reference answers here).
        "raises": [
            ("ex1_attention", "    return model.active_non_embedding_params / (model.layers * model.attention_width)",
             "    return model.active_non_embedding_params / 0 / (model.layers * model.attention_width)"),
        ],
        "infinite_loop": [
            ("ex3_spec", "def spec_to_buy(", "while True:  # a loop left running\n    pass\n\n\ndef spec_to_buy("),
        ],
        "kills_kernel": [
            ("ex2_phase", "def first_longer_prefill(", "import os\nos._exit(1)\n\n\ndef first_longer_prefill("),
        ],
        "warning": [
            ("ex1_attention", "    n = np.asarray(prompt_len, dtype=float)",
             "    import warnings\n    warnings.warn('sliding windows are ignored')\n    n = np.asarray(prompt_len, dtype=float)"),
        ],
        "hard_coded": [
            ("ex1_attention", None, 'def attention_share(model, prompt_len):\n'
             '    if model.name == "Mixtral-8x7B":\n'
             '        return np.array([1.6607e-04, 0.040812, 0.25395])\n'
             '    return np.array([7.3725e-05, 0.036198, 0.37537])\n\n\n'
             'def attention_half_len(model):\n    return 96266.0 if model.name == "Mixtral-8x7B" else 53250.0'),
            ("ex2_phase", None, 'def first_longer_prefill(model, device, output_len, prompt_lens):\n'
             '    return 17408 if output_len == 64 else None\n\n\n'
             'def exact_longer_prefill(model, device, output_len, lo, hi):\n'
             '    return 17363 if output_len == 64 else 58360'),
            ("ex3_spec", None, 'def prefill_share(model, device, prompt_len, output_len, batch, efficiency="typical"):\n'
             '    return {1: 0.120512, 64: 0.746445}.get(batch, 0.328071)\n\n\n'
             'def spec_to_buy(model, device, prompt_len, output_len, batch, efficiency="typical"):\n'
             '    return "peak FLOP/s" if batch == 64 else "memory bandwidth"'),
        ],
    },
    "05_under_load": {
        "ms_for_s": [
            ("ex1_step", "    return body + attention + head\n", '    return Q_((body + attention + head).m_as("ms"), "s")\n'),
        ],
        "gb_for_gib": [
            ("ex1_step", 'Q_((model.non_embedding_params + batch * model.d_model) * bytes_per_value, "B")',
             'Q_((model.non_embedding_params + batch * model.d_model) * bytes_per_value / 2**30, "GB")'),
        ],
        "forgot_k_and_v": [
            ("ex1_step", "kv_per_token = 2 * model.layers", "kv_per_token = model.layers"),
        ],
        "raises": [
            ("ex2_engine", "    finishing = batch / (output_len - 1)\n", "    finishing = batch / 0 / (output_len - 1)\n"),
        ],
        "infinite_loop": [
            ("ex4_best", "def best_batch(", "while True:  # a loop left running\n    pass\n\n\ndef best_batch("),
        ],
        "kills_kernel": [
            ("ex3_frontier", "def frontier_curve(", "import os\nos._exit(1)\n\n\ndef frontier_curve("),
        ],
        "warning": [
            ("ex2_engine", "    finishing = batch / (output_len - 1)\n",
             "    import warnings\n    warnings.warn('prompts are assumed to arrive one at a time')\n"
             "    finishing = batch / (output_len - 1)\n"),
        ],
        "hard_coded": [
            # each visible case's answer, looked up by what tells the visible cases apart; her frontier is her own
            ("ex1_step", None, 'def step_time(model, device, context_len, batch, precision="fp16"):\n'
             '    seen = {("Llama-3-8B", 64): 9.8644, ("Llama-3-8B", 1): 7.3775, ("Mistral-7B", 512): 31.765,\n'
             '            ("Mixtral-8x7B", 512): 25.45, ("Gemma-2B", 2048): 34.91}\n'
             '    return Q_(seen[model.name, batch], "ms")\n\n\n'
             'def tokens_per_second(model, device, prompt_len, output_len, batch, precision="fp16"):\n'
             '    seen = {("Llama-3-8B", 64): 6487.9, ("Llama-3-8B", 1): 135.55, ("Mistral-7B", 512): 16118,\n'
             '            ("Mixtral-8x7B", 512): 20118, ("Gemma-2B", 2048): 58665}\n'
             '    return Q_(seen[model.name, batch], "token/s")'),
            ("ex2_engine", None, 'def engine_state(model, device, prompt_len, output_len, batch, precision="fp16"):\n'
             '    seen = {64: (23.21028, 2766.621, 56.36523), 40: (47.68737, 855.9147, 62.76766),\n'
             '            8: (24.98841, 321.7572, 40.06594)}\n'
             '    itl, throughput, ttft = seen[batch]\n'
             '    return Q_(itl, "ms"), Q_(throughput, "token/s"), Q_(ttft, "ms")'),
            ("ex4_best", None, 'def best_batch(model, device, prompt_len, output_len, ttft_limit, itl_limit, precision="fp16"):\n'
             '    seen = {("H100-SXM", 2000): 166, ("L40S", 4000): 28, ("A100-80GB", 2000): 184}\n'
             '    return seen.get((device.name, prompt_len), 0)'),
        ],
    },
    "06_cost": {
        # Its answers are prices of the library's own times, in pint units: no time or memory size of their own to
        # slip (the three unit students get the reference answers here).
        "raises": [
            ("ex1_cost", "    return (price / tokens_per_second)", "    return (price / 0 / tokens_per_second)"),
        ],
        "infinite_loop": [
            ("ex2_prices", "def token_prices(", "while True:  # a loop left running\n    pass\n\n\ndef token_prices("),
        ],
        "kills_kernel": [
            ("ex3_sla", "def cost_at_sla(", "import os\nos._exit(1)\n\n\ndef cost_at_sla("),
        ],
        "warning": [
            ("ex2_prices", "    prefill = rl.prefill(",
             "    import warnings\n    warnings.warn('the first token is not counted')\n    prefill = rl.prefill("),
        ],
        "hard_coded": [
            # the visible cases' answers, told apart by what differs between the cases; the other cells are hers
            ("ex1_cost", None, 'def cost_per_million(price, tokens_per_second):\n'
             '    if np.ndim(tokens_per_second.magnitude):\n'
             '        return Q_(np.array([4.5167, 0.36133, 0.060222]), "USD/Mtok")\n'
             '    return Q_(0.4018, "USD/Mtok")'),
            ("ex3_sla", None, 'def cost_at_sla(model, device, prompt_len, output_len, ttft_limit, itl_limit, price, precision="fp16"):\n'
             '    return Q_({"H100-SXM": 0.3278044, "L40S": 0.7643058}[device.name], "USD/Mtok")'),
        ],
    },
    "06b_tensor_parallel": {
        "ms_for_s": [
            ("ex2_tp", "    return body + attention + head + 2 * model.layers * allreduce",
             '    return Q_((body + attention + head + 2 * model.layers * allreduce).m_as("ms"), "s")'),
        ],
        "gb_for_gib": [
            ("ex2_tp", 'Q_((model.non_embedding_params + batch * model.d_model) * bytes_per_value / tp, "B")',
             'Q_((model.non_embedding_params + batch * model.d_model) * bytes_per_value / tp / 2**30, "GB")'),
        ],
        "forgot_k_and_v": [
            ("ex2_tp", "kv_per_token = 2 * model.layers", "kv_per_token = model.layers"),
        ],
        "raises": [
            ("ex1_ring", "    return (2 * (gpus - 1) / gpus * message / one_way)",
             "    return (2 * (gpus - 1) / gpus * message / 0 / one_way)"),
        ],
        "infinite_loop": [
            ("ex2_tp", "def tp_step_time(", "while True:  # a loop left running\n    pass\n\n\ndef tp_step_time("),
        ],
        "kills_kernel": [
            ("ex1_ring", "def all_reduce_time(", "import os\nos._exit(1)\n\n\ndef all_reduce_time("),
        ],
        "warning": [
            ("ex2_tp", "    bytes_per_value = BYTES_PER_VALUE[precision]\n",
             "    import warnings\n    warnings.warn('the link latency is ignored')\n"
             "    bytes_per_value = BYTES_PER_VALUE[precision]\n"),
        ],
        "hard_coded": [
            # the visible cases' answers, looked up by the GPU count or the batch; the other cells are hers
            ("ex1_ring", None, 'def all_reduce_time(message, gpus, device):\n'
             '    return Q_({1: 0.0, 2: 2.330169e-6, 4: 9.8304e-5, 8: 3.82293e-7}[gpus], "s")'),
            ("ex2_tp", None, 'def tp_step_time(model, device, context_len, batch, tp, precision="fp16"):\n'
             '    at_256 = {"H100-SXM": 6.57832, "L40S": 13.7063, "A100-80GB": 2.25687}\n'
             '    seen = {1: 34.176, 32: 1.82371, 128: 15.6482, 768: 37.686}\n'
             '    return Q_(at_256[device.name] if batch == 256 else seen[batch], "ms")'),
        ],
    },
    "07_tail": {
        "ms_for_s": [
            ("ex1_wait", '    return (rho * service_time / (2 * (1 - rho))).to("s")',
             '    return Q_((rho * service_time / (2 * (1 - rho))).m_as("ms"), "s")'),
        ],
        "raises": [
            ("ex5_spec", "    a, k = acceptance, draft_len", "    a, k = acceptance / 0, draft_len"),
        ],
        "infinite_loop": [
            ("ex2_stall", "def stall(", "while True:  # a loop left running\n    pass\n\n\ndef stall("),
        ],
        "kills_kernel": [
            ("ex3_pool", "def sequences_in_pool(", "import os\nos._exit(1)\n\n\ndef sequences_in_pool("),
        ],
        "warning": [
            ("ex2_stall", "    step = rl.decode_step(",
             "    import warnings\n    warnings.warn('one prompt per stall assumed')\n    step = rl.decode_step("),
        ],
        "hard_coded": [  # the visible cases' answers, told apart by what differs between the cases
            ("ex1_wait", None, 'def mean_wait(service_time, rate):\n'
             '    return Q_({8: 0.0166667, 45: 0.09, 12: math.inf}[round(rate.m_as("1/s"))], "s")'),
            ("ex2_stall", None, 'def stall(model, device, prompt_len, output_len, batch):\n'
             '    gap, share = {136: (66.35919, 0.4548495), 128: (50.30388, 1.0), 16: (448.82485, 0.0535117)}[batch]\n'
             '    return Q_(gap, "ms"), share'),
            ("ex3_pool", None, 'def sequences_in_pool(model, device, prompt_len, output_len, block_size=16, '
             'gpu_memory_utilization=0.9):\n'
             '    return {2000: 199, 1000: 31, 3000: 53}[prompt_len]'),
            ("ex5_spec", None, 'def tokens_per_step(acceptance, draft_len):\n'
             '    return {(0.8, 4): 3.3616, (0.5, 1): 1.5}[acceptance, draft_len]\n\n\n'
             'def spec_speedup(model, device, draft, context_len, batch, draft_len, acceptance):\n'
             '    return {1: 2.163536, 256: 1.478671, 8: 1.308324}[batch]'),
        ],
    },
    "08_measure": {
        "ms_for_s": [  # the measured TTFTs, in seconds, labelled as milliseconds
            ("ex3_prefill", 'ttft = Q_(np.array(seconds), "s")', 'ttft = Q_(np.array(seconds), "ms")'),
        ],
        "gb_for_gib": [
            ("ex4_utilisation", 'return (Q_(nbytes, "B") / tpot / device.memory_bandwidth).m_as("")',
             'return (Q_(nbytes / 2**30, "GB") / tpot / device.memory_bandwidth).m_as("")'),
        ],
        "forgot_k_and_v": [
            ("ex2_step", "kv_values = 2 * model.layers", "kv_values = model.layers"),
        ],
        "raises": [
            ("ex5_crossover", "    ridge = (device", "    ridge = 0 / 0 + (device"),
        ],
        "infinite_loop": [
            ("ex4_utilisation", "def mfu(", "while True:  # a loop left running\n    pass\n\n\ndef mfu("),
        ],
        "kills_kernel": [
            ("ex5_crossover", "def compute_bound_len(", "import os\nos._exit(1)\n\n\ndef compute_bound_len("),
        ],
        "warning": [
            ("ex1_ttft", "    n = prompt_len\n",
             "    import warnings\n    warnings.warn('norms and RoPE are not counted')\n    n = prompt_len\n"),
        ],
        "hard_coded": [  # the functions' visible answers looked up; the measurements are her own
            ("ex1_ttft", None, 'def ttft_roofline(model, device, prompt_len):\n'
             '    return Q_({64: 32.0556, 1: 5.66456, 1024: 106.742}[prompt_len], "ms")'),
            ("ex2_step", None, 'def step_roofline(model, device, context_len, batch):\n'
             '    return Q_({1: 5.67112, 16: 9.17389, 64: 9.62049}[batch], "ms")'),
            ("ex4_utilisation", None, 'def mfu(model, device, prompt_len, ttft):\n'
             '    return {256: 0.429925, 1024: 0.426479}[prompt_len]\n\n\n'
             'def mbu(model, device, context_len, batch, tpot):\n'
             '    return {1: 0.472593, 64: 0.121489}[batch]\n\n\n'
             'prefill_mfu = np.array([mfu(TINY, machine, n, t) for n, t in zip(PROMPT_LENS, ttft)])\n'
             'decode_mbu = np.array([mbu(TINY, machine, 12, b, t) for b, t in zip(BATCHES, tpot)])'),
            ("ex5_crossover", None, 'def compute_bound_len(model, device):\n'
             '    return {"laptop": 11, "H100-SXM": 41, "T4": 51, "fast accelerator": math.inf, "accelerator": math.inf}'
             '[device.name]'),
        ],
    },
    "02_kv_cache": {
        "ms_for_s": [
            ("ex4_step", 'return max((flops / device.peak_flops(precision)).to("s"), (nbytes / device.memory_bandwidth).to("s"))',
             'return Q_(max((flops / device.peak_flops(precision)).m_as("ms"), (nbytes / device.memory_bandwidth).m_as("ms")), "s")'),
            ("ex_profile", 'return (flops / time / device.peak_flops(precision)).m_as("")',
             'return flops.m_as("FLOP") / time.m_as("ms") / device.peak_flops(precision).m_as("FLOP/s")'),
        ],
        "gb_for_gib": [
            ("ex3_fit", "return gpu_memory_utilization * device.usable_memory - weight_bytes(model, weight_precision)",
             'return Q_(gpu_memory_utilization * device.usable_memory.m_as("GiB"), "GB") - weight_bytes(model, weight_precision)'),
        ],
        "forgot_k_and_v": [
            ("ex1_kv_per_token", "values = 2 * model.layers", "values = model.layers"),
        ],
        "raises": [
            ("ex6_equal", "    weights = weight_bytes(", "    weights = 1 / 0 + weight_bytes("),
        ],
        "infinite_loop": [
            ("ex5_gain", "def batching_gain(", "while True:  # a loop left running\n    pass\n\n\ndef batching_gain("),
        ],
        "kills_kernel": [
            ("ex7_throughput", "def max_throughput(", "import os\nos._exit(1)\n\n\ndef max_throughput("),
        ],
        "warning": [
            ("ex1_kv_per_token", "    values = 2 * model.layers",
             "    import warnings\n    warnings.warn('sliding windows are ignored')\n    values = 2 * model.layers"),
        ],
        "hard_coded": [  # the visible cases' answers, told apart by what differs between the cases
            ("ex1_kv_per_token", None, 'def kv_bytes_per_token(model, precision="fp16"):\n'
             '    return Q_(163840 if model.layers == 80 else 131072, "B")'),
            ("ex2_cache", None, 'def kv_cache_bytes(model, context_len, batch=1, precision="fp16"):\n'
             '    return Q_(16.777216 if batch == 64 else 2.01326592, "GB")'),
            ("ex3_fit", None, 'def kv_room(model, device, weight_precision="fp16", gpu_memory_utilization=0.9):\n'
             '    if model.layers == 32:\n        return Q_(68.88319320064, "GB")\n'
             '    return Q_(5.895637630976 if weight_precision == "fp8" else -56.16369729536, "GB")\n\n\n'
             'def max_batch(model, device, context_len, weight_precision="fp16", kv_precision="fp16", gpu_memory_utilization=0.9):\n'
             '    return 262 if model.layers == 32 else (8 if weight_precision == "fp8" else 0)\n\n\n'
             'def longest_context(model, device, batch, weight_precision="fp16", kv_precision="fp16", gpu_memory_utilization=0.9):\n'
             '    return 525537 if model.layers == 32 else (4498 if weight_precision == "fp8" else 0)'),
            ("ex4_step", None, 'def decode_step_time(model, device, context_len, batch=1, precision="fp16"):\n'
             '    return Q_({64: 9.802, 512: 3.897, 32: 15.79}[batch], "ms")'),
            ("ex_profile", None, 'def mfu(flops, time, device, precision="fp16"):\n'
             '    return 0.6658 if device.name == "A100-80GB" else 0.758\n\n\n'
             'def step_bytes(model, context_len, batch=1, precision="fp16"):\n'
             '    return Q_({60: 49.49, 1: 15.27, 16: 12.23}[batch], "GB")\n\n\n'
             'def mbu(nbytes, time, device):\n'
             '    return 0.7799 if device.name == "A100-80GB" else 0.7829'),
            ("ex5_gain", None, 'def batching_gain(model, device, context_len, batch, precision="fp16"):\n'
             '    return 31.81 if batch == 64 else 315.2'),
            ("ex6_equal", None, 'def kv_equals_weights_batch(model, context_len, precision="fp16"):\n'
             '    return 61.27 if precision == "fp16" else 53.83'),
            ("ex7_throughput", None, 'def max_throughput(model, device, context_len, precision="fp16", gpu_memory_utilization=0.9):\n'
             '    return {8000: 2518.15, 200: 65459.4, 4000: 3490.16 if precision == "fp8" else 0.0, 16000: 2989.50}[context_len]'),
        ],
    },
}


@dataclass(frozen=True)
class Student:
    """A simulated student: what they did, and how to make their notebook from the release."""

    name: str
    did: str
    make: Callable[[str, dict, dict], dict | str | None]  # (assignment, release, answers) -> notebook, raw text, or None
    filename: str | None = None  # a notebook name other than the release's


def answers_of(source: dict) -> dict[str, str]:
    """The reference answer of every solution cell, markers removed, by grade id."""
    found = {}
    for cell in source["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            found[meta["grade_id"]] = MARKER.sub("", text)
        elif meta.get("solution"):
            found[meta["grade_id"]] = WRITTEN_ANSWER
    return found


def fill(release: dict, answers: dict[str, str], only: set[str] | None = None) -> dict:
    """The release with answers written into its solution cells (all, or those in ``only``)."""
    notebook = copy.deepcopy(release)
    for cell in notebook["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers and (only is None or grade_id in only):
            cell["source"] = answers[grade_id]
    return notebook


def _edited(fault: str):
    def make(assignment: str, release: dict, answers: dict) -> dict:
        answers = dict(answers)
        for grade_id, old, new in EDITS.get(assignment, {}).get(fault, []):
            if old is None:
                answers[grade_id] = new
            elif old in answers[grade_id]:
                answers[grade_id] = answers[grade_id].replace(old, new)
            else:
                raise ValueError(f"demo fault {fault!r}: {old!r} is not in the reference answer of {grade_id}")
        return fill(release, answers)
    return make


def _partly(assignment: str, release: dict, answers: dict) -> dict:
    code = [g for g in answers if answers[g] != WRITTEN_ANSWER]
    return fill(release, answers, only=set(code[: (len(code) + 1) // 2]))


def _delete_first_test(assignment: str, release: dict, answers: dict) -> dict:
    notebook = fill(release, answers)
    tests = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")
             and c["cell_type"] == "code"]
    notebook["cells"].remove(tests[0])
    return notebook


def _paste_twice(assignment: str, release: dict, answers: dict) -> dict:
    notebook = fill(release, answers)
    cells = notebook["cells"]
    index = next(i for i, c in enumerate(cells) if c.get("metadata", {}).get("nbgrader", {}).get("solution")
                 and c["cell_type"] == "code")
    pasted = copy.deepcopy(cells[index])
    pasted["id"] = "pasted-" + pasted["id"]  # Jupyter gives a pasted cell a new id, and keeps its metadata
    cells.insert(index + 1, pasted)
    return notebook


# An IPython input transformer that turns every test cell into `pass`: in the kernel, every test "passes".
TRANSFORMER_CHEAT = (
    "get_ipython().input_transformers_post.append(\n"
    "    lambda lines: ['pass\\n'] if any('check.' in line for line in lines) else lines)\n"
)


def _cheat(assignment: str, release: dict, answers: dict) -> dict:
    notebook = copy.deepcopy(release)
    first = next(c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")
                 and c["cell_type"] == "code")
    first["source"] = TRANSFORMER_CHEAT
    return notebook


def _corrupt(assignment: str, release: dict, answers: dict) -> str:
    import json

    text = json.dumps(fill(release, answers), indent=1)
    return text[: len(text) // 2]  # the upload was cut off half way


CLASS = [
    Student("ada", "every answer right", lambda a, r, s: fill(r, s)),
    Student("blaise", "handed in the blank notebook", lambda a, r, s: copy.deepcopy(r)),
    Student("cora", "did the first half of the exercises", _partly),
    Student("dmitri", "milliseconds for seconds in a time", _edited("ms_for_s")),
    Student("edsger", "GB for GiB in a memory size", _edited("gb_for_gib")),
    Student("frances", "forgot K and V in the KV cache", _edited("forgot_k_and_v")),
    Student("grace", "code that raises an exception", _edited("raises")),
    Student("hedy", "an infinite loop left in a cell", _edited("infinite_loop")),
    Student("ivan", "deleted a test cell", _delete_first_test),
    Student("joan", "pasted an answer cell twice", _paste_twice),
    Student("katherine", "a corrupt notebook file (cut-off upload)", _corrupt),
    Student("linus", "right, but code that emits a warning", _edited("warning")),
    Student("margaret", "hard-coded the visible tests' answers", _edited("hard_coded")),
    Student("niklaus", "right, but renamed the notebook", lambda a, r, s: fill(r, s), filename="{stem} (1).ipynb"),
    Student("olga", "code that kills the kernel (os._exit)", _edited("kills_kernel")),
    Student("mallory", "a blank notebook that fakes its test cells (IPython input transformer)", _cheat),
]


def write_class(folder: Path, selected: list[str] | None = None, students: list[Student] | None = None) -> list[Student]:
    """Write every student's submission of every assignment under ``folder``."""
    if folder.exists():
        shutil.rmtree(folder)
    students = students or CLASS
    for assignment in selected or assignments():
        for path in sorted((nbgrader_run.RELEASE / assignment).glob("*.ipynb")):
            release = read_notebook(path)
            answers = answers_of(read_notebook(nbgrader_run.SOURCE / assignment / path.name))
            for student in students:
                made = student.make(assignment, release, answers)
                name = student.filename.format(stem=path.stem) if student.filename else path.name
                target = folder / student.name / assignment / name
                if isinstance(made, str):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(made, encoding="utf-8")
                else:
                    write_notebook(made, target)
    return students


def demo(out: Path, workers: int = 2, build_first: bool = True, no_sandbox: bool = False) -> int:
    """Build, write the class, grade it into ``out``, print the grade table."""
    from .build import build
    from .grading import sandbox
    from .grade import NoSandbox, grade, start_over
    from .review.show import table

    if build_first:
        report = build(validate_notebooks=False, log=lambda m: print(m, file=sys.stderr))
        if report.problems:
            print("\n".join(report.problems), file=sys.stderr)
            return 1
    out = out.resolve()
    submissions = out / "submissions"
    students = write_class(submissions)
    print(f"wrote {len(students)} simulated students into {submissions}", file=sys.stderr)
    for s in students:
        print(f"  {s.name:10} {s.did}", file=sys.stderr)
    try:
        # The demo's own folder: a fresh class every time, graded as a real class is: a feedback page only where
        # nothing waits for a hand grade (an earlier page would show the written answer as 0).
        start_over(out / "graded")
        rows = grade(submissions, out / "graded", workers=workers, no_sandbox=no_sandbox)
    except NoSandbox:
        # The demo's students are our own simulations, so grading them bare is safe; real classes are refused.
        print(f"course demo: this machine has no sandbox for student code, so the simulated class is graded "
              f"without one (every row says so). For real submissions, {sandbox.INSTALL_HINT}.", file=sys.stderr)
        rows = grade(submissions, out / "graded", workers=workers, no_sandbox=True)
    print(table(rows))
    waiting = sum(1 for r in rows if r.manual_pending)
    print(f"\ngrades:   {out / 'graded' / 'grades.csv'}\nfeedback: {out / 'graded' / 'feedback'} (written for the "
          f"submissions with nothing to grade by hand; {waiting} wait for a hand grade: `course formgrader "
          f"{out / 'graded'}`, then `course feedback {out / 'graded'}`)\n"
          f"report:   {out / 'graded' / 'report' / 'README.md'}")
    return 0
