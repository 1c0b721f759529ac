"""Answer checking for notebook test cells, with the likely mistake named.

A test cell calls :func:`quantity` with the student's answer and the
reference.  A right answer passes silently; a wrong one raises
``AssertionError`` whose message names the likely mistake from the course's
table ("off by 1000: milliseconds for seconds?"), tagged ``[mistake: ...]``
so grading reports can count them.

The checker trusts nothing about the answer object but its type: it reads the
magnitude and unit text of a real pint quantity (from any registry) and
compares numbers itself, so an answer whose ``__eq__`` always says True gains
nothing.  Test cells re-import this module before use, so a submission that
rebinds these functions does not change what the tests run.

>>> from rooflab import Q_
>>> quantity(Q_(29.3, "ms"), Q_(0.0293, "s"), name="ttft")
>>> try:
...     quantity(Q_(29.3, "s"), Q_(0.0293, "s"), name="ttft")
... except AssertionError as e:
...     print(str(e).splitlines()[0])
ttft = 29.3 s is off by a factor of 1000 from the expected 0.0293 s. [mistake: milliseconds for seconds]
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Mapping

import numpy as np
import pint

from .units import Q_, ureg

__all__ = ["exercise", "record", "reveal", "WrongAnswer", "quantity", "number", "choice", "derive_yourself", "reference",
           "MISTAKE_TAG", "PRECISION_NOT_PASSED", "QUANTITY_FOR_NUMBER", "BYTES_PER_VALUE", "terms_of"]

MISTAKE_TAG = "[mistake: "
# Tags of the mistakes the checker names from what an exercise tells it (precision=, counts=), for exercises
# and tests to refer to.
PRECISION_NOT_PASSED = "the precision not passed on"
QUANTITY_FOR_NUMBER = "a quantity where a plain number is asked"
# Bytes a value takes in each format the course uses (the checker's own table: it names slips, computes nothing).
BYTES_PER_VALUE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}

_PREFIXES = ("ms", "s", "us", "GB", "GiB", "TB", "B", "TFLOP", "GFLOP", "FLOP", "TB/s", "GB/s", "TFLOP/s")


class WrongAnswer(AssertionError):
    """A failed check.  A notebook shows it as its message alone: the checker's frames teach a student nothing."""

    def _render_traceback_(self) -> list[str]:  # IPython's hook for an exception that draws its own traceback
        return [f"{type(self).__name__}: {self}"]


def _fail(message: str, mistake: str | None = None) -> None:
    __tracebackhide__ = True
    if mistake:
        message = f"{message} {MISTAKE_TAG}{mistake}]"
    raise WrongAnswer(message)


def _as_ours(answer: object, name: str) -> pint.Quantity | None:
    """Return the answer as a quantity of our registry, or None if it is a plain number."""
    if isinstance(answer, pint.Quantity) and type(answer).__module__.startswith("pint"):
        magnitude = answer._magnitude
        units = answer._units
        if answer._REGISTRY is not ureg:
            return Q_(_plain(magnitude, name), format(answer.units, "D") if str(units) else "")
        return Q_(_plain(magnitude, name), answer.units)
    if isinstance(answer, pint.Quantity):
        _fail(f"{name} is a {type(answer).__name__}, not a plain pint quantity: build it with Q_(value, unit).")
    return None


def _plain(value: object, name: str) -> float | np.ndarray:
    """Return a number or numeric array, refusing any other object."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        _fail(f"{name} should be a number, got the boolean {value!r}.")
    if type(value) in (int, float) or isinstance(value, np.number):
        return float(value)
    if type(value) is np.ndarray and value.dtype.kind in "iuf":
        return value.astype(float)
    _fail(f"{name} should be a number or a quantity, got {type(value).__name__} {value!r}.")


def _finite(value, name: str, shown) -> None:
    if not np.all(np.isfinite(value)):
        _fail(f"{name} = {shown} is not a finite number.", "not a number")


def _describe(value: pint.Quantity) -> str:
    return f"{value:.4g~P}" if np.ndim(value.magnitude) == 0 else f"{value:~P}"


# Ratios that betray a known mistake: (factor, the mistake, how far off, the dimension it can happen in).
# A mistake is named only where it can happen: "GB for GiB" for bytes (and rates of bytes), never for FLOPs.
_INFORMATION, _TIME, _NONE = "[information]", "[time]", ""
_FACTORS = [
    (1e3, "milliseconds for seconds", "off by a factor of 1000", _TIME),
    (1e6, "microseconds for seconds", "off by a factor of a million", _TIME),
    (1e9, "a unit prefix (G for none?)", "off by a factor of 10^9", None),
    (1e12, "a unit prefix (T for none?)", "off by a factor of 10^12", None),
    (2**30 / 1e9, "GB for GiB", "off by 1.074 (2^30 / 10^9)", _INFORMATION),
    (2**20 / 1e6, "MB for MiB", "off by 1.049 (2^20 / 10^6)", _INFORMATION),
    (2**40 / 1e12, "TB for TiB", "off by 1.100 (2^40 / 10^12)", _INFORMATION),
    (8.0, "bits for bytes", "off by a factor of 8", _INFORMATION),
    (100.0, "a percentage for a fraction", "off by a factor of 100", _NONE),
]
# Factors this close to 1 are told apart from a missing term only when they match almost exactly: a unit slip
# alone gives the factor to the digit, and a halved cache once came within 0.14% of 2^30 / 10^9 by chance.
# An exercise that names such a factor itself (``mistakes=``) has judged it likely there, and gets 0.2%.
_NEAR_ONE = 0.0005
_NEAR_ONE_NAMED = 0.002


def _possible(dimension: str | None, expected_dim) -> bool:
    """Whether a mistake of ``dimension`` can happen in a quantity of ``expected_dim``."""
    text = str(expected_dim)
    if dimension is None:
        return True
    if dimension == _NONE:
        return not expected_dim
    return dimension in text


def _factor_mistake(ratio: float, expected_dim, rel: float, extra: dict[str, float],
                    generic: bool = True) -> tuple[str, str] | None:
    """The (how far off, mistake) a ratio betrays: the exercise's ``extra`` factors, then (``generic``) the table's."""
    candidates = [(f, name, _how_far(f), "named") for name, f in extra.items()]
    if generic:
        candidates += list(_FACTORS)
    if generic and _exponent(expected_dim, _INFORMATION):
        # Forgetting K and V halves the bytes: only that direction is named (an intensity doubles).
        half = 0.5 if _exponent(expected_dim, _INFORMATION) > 0 else 2.0
        candidates.append((half, "forgot K and V (or the 2 bytes of an fp16 value)", "off by a factor of 2", "one way"))
    elif generic and _exponent(expected_dim, "[computation]"):
        half = 0.5 if _exponent(expected_dim, "[computation]") > 0 else 2.0
        candidates.append((half, "forgot 2 FLOPs per multiply-add", "off by a factor of 2", "one way"))
    # Elsewhere a factor of 2 names no mistake of its own: the message says how far off it is, without a label.
    for factor, mistake, phrase, dimension in candidates:
        named = dimension == "named"
        if factor <= 0 or factor == 1 or not (named or dimension == "one way" or _possible(dimension, expected_dim)):
            continue
        close = min(rel, _NEAR_ONE_NAMED if named else _NEAR_ONE) if max(factor, 1 / factor) < 1.2 else rel
        for f in (factor,) if dimension == "one way" else (factor, 1 / factor):
            if abs(ratio / f - 1) <= close:
                return phrase, mistake
    return None


def _how_far(factor: float) -> str:
    """How far off a named factor puts an answer: 8 -> 'off by a factor of 8'; 0.9967 -> 'off by 0.33%' (a factor
    near 1 read as a percentage, which is how a small slip is seen)."""
    if max(factor, 1 / factor) < 1.2:
        return f"off by {abs(factor - 1) * 100:.2g}%"
    return f"off by a factor of {factor:.4g}"


def _percent(rel: float) -> str:
    """A tolerance as it is: 0.005 -> 'within 0.5%', 0.02 -> 'within 2%'; a count's 1e-9 -> 'exactly'."""
    return "exactly, up to rounding" if rel < 1e-6 else f"within {rel * 100:.3g}%"


def quantity(
    answer: object,
    expected: pint.Quantity,
    name: str = "answer",
    rel: float = 0.02,
    accept: tuple = (),
    mistakes: dict[str, float] | None = None,
    also_wrong: Mapping[str, object] | None = None,
    terms: Mapping[str, object] | None = None,
    counts: Mapping[str, int] | None = None,
    precision: str | None = None,
) -> None:
    """Pass if ``answer`` equals ``expected`` within relative tolerance ``rel``; raise AssertionError otherwise.

    ``accept`` lists other values that are also right (a second counting convention).
    ``mistakes`` maps a mistake's name to the factor it would cause ({"query heads for KV heads": 4}).
    ``also_wrong`` maps a mistake's name to the value (or a tuple of values) that mistake gives, computed by the
    exercise ({"the precision not passed on (computed at fp16)": value_at_fp16}); an answer within ``rel`` of one
    is told that mistake.  ``terms`` names the terms the expected value is the sum of ({"weights": w,
    "cache": c}): an answer that is that sum with one term scaled by a known slip (left out, x2, x8, x1000,
    GB for GiB, the precision's bytes, a count off by one) is told which term and which slip.  ``counts`` names
    the counts the answer is proportional to ({"output_len - 1": 255, "layers": 32}): an answer off by one in one,
    or missing it, or multiplied by it once more, is told so; ``precision`` is the format the exercise
    asks for, so that fp16's 2 bytes a value (or its peak) used instead is named.
    Order of the hints: ``also_wrong``, a ratio upside down, ``mistakes``, the precision, the table's unit slips
    and factors, a count off by one, a slip in one term, then a whole factor; the exercise's own names come first.
    """
    __tracebackhide__ = True
    expected = _as_ours(expected, "expected")
    if expected is None:
        raise TypeError("the reference must be a quantity; use rooflab.check.number for plain numbers")
    references = [expected] + [_as_ours(a, "accepted value") for a in accept]
    mistakes = mistakes or {}
    if precision is not None and precision not in BYTES_PER_VALUE:
        raise ValueError(f"precision should be one of {', '.join(BYTES_PER_VALUE)}, got {precision!r}")
    if isinstance(answer, (tuple, list)) and len(answer) and not isinstance(answer, str):
        _fail(f"{name} should be one quantity, got a {type(answer).__name__} of {len(answer)} items.")
    got = _as_ours(answer, name)
    want = _describe(expected)
    if got is None:
        plain = _plain(answer, name)
        _finite(plain, name, answer)
        if expected.dimensionless:
            got = Q_(plain, "")
        else:
            hint = _bare_hint(plain, expected)
            _fail(
                f"{name} = {answer!r} has no units; the expected answer is {want}. "
                f"Return a quantity, e.g. Q_(value, {format(expected.units, '~')!r}).{hint}",
                "a bare number where a quantity is asked",
            )
    _finite(got.magnitude, name, got)
    if got.dimensionality != expected.dimensionality:
        _wrong_dimension(got, expected, name)
    for reference in references:
        if np.all(np.asarray(reference.magnitude) == 0):
            # A ratio means nothing against zero: compare the values themselves.
            if np.all(np.asarray(got.m_as(reference.units)) == 0):
                return
            _fail(f"{name} = {_describe(got)}, expected {_describe(reference)}.")
        ratio = np.asarray(got.m_as(reference.units) / reference.magnitude, dtype=float)
        if np.all(np.abs(ratio - 1) <= rel):
            return
    shown = _describe(got.to(expected.units))
    for mistake, values in (also_wrong or {}).items():
        if _matches(got, values, rel):
            advice = (f" Pass the precision asked on to every function you call, and use it for the peak."
                      if mistake.startswith(PRECISION_NOT_PASSED) else "")
            _fail(f"{name} = {shown}, expected {want} ({_percent(rel)}); your value is the one this mistake gives: "
                  f"{mistake}.{advice}", mistake)
    ratio = np.asarray(got.m_as(expected.units) / expected.magnitude, dtype=float)
    worst = float(ratio.flat[np.argmax(np.abs(ratio - 1))])
    if worst == 0:
        _fail(f"{name} = {shown}, but the expected value is {want}, not zero.")
    if worst < 0:
        _fail(f"{name} = {shown}, but the expected value is {want}: check the sign.", "wrong sign")
    if expected.dimensionless and abs(float(np.max(np.abs(expected.magnitude))) - 1) > 2 * rel and np.all(
            np.abs(np.asarray(got.m_as(""), dtype=float) * np.asarray(expected.magnitude, dtype=float) - 1) <= 2 * rel):
        _fail(f"{name} = {shown} is the expected {want} upside down: divide the other way round (old / new, "
              "or the part over the whole).", "a ratio upside down")
    factor = _precision_factor(expected.dimensionality, precision)
    found = _factor_mistake(worst, expected.dimensionality, rel, mistakes, generic=False)
    if not found and factor is not None and abs(worst / factor - 1) <= rel:
        _fail(f"{name} = {shown} is {factor:.4g} times the expected {want}: what fp16 gives (2 bytes a value, its "
              f"peak FLOP/s) where {precision} is asked. Pass the precision on to every function you call, and use "
              "it for the peak.", PRECISION_NOT_PASSED)
    found = found or _factor_mistake(worst, expected.dimensionality, rel, {})
    if found:
        phrase, mistake = found
        _fail(f"{name} = {shown} is {phrase} from the expected {want}.", mistake)
    for count, n in (counts or {}).items():
        if n > 1 and abs(worst * n - 1) <= rel:
            _fail(f"{name} = {shown} is 1/{n} of the expected {want}: a factor of {count} ({n}) left out?",
                  f"a factor of {count} left out")
        if n > 1 and abs(worst / n - 1) <= rel:
            _fail(f"{name} = {shown} is {n} times the expected {want}: multiplied by {count} ({n}) once too often?",
                  f"a factor of {count} too many")
        for k, more in ((n + 1, "one too many"), (n - 1, "one too few")):
            if n > 0 and k > 0 and abs(worst / (k / n) - 1) <= min(rel, abs(worst - 1) / 4):
                _fail(f"{name} = {shown}, expected {want}: it is {k}/{n} of it, as if {count} were {k} "
                      f"({more}). Check where the count starts and whether the last item is included.",
                      f"off by one in {count}")
    if terms:
        _term_mistake(got, expected, name, shown, rel, terms, counts or {}, precision)
    if expected.dimensionless and np.ndim(expected.magnitude) == 0 and float(expected.magnitude).is_integer() \
            and np.ndim(got.magnitude) == 0 and abs(float(got.m_as("")) - float(expected.magnitude)) == 1:
        more = "one too many" if float(got.m_as("")) > float(expected.magnitude) else "one too few"
        _fail(f"{name} = {shown}, expected {want}: {more}. Check where a count starts (0 or 1), whether the last "
              "item is included, and whether you round down, up or to the nearest.", "off by one")
    whole = _whole_factor(worst, rel)
    if whole:
        _fail(f"{name} = {shown}, expected {want} ({_percent(rel)}); it is {whole} the expected value: a whole "
              "factor, so look for something counted once that should be counted that many times, or the other "
              "way round (a batch, K and V, the GPUs, 2 FLOPs per multiply-add).")
    if terms:
        _fail(f"{name} = {shown}, expected {want} ({_percent(rel)}); it is {worst:.4g} times the expected value. "
              f"No known slip matches (a unit, a factor of 2 or 8, the precision, a term left out): recheck the "
              f"terms one at a time ({', '.join(terms)}).")
    # Said as what it is: no slip the checker knows. Guessing "a term left out" here misled students whose slip was
    # a factor (the layers, the format's peak) or an off-by-one.
    _fail(f"{name} = {shown}, expected {want} ({_percent(rel)}); it is {worst:.4g} times the expected value, "
          "which matches no slip the checker knows (of units, a known factor or a count): recheck each part of the "
          "formula in turn: a part left out or counted twice, a factor (the layers, K and V, the format's peak), "
          "a count off by one.")


def _matches(got: pint.Quantity, values: object, rel: float) -> bool:
    """Whether ``got`` is within ``rel`` of ``values`` (one value or a tuple; quantities or plain numbers)."""
    for given in values if isinstance(values, (tuple, list)) else (values,):
        value = _as_ours(given, "a value of also_wrong")
        value = Q_(_plain(given, "a value of also_wrong"), "") if value is None else value
        if value.dimensionality != got.dimensionality:
            raise TypeError(f"also_wrong: {value} is not in the answer's dimension ({got.dimensionality})")
        want = np.asarray(value.magnitude, dtype=float)
        have = np.asarray(got.m_as(value.units), dtype=float)
        if np.all(want == 0):
            if np.all(have == 0):
                return True
            continue
        if np.all(np.abs(have / want - 1) <= rel):
            return True
    return False


def _exponent(dimensionality, dimension: str) -> float:
    return dict(dimensionality).get(dimension, 0)


def _precision_factor(dimensionality, precision: str | None) -> float | None:
    """The factor fp16 (2 bytes a value, or its peak) used in place of ``precision`` makes in a quantity of this
    dimension: 2 / bytes for amounts of bytes and times, bytes / 2 for intensities and rates; None if it makes none.
    """
    if precision is None or BYTES_PER_VALUE[precision] == 2:
        return None
    factor = 2 / BYTES_PER_VALUE[precision]
    power = _exponent(dimensionality, _INFORMATION) or _exponent(dimensionality, _TIME)
    if power == 0:
        return None
    return factor if power > 0 else 1 / factor


def _term_slips(term: str, dimensionality, counts: Mapping[str, int], precision: str | None) -> list:
    """(factor, tag, what it looks like) for each slip one term of a sum can have in a quantity of this dimension."""
    information = _exponent(dimensionality, _INFORMATION) != 0
    time = _exponent(dimensionality, _TIME) != 0
    slips = [(0.0, f"the {term} term left out", "missing: left out?")]
    factor = _precision_factor(dimensionality, precision)
    if factor is not None:
        slips.append((factor, f"{PRECISION_NOT_PASSED} in the {term} term",
                      f"{factor:.4g} times what it should be: fp16's 2 bytes a value (or its peak) where "
                      f"{precision} is asked?"))
    if time:
        slips += [(1e3, f"seconds and milliseconds mixed in the {term} term",
                   "1000 times too large: milliseconds added as seconds?"),
                  (1e-3, f"seconds and milliseconds mixed in the {term} term",
                   "1000 times too small: seconds added as milliseconds?")]
    else:
        slips += [(1e3, f"a unit prefix in the {term} term", "1000 times too large: a unit prefix (k, M, G) slip?"),
                  (1e-3, f"a unit prefix in the {term} term", "1000 times too small: a unit prefix (k, M, G) slip?")]
    if information or time:
        slips += [(8.0, f"bits for bytes in the {term} term", "8 times too large: bits for bytes in that term?"),
                  (1 / 8, f"bits for bytes in the {term} term", "8 times too small: bytes for bits in that term?"),
                  (2**30 / 1e9, f"GB for GiB in the {term} term", "off by 2^30 / 10^9: GiB and GB mixed in that term?"),
                  (1e9 / 2**30, f"GB for GiB in the {term} term", "off by 10^9 / 2^30: GiB and GB mixed in that term?")]
    for count, n in counts.items():
        if n > 1:
            slips += [((n + 1) / n, f"off by one in {count}", f"as if {count} were {n + 1}, not {n}: one too many?"),
                      ((n - 1) / n, f"off by one in {count}", f"as if {count} were {n - 1}, not {n}: one too few?"),
                      (float(n), f"the {term} term multiplied by {count}",
                       f"{n} times what it should be: counted once for each of {count} ({n}) where once is right?"),
                      (1 / n, f"the {term} term divided by {count}",
                       f"1/{n} of what it should be: counted once where it is once for each of {count} ({n})?")]
    two = ("K and V, or 2 bytes a value" if information else
           "2 FLOPs per multiply-add" if _exponent(dimensionality, "[computation]") else "")
    slips += [(2.0, f"the {term} term doubled", "twice what it should be: counted twice, or a factor of 2 where "
                                                "none belongs (both halves of a triangle, say)?"),
              (0.5, f"the {term} term halved",
               f"half what it should be: a factor of 2 left out{f' ({two})' if two else ''}?")]
    return slips


def _term_mistake(got, expected, name, shown, rel, terms: Mapping[str, object], counts, precision) -> None:
    """Fail naming the term and the slip when the answer is the expected sum with one term scaled; else return."""
    __tracebackhide__ = True
    units = expected.units
    values = {}
    for term, value in terms.items():
        q = _as_ours(value, f"the term {term}")
        values[term] = np.asarray(q.m_as(units) if q is not None else _plain(value, f"the term {term}"), dtype=float)
    want = sum(values.values())
    if not np.allclose(want, np.asarray(expected.magnitude, dtype=float), rtol=max(rel, 1e-6)):
        raise ValueError(f"terms ({', '.join(terms)}) do not add up to the expected value {_describe(expected)}")
    have = np.asarray(got.m_as(units), dtype=float)
    scale = np.max(np.abs(want))
    off = float(np.max(np.abs(have - want))) / scale
    # The slip must explain the answer far better than the answer matches the sum: to a tenth of how far off it is,
    # and a factor near 1 (GB for GiB) almost exactly, as for the whole answer.
    close = min(rel, off / 10)
    found = []
    for term, value in values.items():
        for factor, tag, looks in _term_slips(term, expected.dimensionality, counts, precision):
            error = float(np.max(np.abs(have - (want + (factor - 1) * value)))) / scale
            if error <= (min(close, _NEAR_ONE_NAMED * float(np.max(np.abs(value))) / scale)
                         if 0.8 < factor < 1.25 else close):
                found.append((error, term, tag, looks))
    if not found:
        return
    found.sort(key=lambda f: f[0])
    best, term, tag, looks = found[0]
    # Another term that a slip explains as well is said too; another slip of the same term is not (a term
    # left out and the same term 1000 times too small look alike, and the first is the likelier).  "As well" is
    # to rounding: at 2,000 tokens Llama-3-8B's logits x 1000 come within 0.1% of its attention term, a coincidence
    # that an exact doubling of attention should not be blamed on.
    others = sorted({f"the {t} term {l.split(':')[0].split(' (')[0]}" for e, t, g, l in found[1:]
                     if t != term and e <= 2 * best + 1e-6})
    also = f" (or {'; or '.join(others)})" if others else ""
    _fail(f"{name} = {shown}, expected {_describe(expected)} ({_percent(rel)}): it is the expected "
          f"{' + '.join(terms)} with the {term} term {looks}{also}", tag)


def terms_of(result, what: str = "time") -> dict[str, pint.Quantity]:
    """The parts of a library result (a prefill's or a decode step's ``.parts``) as :func:`quantity`'s ``terms=``.

    Returns {part name: its ``what`` ("time", "bytes" or "flops")}, plus "the overhead per pass" for what the
    total has beyond its parts (the typical preset's fixed cost), so that the terms add up to ``getattr(result,
    what)``.  An exercise checking a step's time writes ``terms=check.terms_of(step)``.
    """
    total = getattr(result, what)
    parts = {name: getattr(part, what) for name, part in result.parts.items()}
    rest = total - sum(parts.values(), 0 * total)
    if abs(rest.magnitude) > 1e-9 * abs(total.magnitude):
        parts["the overhead per pass"] = rest
    return parts


def _whole_factor(ratio: float, rel: float) -> str | None:
    """'3 times' or '1/3 of' when ``ratio`` is a whole number from 2 to 1024 or its inverse (within ``rel``)."""
    for value, phrase in ((ratio, "{n} times"), (1 / ratio, "1/{n} of")):
        n = round(value)
        if 2 <= n <= 1024 and abs(value / n - 1) <= rel:
            return phrase.format(n=n)
    return None


def _bare_hint(plain, expected: pint.Quantity) -> str:
    """Say which unit a bare number would be right in, if any."""
    if np.ndim(plain):
        return ""
    for unit in _PREFIXES:
        try:
            value = expected.m_as(unit)
        except pint.DimensionalityError:
            continue
        if value and abs(plain / value - 1) <= 0.02:
            return f" Your number matches the answer in {unit}: write Q_({plain:g}, {unit!r})."
    return ""


def _wrong_dimension(got: pint.Quantity, expected: pint.Quantity, name: str) -> None:
    __tracebackhide__ = True
    time = ureg.get_dimensionality("[time]")
    got_dim, want_dim = got.dimensionality, expected.dimensionality
    if got_dim == want_dim / time:
        _fail(
            f"{name} = {_describe(got)} is a rate (per second), but an amount in "
            f"{format(expected.units, '~')} is asked: multiply by a time, or drop a '/s'.",
            "a rate for an amount",
        )
    if got_dim == want_dim * time:
        _fail(
            f"{name} = {_describe(got)} is an amount, but a rate in {format(expected.units, '~')} "
            f"is asked: divide by a time.",
            "an amount for a rate",
        )
    _fail(
        f"{name} = {_describe(got)} has the dimension {got_dim or 'dimensionless'}, "
        f"but the answer is in {format(expected.units, '~') or 'pure numbers'} ({want_dim or 'dimensionless'}).",
        "wrong dimension",
    )


def number(answer: object, expected: float, name: str = "answer", rel: float = 0.02, accept: tuple = (),
           mistakes: dict[str, float] | None = None, also_wrong: Mapping[str, object] | None = None,
           terms: Mapping[str, float] | None = None, counts: Mapping[str, int] | None = None,
           precision: str | None = None) -> None:
    """Check a plain number (a ratio, a count, a fraction) like :func:`quantity`.

    A pint quantity is refused, even a dimensionless one: the exercise asks for a float, and a quantity that
    happens to print like one fails later where a float is needed (a format string, a comparison with a number).
    """
    __tracebackhide__ = True
    if isinstance(answer, pint.Quantity):
        how = ("value.m_as(\"\") or value.magnitude" if answer.dimensionless else
               f"divide out its unit first (it is in {format(answer.units, '~') or 'no unit'}), then .m_as(\"\")")
        shown = _describe(answer) if type(answer).__module__.startswith("pint") else repr(answer)
        _fail(f"{name} = {shown} is a quantity, but a plain number is asked: return a float, e.g. {how}.",
              QUANTITY_FOR_NUMBER)
    quantity(answer, Q_(_plain(expected, "expected"), ""), name=name, rel=rel,
             accept=tuple(Q_(_plain(a, "accepted value"), "") for a in accept), mistakes=mistakes,
             also_wrong=also_wrong, terms=terms, counts=counts, precision=precision)


def choice(answer: object, expected: str, name: str = "answer", options: dict[str, tuple[str, ...]] | None = None,
           why: str = "", also_wrong: Mapping[str, str] | None = None) -> None:
    """Check a word answer.  ``options`` maps each allowed answer to its accepted spellings; ``why`` is how to
    find the right one, said after a wrong one (it must not give the answer away).  ``also_wrong`` maps a
    mistake's name to the option that mistake picks ({"the precision not passed on": "does not fit"}): a wrong
    pick that one of them explains is told that mistake (the first that does)."""
    __tracebackhide__ = True
    if not isinstance(answer, str):
        _fail(f"{name} should be a string, got {type(answer).__name__} {answer!r}.")
    options = options or {expected: (expected,)}
    matched = _option(answer, options)
    if matched is None:
        _fail(f"{name} = {answer!r} is not one of the options: {', '.join(repr(k) for k in options)}.")
    if matched != expected:
        for mistake, option in (also_wrong or {}).items():
            if option != expected and _option(option, options) == matched:
                _fail(f"{name} = {answer!r} is not right: it is what this mistake gives: {mistake}.", mistake)
        # The tag names the wrong pick, not the right one: the message must not hand out the answer.
        _fail(f"{name} = {answer!r} is not right.{' ' + why if why else ''}", f"{name}: picked {matched}")


def _option(answer: object, options: dict[str, tuple[str, ...]]) -> str | None:
    """The first option whose name or accepted spelling ``answer`` is, or None (also for a non-string)."""
    if not isinstance(answer, str):
        return None
    said = _spelling(answer)
    return next((key for key, spellings in options.items()
                 if said == _spelling(key) or said in {_spelling(s) for s in spellings}), None)


def _spelling(text: str) -> str:
    """A word answer or option as compared: lower case, hyphens and underscores as spaces, single spaces."""
    return " ".join(text.lower().replace("-", " ").replace("_", " ").split())


_UNNAMED = "this library function"


def _disabled(*args, **kwargs):
    # Runs with the *patched* function's globals, so it may use builtins only.
    raise RuntimeError(
        "rooflab: this library function is switched off while this test runs. "
        "The exercise asks you to derive the result from the formula yourself, "
        "so write the arithmetic instead of calling the library's answer."
    )


def _disabled_code(target):
    """The code of :func:`_disabled` with ``target``'s qualified name in its message (the message is a constant,
    because the swapped code runs with the target's globals and cannot look anything up)."""
    code = _disabled.__code__
    name = f"the library function {target.__qualname__}"
    consts = tuple(const.replace(_UNNAMED, name) if isinstance(const, str) else const for const in code.co_consts)
    return code.replace(co_consts=consts)


def library_answers() -> list:
    """The library functions that compute what the derivation exercises ask for (:data:`rooflab.exercises.DERIVED`).

    Functions absent from this copy of the library (the grading sandbox's copy leaves some out) are skipped.
    """
    from .exercises import derived, resolve

    return [found for found in map(resolve, derived()) if found is not None]


@contextmanager
def derive_yourself(*functions):
    """Switch library functions off for the duration of a test, wherever they are referenced.

    With no arguments, switches off :func:`library_answers`.  Swapping the code
    object (rather than a module attribute) also catches a student who imported
    the function by name (``from rooflab import prefill``).  Accepts functions,
    methods and properties.
    """
    functions = functions or tuple(library_answers())
    targets = [function.fget if isinstance(function, property) else getattr(function, "__func__", function)
               for function in functions]
    originals = []
    for target in dict.fromkeys(targets):  # once each: a second swap would save the disabled code as the original
        originals.append((target, target.__code__))
        target.__code__ = _disabled_code(target)
    try:
        yield
    finally:
        for target, code in originals:
            target.__code__ = code


_REFERENCE = "_rooflab_reference"


def reference():
    """A private copy of rooflab, loaded afresh from its files, for computing expected answers.

    Student code that patches ``rooflab`` (on purpose or by accident) cannot move
    the reference: the copy has its own functions and its own unit registry
    (quantities from it are converted by this checker like any other registry's).
    Pass it names ("H100"), not records of the main package.
    """
    if _REFERENCE in sys.modules:
        return sys.modules[_REFERENCE]
    folder = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(_REFERENCE, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[_REFERENCE] = module
    spec.loader.exec_module(module)
    return module


# -- the one-line test cells ------------------------------------------------------

def exercise(name: str, *answers, cases: list | None = None) -> None:
    """Check the student's ``answers`` to the exercise ``name`` on its visible cases (or on ``cases``).

    Prints how many cases passed (naming the visible ones); raises AssertionError naming the first failing
    case and the likely mistake.  Where the exercise asks for a derivation, the
    library's answers are switched off while the student's code runs.
    """
    __tracebackhide__ = True
    from . import exercises

    spec = exercises.get(name)
    rl = importlib.import_module(__package__)
    ref = reference()
    hidden = cases is not None
    cases = spec.visible if cases is None else tuple(cases)
    banned = spec.banned()
    # Name every function checked (a Remote stand-in in grading carries its name as .name).
    named = [getattr(a, "__name__", None) or getattr(a, "name", None) for a in answers if callable(a)]
    checked = ", ".join(n for n in named if isinstance(n, str)) or name
    for case in cases:
        try:
            with derive_yourself(*banned) if banned else nullcontext():
                spec.run(answers, case, ref, rl)
        except AssertionError as error:
            if not hidden:
                raise
            _hidden_case_failed(checked, case, str(error))
    print(f"{checked}: {len(cases)} case{'s' if len(cases) != 1 else ''} right.")
    if not hidden:
        # Which cases: a student who passes should know what was tried, to judge what was not.
        print("\n".join(f"  {_shortened(_case_text(case))}" for case in cases))
    if spec.derived and not hidden:
        _show_derived(spec.derived)


def _show_derived(text: str) -> None:
    """Show an exercise's "what you derived" Markdown under its check, rendered, in a notebook kernel only: a
    grader or a script has no use for it (and would print its LaTeX raw)."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Markdown("**What you derived.** " + text))


# Whether a failed hidden case's message shows the expected value: a course setting (SandboxedExecute.show_expected
# in nbgrader_config.py), off by default so that hidden cases can be used again next semester.
SHOW_EXPECTED_ON_HIDDEN = False


def _shortened(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[:width - 1] + "\u2026"


def _case_text(case) -> str:
    parts = case if isinstance(case, tuple) else (case,)
    return "(" + ", ".join(str(p) for p in parts) + ")"


def _hidden_case_failed(checked: str, case, message: str) -> None:
    """Fail naming the hidden case and the checker's named mistake; the expected value only if the course says so."""
    __tracebackhide__ = True
    where = f"{checked} fails the hidden case {_case_text(case)}"
    if SHOW_EXPECTED_ON_HIDDEN:
        raise WrongAnswer(f"{where}: {message}")
    tag = message.rfind(MISTAKE_TAG)
    if tag >= 0:
        mistake = message[tag + len(MISTAKE_TAG):].split("]")[0]
        _fail(f"{where}: {mistake}.", mistake)
    _fail(f"{where} (the checker names no likely mistake; the expected value of a hidden case is not shown).")


def _not_yet(what: str, name: str, options) -> str:
    return (f"No {what} yet: replace the ... after {name} = with one of {', '.join(repr(k) for k in options)}, "
            "then run this cell again.")


def record(name: str, answer: object) -> None:
    """Take note of a prediction (it is not graded) and say where it will be revisited."""
    from . import exercises

    question = exercises.get_question(name)
    chosen = _option(answer, question.options)
    if answer is Ellipsis:
        print(_not_yet("prediction", name, question.options))
        return
    if chosen is None:
        print(f"{name} = {answer!r} is not one of the options "
              f"({', '.join(repr(k) for k in question.options)}): pick one, then run this cell again.")
        return
    later = f" {question.revisited_in} shows whether the numbers agree." if question.revisited_in else ""
    print(f"Noted: {name} = {chosen!r}.{later}")


def reveal(name: str, answer: object) -> None:
    """Compare a prediction or an answer read off a plot with what the numbers say, and explain; never graded."""
    from . import exercises

    question = exercises.get_question(name)
    chosen = _option(answer, question.options)
    if answer is Ellipsis:  # not answered yet: the explanation would give the answer away
        print(_not_yet("answer", name, question.options))
        return
    if chosen is None:
        said = f"You did not pick one of the options for {name}"
    elif chosen == question.answer:
        said = f"You said {chosen!r}, and the numbers agree"
    else:
        said = f"You said {chosen!r}; the numbers say {question.answer!r}"
    print(f"{said}. {question.explain(reference())}")
