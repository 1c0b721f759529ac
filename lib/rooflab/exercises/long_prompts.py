"""Assignment 4b, crossovers in the prefill: its exercises and the explorer's question.

Each visible case is chosen for the mistakes it catches (noted beside it);
``tests/test_exercises.py`` feeds every listed mistake to prove it fails.
Hidden cases live in the instructor's hidden test cells, never here.
"""

from __future__ import annotations

import numpy as np

from ..check import _fail, choice, number
from . import exercise, question
from .two_phases import TOTAL_FOR_ACTIVE

A = "04b_long_prompts"
LOGITS_LEFT_OUT = "the last token's logits left out of the total"


def _whole(answer, expected, call: str) -> None:
    """Check a whole number found by a search (tokens, a batch): exactly right, or say by how much it is off."""
    __tracebackhide__ = True
    if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, (int, float, np.integer, np.floating)):
        _fail(f"{call} should be a whole number, got {type(answer).__name__} {answer!r}.")
    if answer == expected:
        return
    if abs(answer - expected) <= 2:
        _fail(f"{call} = {answer:,}, expected {expected:,}: {abs(answer - expected):g} "
              f"{'too many' if answer > expected else 'too few'}. Look at the ends of the search: the first length "
              "that crosses (> or >=), where the search starts and stops, and the output_len - 1 decode steps.",
              "off by one")
    _fail(f"{call} = {answer:,}, expected {expected:,}.")


# -- Exercise 1: attention's share of the prefill ----------------------------------------------------------------

@exercise("attention_share", A, derive=True, derived=r"""
$2LAN^2 = 2PN$ gives $N = P / (LA)$: the active non-embedding parameters over the attention width summed over the
layers. For Llama-3.1-8B, 6.98 B / (32 x 4,096) = 53,250 tokens: beyond Llama-3-8B's 8,192-token context, well
within Llama-3.1-8B's 131,072. For Mixtral $P$ is its 12.6 B active parameters, not 46.4 B: about 96,000 tokens,
beyond its 32,768-token context, so attention never takes half of its prefill.
""", visible=[
    # 4 tokens, where the last token's logits are 2% of the FLOPs (leaving them out shows), 2,000 (3.6%: full,
    # non-causal attention doubles it) and 32,000 (37.5%: counting the embedding table and head in P shows); the
    # half-way length catches a full attention matrix (half of it) and a missing factor of layers
    ("Llama-3.1-8B", (4, 2000, 32000)),
    # a mixture of experts: P is the active parameters (a token passes through 2 of 8 experts), so every
    # parameter in P (all 46.4 B) makes attention's share about 3.7 times too small at 4,096 tokens
    ("Mixtral-8x7B", (16, 4096, 32768)),
])
def _attention_share(answers, case, ref, rl):
    __tracebackhide__ = True
    attention_share, attention_half_len = answers
    name, lengths = case
    lengths = np.array(lengths)
    shares = attention_share(rl.model(name), lengths)
    call = f"attention_share({name}, np.array({[int(n) for n in lengths]}))"
    if np.shape(shares) != lengths.shape:
        _fail(f"{call} should give one share per length, an array of shape {lengths.shape}; got {shares!r}. Write "
              "it as one array expression (np.asarray(prompt_len, dtype=float)), without a loop or if.")
    m = ref.model(name)
    n = lengths.astype(float)
    attention = 2 * m.layers * m.attention_width * n**2
    linear = 2 * m.active_non_embedding_params * n
    # the last token's logits left out of the total: 2% of the FLOPs at 4 tokens, outside the 0.5% tolerance
    slips = {LOGITS_LEFT_OUT: attention / (attention + linear)}
    if m.is_moe:  # P taken as every parameter outside the embedding table and head, not the active ones
        slips[TOTAL_FOR_ACTIVE] = attention / (attention + 2 * m.non_embedding_params * n + 2 * m.d_model * m.vocab)
    number(np.asarray(shares, dtype=float), ref.attention_share(name, lengths), call, rel=0.005, also_wrong=slips)
    number(attention_half_len(rl.model(name)), ref.attention_crossover_len(name), f"attention_half_len({name})",
           rel=0.005)


# -- Exercise 2: the prompt whose prefill outlasts the answer ----------------------------------------------------

def _grid(kind: str, top: int) -> np.ndarray:
    """The prompt lengths searched: every 128 tokens up to 32,768 (or the context), or 50 spaced geometrically."""
    if kind == "every 128":
        return np.arange(128, min(32769, top + 1), 128)
    if kind == "50 geometric":
        return np.geomspace(16, top, 50).astype(int)
    raise ValueError(f"unknown grid {kind!r}: 'every 128' or '50 geometric'")


@exercise("longer_prefill", A, visible=[
    # a 64-token answer on the H100: crosses at 17,363 tokens, so taking the index before the first crossing, the
    # decode of output_len steps (not output_len - 1) or TTFT against one step (ITL) all miss it
    ("Llama-3.1-8B", "H100", 64, "every 128"),
    # a 256-token answer on the H100 crosses beyond 32,768 tokens: no grid point does (None, not the first one,
    # which is what np.argmax of all-False gives), while the bisection still finds it within the context
    ("Llama-3.1-8B", "H100", 256, "every 128"),
])
def _longer_prefill(answers, case, ref, rl):
    __tracebackhide__ = True
    first_longer_prefill, exact_longer_prefill = answers
    name, device, output_len, kind = case[:4]
    top = ref.model(name).max_context - output_len + 1
    hi = case[4] if len(case) > 4 else top
    exact = ref.ttft_exceeds_decode_len(name, device, output_len)
    grid = _grid(kind, top)
    found = first_longer_prefill(rl.model(name), rl.hardware(device), output_len, grid)
    call = f"first_longer_prefill({name}, {device}, {output_len}, the {kind} grid)"
    if exact > grid[-1]:
        if found is not None:
            _fail(f"{call} = {found!r}, but no prompt of the grid (up to {grid[-1]:,}) outlasts the answer: "
                  "expected None.", "a crossing where there is none")
    else:
        _whole(found, int(grid[np.searchsorted(grid, exact)]), call)
    answer = exact_longer_prefill(rl.model(name), rl.hardware(device), output_len, 1, hi)
    call = f"exact_longer_prefill({name}, {device}, {output_len}, 1, {hi})"
    if exact > hi:
        if answer is not None:
            _fail(f"{call} = {answer!r}, but no prompt up to {hi:,} tokens outlasts the answer: expected None.",
                  "a crossing where there is none")
    else:
        _whole(answer, exact, call)


# -- Exercise 3: which spec to buy, at the batch the service runs at ---------------------------------------------

SPECS = {"peak FLOP/s": ("flops", "peak flops", "flop/s", "compute", "peak flop/s", "tflop/s"),
         "memory bandwidth": ("bandwidth", "memory", "hbm bandwidth", "hbm")}


def _share_slips(ref, name, device, prompt_len, output_len, batch, efficiency) -> dict[str, float]:
    """The prefill share each likely slip in modelling ``batch`` requests gives: {slip: share}."""
    def share(n_batch=batch, prefill_batch=None, steps=output_len - 1, grows=True, eff=efficiency, per_seq=False,
              one_step=False):
        prefill = ref.prefill(name, device, prompt_len, prefill_batch or n_batch, allow_overflow=True,
                              efficiency=eff).time_si
        contexts = np.arange(prompt_len, prompt_len + steps) if grows else np.full(steps, prompt_len)
        if one_step:
            contexts = np.array([prompt_len])
        if not contexts.size:  # a one-token answer: the prefill makes it, no step runs
            return 1.0
        step = ref.decode_step(name, device, contexts, n_batch, allow_overflow=True, efficiency=eff).time_si
        decode = float(np.sum(step)) / (n_batch if per_seq else 1)
        return prefill / (prefill + decode)

    right = share()
    return {"output_len decode steps, not output_len - 1 (the prefill makes the first token)": share(steps=output_len),
            "every step at the prompt's context (each step's cache is a token longer)": share(grows=False),
            "one prompt's prefill against the batch's decode (the batch prefills every prompt)": share(prefill_batch=1),
            "the decode time per sequence (divided by the batch): the batch's answers share each step":
                share(per_seq=True),
            "one decode step for the whole answer": share(one_step=True),
            "decided at batch 1, not at the batch served": share(n_batch=1),
            "at the ideal roofline, not the efficiency asked for": share(eff="ideal"),
            "the decode's share, not the prefill's": 1 - right}


@exercise("spec_to_buy", A, derive=("serving.request",), derived=r"""
With $T_p(B)$ the prefill of $B$ prompts in one pass and $T_s(c, B)$ one decode step of $B$ sequences at context
$c$, the $B$ requests take
$$T_p(B) + \sum_{c=P}^{P+O-2} T_s(c, B),$$
$O - 1$ steps, since the prefill makes the first token. The prefill's share is the first term over the total. It
grows with $B$: the prefill's cost is $B$ prompts' FLOPs, compute-bound, so about $B$ times one prompt's, while a
decode step reads the weights once for the whole batch and grows only by the caches. The summariser
(4,000-token documents, 100-token summaries) is 12% prefill alone on the H100 and three quarters at batch 64.
""", visible=[
    # a summariser (4,000-token documents, 100-token summaries) alone on the H100: prefill 12% of the time. It
    # catches TTFT held against one decode step instead of the whole answer, output_len steps for output_len - 1
    # (1% of the decode), and "short answers mean FLOP/s"
    ("Llama-3-8B", "H100", 4000, 100, 1, "typical"),
    # the same summariser at the batch it is served at, 64: prefill 75% of the time, the answer flips. Deciding
    # at batch 1, prefilling one prompt while decoding 64 sequences, or every step at the prompt's context (the
    # caches are two thirds of a step here) shows
    ("Llama-3-8B", "H100", 4000, 100, 64, "typical"),
    # a small model at batch 8 on the B200: prefill 64% at the ideal, 33% at 2023's static engines, where the
    # fixed cost of each decode step weighs; deciding at the ideal, or per sequence (decode time / batch), shows
    ("Gemma-2B", "B200", 4000, 50, 8, "typical-2023"),
])
def _spec_to_buy(answers, case, ref, rl):
    __tracebackhide__ = True
    prefill_share, spec_to_buy = answers
    name, device, prompt_len, output_len, batch, efficiency = case
    r = ref.request(name, device, prompt_len, output_len, batch=batch, allow_overflow=True, efficiency=efficiency)
    call = f"({name}, {device}, {prompt_len}, {output_len}, batch {batch}, {efficiency!r})"
    slips = _share_slips(ref, name, device, prompt_len, output_len, batch, efficiency)
    right = r.prefill_share.m_as("")
    number(prefill_share(rl.model(name), rl.hardware(device), prompt_len, output_len, batch, efficiency), right,
           f"prefill_share{call}", rel=1e-3,
           also_wrong={slip: share for slip, share in slips.items() if abs(share / right - 1) > 2e-3})
    expected = "peak FLOP/s" if r.ttft > r.decode_time else "memory bandwidth"  # a tie counts for the decode
    answer = spec_to_buy(rl.model(name), rl.hardware(device), prompt_len, output_len, batch, efficiency)
    choice(answer, expected, f"spec_to_buy{call}", SPECS)


def _summariser(ref, batch: int) -> str:
    """What the summariser's prediction (4,000-token documents, 100-token summaries on the H100) turns on."""
    ideal, typical = (ref.request("Llama-3-8B", "H100", 4000, 100, batch=batch, allow_overflow=True, efficiency=e)
                      for e in ("ideal", "typical"))
    spec = "peak FLOP/s" if typical.ttft > typical.decode_time else "memory bandwidth"
    why = ("one prompt's prefill is a single pass at the flat roof, while each of the 99 decode steps reads every "
           "weight for one token" if batch == 1 else
           f"the {batch} prompts cost {batch} prefills, while the {batch} answers share each decode step's weight read")
    return (f"At batch {batch} the prefill takes {typical.ttft.m_as('ms'):,.0f} ms and the decode of the answers "
            f"{typical.decode_time.m_as('ms'):,.0f} ms at typical efficiency: the prefill is "
            f"{typical.prefill_share.m_as(''):.0%} of the time ({ideal.prefill_share.m_as(''):.0%} at the ideal), so "
            f"{spec} decides. Why: {why} (Llama-3-8B, H100).")


@question("summariser_alone", A, "memory bandwidth", SPECS, revisited_in="The cell after Exercise 3's table")
def _summariser_alone(ref):
    return _summariser(ref, 1)


@question("summariser_at_64", A, "peak FLOP/s", SPECS, revisited_in="The cell after Exercise 3's table")
def _summariser_at_64(ref):
    return _summariser(ref, 64)


# -- the explorer's question -------------------------------------------------------------------------------------

MOVES = {"shorter": ("shorter prompts", "down", "lower", "smaller", "earlier", "fewer"),
         "longer": ("longer prompts", "up", "higher", "larger", "later", "more"),
         "the same": ("same", "unchanged", "no change", "stays", "it stays", "does not move")}


@question("h200_crossing", A, "shorter", MOVES)
def _h200_crossing(ref):
    h100, h200 = (ref.ttft_exceeds_decode_len("Llama-3.1-8B", d, 64) for d in ("H100", "H200"))
    ttft = [ref.prefill("Llama-3.1-8B", d, 16000).time.m_as("ms") for d in ("H100", "H200")]
    itl = [ref.decode_step("Llama-3.1-8B", d, 16000).time.m_as("ms") for d in ("H100", "H200")]
    ratio = ref.hardware("H200").memory_bandwidth / ref.hardware("H100").memory_bandwidth
    return (f"The H200 has the H100's peak FLOP/s and {ratio.m_as(''):.2f} times its bandwidth. A long prompt's "
            f"prefill is compute-bound, so it takes as long on both ({ttft[0]:.0f} ms on the H100, {ttft[1]:.0f} ms on "
            f"the H200, at 16,000 tokens), while every decode step is memory-bound and shorter on the H200 "
            f"({itl[0]:.2f} ms on the H100, {itl[1]:.2f} ms on the H200). With the answer cheaper and the prompt not, the prefill outlasts a 64-token answer "
            f"from {h200:,} tokens on the H200 instead of {h100:,} on the H100: more workloads sit on the prefill "
            "side of the crossover on a GPU with more bandwidth per FLOP/s.")
