"""The grading pipeline end to end on the simulated class (ten assignments, sixteen students).

Expected scores are derived from which test cells each student's fault breaks.

01_two_phases, cell points in brackets (40 autograded, 12 of them in visible tests; the predictions are recorded,
not graded): prefill_flops [1 visible + 3 hidden]; weight_bytes [1+3]; decode_bytes [1+4]; roofline_time [1+3];
ttft_and_itl [1+3]; intensities [2+3]; speedups [2+3]; sla_verdict [2+3]; decode_share [1+3].

02_kv_cache (30 autograded, 8 visible): kv_bytes_per_token [1+3]; kv_cache_bytes [1+2];
kv_room, max_batch and longest_context [1+4]; decode_step_time [1+3]; mfu, step_bytes and mbu [1+4];
batching_gain [1+2]; kv_equals_weights_batch [1+2]; max_throughput [1+2].

03_quantization (25 autograded, 6 visible): bits and bytes [1+3]; decode_speedup [1+4]; ttft_speedup [1+2];
w8a8_prefill_speedup [1+2]; extra_sequences [1+4]; cheapest_config [1+4].

04_crossover (20 autograded, 3 visible, no written answer): compute_bound_batch [1+5]; attention_intensity and
decode_parts [1+6]; moe_decode (experts read, body bytes, compute-bound batch) [1+6].
04b_long_prompts (20 autograded, 3 visible; the written answer 10): attention share [1+5]; prefill against answer
[1+6]; spec_to_buy [1+6].  Its answers handle no units of their own: the three unit students get the reference.

05_under_load (30 autograded, 7 of them in visible tests, no written answer; its predictions are recorded, not
graded): step_time and tokens_per_second [1+3]; engine_state [2+7]; frontier_curve and bend_batch [2+6];
best_batch [2+7].  frontier_curve and best_batch call engine_state: a slip there is charged once (the cascade).
06_cost (20 autograded, 4 visible, no written answer): cost_per_million [1+3]; token_prices [2+8]; cost_at_sla
[1+5].  token_prices and cost_at_sla call cost_per_million (charged once); the course's engine_state and best_batch
come from rooflab.earlier.  Its answers price the library's own times: the three unit students get the reference.
06b_tensor_parallel (20 autograded, 6 visible; the written answer 10): all_reduce_time [2+4]; tp_step_time [4+10].
tp_step_time calls all_reduce_time (charged once).

07_tail (30 autograded, 6 of them in visible tests; predictions, the explorer's question and the optional "Going
further" exercises, prefix_tokens_saved and highest_rate, carry no points): mean_wait [1+6]; stall [2+6];
sequences_in_pool [1+6]; tokens_per_step and spec_speedup [2+6].  No exercise calls another's function, so a fault
costs its own 7 or 8.
08_measure (25 autograded, 7 visible; the written answer 5; predictions recorded, not graded; the students'
measurements are taken again in the sandbox when graded): ttft_roofline [1+4]; step_roofline [1+4]; the two
profiles [2+4]; mfu and mbu [1+3]; MFU and MBU of one's own profiles [1+1]; compute_bound_len [1+2].
"""

import csv
import zipfile

import pytest

from course import demo
from course.grade import grade
from tests.conftest import BARE

pytestmark = pytest.mark.slow

A, B, C, D, E, F = "01_two_phases", "02_kv_cache", "03_quantization", "04_crossover", "05_under_load", "07_tail"
G, H, I, J = "08_measure", "06_cost", "04b_long_prompts", "06b_tensor_parallel"
# 01_two_phases: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_A = {
    # (student, assignment): (score, status, manual points pending)
    # the reference answers; the written answer waits for the instructor
    ("ada", A): (40, "graded", 10),
    # blank: every test fails; an untouched written answer needs no grading
    ("blaise", A): (0, "graded", 0),
    # the first half of the answer cells: A prefill_flops to ttft_and_itl, 4+4+5+4+4; B ex1-ex4, 4+3+5+4
    ("cora", A): (21, "graded", 0),
    # ms for s.  A: roofline_time [4] and ttft_and_itl [4] fail; speed-up ratios survive.
    # B: decode_step_time [4] fails; batching_gain is a ratio of two such times and survives
    # A slip is charged once (course/grading/autograde.py): ttft_and_itl passes with the course's roofline_time: 40 - 4.
    ("dmitri", A): (36, "graded", 10),
    # GB for GiB.  A, in weight_bytes: weight_bytes [1+3], decode_bytes [1+4], ttft_and_itl [1+3] and
    # intensities [2+3] fail, 18 points (on Llama-3-8B weights / 1.074 land within 0.4 % of the careful count that
    # skips the embedding table, so each visible test also has a model whose embedding is a small share);
    # speed-up ratios survive.  B, the capacity read in GiB: max_batch and longest_context [5] and the FP8 gain [3] fail
    # A slip is charged once: decode_bytes, ttft_and_itl and intensities pass with the course's weight_bytes (and
    # decode_bytes): only weight_bytes' own 1 + 3 are lost.
    ("edsger", A): (36, "graded", 10),
    # forgot K and V.  A: decode_bytes [1+4] (its KV part is checked on its own) and the visible ttft_and_itl [1]
    # (Llama-2-7B at 4,000 tokens, where the cache is 13 % of a step's bytes); the hidden ttft_and_itl cases'
    # caches are under 2 % of the bytes and pass.  The visible intensities [2]: at that case the halved cache takes
    # the step's bytes from 13.5 + 2.1 = 15.6 GB to 14.5 GB, an intensity 7 % too high (the hidden cases' caches are
    # small again).  40 - 5 - 1 - 2 = 32.  B: every exercise stands on kv_bytes_per_token, and every one fails
    # A slip is charged once: the visible ttft_and_itl and intensities pass with the course's decode_bytes, and in B
    # every later exercise passes with the course's kv_bytes_per_token: A 40 - 5, B 30 - (1 + 3).
    ("frances", A): (35, "graded", 10),
    # raises.  A, in prefill_flops: it [4], ttft_and_itl [4], intensities [5], speedups [5] fail.
    # B, in kv_equals_weights_batch: that exercise [3] alone
    # A slip is charged once: ttft_and_itl, intensities and speedups pass with the course's prefill_flops: 40 - 4.
    ("grace", A): (36, "graded", 10),
    # a cell loops until the per-cell timeout, so its functions never exist: A decode_share [4], B batching_gain [3]
    ("hedy", A): (36, "graded", 10),
    # deleted a test cell (restored), pasted an answer twice (rebuilt), a warning on stderr (ignored),
    # a renamed notebook (found): all full marks
    ("ivan", A): (40, "graded", 10),
    ("joan", A): (40, "graded", 10),
    ("linus", A): (40, "graded", 10),
    ("niklaus", A): (40, "graded", 10),
    # corrupt JSON: nothing to grade
    ("katherine", A): (0, "ungradable", 0),
    # os._exit at the top of an answer cell kills the kernel: that cell is lost (a fresh kernel replays the rest),
    # so its functions never exist.  A: sla_verdict [2+3]; B: max_throughput [3]
    ("olga", A): (35, "graded", 10),
    # an IPython input transformer that turns every test cell into `pass`: the kernel's own tests all pass,
    # the grader's run of them finds nothing defined
    ("mallory", A): (0, "graded", 0),
    # hard-coded visible answers (a table of every visible case): the visible points only, 1+1+1+1+1+2+2+2+1
    ("margaret", A): (12, "graded", 10),
}
# 02_kv_cache: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_B = {
    # (student, assignment): (score, status, manual points pending)
    # the reference answers; the written answer (10) waits for the instructor
    ("ada", B): (30, "graded", 10),
    # blank: every test fails; an untouched written answer needs no grading
    ("blaise", B): (0, "graded", 0),
    # the first half of the eight answer cells: kv_bytes_per_token, kv_cache_bytes, max_batch, decode_step_time,
    # 4 + 3 + 5 + 4 = 16
    ("cora", B): (16, "graded", 0),
    # ms for s in decode_step_time [4] and in mfu [5] (the profile's two test cells run all three functions);
    # batching_gain is a ratio of two such times and survives: 30 - 9
    ("dmitri", B): (21, "graded", 10),
    # GB for GiB, the capacity read in GiB: kv_room, max_batch and longest_context [5] and max_throughput, which
    # counts with max_batch [3], fail (0.9 x 79.11 - 16.06 = 55.14 GB of room at 8,000 tokens: 52 sequences for 57,
    # 52 / 21.07 ms = 2,468 tokens/s instead of 57 / 22.64 ms = 2,518): 30 - 8
    ("edsger", B): (22, "graded", 10),
    # forgot K and V in kv_bytes_per_token: every exercise stands on it and every one fails, the profile's
    # step_bytes too (the caches are 73% of the batch-60 step's bytes)
    ("frances", B): (26, "graded", 10),
    # raises in kv_equals_weights_batch: that exercise [3] alone
    ("grace", B): (27, "graded", 10),
    # a cell loops until the per-cell timeout, so batching_gain never exists [3]
    ("hedy", B): (27, "graded", 10),
    # deleted a test cell (restored), pasted an answer twice (rebuilt), a warning on stderr (ignored),
    # a renamed notebook (found): all full marks
    ("ivan", B): (30, "graded", 10),
    ("joan", B): (30, "graded", 10),
    ("linus", B): (30, "graded", 10),
    ("niklaus", B): (30, "graded", 10),
    # corrupt JSON: nothing to grade
    ("katherine", B): (0, "ungradable", 0),
    # os._exit at the top of max_throughput's cell: the kernel dies, that function never exists [3]
    ("olga", B): (27, "graded", 10),
    # an IPython input transformer that turns every test cell into `pass`: the grader's run finds nothing defined
    ("mallory", B): (0, "graded", 0),
    # hard-coded visible answers: the eight visible points only
    ("margaret", B): (8, "graded", 10),
}
# 03_quantization: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_C = {
    ("mallory", C): (0, "graded", 0),
    ("ada", C): (25, "graded", 5), ("blaise", C): (0, "graded", 0),
    ("cora", C): (12, "graded", 0),  # bits and bytes, decode_speedup, ttft_speedup: 4 + 5 + 3
    # ms for s in decode_step_time: the speed-ups are ratios and cancel it, but the decode exercise checks the step
    # time first (4.798 s for 4.798 ms): its tests [1 + 4] fail.  25 - 5 = 20
    ("dmitri", C): (20, "graded", 5),
    # GB for GiB in quantized_weight_bytes (every weight / 1.074): its tests [1 + 3] fail.  decode_step_time of INT4
    # weights at 100 tokens reads 5.31 GB instead of 5.70 GB: 1.589 ms against 1.705 ms (or the careful 1.392 ms),
    # outside 2 % of both: decode [1 + 4].  ttft_speedup: both prefills of a memory-bound prompt read the same wrong way
    # and the ratio survives, but Mistral-7B's 100-token INT8 prefill on the A100 turns memory-bound in the wrong
    # count, 1.476 against 1.584: the visible test [1] fails; the hidden cases are all memory-bound in both formats
    # or compute-bound in both, and pass [2].  w8a8 likewise survives (2,000 tokens compute-bound both ways, 16
    # tokens memory-bound both ways).  extra_sequences: largest_batch of Llama-3-8B at 8,000 tokens and 0.9 x 85.52 =
    # 76.97 GB gets floor((76.97 - 14.96) / 1.049) = 59 FP16 sequences instead of 58: visible [1] and hidden [4].
    # 25 - 4 - 5 - 1 - 5 = 10
    ("edsger", C): (10, "graded", 5),
    ("frances", C): (20, "graded", 5),  # halves the cache per sequence in largest_batch: extra_sequences [5]
    ("grace", C): (22, "graded", 5),  # w8a8_prefill_speedup raises [3]
    ("hedy", C): (22, "graded", 5),  # the loop stops ttft_speedup being defined [3]
    ("ivan", C): (25, "graded", 5), ("joan", C): (25, "graded", 5), ("linus", C): (25, "graded", 5),
    ("niklaus", C): (25, "graded", 5),
    ("katherine", C): (0, "ungradable", 0),
    ("olga", C): (20, "graded", 5),  # os._exit in cheapest_config's cell [5]
    ("margaret", C): (6, "graded", 5),  # the six visible tests
}
# 04_crossover: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_D = {
    ("mallory", D): (0, "graded", 0),
    # 04: 20 autograded points and no written answer, so nothing waits for the instructor.
    ("ada", D): (20, "graded", 0), ("blaise", D): (0, "graded", 0),
    # the first two of its three answer cells ((3 + 1) // 2): compute_bound_batch and with caches: 6 + 7
    ("cora", D): (13, "graded", 0),
    # ms for s in decode_parts' roofline: every part 1000 times too long, both of its tests [1+6]: 20 - 7
    ("dmitri", D): (13, "graded", 0),
    # GB for GiB in the weights of compute_bound_batch: off by 1.074 on Llama-3-70B at FP8 on the H200 (194.9 against
    # 209.3, and 207 for the careful count), visible, and on the hidden cases: both of its tests [1+5]: 20 - 6
    ("edsger", D): (14, "graded", 0),
    ("frances", D): (13, "graded", 0),  # half the cache bytes in decode_parts' attention: exercise 2 [1+6]: 20 - 7
    ("grace", D): (13, "graded", 0),  # experts_read divides by zero: exercise 3's tests [1+6]: 20 - 7
    ("hedy", D): (13, "graded", 0),  # the loop stops attention_intensity and decode_parts being defined [1+6]
    ("ivan", D): (20, "graded", 0), ("joan", D): (20, "graded", 0), ("linus", D): (20, "graded", 0),
    ("niklaus", D): (20, "graded", 0),
    ("katherine", D): (0, "ungradable", 0),
    ("olga", D): (14, "graded", 0),  # os._exit in compute_bound_batch's cell: both of its tests [1+5]: 20 - 6
    ("margaret", D): (3, "graded", 0),  # the three visible tests, 1 point each
}
# 04b_long_prompts: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_I = {
    ("mallory", I): (0, "graded", 0),
    # 20 autograded points, the written answer (10) waits for the instructor.
    ("ada", I): (20, "graded", 10), ("blaise", I): (0, "graded", 0),
    # the first two of its three answer cells: attention share and the prefill against the answer: 6 + 7
    ("cora", I): (13, "graded", 0),
    # no unit of its own to slip: the ms-for-s, GB-for-GiB and K-and-V students hand in the reference here
    ("dmitri", I): (20, "graded", 10), ("edsger", I): (20, "graded", 10), ("frances", I): (20, "graded", 10),
    ("grace", I): (14, "graded", 10),  # attention_half_len divides by zero: exercise 1's tests [1+5]: 20 - 6
    ("hedy", I): (13, "graded", 10),  # the loop stops spec_to_buy being defined [1+6]: 20 - 7
    ("ivan", I): (20, "graded", 10), ("joan", I): (20, "graded", 10), ("linus", I): (20, "graded", 10),
    ("niklaus", I): (20, "graded", 10),
    ("katherine", I): (0, "ungradable", 0),
    ("olga", I): (13, "graded", 10),  # os._exit in first_longer_prefill's cell: both of its tests [1+6]: 20 - 7
    ("margaret", I): (3, "graded", 10),  # the three visible tests, 1 point each
}
# 05_under_load: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_E = {
    # 05: 30 autograded points and no written answer, so nothing waits for the instructor.
    ("ada", E): (30, "graded", 0), ("blaise", E): (0, "graded", 0),
    # the first half of the 4 answer cells: step_time [1+3] and engine_state [2+7]
    ("cora", E): (13, "graded", 0),
    # ms for s in step_time: its step 1000 times too long, tokens_per_second 1000 times too small [1+3]; no other
    # answer calls it (engine_state prices the step with the library's costs): 30 - 4
    ("dmitri", E): (26, "graded", 0),
    # GB for GiB in step_time's body bytes: the weight read, half of the 9.86 ms step at batch 64, shrinks by
    # 10^9 / 2^30, 3.4% off the step, outside the 2% tolerance [1+3]: 30 - 4
    ("edsger", E): (26, "graded", 0),
    # forgot K and V in step_time: the cache read halves, 5.38 of the 9.86 ms at batch 64 and 2,149 tokens [1+3]
    ("frances", E): (26, "graded", 0),
    # engine_state divides by zero [2+7]; frontier_curve and best_batch call it and pass with the course's
    # engine_state (a slip charged once): 30 - 9
    ("grace", E): (21, "graded", 0),
    ("hedy", E): (21, "graded", 0),  # the loop stops best_batch being defined [2+7]
    ("ivan", E): (30, "graded", 0), ("joan", E): (30, "graded", 0), ("linus", E): (30, "graded", 0),
    ("niklaus", E): (30, "graded", 0),
    ("katherine", E): (0, "ungradable", 0),
    ("olga", E): (22, "graded", 0),  # os._exit in frontier_curve's cell [2+6]
    ("mallory", E): (0, "graded", 0),
    # hard-coded visible answers in step_time [1], engine_state [2] and best_batch [2]; her frontier_curve, her
    # own, calls her engine_state, which fails its hidden test, and passes with the course's [2+6]: 5 + 8
    # (graded once in the sandbox for 05 and 06_cost alone: every row of EXPECTED_E and EXPECTED_H as written)
    ("margaret", E): (13, "graded", 0),
}
# 06_cost: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_H = {
    # 20 autograded points and no written answer
    ("ada", H): (20, "graded", 0), ("blaise", H): (0, "graded", 0),
    # the first half of the 3 answer cells, (3 + 1) // 2 = 2: cost_per_million [1+3] and token_prices [2+8]: 4 + 10
    ("cora", H): (14, "graded", 0),
    # no time or memory size of their own to slip: the reference answers
    ("dmitri", H): (20, "graded", 0), ("edsger", H): (20, "graded", 0), ("frances", H): (20, "graded", 0),
    # cost_per_million divides by zero [1+3]; token_prices and cost_at_sla call it and pass with the course's
    # cost_per_million (a slip charged once): 20 - 4
    ("grace", H): (16, "graded", 0),
    ("hedy", H): (10, "graded", 0),  # the loop stops token_prices being defined [2+8]: 20 - 10
    ("ivan", H): (20, "graded", 0), ("joan", H): (20, "graded", 0), ("linus", H): (20, "graded", 0),
    ("niklaus", H): (20, "graded", 0),
    ("katherine", H): (0, "ungradable", 0),
    ("olga", H): (14, "graded", 0),  # os._exit in cost_at_sla's cell [1+5]: 20 - 6
    ("mallory", H): (0, "graded", 0),
    # hard-coded visible answers in cost_per_million [1] and cost_at_sla [1]; token_prices calls her
    # cost_per_million, which fails its hidden test, and passes with the course's [2+8]: 1 + 10 + 1
    ("margaret", H): (12, "graded", 0),
}
# 06b_tensor_parallel: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_J = {
    # 20 autograded points, the written deployment (10) waits for the instructor
    ("ada", J): (20, "graded", 10), ("blaise", J): (0, "graded", 0),
    # the first half of the 2 answer cells, (2 + 1) // 2 = 1: all_reduce_time [2+4]
    ("cora", J): (6, "graded", 0),
    # ms for s in tp_step_time [4+10]: 20 - 14
    ("dmitri", J): (6, "graded", 10),
    # GB for GiB in tp_step_time's weight bytes: 7% short at batch 1, where the body is nearly all, outside the 1%
    # tolerance [4+10]: 20 - 14
    ("edsger", J): (6, "graded", 10),
    # forgot K and V in tp_step_time: the caches are most of the step of 256 sequences at 2,000 tokens [4+10]: 20 - 14
    ("frances", J): (6, "graded", 10),
    # all_reduce_time divides by zero [2+4]; tp_step_time calls it and passes with the course's (charged once): 20 - 6
    ("grace", J): (14, "graded", 10),
    ("hedy", J): (6, "graded", 10),  # the loop stops tp_step_time being defined [4+10]: 20 - 14
    ("ivan", J): (20, "graded", 10), ("joan", J): (20, "graded", 10), ("linus", J): (20, "graded", 10),
    ("niklaus", J): (20, "graded", 10),
    ("katherine", J): (0, "ungradable", 0),
    # os._exit in all_reduce_time's cell, before its def [2+4]; tp_step_time calls the missing function and passes
    # with the course's (charged once): 20 - 6
    ("olga", J): (14, "graded", 10),
    ("mallory", J): (0, "graded", 0),
    # hard-coded visible answers in all_reduce_time [2] and tp_step_time [4]: 2 + 4
    ("margaret", J): (6, "graded", 10),
}
# 07_tail: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_F = {
    # 30 autograded points, the written answer (10) waits for the instructor
    ("ada", F): (30, "graded", 10), ("blaise", F): (0, "graded", 0),
    # the first half of the 6 answer cells (4 graded, then the 2 optional ones at the end): mean_wait, stall,
    # sequences_in_pool: (1 + 6) + (2 + 6) + (1 + 6) = 22
    ("cora", F): (22, "graded", 0),
    # ms for s in mean_wait: 1000 times too long where rho < 1 (the past-capacity case still says inf): 30 - (1 + 6)
    ("dmitri", F): (23, "graded", 10),
    # no GB/GiB or K-and-V step in this assignment (the pool comes from memory_budget): the reference
    ("edsger", F): (30, "graded", 10), ("frances", F): (30, "graded", 10),
    # tokens_per_step divides by zero, and spec_speedup calls it: the speculation tests fail: 30 - (2 + 6)
    ("grace", F): (22, "graded", 10),
    # the loop stops stall being defined: 30 - (2 + 6)
    ("hedy", F): (22, "graded", 10),
    ("ivan", F): (30, "graded", 10), ("joan", F): (30, "graded", 10), ("linus", F): (30, "graded", 10),
    ("niklaus", F): (30, "graded", 10),
    ("katherine", F): (0, "ungradable", 0),
    ("olga", F): (23, "graded", 10),  # os._exit in sequences_in_pool's cell: 30 - (1 + 6)
    ("mallory", F): (0, "graded", 0),
    # the visible tests of the four graded exercises: 1 + 2 + 1 + 2
    ("margaret", F): (6, "graded", 10),
}
# 08_measure: (student, assignment): (score, status, manual points pending), with the arithmetic.
EXPECTED_G = {
    # 07: 25 autograded points, the written answer (5) waits for the instructor
    ("ada", G): (25, "graded", 5), ("blaise", G): (0, "graded", 0),
    # the first three of its six answer cells: ttft_roofline, step_roofline and the prefill profile: 5 + 5; without
    # the decode profile's cell tpot never exists, so both profile tests [2+4] fail at their decode case
    ("cora", G): (10, "graded", 0),
    # measured seconds labelled as milliseconds: every TTFT 1000 times shorter than the roofline allows, both
    # profile tests [2+4]; the MFU computed from them is about 500, beyond the margin of 2: both own-utilisation
    # tests [1+1].  mfu itself is right: 25 - 8
    ("dmitri", G): (17, "graded", 5),
    # GB for GiB in mbu's bytes (off by 1.074): mfu and mbu's tests [1+3], and decode_mbu, built with it, no longer
    # matches the formula on the same times (7% > 2%): the own-utilisation tests [1+1]: 25 - 6
    ("edsger", G): (19, "graded", 5),
    # forgot K and V in step_roofline: the visible TinyLlama batch of 64 (caches a third of the step) [1] and the
    # hidden cases (the lab server's batch of 64 at 100 tokens: a memory-bound attention 0.35 of 2.4 ms) [4];
    # mbu counts its own cache and passes: 25 - 5
    ("frances", G): (20, "graded", 5),
    ("grace", G): (22, "graded", 5),  # compute_bound_len divides by zero [1+2]
    # the loop in exercise 4's cell: mfu, mbu and the student's own MFU and MBU never exist [4 + 2]: 25 - 6
    ("hedy", G): (19, "graded", 5),
    ("ivan", G): (25, "graded", 5), ("joan", G): (25, "graded", 5), ("linus", G): (25, "graded", 5),
    ("niklaus", G): (25, "graded", 5),
    ("katherine", G): (0, "ungradable", 0),
    ("olga", G): (22, "graded", 5),  # os._exit in compute_bound_len's cell [1+2]
    ("mallory", G): (0, "graded", 0),
    # hard-coded function answers, measurements her own (so they agree with the checker's re-timing within 3x):
    # the visible ttft, step, mfu/mbu and crossover tests [1+1+1+1] (her crossover table holds the two
    # accelerators' math.inf too), both profile tests [2+4]; her prefill_mfu calls the table with 1 token and
    # raises, so the own-utilisation tests fail [0]: 4 + 6
    ("margaret", G): (10, "graded", 5),
}
EXPECTED = {**EXPECTED_A, **EXPECTED_B, **EXPECTED_C, **EXPECTED_D, **EXPECTED_I, **EXPECTED_E, **EXPECTED_H,
            **EXPECTED_J, **EXPECTED_F, **EXPECTED_G}
MAXIMA = {
    A: 40,
    B: 30,
    C: 25,
    D: 20,
    I: 20,
    E: 30,
    H: 20,
    J: 20,
    F: 30,
    G: 25,
}
GRADED_CELLS = {  # graded cells of each assignment (test cells and written answers)
    A: 18,
    B: 16,
    C: 12,
    D: 6,  # 3 visible and 3 hidden test cells, no written answer
    I: 6,  # 3 visible and 3 hidden test cells and the written answer, one fewer as for the others
    E: 8,  # no written answer: 4 visible and 4 hidden test cells
    H: 6,  # 3 visible and 3 hidden test cells, no written answer
    J: 4,  # 2 visible and 2 hidden test cells and the written answer, one fewer as for the others
    F: 8,  # 4 visible and 4 hidden test cells and the written answer, one fewer (9 -> 8), as for 01-05
    G: 12,
}


# `graded`: the demo class graded once per session (tests/conftest.py).


@pytest.mark.exhaustive
def test_every_student_gets_the_grade_the_design_implies(graded):
    _, rows = graded
    assert set(rows) == set(EXPECTED)
    got = {key: (r.score, r.status, r.manual_pending) for key, r in rows.items()}
    assert got == EXPECTED
    assert all(r.max_score == MAXIMA[r.assignment] for r in rows.values())


@pytest.mark.exhaustive
def test_reference_full_marks_and_blank_zero_on_every_cell(graded):
    _, rows = graded
    for assignment in (A, B, C, D, I, E, H, J, F, G):
        assert all(score == top for score, top in rows["ada", assignment].cells.values())
        assert all(score == 0 for score, _ in rows["blaise", assignment].cells.values())
    assert {a: len(rows["blaise", a].cells) for a in (A, B, C, D, I, E, H, J, F, G)} == GRADED_CELLS


@pytest.mark.exhaustive
def test_reasons_are_recorded(graded):
    _, rows = graded
    for assignment in (A, B, C, D, I, E, H, J, F, G):
        assert "not valid JSON" in rows["katherine", assignment].reason
        assert any("did not finish" in f or "stopped its kernel" in f for f in rows["olga", assignment].flags)
        assert any("input_transformers_post" in f for f in rows["mallory", assignment].flags)
        assert any("passed in the kernel" in f for f in rows["mallory", assignment].flags)
        assert "rebuilt from the release copy" in rows["ivan", assignment].reason
        assert "deleted" in rows["ivan", assignment].reason
        assert "appears 2 times" in rows["joan", assignment].reason
        assert "renamed" in rows["niklaus", assignment].reason
        assert rows["ada", assignment].reason == ""


@pytest.mark.exhaustive
def test_checker_names_the_mistakes(graded):
    _, rows = graded
    assert ("test_roofline_time_visible", "milliseconds for seconds") in rows["dmitri", A].mistakes
    assert ("test_step_visible", "milliseconds for seconds") in rows["dmitri", B].mistakes
    assert ("test_weight_bytes_visible", "GB for GiB") in rows["edsger", A].mistakes
    assert ("test_decode_bytes_hidden", "forgot K and V (or the 2 bytes of an fp16 value)") in rows["frances", A].mistakes
    assert ("test_kv_per_token_visible", "forgot K and V (or the 2 bytes of an fp16 value)") in rows["frances", B].mistakes
    assert ("test_step_visible", "milliseconds for seconds") in rows["dmitri", E].mistakes
    assert ("test_tp_hidden", "GB for GiB") in rows["edsger", J].mistakes  # tp_step_time moved to 06b
    assert ("test_wait_visible", "milliseconds for seconds") in rows["dmitri", F].mistakes
    assert ("test_profiles_visible", "seconds written as milliseconds") in rows["dmitri", G].mistakes


@pytest.mark.exhaustive
def test_grades_csv_feedback_and_report(graded):
    folder, rows = graded
    out = folder / "graded"
    with open(out / "grades.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["student", "assignment", "score", "max_score", "manual_pending", "status", "reason",
                              "flags", "manual_score", "late", "late_penalty"]
    assert {(r["student"], r["assignment"]) for r in table} == set(EXPECTED)
    feedback = out / "feedback" / "ada" / A / f"{A}.html"
    assert feedback.exists()
    page = feedback.read_text()
    assert "BEGIN HIDDEN TESTS" not in page and "Mixtral-8x7B&quot;, 4096" not in page and '("Mixtral-8x7B", 4096)' not in page
    wrong = (out / "feedback" / "dmitri" / A / f"{A}.html").read_text()
    assert "milliseconds for seconds" in wrong
    report = (out / "report" / "README.md").read_text()
    assert "milliseconds for seconds" in report and "GB for GiB" in report
    assert (out / "report" / f"{A}_heatmap.png").stat().st_size > 10_000


SMALL = ["ada", "dmitri", "joan"]  # right, a unit mistake, a repaired notebook


def _scores(rows):
    return {(r.student, r.assignment): (r.score, r.status, r.manual_pending, tuple(sorted(r.cells.items())))
            for r in rows}


def test_same_grades_twice_with_one_or_two_workers_from_a_folder_or_a_zip(tmp_path):
    submissions = tmp_path / "class" / "submissions"
    demo.write_class(submissions, selected=[A], students=[s for s in demo.CLASS if s.name in SMALL])
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in submissions.rglob("*.ipynb"):
            handle.write(path, path.relative_to(tmp_path / "class"))  # inside one top folder, as an LMS exports
    one = grade(submissions, tmp_path / "one", workers=1, quiet=True, no_sandbox=BARE)
    two = grade(archive, tmp_path / "two", workers=2, quiet=True, no_sandbox=BARE)
    again = grade(archive, tmp_path / "two", workers=2, quiet=True, no_sandbox=BARE)  # over the previous run's output
    assert _scores(one) == _scores(two) == _scores(again)
    assert {(r.student, r.assignment): r.score for r in one} == {
        key: value[0] for key, value in EXPECTED.items() if key[0] in SMALL and key[1] == A}
