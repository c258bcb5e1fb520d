"""``--set path=value`` overrides: parsing and typing against the defaults.

One syntax everywhere: ``bench.KEY=VALUE`` sets a bench parameter (typed like
its default: ``bench.events=1e6`` gives the integer 1000000, a list default
takes ``a,b,c``); other paths address the machine configuration.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from kernbench._core import ConfigError

BENCH_PREFIX = "bench."


def split_assignment(text: str) -> tuple[str, str]:
    """``"a.b=3"`` -> ``("a.b", "3")``, with a clear error for anything else."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected PATH=VALUE, e.g. bench.events=1e6")
    return key, value.strip()


def _parse_number(text: str) -> int | float:
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
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(default, int):
        x = _parse_number(value)
        if isinstance(x, float):
            if not x.is_integer():
                raise ValueError(f"expected an integer, got {value!r}")
            x = int(x)
        if default > 0 and x <= 0:
            raise ValueError(f"expected a positive integer, got {value!r}")
        return x
    if isinstance(default, float):
        x = float(_parse_number(value))
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
