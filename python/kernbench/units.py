"""Quantities as text and back: the one place kernbench formats sizes, rates and times.

    units.size(98304)                 # '96 KiB'  (the largest binary unit that divides exactly)
    units.size(4096, sep="")          # '4KiB'    (metric names)
    units.size(1 << 30, largest="MiB")  # '1024 MiB'
    units.gbps(32e9)                  # '32 GB/s'
    units.ns(1500)                    # '1.5 ns'  (from picoseconds)
    units.parse_quantity("32 GB/s")   # (32.0, 'GB/s')
    units.to_base(32.0, "GB/s")       # (3.2e10, 'B/s')

Binary prefixes (KiB, MiB, GiB) are powers of 1024; decimal ones (KB,
MB, GB, and every rate prefix: GB/s = 1e9 B/s) powers of 1000, as in the
machine configs (docs/config-reference.md).

There is one unit table, the C++ one (src/config/quantity.*): the time, size and bandwidth units of ``UNITS``
are read from it at import (their names from ``_core.config_schema()``, their factors from
``_core.parse_time/parse_bytes/parse_bandwidth``), and ``parse_size`` is ``_core.parse_bytes``. Python adds
only what the bindings do not cover (``PYTHON_ONLY``): sizes past GiB (TB, TiB) and the frequencies (Hz,
kHz, KHz, MHz, GHz), for which _core has no parser.
"""

from __future__ import annotations

import json
import re

from kernbench import _core

__all__ = ["KiB", "MiB", "GiB", "size", "gbps", "ns", "parse_quantity", "split_quantity", "to_base", "parse_size",
           "UNITS", "PYTHON_ONLY"]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

_BINARY = (("GiB", GiB), ("MiB", MiB), ("KiB", KiB))

#: The C++ table's kinds: schema name -> (base unit, parser of "<number> <unit>" into base units).
_CORE_KINDS = {"bytes": ("B", _core.parse_bytes), "bandwidth": ("B/s", _core.parse_bandwidth),
               "time": ("ps", _core.parse_time)}

#: Units the bindings do not parse, unit -> (base unit, factor): sizes past the C++ table's GiB, and the
#: frequencies (the C++ table has Hz, kHz, MHz, GHz but no binding parses them; KHz is Python's alias).
PYTHON_ONLY: dict[str, tuple[str, float]] = {
    "TB": ("B", 1e12), "TiB": ("B", 1 << 40),
    "Hz": ("Hz", 1), "kHz": ("Hz", 1e3), "KHz": ("Hz", 1e3), "MHz": ("Hz", 1e6), "GHz": ("Hz", 1e9),
}


def _core_units() -> dict[str, tuple[str, float]]:
    """unit -> (base, factor) of the C++ table's sizes, bandwidths and times. A factor is what the C++ parser
    makes of 8 of the unit, over 8 (exact: a bit rate is 1/8 of its byte rate)."""
    names = json.loads(_core.config_schema())["units"]
    out: dict[str, tuple[str, float]] = {}
    for kind, (base, parse) in _CORE_KINDS.items():
        for unit in names[kind]:
            eight = int(parse(f"8 {unit}", ""))
            out[unit] = (base, eight // 8 if eight % 8 == 0 else eight / 8)
    return out


#: unit -> (dimension's base unit, factor to it). Base units: B, B/s, ps, Hz.
UNITS: dict[str, tuple[str, float]] = {**_core_units(), **PYTHON_ONLY}

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z][A-Za-z/]*)\s*$")


def size(n: int, *, sep: str = " ", largest: str = "GiB") -> str:
    """``n`` bytes in the largest binary unit (up to ``largest``) that divides it exactly: 98304 -> '96 KiB'.

    A size no KiB divides is plain bytes ('100 B'); 0 is '0 B'.
    """
    n = int(n)
    names = [u for u, _ in _BINARY]
    if largest not in names:
        raise ValueError(f"units.size: largest={largest!r}: expected one of {', '.join(names)}")
    for unit, scale in _BINARY[names.index(largest):]:
        if n and n % scale == 0:
            return f"{n // scale}{sep}{unit}"
    return f"{n}{sep}B"


def gbps(bytes_per_s: float) -> str:
    """A rate in B/s as decimal GB/s, shortest form: 3.2e10 -> '32 GB/s'."""
    return f"{bytes_per_s / 1e9:g} GB/s"


def ns(ps: float) -> str:
    """A time in picoseconds as nanoseconds, shortest form: 1500 -> '1.5 ns'."""
    return f"{ps / 1e3:g} ns"


def split_quantity(text: str) -> tuple[str, str] | None:
    """'32 GB/s' -> ('32', 'GB/s'): the number's text and the unit word, known or not; None when ``text`` is
    not a number followed by a unit."""
    m = _QUANTITY.match(text) if isinstance(text, str) else None
    return (m.group(1), m.group(2)) if m else None


def parse_quantity(text: str) -> tuple[float, str] | None:
    """'32 GB/s' -> (32.0, 'GB/s'); None when ``text`` is not a number with a known unit."""
    q = split_quantity(text)
    if q is None or q[1] not in UNITS:
        return None
    return float(q[0]), q[1]


def to_base(value: float, unit: str) -> tuple[float, str]:
    """A value in ``unit`` expressed in its dimension's base unit: (32, 'GB/s') -> (3.2e10, 'B/s')."""
    try:
        base, factor = UNITS[unit]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r} (known: {', '.join(UNITS)})") from None
    return value * factor, base


def parse_size(text: str) -> int:
    """'4KiB', '16 MiB', '100 B' -> bytes (the inverse of ``size``); a bad text names itself.

    ``_core.parse_bytes`` reads it (the config's rule: exact decimals, a whole number of bytes, at most
    2**63 - 1); only the Python-only sizes (TB, TiB) are read here. ValueError, never the ConfigError of _core.
    """
    q = split_quantity(text)
    if q is not None and PYTHON_ONLY.get(q[1], ("",))[0] == "B":
        value, _ = to_base(float(q[0]), q[1])
        return int(round(value))
    try:
        return int(_core.parse_bytes(text, "")) if isinstance(text, str) else _not_a_size(text, "")
    except _core.ConfigError as e:
        return _not_a_size(text, f" ({e})")


def _not_a_size(text, why: str) -> int:
    raise ValueError(f"{text!r}: expected a size such as '4 KiB' or '16MiB'{why}")
