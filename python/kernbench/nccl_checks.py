"""The checks that refuse an nccl-tests log no run could print (kernbench.nccl reads the logs): a time below the
printed resolution, an algbw that is not size / time, a busbw that is not algbw x the collective's factor, a size
measured twice (two logs in one file). Each is refused naming the file and line, never used as is."""

from __future__ import annotations

from kernbench._core import ConfigError


class NcclLogError(ConfigError):
    """A file that is not (or no longer) nccl-tests output: the message names the file and the line."""


class BadValue(ValueError):
    """A field that reads as a number but means nothing (non-finite, negative, impossible): refused at its line,
    never taken for a row cut short."""


def group_name(g: int) -> str:
    return ("out-of-place", "in-place")[g] if g < 2 else f"column group {g + 1}"


#: nccl-tests prints times and bandwidths with two decimals (%7.2f): each printed value is within half a unit of
#: the last digit (with a margin for older versions' other rounding) of the one it measured.
_PRINTED = 0.0051


def check_rate(size: int, time_us: float | None, algbw: float | None, where: str) -> None:
    """A measured row must be one a run can print: a positive size takes a time of at least the printed 0.01 us,
    and algbw is size / time (GB/s, 1e9 B) up to the printing's rounding; else BadValue (refused)."""
    if size == 0 or time_us is None:
        return
    if time_us < _PRINTED:
        raise BadValue(f"the {where} time is {time_us:g} us for {size} bytes: nccl-tests times a positive size "
                        "with at least 0.01 us")
    if algbw is None:
        return
    slack = min(_PRINTED / time_us, 0.5)
    lo, hi = size / (time_us * (1 + slack)) / 1e3, size / (time_us * (1 - slack)) / 1e3
    if not lo * 0.999 - _PRINTED <= algbw <= hi * 1.001 + _PRINTED:
        raise BadValue(f"the {where} algbw {algbw:g} GB/s is not size / time = {size} B / {time_us:g} us = "
                        f"{size / time_us / 1e3:.4g} GB/s")


def check_busbw(log, factor: float, hint: str = "") -> None:
    """Every row's busbw must be its algbw x the collective's factor (nccl-tests' own formula), up to the
    printing's rounding: a busbw column inconsistent with size / time is refused, naming the line."""
    for r in log.rows:
        for g, grp in enumerate(r.groups):
            a, b = grp["algbw"], grp["busbw"]
            if a is None or b is None:
                continue
            want = a * factor
            if abs(b - want) > _PRINTED * (1 + factor) + 1e-3 * want:
                raise NcclLogError(f"{log.path}:{r.line}: the {group_name(g)} busbw {b:g} GB/s is not algbw x "
                                   f"{factor:.4g} = {want:.4g} GB/s (nccl-tests' busbw for this collective and "
                                   f"{log.ranks} ranks){hint}")


def check_repeats(path, rows) -> None:
    """A size measured twice (same type, op and root) means two tables in one file: refused, never weighed twice."""
    seen: dict[tuple, int] = {}
    for r in rows:
        key = (r.size, r.type, r.redop, r.root)
        if key in seen:
            raise NcclLogError(f"{path}:{r.line}: size {r.size} ({r.type}) again, first at line {seen[key]}: two "
                               "logs (or a table repeated) in one file; give one log per file")
        seen[key] = r.line
