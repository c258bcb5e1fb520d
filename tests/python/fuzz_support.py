"""Shared pieces of the hypothesis fuzz tests of kernbench's file readers (issue 31): the time box, the checks.

``fuzz(strategy, check, examples, at_seed)`` runs ``check`` on ``examples`` generated inputs (seeded, so a default
run is reproducible), then keeps going with fresh seeds while ``KERNBENCH_FUZZ_SECONDS`` lasts (``.ci/run`` sets
it). ``time_limit(s)`` fails an example that runs longer (a hang). ``assert_typed_error`` and ``assert_finite`` are
the allowed outcomes of a reader: a typed kernbench error naming the file, or a result with no NaN or infinity.
The strategies give the awkward inputs every reader meets: numbers as texts, encodings, cut and garbage bytes.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from kernbench._core import ConfigError, UsageError

#: The errors a reader may raise (CalibrationError is a ConfigError).
TYPED_ERRORS = (ConfigError, UsageError)
ENCODINGS = ["utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16", "utf-16-le", "utf-32"]


def fuzz_seconds() -> float:
    """The extra fuzzing time asked for with KERNBENCH_FUZZ_SECONDS (0: the short default run only)."""
    return float(os.environ.get("KERNBENCH_FUZZ_SECONDS", "0") or 0)


def fuzz(strategy: st.SearchStrategy[Any], check: Callable[[Any], None], examples: int, at_seed: int,
         share: float = 1.0) -> int:
    """``check`` on ``examples`` inputs drawn from ``strategy`` at ``at_seed``, then on more at fresh seeds
    while ``share`` of KERNBENCH_FUZZ_SECONDS lasts (a module of two fuzz tests gives each half); returns how
    many rounds ran."""
    def one_round(n: int, s: int) -> None:
        @seed(s)
        @settings(max_examples=n, deadline=None, database=None, derandomize=False,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                         HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
        @given(strategy)
        def run(value):
            check(value)

        run()

    one_round(examples, at_seed)
    rounds, stop = 1, time.monotonic() + share * fuzz_seconds()
    while time.monotonic() < stop:
        one_round(max(examples, 100), at_seed + rounds)
        rounds += 1
    return rounds


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Fail (AssertionError) when the block runs longer than ``seconds``: a reader that hangs. Main thread only."""
    def on_alarm(signum, frame):
        raise AssertionError(f"{what}: still running after {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def assert_typed_error(e: BaseException, path: Path | str, allowed: tuple[type[BaseException], ...] = TYPED_ERRORS):
    """``e`` is one of kernbench's typed errors, on one line, and names the file ``path``."""
    assert isinstance(e, allowed), f"{path}: {type(e).__name__} is not a typed error: {e}"
    msg = str(e)
    assert str(path) in msg, f"the message does not name the file {path}: {msg}"
    assert "\n" not in msg, f"{path}: the message is more than one line: {msg!r}"


def assert_finite(obj: Any, where: str = "result", _depth: int = 0) -> None:
    """No NaN or infinity anywhere in ``obj`` (maps, lists, dataclass-like objects with __dict__)."""
    assert _depth < 200, f"{where}: nested deeper than 200"
    if isinstance(obj, float):
        assert math.isfinite(obj), f"{where} = {obj!r}: not finite"
    elif isinstance(obj, dict):
        for k, v in obj.items():
            assert_finite(k, f"{where} key", _depth + 1)
            assert_finite(v, f"{where}.{k}", _depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for i, v in enumerate(obj):
            assert_finite(v, f"{where}[{i}]", _depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        assert_finite(vars(obj), where, _depth + 1)


def numeric_texts() -> st.SearchStrategy[str]:
    """Numbers as a user might type them: huge, tiny, non-finite, with units, underscores, other digits."""
    return st.one_of(
        st.integers(-(10**30), 10**30).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", ".inf", ".nan", "1e308", "1e309", "-1e308",
                         "4e-324", "1e-400", "0", "-0.0", "0x10", "1_000", "9" * 400, "9" * 5000, "1/2", "+3", " 7 ",
                         "٣", "1e308 ns", "1e308 s", "1e-308 us", "5 %", "nan us", "inf GB/s", "2 fortnights",
                         "3 us", "64 MiB", "1e999 GiB", "true", "", "~", "null"]),
        st.tuples(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                  st.sampled_from(["us", "ns", "s", "GB/s", "GFLOPS", "%", "MiB", "x"])).map(" ".join),
    )


def encoded(text: str) -> st.SearchStrategy[bytes]:
    """``text`` in one of several encodings (UTF-8 with or without a BOM, Latin-1, UTF-16, ...), or cut short,
    or with garbage bytes put in."""
    def enc(name: str) -> bytes:
        return text.encode(name, errors="replace")

    plain = st.sampled_from(["utf-8"] * 6 + ENCODINGS).map(enc)  # mostly UTF-8: the content gets read too

    @st.composite
    def damaged(draw) -> bytes:
        raw = draw(plain)
        if not raw:
            return draw(st.binary(max_size=40))
        at = draw(st.integers(0, len(raw)))
        if draw(st.booleans()):
            return raw[:at]
        return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]

    return st.one_of(plain, plain, plain, damaged())


def outcome(read: Callable[[], Any], path: Path | str, seconds: float = 10.0,
            allowed: tuple[type[BaseException], ...] = TYPED_ERRORS) -> tuple[Any, BaseException | None]:
    """(result, None) of ``read()``, or (None, the error) when it raised one of ``allowed`` naming ``path``; any
    other exception, or a run longer than ``seconds``, fails the example."""
    try:
        with time_limit(seconds, f"reading {path}"):
            return read(), None
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 -- the point: which exception it is
        assert_typed_error(e, path, allowed)
        return None, e


def json_values() -> st.SearchStrategy[Any]:
    """Small JSON values of any shape: null, booleans, big integers, floats with NaN and infinities, texts, lists
    and maps of them."""
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
    def nest(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=4), kids, max_size=3))

    return st.recursive(leaves, nest, max_leaves=8)
