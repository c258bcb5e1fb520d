"""The one place where a serving run's arguments are checked: ``serving.run`` (the API) and ``kernbench serve`` (the
CLI) both call ``check_run_args`` before anything is built, so a bad value is a ServingError naming the argument
(``block_size`` from the API, ``--block-size`` from the CLI), its value and what is allowed -- never numpy's or
pybind's error, a ZeroDivisionError, an int64 that wraps, or a memory blow-up.

The type and range of each argument are the shared argument checker's rules (``kernbench.args``: a whole number
refuses bools, strings, NaN and fractions); the bounds below are what the C++ serving core's types hold and what a
run can allocate, chosen so that every sum the core forms (tokens over all requests, times in ps) stays in int64.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, Callable, Mapping

from kernbench._core import ConfigError, UsageError
from kernbench.args import INT32, Flag, Optional, Rule, Text, Whole
from kernbench.workloads.graph import WorkloadError

__all__ = ["ServingError", "SCHEDULERS", "MAX_REQUESTS", "MAX_TOKENS", "MAX_ARRIVAL_S", "MAX_ITERATION_S", "check_run_args", "check_warmup",
           "api_name", "cli_name", "POLICIES"]

#: Requests of one run: each request has ~15 per-request columns of 8 bytes in Python and the core (about 1 GiB
#: of arrays at the bound); a larger run is refused before anything is allocated.
MAX_REQUESTS = 10_000_000
#: Tokens of one prompt, output or shared prefix: far past any model's positions (which ``run`` checks too), and
#: small enough that the tokens of MAX_REQUESTS requests sum in int64 (1e7 x 2^30 < 2^63).
MAX_TOKENS = 1 << 30
#: The latest arrival: the core's clock is an int64 count of picoseconds (2^63 ps = 106 days); arrivals stop at
#: 1e6 s (11.6 days), leaving room for the run to finish.
MAX_ARRIVAL_S = 1e6
#: One iteration's price: past this the machine's description is wrong (a 1 Hz clock), not the load.
MAX_ITERATION_S = 1e5

#: The choices of the text arguments (the scheduler policies are serving.SCHEDULERS).
POLICIES = {"arrival": ("poisson", "gamma", "constant"), "preemption": ("recompute", "swap"),
            "routing": ("round_robin", "least_loaded")}


def api_name(name: str) -> str:
    return name


def cli_name(name: str) -> str:
    """The ``kernbench serve`` flag of an argument of ``serving.run``."""
    return {"routing": "--router", "model": "--model"}.get(name, "--" + name.replace("_", "-"))


class _Positive(Rule):
    """A finite real number > 0 (bools and strings refused)."""

    def __call__(self, value, where, name):
        if isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real):
            raise self.fail(where, name, f"must be a number, got {type(value).__name__} {value!r}")
        if not (math.isfinite(float(value)) and float(value) > 0):
            raise self.fail(where, name, f"= {value!r} must be a finite number > 0")
        return value


class _Choice(Rule):
    def __init__(self, choices: tuple[str, ...]):
        self.choices = choices

    def __call__(self, value, where, name):
        if not isinstance(value, str) or value not in self.choices:
            raise self.fail(where, name, f"= {value!r} is not one of {', '.join(self.choices)}")
        return value


class _Length(Rule):
    """A length distribution's text (checked by Dist.parse), a Dist, or a whole number of tokens."""

    def __call__(self, value, where, name):
        if isinstance(value, str) or callable(getattr(value, "sample", None)):  # a text, or a serving_load.Dist
            return value
        return Whole(1, MAX_TOKENS)(value, where, name)


class _TraceArg(Rule):
    def __call__(self, value, where, name):
        if value is None or isinstance(value, (str, Path)) or callable(getattr(value, "check", None)):  # or a Trace
            return value
        raise self.fail(where, name, f"must be a CSV path or a Trace, got {type(value).__name__} {value!r}")


class _Slo(Rule):
    def __call__(self, value, where, name):
        if value is None or isinstance(value, (str, dict)):
            return value
        raise self.fail(where, name, f"must be a text like ttft=200ms,tpot=50ms or a dict, got {value!r}")


class _Pair(Rule):
    """``disaggregate``: (prefill instances, decode instances), two whole numbers >= 1."""

    item = Whole(1, INT32[1])

    def __call__(self, value, where, name):
        if value is None:
            return None
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") or len(value) != 2:
            raise self.fail(where, name, f"must be (prefill, decode) instances, two whole numbers >= 1, got "
                                         f"{value!r}")
        return tuple(int(self.item(v, where, f"{name}[{i}]")) for i, v in enumerate(value))


class _Dtype(Rule):
    def __call__(self, value, where, name):
        from kernbench.workloads.graph import DTYPE_BYTES

        if value is None or (isinstance(value, str) and value in DTYPE_BYTES):
            return value
        raise self.fail(where, name, f"= {value!r} is not a precision ({', '.join(sorted(DTYPE_BYTES))})")


class ServingError(WorkloadError):
    """Bad serving input (a trace row, a distribution, an SLO, a plan with no room for the KV cache)."""


#: The serving scheduler policies (kernbench.serving re-exports them).
SCHEDULERS = ("vllm", "sarathi", "orca", "static")


def _rules() -> dict[str, Rule]:
    return {
        "model": Text(), "tp": Whole(1, INT32[1]), "pp": Whole(1, INT32[1]), "qps": _Positive(),
        "requests": Whole(1, MAX_REQUESTS), "prompt": _Length(), "output": _Length(),
        "arrival": _Choice(POLICIES["arrival"]), "cv": _Positive(), "trace": _TraceArg(),
        "scheduler": _Choice(SCHEDULERS), "max_num_seqs": Whole(1, INT32[1]),  # the core's int
        "max_batched_tokens": Optional(Whole(1, MAX_TOKENS)), "block_size": Whole(1, 1 << 20),
        "kv_blocks": Optional(Whole(1, INT32[1])), "preemption": _Choice(POLICIES["preemption"]), "slo": _Slo(),
        "check": Whole(0, 100_000), "dtype": _Dtype(), "replicas": Whole(1, INT32[1]),
        "routing": _Choice(POLICIES["routing"]), "disaggregate": _Pair(), "prefix_caching": Flag(),
        "prefix_groups": Whole(0, INT32[1]), "prefix_tokens": Whole(0, MAX_TOKENS),
        "max_tokens": Whole(1, MAX_TOKENS),
    }


def check_warmup(value: Any, where: str, name: str, requests: int | None = None) -> None:
    """``warmup``: a fraction in [0, 1) of the requests, or (the API only) a whole count below the request count."""
    if isinstance(value, bool) or isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real):
        raise ServingError(f"{where}: {name} must be a fraction in [0, 1) or a count of requests, got {value!r}")
    if isinstance(value, numbers.Integral):
        if not 0 <= value < (requests if requests is not None else MAX_REQUESTS):
            raise ServingError(f"{where}: {name} = {value} requests is out of range (allowed: 0 .. "
                               f"{requests - 1 if requests is not None else MAX_REQUESTS - 1}: at least one request "
                               "is measured)")
        return
    if not (math.isfinite(value) and 0 <= value < 1):
        raise ServingError(f"{where}: {name} = {value!r} is not a fraction in [0, 1) (the share of requests left out "
                           "of the statistics)")


def check_run_args(values: Mapping[str, Any], where: str = "serving.run",
                   name: Callable[[str], str] = api_name) -> dict[str, Any]:
    """Each of ``values`` (serving.run's keyword arguments, by their API names) checked by its rule; returns them
    as the rules pass them on. ``name`` words an argument in the error (``cli_name`` for the CLI's flags)."""
    from kernbench.args import check_seed

    rules = _rules()
    out = dict(values)
    for key, value in values.items():
        try:
            if key == "seed":
                check_seed(value, name(key))
            elif key == "warmup":
                check_warmup(value, where, name(key))
            elif key in rules:
                out[key] = rules[key](value, where, name(key))
        except ServingError:
            raise
        except (UsageError, ConfigError) as e:  # the shared rules' and check_seed's words, as a serving error
            text = str(e)
            raise ServingError(text if text.startswith(where) else f"{where}: {text}") from None
    return out
