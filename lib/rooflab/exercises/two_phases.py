"""Assignment 1, two phases, one request: its exercises and predictions.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
"""

from __future__ import annotations

from ..check import quantity
from . import exercise, question

A = "01_two_phases"
EXACT = 1e-3  # FLOP and byte counts are exact arithmetic: only rounding may differ


@exercise("prefill_flops", A, derive=True, visible=[
    ("Llama-3-8B", 2000),  # attention is 3.6% of it: a missing or doubled (non-causal) attention term shows
    ("Llama-3-8B", 16),    # the logits are 0.5% of it: forgetting them (or counting them per token) shows
])
def _prefill_flops(answers, case, ref, rl):
    __tracebackhide__ = True
    (prefill_flops,) = answers
    name, prompt_len = case
    expected = ref.prefill(name, "H100", prompt_len, allow_overflow=True).flops
    quantity(prefill_flops(rl.model(name), prompt_len), expected, f"prefill_flops({name}, {prompt_len})", rel=EXACT)


PHASES = {"prefill": ("the prefill", "prompt"), "decode": ("decoding", "the decode", "generation")}
SPECS = {"peak FLOP/s": ("flops", "peak flops", "flop/s", "compute", "tflop/s"),
         "memory bandwidth": ("bandwidth", "memory", "hbm bandwidth", "hbm")}


@question("compute_bound_phase", A, "prefill", PHASES, revisited_in="Exercise 4")
def _compute_bound_phase(ref):
    long = ref.prefill("Llama-3-8B", "H100", 2000)
    step = ref.decode_step("Llama-3-8B", "H100", 2000)
    turn = ref.prefill_compute_bound_len("Llama-3-8B", "H100")
    ridge = ref.hardware("H100").ridge_point("fp16")
    return (f"The H100's ridge point is {ridge.m_as('FLOP/B'):.0f} FLOP/B. The prefill of a 2,000-token prompt does "
            f"{long.intensity.m_as('FLOP/B'):,.0f} FLOP per byte it reads, so it waits on the arithmetic; a decode "
            f"step does {step.intensity.m_as('FLOP/B'):.1f}, so it waits on memory. A prompt shorter than about "
            f"{turn} tokens is memory-bound in the prefill too: its intensity is about one FLOP/B per token.")


@question("chatbot_spec", A, "memory bandwidth", SPECS, revisited_in="Exercise 6")
def _chatbot_spec(ref):
    chat = ref.request("Llama-3-8B", "H100", 50, 500)
    return (f"A chatbot turn of a 50-token question and a 500-token answer spends "
            f"{chat.decode_share.m_as(''):.1%} of its time decoding (Llama-3-8B, H100), and decode is memory-bound: "
            "memory bandwidth sets how fast its words stream, and its short prompts are memory-bound too.")
