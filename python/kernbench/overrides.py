"""``--set path=value`` overrides: parsing and typing against the defaults.

One syntax everywhere: ``bench.KEY=VALUE`` sets a bench parameter (typed like
its default: ``bench.events=1e6`` gives the integer 1000000, a list default
takes ``a,b,c``); other paths address the machine configuration.

Every value is checked before a bench runs: by type (``coerce``: integers fit
64 bits, a count whose default is positive stays positive, one whose default
is 0 stays >= 0), then by what the bench declares (``Param`` bounds, choices
and a per-value ``check``; the bench's ``checks`` over all its parameters;
``check_params``). A refused value is a ConfigError naming the parameter, the
value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from kernbench._core import ConfigError

BENCH_PREFIX = "bench."
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # bench integers go to C++ as int64


@dataclass(frozen=True)
class Param:
    """A bench parameter with what it allows, for ``@bench(params={"tp": Param([8, 16], min=1, ...)})``.

    ``default``: the value (its type types ``--set``). ``min``/``max``: bounds of the number (of each
    item of a list). ``choices``: the allowed values (of each item). ``check``: ``fn(value) -> None``
    for each value (each item of a list); return a text or raise ValueError to refuse it. ``allowed``:
    words for the error message (default: from the bounds and choices). ``help``: one line for
    ``kernbench describe``. ``size``: its values are sizes, not code paths, though they are strings or
    choices (``"8x8"`` SIPs): a full-check size may take fewer of them (kernbench.full_check).
    """

    default: Any
    min: float | None = None
    max: float | None = None
    choices: Sequence[Any] | None = None
    check: Callable[[Any], Any] | None = None
    allowed: str = ""
    help: str = ""
    size: bool = False

    def describe_allowed(self) -> str:
        if self.allowed:
            return self.allowed
        parts = []
        if self.choices is not None:
            parts.append("one of " + ", ".join(str(c) for c in self.choices))
        if self.min is not None and self.max is not None:
            parts.append(f"from {self.min} to {self.max}")
        elif self.min is not None:
            parts.append(f">= {self.min}")
        elif self.max is not None:
            parts.append(f"<= {self.max}")
        return "; ".join(parts)


def shape_check(n: int, *, allow: Sequence[str] = ()) -> Callable[[Any], Any]:
    """A ``Param.check`` for ``"AxB"`` (``n`` positive integers joined by ``x``), or one of ``allow``."""

    def check(value: Any) -> str | None:
        text = str(value).strip().lower()
        if text in allow:
            return None
        parts = text.split("x")
        form = "x".join("N" * n)
        if len(parts) != n or not all(p.isascii() and p.isdigit() for p in parts):
            return f"{value!r} is not {form} ({n} positive integers joined by x)"
        if any(int(p) <= 0 for p in parts):
            return f"{value!r}: every dimension must be positive"
        if any(len(p) > 18 for p in parts):
            return f"{value!r}: a dimension is too large"
        return None

    return check


def _refuse(name: str, value: Any, why: str, allowed: str) -> ConfigError:
    shown = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
    tail = f" (allowed: {allowed})" if allowed and allowed not in why else ""
    return ConfigError(f"bench.{name}={shown}: {why}{tail}")


def check_params(bench_name: str, params: Mapping[str, Any], specs: Mapping[str, Param] | None = None,
                 checks: Callable[[Mapping[str, Any]], Any] | None = None) -> None:
    """Every parameter against its ``Param`` (bounds, choices, check), then the bench's ``checks``.

    Raises ConfigError ``bench.NAME=VALUE: why (allowed: ...)``; nothing has run yet.
    """
    for name, spec in (specs or {}).items():
        if name not in params:
            continue
        value = params[name]
        items = value if isinstance(value, (list, tuple)) else [value]
        allowed = spec.describe_allowed()
        for item in items:
            if spec.choices is not None and item not in spec.choices:
                raise _refuse(name, value, f"{item!r} is not allowed", allowed)
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                if spec.min is not None and item < spec.min:
                    raise _refuse(name, value, f"{item} is below {spec.min}", allowed)
                if spec.max is not None and item > spec.max:
                    raise _refuse(name, value, f"{item} is above {spec.max}", allowed)
            if spec.check is not None:
                try:
                    why = spec.check(item)
                except (ValueError, TypeError) as e:
                    why = str(e) or type(e).__name__
                if why:
                    raise _refuse(name, value, str(why), allowed)
    if checks is not None:
        try:
            why = checks(params)
        except ConfigError:
            raise
        except (ValueError, TypeError) as e:
            why = str(e) or type(e).__name__
        if why:
            text = str(why)
            raise ConfigError(text if text.startswith("bench.") else f"bench {bench_name!r}: {text}")


def split_assignment(text: str) -> tuple[str, str]:
    """``"a.b=3"`` -> ``("a.b", "3")``, with a clear error for anything else."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected PATH=VALUE, e.g. bench.events=1e6")
    return key, value.strip()


#: The words of a true and a false flag (``--set``, a calibration call's bool parameter), any case.
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def parse_bool(value: Any) -> bool:
    """The one reader of a flag given as text: 1/true/yes/on or 0/false/no/off (any case); ValueError
    ``expected true or false, got ...`` otherwise. A bool is itself."""
    if isinstance(value, bool):
        return value
    low = str(value).lower()
    if low in TRUE_WORDS:
        return True
    if low in FALSE_WORDS:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def parse_number(text: str) -> int | float:
    """The one reader of a number given as text: an int when it is one (exactly, any size), else a finite
    float; ValueError ``expected a (finite) number, got ...`` otherwise."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {text!r}")
    return x


def coerce(value: str, default: Any) -> Any:
    """Parse ``value`` to the type of ``default``; ValueError says what was expected.

    A number whose default is positive (a size, a count, a rate, a time)
    must stay positive: ``bench.events=-5`` is refused here, not deep in a run.
    """
    if isinstance(default, bool):
        return parse_bool(value)
    if isinstance(default, int):
        x = parse_number(value)
        if isinstance(x, float):
            if not x.is_integer():
                raise ValueError(f"expected an integer, got {value!r}")
            x = int(x)
        if not INT_MIN <= x <= INT_MAX:
            raise ValueError(f"expected an integer that fits 64 bits (at most {INT_MAX}), got {value!r}")
        if default > 0 and x <= 0:
            raise ValueError(f"expected a positive integer, got {value!r}")
        if default == 0 and x < 0:
            raise ValueError(f"expected an integer >= 0, got {value!r}")
        return x
    if isinstance(default, float):
        try:
            x = float(parse_number(value))
        except OverflowError:  # an integer too large for a double (e.g. 400 digits)
            raise ValueError(f"expected a finite number, got {value!r}") from None
        if not math.isfinite(x) or abs(x) > 1e300:
            raise ValueError(f"expected a finite number, got {value!r}")
        if default > 0 and x <= 0:
            raise ValueError(f"expected a positive number, got {value!r}")
        return x
    if isinstance(default, (list, tuple)):
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items:
            raise ValueError(f"expected a comma-separated list, got {value!r}")
        proto = default[0] if default else ""
        return [coerce(v, proto) for v in items]
    return value


def apply_bench_overrides(
    bench_name: str, defaults: Mapping[str, Any], assignments: Iterable[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Split ``--set`` assignments into typed bench params and raw config overrides.

    Returns ``(params, config_overrides)``; an unknown ``bench.`` key or a
    badly typed value raises ConfigError naming the key and the known ones.
    """
    params = dict(defaults)
    config: dict[str, str] = {}
    known = ", ".join(BENCH_PREFIX + k for k in defaults) or "none"
    for text in assignments:
        key, value = split_assignment(text)
        if key.startswith(BENCH_PREFIX):
            name = key[len(BENCH_PREFIX):]
            if name not in defaults:
                raise ConfigError(
                    f"--set {key}={value}: unknown parameter {name!r} of bench {bench_name!r} "
                    f"(known: {known})"
                )
            try:
                params[name] = coerce(value, defaults[name])
            except ValueError as e:
                raise ConfigError(f"--set {key}={value}: {e}") from None
        else:
            config[key] = value
    return params, config
