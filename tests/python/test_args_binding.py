"""kernbench.args.checked binds the common call without inspect.Signature.bind (a lowering makes 10**5 checked
calls): the arguments a function receives, and the error of a call that does not fit, are what sig.bind gives."""

from __future__ import annotations

import pytest

from kernbench._core import UsageError
from kernbench.args import Whole, checked


@checked("f", m=Whole(1), k=Whole(0))
def f(a, m, k=0, *, name="", **kw):
    return a, m, k, name, kw


def test_positional_keyword_and_extra_keywords_reach_the_function_checked():
    """Positional, keyword and ** arguments arrive as called, each by its rule (an integral float becomes an int),
    and keyword order does not matter."""
    assert f(1, 2.0) == (1, 2, 0, "", {})
    assert f(1, m=2, k=3.0, name="x") == (1, 2, 3, "x", {})
    assert f(1, 2, name="y", k=4) == f(1, 2, k=4, name="y") == (1, 2, 4, "y", {})
    assert f(1, 2, other=5) == (1, 2, 0, "", {"other": 5})


@pytest.mark.parametrize("call,message", [
    (lambda: f(1, 0), r"f: m = 0 is out of range \(allowed: 1 \.\. "),                                    # the rule, naming the argument
    (lambda: f(1, 2, k=-1), r"f: k = -1 is out of range \(allowed: 0 \.\. "),
    (lambda: f(1, m=2.5), r"f: m must be a whole number, got the fraction 2.5"),
    (lambda: f(1), r"f: missing a required argument: 'm'"),                       # sig.bind's words
    (lambda: f(1, 2, m=3), r"f: multiple values for argument 'm'"),
    (lambda: f(1, 2, 3, 4), r"f: too many positional arguments"),
])
def test_a_call_that_does_not_fit_is_a_usage_error_in_bind_words(call, message):
    """A bad value fails its rule naming the argument; a call the signature cannot take (a missing or doubled
    argument, too many positional ones) is a UsageError carrying sig.bind's own words, as before the fast path."""
    with pytest.raises(UsageError, match=message):
        call()
