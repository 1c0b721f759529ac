"""The course's mistakes, written as a student would make them, for every exercise.

``MISTAKES[exercise][mistake]`` takes the namespace of the reference solutions
(the source notebook's answers run) and returns the wrong answers a student
with that mistake hands in, in the order the test cell passes them.
``tests/test_exercises.py`` proves each fails at least one visible case, so a
student sees the mistake before the hidden tests do.  Keys that name one of
the checker's mistakes ("forgot 2 FLOPs per multiply-add") must also be named
in the failure message.
"""

from rooflab import Q_


def _scaled(function, factor):
    return lambda *args, **kwargs: function(*args, **kwargs) * factor


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
}
