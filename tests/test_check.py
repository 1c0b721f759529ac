"""The answer checker: right answers pass, wrong ones name the likely mistake."""

import numpy as np
import pint
import pytest

import rooflab as rl
from rooflab import Q_, check


def fails(answer, expected, **kwargs):
    with pytest.raises(AssertionError) as error:
        check.quantity(answer, expected, **kwargs)
    return str(error.value)


def test_equivalent_units_pass():
    check.quantity(Q_(29.3, "ms"), Q_(0.0293, "s"))
    check.quantity(Q_(16.06, "GB"), Q_(16.06e9, "B"))
    check.quantity(pint.UnitRegistry().Quantity(29.3, "ms"), Q_(0.0293, "s"))  # another registry


def test_accepted_alternatives():
    check.quantity(Q_(4.87, "ms"), Q_(4.56, "ms"), accept=(Q_(4.87, "ms"),))


@pytest.mark.parametrize(
    "answer, expected, mistake",
    [
        (Q_(29.3, "s"), Q_(29.3, "ms"), "milliseconds for seconds"),
        (Q_(29.3e-6, "s"), Q_(29.3, "ms"), "milliseconds for seconds"),
        (Q_(16.06, "GiB"), Q_(16.06, "GB"), "GB for GiB"),
        (Q_(1048576, "B"), Q_(131072, "B"), "bits for bytes"),
        (Q_(65536, "B"), Q_(131072, "B"), "forgot K and V"),
        (Q_(14.5, "TFLOP"), Q_(29, "TFLOP"), "forgot 2 FLOPs per multiply-add"),
        (Q_(29, "TFLOP/s"), Q_(29, "TFLOP"), "a rate for an amount"),
        (Q_(3.35, "TB"), Q_(3.35, "TB/s"), "an amount for a rate"),
        (29.3, Q_(29.3, "ms"), "a bare number where a quantity is asked"),
        (Q_(5, "GB"), Q_(5, "ms"), "wrong dimension"),
        (Q_(float("nan"), "ms"), Q_(5, "ms"), "not a number"),
        (Q_(45, ""), Q_(0.45, ""), "a percentage for a fraction"),
    ],
)
def test_mistakes_are_named(answer, expected, mistake):
    assert f"[mistake: {mistake}" in fails(answer, expected, name="x")


def test_context_specific_mistakes():
    message = fails(Q_(512, "KiB/token"), Q_(128, "KiB/token"), mistakes={"query heads for KV heads": 4})
    assert "query heads for KV heads" in message


def test_bare_number_hint_says_which_unit():
    assert "Q_(29.3, 'ms')" in fails(29.3, Q_(0.0293, "s"))


def test_unexplained_wrong_answer_says_how_far():
    assert "1.5 times" in fails(Q_(1.5, "s"), Q_(1, "s"))


def test_equality_cannot_be_faked():
    class AlwaysEqual:
        def __eq__(self, other):
            return True
    assert "should be a number" in fails(AlwaysEqual(), Q_(1, "s"))

    class Sneaky(type(Q_(1, "s"))):
        def __eq__(self, other):
            return True
    with pytest.raises(AssertionError):
        check.quantity(Sneaky(2, "s"), Q_(1, "s"))


def test_arrays_and_numbers():
    check.quantity(Q_(np.array([1.0, 2.0]), "ms"), Q_(np.array([1.0, 2.0]), "ms"))
    check.number(0.45, 0.45)
    with pytest.raises(AssertionError, match="off by a factor of 100"):
        check.number(45.0, 0.45)


def test_choice():
    options = {"prefill": ("prefill", "the prefill"), "decode": ("decode", "decoding")}
    check.choice(" Prefill ", "prefill", options=options)
    with pytest.raises(AssertionError, match="not right"):
        check.choice("decoding", "prefill", options=options)
    with pytest.raises(AssertionError, match="not one of the options"):
        check.choice("both", "prefill", options=options)
    with pytest.raises(AssertionError, match="should be a string"):
        check.choice(1, "prefill", options=options)


def test_derive_yourself_names_the_function_it_switched_off():
    # A student who called a blocked method must learn which call to replace with arithmetic.
    with check.derive_yourself(rl.serving.prefill, rl.Model.weight_bytes):
        with pytest.raises(RuntimeError, match=r"library function Model\.weight_bytes is switched off"):
            rl.model("Llama-3-8B").weight_bytes("fp16")
        with pytest.raises(RuntimeError, match=r"library function prefill is switched off"):
            rl.prefill("Llama-3-8B", "H100", 10)


def test_derive_yourself_blocks_library_calls_wherever_imported():
    from rooflab import prefill as imported_by_name
    with check.derive_yourself(rl.serving.prefill, rl.Model.weight_bytes):
        with pytest.raises(RuntimeError, match="switched off while this test runs"):
            imported_by_name("Llama-3-8B", "H100", 10)
        with pytest.raises(RuntimeError, match="switched off"):
            rl.model("Llama-3-8B").weight_bytes("fp16")
        assert rl.model("Llama-3-8B").total_params > 0  # other library parts still work
    assert rl.prefill("Llama-3-8B", "H100", 10).time.m_as("s") > 0  # restored afterwards


def test_zero_is_compared_exactly():
    check.number(0, 0, "max_batch")
    with pytest.raises(AssertionError, match="expected 0"):
        check.number(3, 0, "max_batch")


@pytest.mark.parametrize("answer, expected", [
    (Q_(29.0 * 1.0486, "TFLOP"), Q_(29, "TFLOP")),  # 4.9 % too many FLOPs: a term, not MB for MiB
    (Q_(16.06e3, "GB"), Q_(16.06, "GB")),  # a thousand times too many bytes: no milliseconds in bytes
    (Q_(8 * 0.4, ""), Q_(0.4, "")),  # eight times a ratio: bits for bytes cannot happen in a pure number
])
def test_a_mistake_is_named_only_where_its_dimension_allows(answer, expected):
    assert "[mistake:" not in fails(answer, expected, name="x")


def test_a_near_one_factor_is_named_only_when_it_matches_closely():
    assert "[mistake: GB for GiB]" in fails(Q_(16.06 * 2**30 / 1e9, "GB"), Q_(16.06, "GB"))
    assert "[mistake:" not in fails(Q_(16.06 * 1.08, "GB"), Q_(16.06, "GB"))  # 8 % off: within 2 % of 1.074


def test_a_small_named_slip_is_said_as_a_percentage():
    # a mistake whose factor is 0.9967 (a third of a percent low) reads as a percentage, a large one as a factor
    message = fails(Q_(0.9967, "s"), Q_(1, "s"), rel=0.001, mistakes={"one step short": 0.9967})
    assert "off by 0.33%" in message and "factor of 0.9967" not in message and "[mistake: one step short]" in message
    assert "off by a factor of 3" in fails(Q_(3, "s"), Q_(1, "s"), mistakes={"three times": 3.0})


def test_tolerance_is_printed_as_it_is():
    assert "(within 0.5%)" in fails(Q_(1.5, "s"), Q_(1, "s"), rel=0.005)
    assert "(within 2%)" in fails(Q_(1.5, "s"), Q_(1, "s"))


def test_a_failed_check_shows_its_message_alone_in_a_notebook():
    with pytest.raises(check.WrongAnswer) as error:
        check.quantity(Q_(1.5, "s"), Q_(1, "s"), name="ttft")
    assert error.value._render_traceback_() == [f"WrongAnswer: {error.value}"]
    assert isinstance(error.value, AssertionError)  # nbgrader and the grader treat it as a failed test


def test_exercise_runs_the_visible_cases_and_names_the_failing_one(capsys):
    def prefill_flops(model, prompt_len):  # 2 P N + 2 L A N^2 + 2 d V, written out independently
        return Q_(2 * model.active_non_embedding_params * prompt_len
                  + 2 * model.layers * model.attention_width * prompt_len**2 + 2 * model.d_model * model.vocab, "FLOP")

    check.exercise("prefill_flops", prefill_flops)
    out = capsys.readouterr().out
    assert "prefill_flops: 3 cases right." in out
    # The visible cases are named, one a line, so a student knows what was tried (and what was not).
    assert "  (Llama-3-8B, 2000)\n  (Llama-3-8B, 16)\n  (Mixtral-8x7B, 512)" in out
    check.exercise("prefill_flops", prefill_flops, cases=[("Gemma-2B", 7)])
    out = capsys.readouterr().out
    assert "1 case right." in out and "Gemma-2B" not in out  # a hidden case passed is not named to the student
    with pytest.raises(check.WrongAnswer, match=r"prefill_flops\(Llama-3-8B, 2000\).*forgot 2 FLOPs"):
        check.exercise("prefill_flops", lambda m, n: prefill_flops(m, n) / 2)
    with pytest.raises(RuntimeError, match="switched off"):  # a derivation: the library's answer is off
        check.exercise("prefill_flops", lambda m, n: rl.prefill(m, "H100", n).flops)
    with pytest.raises(KeyError, match="no exercise called 'prefil_flops'"):
        check.exercise("prefil_flops", prefill_flops)


def test_what_you_derived_shows_only_after_the_visible_cases_pass_in_a_notebook(monkeypatch):
    from dataclasses import replace

    import IPython
    import IPython.display
    from rooflab import exercises

    shown = []
    spec = replace(exercises.get("prefill_flops"), derived="$F = 2PN$")
    monkeypatch.setitem(exercises._EXERCISES, "prefill_flops", spec)
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))

    def prefill_flops(model, prompt_len):
        return Q_(2 * model.active_non_embedding_params * prompt_len
                  + 2 * model.layers * model.attention_width * prompt_len**2 + 2 * model.d_model * model.vocab, "FLOP")

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    check.exercise("prefill_flops", prefill_flops)
    assert shown == []  # a script or the grader: nothing rendered
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    with pytest.raises(check.WrongAnswer):
        check.exercise("prefill_flops", lambda m, n: prefill_flops(m, n) / 2)
    assert shown == []  # not before the answer is right
    check.exercise("prefill_flops", prefill_flops, cases=[("Gemma-2B", 7)])
    assert shown == []  # nor on hidden cases
    check.exercise("prefill_flops", prefill_flops)
    assert shown == ["**What you derived.** $F = 2PN$"]


def test_predictions_are_recorded_and_revealed_not_graded(capsys):
    check.record("compute_bound_phase", "decoding")
    assert "Noted: compute_bound_phase = 'decode'" in capsys.readouterr().out
    check.record("compute_bound_phase", "both")
    assert "is not one of the options" in capsys.readouterr().out
    check.record("compute_bound_phase", Ellipsis)  # the cell as released
    assert "No prediction yet" in capsys.readouterr().out
    check.reveal("compute_bound_phase", "decode")  # wrong: told so, with the explanation, and nothing raised
    said = capsys.readouterr().out
    assert "the numbers say 'prefill'" in said and "ridge point is 295 FLOP/B" in said  # 989.4e12 / 3.35e12
    check.reveal("compute_bound_phase", "both")
    assert "did not pick one of the options" in capsys.readouterr().out


def test_zero_against_a_nonzero_answer_is_not_called_a_sign_slip():
    message = fails(Q_(0, "token/s"), Q_(2730, "token/s"))
    assert "not zero" in message and "[mistake: wrong sign]" not in message
    assert "[mistake: wrong sign]" in fails(Q_(-2730, "token/s"), Q_(2730, "token/s"))


def test_a_ratio_upside_down_is_named():
    # 3.17x faster from the A100 to the H100 (old / new); new / old is 1 / 3.17 = 0.315
    with pytest.raises(check.WrongAnswer, match=r"upside down.*\[mistake: a ratio upside down\]"):
        check.number(1 / 3.17, 3.17, "ttft speed-up")


def test_a_wrong_word_gets_the_way_to_find_it_not_the_answer():
    with pytest.raises(check.WrongAnswer) as error:
        check.choice("memory", "compute", "bound", {"compute": (), "memory": ()}, why="Compare F/P with B/W.")
    assert "Compare F/P with B/W." in str(error.value) and "compute" not in str(error.value)


def test_an_unanswered_question_is_not_explained(capsys):
    check.reveal("a100_prefill_turn", Ellipsis)
    said = capsys.readouterr().out
    assert "No answer yet" in said and "token" not in said.split("one of")[0]


def test_whole_factors_and_off_by_one_are_told_apart_from_unknown_misses():
    message = fails(Q_(2 * 9.86, "ms"), Q_(9.86, "ms"), name="step")  # a factor of 2 in a time names no mistake
    assert "2 times the expected value: a whole factor" in message and "[mistake:" not in message
    assert "1/64 of the expected value" in fails(Q_(6488 / 64, "token/s"), Q_(6488, "token/s"))
    with pytest.raises(check.WrongAnswer, match=r"one too many.*\[mistake: off by one\]"):
        check.number(190, 189, "bend_batch", rel=1e-3)
    assert "matches no slip the checker knows" in fails(Q_(1.37, "s"), Q_(1, "s"))


def test_a_failed_hidden_case_names_the_case_and_the_mistake_but_not_the_expected_value(monkeypatch):
    from rooflab import Q_

    def forgot_k_and_v(model, precision="fp16"):
        # Half of 2 * layers * kv_heads * head_dim * bytes: K without V.
        return Q_(model.layers * model.kv_heads * model.head_dim * 2, "B")

    with pytest.raises(AssertionError) as failed:
        check.exercise("kv_bytes_per_token", forgot_k_and_v, cases=[("Llama-2-7B", "fp16")])
    message = str(failed.value)
    assert "hidden case (Llama-2-7B, fp16)" in message and "[mistake: forgot K and V" in message
    # Llama-2-7B: 32 layers x 32 KV heads x 128 x 2 values x 2 bytes = 524,288 B per token, not shown.
    assert "524" not in message and "expected" not in message
    monkeypatch.setattr(check, "SHOW_EXPECTED_ON_HIDDEN", True)
    with pytest.raises(AssertionError) as shown:
        check.exercise("kv_bytes_per_token", forgot_k_and_v, cases=[("Llama-2-7B", "fp16")])
    assert "hidden case (Llama-2-7B, fp16)" in str(shown.value) and "expected" in str(shown.value)


# -- a quantity where a number is asked, and the other way round ------------------------------------------------

@pytest.mark.parametrize("answer", [Q_(0.45, ""), Q_(450, "ms/s"), pint.UnitRegistry().Quantity(0.45, ""),
                                    Q_(np.array([0.45]), "")])
def test_number_refuses_a_quantity_even_a_dimensionless_one(answer):
    with pytest.raises(AssertionError) as error:
        check.number(answer, 0.45, name="share")
    message = str(error.value)
    assert f"[mistake: {check.QUANTITY_FOR_NUMBER}]" in message
    assert ".m_as(\"\")" in message and ".magnitude" in message


def test_number_refuses_a_quantity_with_units_and_says_to_divide_them_out():
    with pytest.raises(AssertionError, match="divide out its unit"):
        check.number(Q_(0.45, "s"), 0.45)


def test_quantity_refuses_a_plain_number_where_a_unit_is_asked():
    assert "[mistake: a bare number where a quantity is asked]" in fails(0.0293, Q_(0.0293, "s"))


# -- the exercise's own wrong values (also_wrong) -----------------------------------------------------------------

def test_also_wrong_names_the_mistake_whose_value_the_answer_is():
    # An fp8 TTFT of 10 ms; the same computed at fp16 (the precision not passed on) takes 20 ms.
    message = fails(Q_(20.1, "ms"), Q_(10, "ms"), also_wrong={"the precision not passed on (fp16)": Q_(0.02, "s")})
    assert "[mistake: the precision not passed on (fp16)]" in message


def test_also_wrong_takes_several_values_and_plain_numbers():
    with pytest.raises(AssertionError, match=r"\[mistake: n for n - 1\]"):
        check.number(0.75, 0.7, also_wrong={"n for n - 1": (0.9, 0.75)})


def test_also_wrong_comes_before_the_generic_factors():
    # 2x the bytes would be a whole factor; the exercise knows it is the fp16 cache of an fp8 request.
    message = fails(Q_(2, "GB"), Q_(1, "GB"), also_wrong={"the cache kept in fp16": Q_(2, "GB")})
    assert "[mistake: the cache kept in fp16]" in message


def test_a_right_answer_passes_whatever_also_wrong_says():
    check.quantity(Q_(1, "GB"), Q_(1, "GB"), also_wrong={"anything": Q_(1, "GB")})


# -- the precision asked ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, expected, precision", [
    (Q_(16, "GB"), Q_(8, "GB"), "fp8"),                 # fp8 weights counted at 2 bytes
    (Q_(16, "GB"), Q_(32, "GB"), "fp32"),               # fp32 weights counted at 2 bytes
    (Q_(20, "ms"), Q_(10, "ms"), "int8"),               # the fp16 peak for an int8 computation: twice as long
    (Q_(250, "FLOP/B"), Q_(500, "FLOP/B"), "fp8"),      # an intensity over fp16's bytes: half
    (Q_(1000, "token/s"), Q_(2000, "token/s"), "fp8"),  # a rate at fp16's speed: half
])
def test_a_precision_not_passed_on_is_named(answer, expected, precision):
    assert f"[mistake: {check.PRECISION_NOT_PASSED}]" in fails(answer, expected, precision=precision)


def test_twice_the_bytes_is_never_called_forgetting_k_and_v():
    # Forgetting K and V halves the bytes; twice as many is a whole factor, and at fp8 the fp16 format.
    assert "forgot K and V" not in fails(Q_(2, "GB"), Q_(1, "GB"))
    assert "forgot K and V" not in fails(Q_(2, "GB"), Q_(1, "GB"), precision="fp8")
    assert "forgot K and V" not in fails(Q_(0.5, "GB"), Q_(1, "GB"), precision="fp32")
    assert "[mistake: forgot K and V" in fails(Q_(0.5, "GB"), Q_(1, "GB"), precision="fp8")


def test_an_unknown_precision_is_an_error_of_the_exercise():
    with pytest.raises(ValueError, match="precision"):
        check.quantity(Q_(1, "GB"), Q_(1, "GB"), precision="fp12")


def test_counts_name_an_off_by_one():
    # A request of 5 output tokens has 4 decode steps of 30 ms: 120 ms, not 150 ms.
    message = fails(Q_(150, "ms"), Q_(120, "ms"), counts={"output_len - 1": 4})
    assert "[mistake: off by one in output_len - 1]" in message and "5" in message


def test_counts_name_a_factor_left_out_or_repeated():
    # A 32-layer model's KV cache per token: 128 KiB; per layer it is 4 KiB.
    assert "[mistake: a factor of layers left out]" in fails(Q_(4, "KiB"), Q_(128, "KiB"), counts={"layers": 32})
    assert "[mistake: a factor of layers too many]" in fails(Q_(4096, "KiB"), Q_(128, "KiB"), counts={"layers": 32})


# -- a sum of named terms -------------------------------------------------------------------------------------------

WEIGHTS, CACHE = Q_(16, "GB"), Q_(2, "GB")  # a decode step's bytes: 16 GB of weights and a 2 GB cache


@pytest.mark.parametrize("answer, precision, mistake", [
    (Q_(16 + 2 * 8, "GB"), None, "bits for bytes in the cache term"),
    (Q_(16, "GB"), None, "the cache term left out"),
    (Q_(2, "GB"), None, "the weights term left out"),
    (Q_(16 + 2000, "GB"), None, "a unit prefix in the cache term"),
    (Q_(16 * 2**30 / 1e9 + 2, "GB"), None, "GB for GiB in the weights term"),
    (Q_(16 + 4, "GB"), None, "the cache term doubled"),
    (Q_(16 + 4, "GB"), "fp8", "the precision not passed on in the cache term"),
    (Q_(16 + 1, "GB"), "fp32", "the precision not passed on in the cache term"),
])
def test_a_slip_in_one_term_names_the_term(answer, precision, mistake):
    message = fails(answer, WEIGHTS + CACHE, name="decode_bytes", terms={"weights": WEIGHTS, "cache": CACHE},
                    precision=precision)
    assert f"[mistake: {mistake}]" in message


def test_the_term_message_says_the_factor_and_the_slip():
    message = fails(Q_(32, "GB"), WEIGHTS + CACHE, terms={"weights": WEIGHTS, "cache": CACHE})
    assert "the cache term 8 times too large: bits for bytes in that term?" in message


def test_another_terms_slip_is_said_only_where_it_explains_the_answer_as_well():
    # Weights 16 GB, cache 2 GB, and a third term of 2.0004 MB: the cache doubled (+2 GB) and the third term
    # 1000 times too large (+1.9984 GB) differ by 0.0016 GB, 0.009% of the 18 GB sum, within the 0.1% tolerance
    # but not as well as the exact doubling, so it is not offered; an equal 2 GB weights-side term doubled is.
    small = Q_(2.0004, "MB")
    message = fails(Q_(20.0020004, "GB"), WEIGHTS + CACHE + small, rel=1e-3,
                    terms={"weights": WEIGHTS, "cache": CACHE, "logits": small})
    assert "[mistake: the cache term doubled]" in message and "(or" not in message
    both = {"weights": WEIGHTS, "cache": Q_(3, "GB"), "table": Q_(3, "GB")}  # 22 GB, and 25 GB with either doubled
    message = fails(Q_(25, "GB"), Q_(22, "GB"), rel=1e-3, terms=both)
    assert "(or the table term twice what it should be)" in message or "(or the cache term twice" in message


def test_seconds_added_to_milliseconds_in_a_sum_of_times():
    # TTFT 0.2 s plus 255 steps of 30 ms = 7.85 s; the TTFT's 0.2 added as if it were milliseconds.
    terms = {"TTFT": Q_(0.2, "s"), "decode": Q_(255 * 30, "ms")}
    message = fails(Q_(7650.2, "ms"), Q_(7.85, "s"), terms=terms)
    assert "[mistake: seconds and milliseconds mixed in the TTFT term]" in message


def test_an_off_by_one_in_one_term():
    terms = {"TTFT": Q_(200, "ms"), "decode": Q_(4 * 30, "ms")}  # 5 output tokens: 4 decode steps
    message = fails(Q_(200 + 5 * 30, "ms"), Q_(320, "ms"), terms=terms, counts={"output_len - 1": 4})
    assert "[mistake: off by one in output_len - 1]" in message


def test_terms_of_a_library_step_add_up_and_name_its_parts():
    step = rl.decode_step("Llama-3-8B", "H100", 2000, 64, "fp16", efficiency="typical")
    terms = check.terms_of(step)
    assert {"body", "attention", "head", "the overhead per pass"} <= set(terms)
    assert abs(sum(terms.values(), Q_(0, "s")) / step.time - 1) < 1e-12
    ideal = check.terms_of(rl.decode_step("Llama-3-8B", "H100", 2000, 64, "fp16", efficiency="ideal"))
    assert "the overhead per pass" not in ideal  # the ideal roofline has no fixed cost
    # The 64 caches read in bits: the attention term 8 times too long, named with its term.
    slipped = step.time + 7 * terms["attention"]
    with pytest.raises(AssertionError, match=r"\[mistake: bits for bytes in the attention term\]"):
        check.quantity(slipped, step.time, name="step_time", terms=terms)


def test_no_known_slip_says_so_and_names_the_terms():
    message = fails(Q_(19, "GB"), WEIGHTS + CACHE, terms={"weights": WEIGHTS, "cache": CACHE})
    assert "No known slip matches" in message and "(weights, cache)" in message
    assert "[mistake:" not in message


def test_terms_that_do_not_add_up_are_an_error_of_the_exercise():
    with pytest.raises(ValueError, match="add up"):
        check.quantity(Q_(30, "GB"), WEIGHTS + CACHE, terms={"weights": WEIGHTS, "cache": WEIGHTS})


def test_terms_of_a_plain_number():
    with pytest.raises(AssertionError, match=r"\[mistake: the b term left out\]"):
        check.number(0.3, 0.4, terms={"a": 0.3, "b": 0.1}, rel=0.001)


# -- laws: a right answer passes whatever the hints say; a named term slip explains the answer -------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

_TERM = st.floats(min_value=0.01, max_value=100.0)
# Each term slip's tag (its term put in as {t}) and the factors it stands for.
_SLIPS = {"the {t} term left out": (0.0,), "bits for bytes in the {t} term": (8.0, 1 / 8),
          "a unit prefix in the {t} term": (1e3, 1e-3), "GB for GiB in the {t} term": (2**30 / 1e9, 1e9 / 2**30),
          "the {t} term doubled": (2.0,), "the {t} term halved": (0.5,),
          "the precision not passed on in the {t} term": (2.0,)}


@settings(max_examples=200, deadline=None)
@given(a=_TERM, b=_TERM, c=_TERM, wobble=st.floats(min_value=-0.0199, max_value=0.0199))
def test_an_answer_within_the_tolerance_passes_whatever_the_hints(a, b, c, wobble):
    expected = Q_(a + b + c, "GB")
    check.quantity(expected * (1 + wobble), expected, terms={"a": Q_(a, "GB"), "b": Q_(b, "GB"), "c": Q_(c, "GB")},
                   also_wrong={"x": expected * (1 + wobble)}, counts={"n": 7}, precision="fp8")


@settings(max_examples=300, deadline=None)
@given(values=st.lists(_TERM, min_size=2, max_size=3), which=st.integers(0, 2),
       factor=st.sampled_from([0.0, 8.0, 1 / 8, 1e3, 2**30 / 1e9, 2.0, 0.5]), wobble=st.floats(-0.03, 0.03))
def test_a_named_term_slip_always_explains_the_answer(values, which, factor, wobble):
    terms = {name: Q_(v, "GB") for name, v in zip("abc", values)}
    total = sum(values)
    slipped = list(values)
    slipped[which % len(values)] *= factor
    answer = sum(slipped) * (1 + wobble)  # a slip, and sometimes a little more that no slip explains
    try:
        check.quantity(Q_(answer, "GB"), Q_(total, "GB"), terms=terms, rel=0.001, precision="fp8")
    except AssertionError as error:
        message = str(error)
    else:
        assert abs(answer / total - 1) <= 0.001
        return
    tag = message[message.rfind("[mistake: ") + len("[mistake: "):-1] if "[mistake: " in message else ""
    for pattern, factors in _SLIPS.items():
        for name, value in zip("abc", values):
            if tag == pattern.format(t=name):
                # Sound: the slip named, on the term named, gives the answer to a tenth of how far off it is.
                off = abs(answer - total)
                assert any(abs(total + (f - 1) * value - answer) <= max(off / 10, 1e-9) + 1e-9 for f in factors), \
                    message
