"""The course's exercises, as the checker runs them.

A notebook's test cell is one line, ``check.exercise("prefill_flops", prefill_flops)``.
The line names an :class:`Exercise` registered here: how to call the student's
answer on one case, what the right answer is (computed from the checker's
private copy of the library), and the visible cases.  The visible cases are
chosen so that every mistake on the course's list fails at least one of them
(``tests/test_exercises.py`` feeds each listed mistake to prove it).  Hidden
cases are not here: they sit in the instructor's hidden test cells
(``check.exercise(name, answer, cases=[...])``) and never reach a student.

Predictions and questions that are revealed, not graded, are :class:`Question` s.

One module per assignment registers its exercises: :mod:`.two_phases`,
:mod:`.kv_cache`, :mod:`.quantization`, :mod:`.crossover`, :mod:`.long_prompts`,
:mod:`.under_load`, :mod:`.cost`, :mod:`.tensor_parallel`, :mod:`.tail`,
:mod:`.measure`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

__all__ = ["Exercise", "Question", "exercise", "question", "get", "get_question", "all_exercises", "all_questions",
           "ASSIGNMENTS", "DERIVED", "derived", "derived_names", "resolve"]

# Module of each assignment's exercises, in course order.
ASSIGNMENTS = {
    "01_two_phases": "two_phases",
    "02_kv_cache": "kv_cache",
    "03_quantization": "quantization",
    "04_crossover": "crossover",
    "04b_long_prompts": "long_prompts",
    "05_under_load": "under_load",
    "06_cost": "cost",
    "06b_tensor_parallel": "tensor_parallel",
    "07_tail": "tail",
    "08_measure": "measure",
}

# What each assignment asks students to derive: the library functions (``module.name`` or ``module.Class.name``
# under rooflab) whose results its exercises ask for.  The one list: the checker switches all of them off while a
# derivation runs (:func:`rooflab.check.library_answers`), the grader's source rules note their names in a
# derivation (course/grading/source_rules.py), and the grading sandbox's copy of the library for an assignment leaves out
# its own and later assignments' (course/grading/library_copy.py).  The course's own versions of exercises live in
# :mod:`rooflab.earlier` (``earlier.WRITTEN_IN`` says whose).
DERIVED = {
    "01_two_phases": (
        "serving.prefill", "serving.decode_step", "serving.request", "operations.forward_pass",
        "operations.prefill_pass", "operations.decode_pass", "operations.body_bytes", "roofline.roofline",
        "roofline.cost_si", "roofline.combine", "models.Model.weight_bytes", "models.Model.weight_bytes_si",
        "models.Model.flops_per_token",
    ),
    "02_kv_cache": (
        "serving.memory_budget", "memory.footprint", "operations.decode_terms", "operations.decode_total",
        "models.Model.kv_bytes_per_token", "models.Model.kv_bytes_per_token_si",
    ),
    "03_quantization": (
        "precision.Precision.bits_per_weight", "precision.Precision.bytes_per_weight",
        "precision.Precision.embedding_bits_per_weight", "precision.Precision.embedding_bytes_per_weight",
    ),
    "04_crossover": ("operations.expected_experts", "crossover.decode_compute_bound_batch"),
    "04b_long_prompts": (
        "crossover.attention_share", "crossover.attention_crossover_len", "crossover.balanced_output_len",
        "crossover.prefill_compute_bound_len", "crossover.ttft_exceeds_decode_len",
    ),
    # 05 derives the steady state, the frontier and the SLA search from 01's step and prefill costs and 02's memory
    # budget, which stay on (its exercises switch off this list only).
    "05_under_load": (
        "fleet.steady_state", "fleet.frontier", "fleet.best_under_sla", "fleet.max_concurrency", "fleet._pass_si",
        "fleet._steady_si", "fleet._max_batch", "calibration.predict", "calibration.ideal_ratio",
    ),
    # 06_cost prices what 05 modelled: 05's steady state and SLA search stay on.
    "06_cost": (
        "fleet.cost_per_million_tokens", "fleet.energy_per_token",
        "fleet.SteadyState.cost_per_million", "fleet.SteadyState.cost_per_million_input",
        "fleet.SteadyState.cost_per_million_output", "fleet.SteadyState.energy_per_token",
    ),
    # 06b splits one copy over several GPUs: the ring all-reduce and the tensor-parallel step.
    "06b_tensor_parallel": ("fleet.all_reduce_time", "fleet.tensor_parallel_step"),
    # 07 asks for formulas the library has no function for (M/D/1, blocks, prefix, speculation); its simulations
    # run on rooflab.simulate, a tool the notebook hands out, not an answer.
    "07_tail": (),
    # 08's derivations (a prompt's roofline, a step's, MFU and MBU, the crossover) are 01's and 04's answers again.
    "08_measure": (),
}


def derived(assignments=None) -> tuple[str, ...]:
    """The dotted names of :data:`DERIVED` for ``assignments`` (default: all), in course order."""
    chosen = list(DERIVED) if assignments is None else [a for a in DERIVED if a in assignments]
    return tuple(name for assignment in chosen for name in DERIVED[assignment])


def derived_names() -> frozenset[str]:
    """The short names (``prefill``, ``weight_bytes``) of every library answer and of the course's own versions."""
    from .. import earlier

    return frozenset(name.rpartition(".")[2] for name in derived()) | frozenset(earlier.WRITTEN_IN)


def resolve(dotted: str):
    """The library object ``dotted`` names under rooflab ("crossover.balanced_output_len"); None if it is absent."""
    module, *attributes = dotted.split(".")
    try:
        target = importlib.import_module(f"rooflab.{module}")
    except ImportError:
        return None
    for attribute in attributes:
        found = vars(target).get(attribute) if isinstance(target, type) else getattr(target, attribute, None)
        if found is None:
            return None
        target = found
    return target


_EXERCISES: dict[str, "Exercise"] = {}
_QUESTIONS: dict[str, "Question"] = {}


@dataclass(frozen=True)
class Exercise:
    """One graded exercise: ``run(answers, case, ref, rl)`` raises AssertionError when a case is wrong.

    ``answers`` are what the test cell passed after the name (the student's
    functions or values), ``ref`` is the checker's private copy of the library
    (expected values), ``rl`` the library the student's code sees (arguments).
    ``derive`` is True when the library's answers are switched off while the
    student's code runs, or a tuple of dotted names ("crossover.balanced_output_len")
    when only those are.
    """

    name: str
    assignment: str
    run: Callable
    visible: tuple
    derive: bool | tuple[str, ...] = False
    #: Markdown shown under the check once every visible case passes: the formula the student arrived at, kept
    #: out of the notebook so that it cannot be read before the answer is written.
    derived: str = ""

    def built_on(self) -> set[str]:
        """Names of :mod:`rooflab.earlier`'s functions from assignments before this one: a derivation may use them."""
        from .. import earlier

        order = list(ASSIGNMENTS)
        return {name for name, written in earlier.WRITTEN_IN.items()
                if order.index(written) < order.index(self.assignment)}

    def banned(self) -> tuple:
        """The library functions switched off while the student's code runs (empty: none)."""
        if not self.derive:
            return ()
        from .. import earlier

        # The course's versions of this assignment's exercises and later ones; earlier ones are to build on.
        own = tuple(getattr(earlier, name) for name in earlier.WRITTEN_IN if name not in self.built_on())
        if self.derive is True:
            from ..check import library_answers

            return tuple(library_answers()) + own
        # "crossover.balanced_output_len", "fleet.SteadyState.energy_per_token": each on the one list (DERIVED).
        return tuple(found for found in map(resolve, self.derive) if found is not None) + own


@dataclass(frozen=True)
class Question:
    """A prediction or a question about a plot: revealed with its explanation, never graded.

    ``options`` maps each allowed answer to its other accepted spellings;
    ``explain(ref)`` returns the explanation with the numbers that settle it.
    """

    name: str
    assignment: str
    answer: str
    options: dict[str, tuple[str, ...]]
    explain: Callable
    revisited_in: str = ""


def exercise(name: str, assignment: str, visible: list, derive: bool | tuple[str, ...] = False,
             derived: str = "") -> Callable:
    """Register the decorated ``run(answers, case, ref, rl)`` as the exercise ``name``; ``derived`` (Markdown) is
    shown once the visible cases pass."""

    def register(run: Callable) -> Callable:
        if name in _EXERCISES:
            raise ValueError(f"exercise {name!r} is registered twice")
        _EXERCISES[name] = Exercise(name, assignment, run, tuple(visible), derive, derived.strip())
        return run

    return register


def question(name: str, assignment: str, answer: str, options: dict[str, tuple[str, ...]],
             revisited_in: str = "") -> Callable:
    """Register the decorated ``explain(ref)`` as the explanation of the question ``name``."""

    def register(explain: Callable) -> Callable:
        if name in _QUESTIONS:
            raise ValueError(f"question {name!r} is registered twice")
        _QUESTIONS[name] = Question(name, assignment, answer, options, explain, revisited_in)
        return explain

    return register


def _load() -> None:
    for module in ASSIGNMENTS.values():
        try:
            importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{module}":
                raise


def get(name: str) -> Exercise:
    """The exercise called ``name``; KeyError naming the known ones if there is none."""
    _load()
    if name not in _EXERCISES:
        raise KeyError(f"no exercise called {name!r}; the course has {', '.join(sorted(_EXERCISES))}")
    return _EXERCISES[name]


def get_question(name: str) -> Question:
    """The question called ``name``; KeyError naming the known ones if there is none."""
    _load()
    if name not in _QUESTIONS:
        raise KeyError(f"no question called {name!r}; the course has {', '.join(sorted(_QUESTIONS))}")
    return _QUESTIONS[name]


def all_exercises() -> list[Exercise]:
    """Every registered exercise, in course order."""
    _load()
    order = list(ASSIGNMENTS)
    return sorted(_EXERCISES.values(), key=lambda e: order.index(e.assignment))


def all_questions() -> list[Question]:
    """Every registered question."""
    _load()
    return list(_QUESTIONS.values())
