"""The Python API's one argument checker: every wrapper of kernbench.program, kernbench.ccl and kernbench.system
checks its arguments here, before the pybind call, so a wrong type or a value the C++ type cannot hold is a
UsageError naming the method, the argument and the value -- never pybind's "incompatible function arguments".

    @checked("Program.dma")
    def dma(self, agent, src, dst, bytes, deps=(), name="", tag=None): ...

Each argument is checked by the rule its name has in ``RULES`` (``bytes``: a whole number 0 .. 2**63-1,
``name``: a text, ``agent``: a node, ...); ``checked(where, flops=None)`` leaves one to the call,
``checked(where, m=I64)`` sets one. A rule checks what the argument is (an integer, an integral float, a
text...) and the range of the C++ type that takes it; what the value means (a GEMM dimension > 0, a SIP that
exists) the call itself then checks, with its own typed error.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
from typing import Any, Callable

from kernbench._core import ConfigError, UsageError

__all__ = ["Rule", "Whole", "Real", "Text", "Flag", "NodeRule", "Nodes", "Ints", "Optional", "Deps", "RULES",
           "checked", "check", "SEED_MAX", "check_seed"]

INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)
UINT32 = (0, 2**32 - 1)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool")


def _kind(value: Any) -> str:
    if _is_bool(value):
        return f"the bool {_shown(value)}"
    if isinstance(value, (str, bytes)):
        return f"the string {_shown(value)}"
    return f"{type(value).__name__} {_shown(value)}"


class Rule:
    """What one argument must be; ``rule(value, where, name)`` returns the value to pass on or raises
    UsageError ``where: name ...``."""

    def __call__(self, value: Any, where: str, name: str) -> Any:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    @staticmethod
    def fail(where: str, name: str, why: str) -> UsageError:
        return UsageError(f"{where}: {name} {why}")


class Whole(Rule):
    """An integer (numpy integers too) or an integral float, from ``lo`` to ``hi``; bools, strings, None,
    NaN, inf and fractions are refused (nothing is truncated). ``below``: the words for a value under ``lo``."""

    def __init__(self, lo: int = INT64[0], hi: int = INT64[1], below: str = ""):
        self.lo, self.hi, self.below = lo, hi, below

    def __call__(self, value, where, name):
        if _is_bool(value) or isinstance(value, (str, bytes)):
            raise self.fail(where, name, f"must be an integer, got {_kind(value)}")
        if isinstance(value, numbers.Integral) or (hasattr(value, "__index__") and not isinstance(value, float)):
            try:
                x = operator.index(value)
            except TypeError:
                raise self.fail(where, name, f"must be an integer, got {_kind(value)}") from None
        elif isinstance(value, numbers.Real):
            f = float(value)
            if not math.isfinite(f):
                raise self.fail(where, name, f"must be a finite integer, got {_shown(value)}")
            if f != math.floor(f):
                raise self.fail(where, name, f"must be a whole number, got the fraction {_shown(value)} "
                                             "(nothing is truncated)")
            x = int(f)
        else:
            raise self.fail(where, name, f"must be an integer, got {_kind(value)}")
        if x < self.lo and self.below:
            raise self.fail(where, name, f"= {x} is out of range ({self.below}; allowed: {self.lo} .. {self.hi})")
        if not self.lo <= x <= self.hi:
            raise self.fail(where, name, f"= {x} is out of range (allowed: {self.lo} .. {self.hi})")
        return value if isinstance(value, int) else x  # an int subclass (a Program's op id) kept as it is


class Real(Rule):
    """A real number (int, float, numpy); bools, strings and None are refused, and with ``finite`` NaN and
    inf, and values below ``lo`` (None: no bound)."""

    def __init__(self, lo: float | None = 0.0, finite: bool = True):
        self.lo, self.finite = lo, finite

    def __call__(self, value, where, name):
        if _is_bool(value) or isinstance(value, (str, bytes)) \
                or not isinstance(value, numbers.Real):
            raise self.fail(where, name, f"must be a number, got {_kind(value)}")
        f = float(value)
        if self.finite and not math.isfinite(f):
            raise self.fail(where, name, f"must be finite, got {_shown(value)}")
        if self.lo is not None and f < self.lo:
            raise self.fail(where, name, f"= {_shown(value)} is below {self.lo}")
        return value


class Text(Rule):
    """A str."""

    def __call__(self, value, where, name):
        if not isinstance(value, str):
            raise self.fail(where, name, f"must be a text (str), got {_kind(value)}")
        return value


class Flag(Rule):
    """A bool (numpy's too)."""

    def __call__(self, value, where, name):
        if not _is_bool(value):
            raise self.fail(where, name, f"must be True or False, got {_kind(value)}")
        return bool(value)


class NodeRule(Rule):
    """A node: its name (str) or its id (a whole number 0 .. 2**32-1)."""

    ids = Whole(*UINT32)

    def __call__(self, value, where, name):
        if isinstance(value, str):
            return value
        if value is None or isinstance(value, bytes) or _is_bool(value):
            raise self.fail(where, name, f"must be a node name or id, got {_kind(value)}")
        return self.ids(value, where, name)


class Ints(Rule):
    """A list (or tuple, range...) of items each checked by ``item``; a lone item counts as a list of one when
    ``lone`` (a node for ``pes=``), and ``empty`` says whether ``[]`` is allowed."""

    def __init__(self, item: Rule, *, lone: bool = False, empty: bool = True, why_empty: str = ""):
        self.item, self.lone, self.empty, self.why_empty = item, lone, empty, why_empty

    def __call__(self, value, where, name):
        if self.lone and isinstance(value, (str, numbers.Integral)) and not _is_bool(value):
            value = [value]
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise self.fail(where, name, f"must be a list, got {_kind(value)}")
        out = [self.item(v, where, f"{name}[{i}]") for i, v in enumerate(value)]
        if not out and not self.empty:
            raise self.fail(where, name, f"is an empty list{self.why_empty}")
        return out


def Nodes(*, empty: bool = True, why_empty: str = "") -> Ints:  # noqa: N802 - reads as a rule, like the classes
    """A list of nodes (a lone node counts as one)."""
    return Ints(NodeRule(), lone=True, empty=empty, why_empty=why_empty)


class Optional(Rule):
    """None, or what ``rule`` allows."""

    def __init__(self, rule: Rule):
        self.rule = rule

    def __call__(self, value, where, name):
        return None if value is None else self.rule(value, where, name)


class Deps(Rule):
    """Dependencies: a list of op ids (whole numbers >= 0) or objects with ``sinks`` (a Handle); the owner of
    each is checked by the Program that takes them."""

    ids = Whole(0, UINT32[1], below="not an op handle")

    def __call__(self, value, where, name):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise self.fail(where, name, f"must be a list of op handles, got {_kind(value)}")
        value = list(value)
        for i, d in enumerate(value):
            if not hasattr(d, "sinks"):
                self.ids(d, where, f"{name}[{i}]")
        return value


class RankDeps(Rule):
    """Per-rank dependencies: a list with one ``Deps`` list per rank."""

    deps = Deps()

    def __call__(self, value, where, name):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise self.fail(where, name, f"must be a list of dependency lists (one per rank), got {_kind(value)}")
        return [self.deps(d, where, f"{name}[{i}]") for i, d in enumerate(value)]


class Tag(Rule):
    """A tag: None, a label (str) or a tag id (a whole number 0 .. 2**31-1)."""

    ids = Whole(0, INT32[1])

    def __call__(self, value, where, name):
        if value is None or isinstance(value, str):
            return value
        return self.ids(value, where, name)


SIZE = Whole(0, INT64[1], below="a negative size")
COUNT = Whole(0, INT64[1], below="negative")
I64, I32, U32 = Whole(*INT64), Whole(*INT32), Whole(*UINT32, below="negative")
NODE = NodeRule()

#: The rule of each argument name used by the wrappers (a name not listed is not checked).
RULES: dict[str, Rule] = {
    # byte counts and counts
    "bytes": SIZE, "bytes_per_pe": SIZE, "vector_bytes": SIZE, "elem_bytes": I64, "duration_ps": COUNT,
    "launch_ps": COUNT, "tiles": U32, "buffers": U32, "kv_buffers": U32, "pieces": I64, "root": I64,
    "channels": I64, "calls": I64, "host_threads": I64, "grid_w": I64, "grid_h": I64, "key": I64,
    "m": I64, "n": I64, "k": I64, "tile_m": I64, "tile_n": I64, "tile_k": I64, "t_q": I64, "s_kv": I64,
    "tile_q": I64, "tile_s": I64, "d_head": I64, "case": I32, "sip": I32, "h_q": I32, "pe_first": I32,
    "pe_count": I32, "at_ps": Optional(I64), "until_ps": Optional(I64), "address": COUNT,
    # real numbers
    "flops": Real(0.0),
    # texts
    "name": Text(), "precision": Text(), "algorithm": Text(), "what": Text(), "phase": Text(), "kind": Text(),
    "inter": Optional(Text()), "buffer": Optional(Text()), "verify": Text(), "protocol": Text(), "mode": Text(),
    "compute": Text(),
    # flags
    "pinned": Flag(),
    # nodes and lists
    "agent": NODE, "src": NODE, "dst": NODE, "peer": NODE, "issuer": NODE, "memory": NODE,
    "source": Optional(NODE), "homes": Optional(Nodes()), "cubes": Ints(I32), "deps": Deps(),
    "rank_deps": Optional(RankDeps()),
    "tag": Tag(), "load_tag": Tag(), "compute_tag": Tag(), "store_tag": Tag(),
}


def check(where: str, name: str, value: Any, rule: Rule | None = None) -> Any:
    """One argument by ``rule`` (default: its name's in RULES); returns the value to pass on."""
    rule = rule if rule is not None else RULES.get(name)
    return value if rule is None else rule(value, where, name)


def checked(where: str, **rules: Rule | None) -> Callable:
    """Decorate a wrapper: every argument it is called with (those in ``**kw`` too) is checked by its rule
    (``rules`` first, then RULES; None: not checked here) and passed on as the rule returns it."""

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        rule = {p.name: (rules[p.name] if p.name in rules else RULES.get(p.name)) for p in params}
        # The fast path binds the common call (no *args, no positional-only name given by keyword) by position
        # and name, in the signature's order, as sig.bind would; anything else goes through sig.bind, which
        # also words the TypeError of a call that does not fit.
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        by_keyword = {p.name: i for i, p in enumerate(params)
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        required = {p.name for p in params if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        fast = not any(p.kind is p.VAR_POSITIONAL for p in params)

        def rule_of(name: str) -> Rule | None:
            return rules[name] if name in rules else RULES.get(name)

        def slow(args, kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                raise UsageError(f"{where}: {e}") from None
            for name, value in list(bound.arguments.items()):
                if name == var_kw:
                    for key, v in value.items():
                        r = rule_of(key)
                        if r is not None:
                            value[key] = r(v, where, key)
                    continue
                r = rule.get(name)
                if r is not None:
                    bound.arguments[name] = r(value, where, name)
            return fn(*bound.args, **bound.kwargs)

        @functools.wraps(fn)
        def run(*args, **kwargs):
            n = len(args)
            if not fast or n > len(positional) or (var_kw is None and not kwargs.keys() <= by_keyword.keys()):
                return slow(args, kwargs)
            named = positional[:n]
            if any(k in kwargs for k in named) or not required <= set(named).union(kwargs):
                return slow(args, kwargs)
            args = list(args)
            for i, name in enumerate(named):  # positional arguments come first in the signature's order
                r = rule[name]
                if r is not None:
                    args[i] = r(args[i], where, name)
            known = sorted((k for k in kwargs if k in by_keyword), key=by_keyword.__getitem__)
            out = {k: kwargs[k] for k in known}
            for k in known:
                r = rule[k]
                if r is not None:
                    out[k] = r(out[k], where, k)
            for k in kwargs:  # those **kw takes, checked by their own name's rule, after the named ones
                if k not in by_keyword:
                    r = rule_of(k)
                    out[k] = kwargs[k] if r is None else r(kwargs[k], where, k)
            return fn(*args, **out)

        return run

    return wrap


def machine_range(key: str, value: Any, lo: int, hi: int, machine: str, what: str) -> None:
    """A bench parameter whose range is the machine's (a SIP index, a PE count): each item of ``value``
    (a list's too) must lie in ``lo .. hi``, else a ConfigError ``--set bench.KEY=VALUE: ... (allowed: lo ..
    hi: what on MACHINE)``, raised before the bench runs anything."""
    from kernbench._core import ConfigError

    items = value if isinstance(value, (list, tuple)) else [value]
    shown = ",".join(str(v) for v in items) if isinstance(value, (list, tuple)) else str(value)
    for item in items:
        if not lo <= item <= hi:
            raise ConfigError(f"--set bench.{key}={shown}: {item} is out of range for this machine "
                              f"(allowed: {lo} .. {hi}: {what} on {machine})")


#: The engine takes a signed 64-bit seed, >= 0.
SEED_MAX = 2**63 - 1


def check_seed(seed: Any, what: str = "--seed") -> int:
    """An integer from 0 to 2**63 - 1 (the engine's 64-bit seed), or ConfigError naming it."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{what} {seed!r}: expected an integer from 0 to {SEED_MAX}")
    if not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"{what} {seed}: out of range (allowed: 0 to {SEED_MAX})")
    return seed
