"""kernbench.units: the one formatter of sizes, rates and times, and its parser."""

from __future__ import annotations

import pytest

from kernbench import units


@pytest.mark.parametrize("n, kw, text", [
    (4096, {}, "4 KiB"), (98304, {}, "96 KiB"), (1 << 20, {}, "1 MiB"), (64 << 20, {}, "64 MiB"),
    (1 << 30, {}, "1 GiB"), (3 << 30, {}, "3 GiB"), (1 << 30, {"largest": "MiB"}, "1024 MiB"),
    (1536 << 10, {}, "1536 KiB"), (100, {}, "100 B"), (0, {}, "0 B"), (4096, {"sep": ""}, "4KiB"),
    (16 << 20, {"sep": "", "largest": "MiB"}, "16MiB"),
])
def test_size_is_the_largest_binary_unit_that_divides(n, kw, text):
    """units.size writes a byte count in the largest binary unit (up to `largest`) that divides it exactly, plain
    bytes otherwise, with the separator given."""
    assert units.size(n, **kw) == text


def test_size_refuses_an_unknown_largest_unit():
    """units.size with a `largest` that is not a binary unit is a ValueError naming it."""
    with pytest.raises(ValueError, match="largest='TB'"):
        units.size(1, largest="TB")


def test_rates_and_times():
    """gbps and ns format B/s as decimal GB/s and ps as ns in their shortest form."""
    assert units.gbps(32e9) == "32 GB/s" and units.gbps(1.25e11) == "125 GB/s"
    assert units.ns(1500) == "1.5 ns" and units.ns(2000) == "2 ns"


@pytest.mark.parametrize("text, parsed, base", [
    ("32 GB/s", (32.0, "GB/s"), (32e9, "B/s")), ("2ns", (2.0, "ns"), (2000.0, "ps")),
    ("64 KiB", (64.0, "KiB"), (65536.0, "B")), (" 1.5 GHz ", (1.5, "GHz"), (1.5e9, "Hz")),
    ("1e3 MB", (1000.0, "MB"), (1e9, "B")),
])
def test_parse_quantity_and_base_units(text, parsed, base):
    """parse_quantity reads a number and a known unit (spaces and exponents allowed) and to_base converts it to its
    dimension's base unit (B, B/s, ps, Hz)."""
    assert units.parse_quantity(text) == parsed
    assert units.to_base(*parsed)[0] == pytest.approx(base[0]) and units.to_base(*parsed)[1] == base[1]


def test_split_quantity_keeps_any_unit_word():
    """split_quantity splits a number from a unit word, known or not, keeping the number's text (calibration data
    reads values so, and names an unknown unit itself), while parse_quantity takes only the known units."""
    assert units.split_quantity(" 1.5e3 GB/s ") == ("1.5e3", "GB/s")
    assert units.split_quantity("32 parsecs") == ("32", "parsecs") and units.parse_quantity("32 parsecs") is None
    for text in ("32", "GB/s", "", "1,2 GB/s", None, 32):
        assert units.split_quantity(text) is None


@pytest.mark.parametrize("text", ["32", "fast", "32 parsecs", "GB/s", "", "1,2 GB/s"])
def test_parse_quantity_rejects_what_is_not_a_quantity(text):
    """A bare number, a word, an unknown unit, a unit without a number, an empty text or a comma decimal is not a
    quantity: parse_quantity returns None."""
    assert units.parse_quantity(text) is None


def test_parse_size_inverts_size():
    """parse_size reads back what size writes (with or without the space) and refuses a quantity that is not a size."""
    for n in (4096, 98304, 1 << 20, 3 << 30, 100):
        assert units.parse_size(units.size(n)) == n
        assert units.parse_size(units.size(n, sep="")) == n
    with pytest.raises(ValueError, match="expected a size"):
        units.parse_size("2 ns")


def test_the_modules_that_format_sizes_use_it():
    """The helpers that had their own formatting now go through units, with the same text as before."""
    from kernbench import config, references, show, vgpu

    assert config._size(4096) == "4 KiB" and config._size(64) == "64 B"
    assert references._size(64 << 20) == "64 MiB" and references._size(1 << 30) == "1 GiB"
    assert vgpu._size_name(4096) == "4KiB" and vgpu._size_name(16 << 20) == "16MiB"
    assert show._gbps(128e9) == "128 GB/s" and show._ns(2500) == "2.5 ns"
    for mod in (config, references, show, vgpu):
        assert "units" in mod.__dict__ or any(getattr(mod, f, None) in (units.size, units.gbps, units.ns)
                                              for f in ("_size", "_gbps", "_ns"))


def test_the_unit_table_is_the_cpp_one():
    """units.UNITS holds every time, size and bandwidth unit of the C++ table (the schema's lists, bit rates
    included) with the factor _core.parse_* gives it; only PYTHON_ONLY (TB, TiB, frequencies) is Python's."""
    import json

    from kernbench import _core

    names = json.loads(_core.config_schema())["units"]
    for kind, parse in (("time", _core.parse_time), ("bytes", _core.parse_bytes),
                        ("bandwidth", _core.parse_bandwidth)):
        for u in names[kind]:
            assert units.UNITS[u][1] * 1000 == parse(f"1000 {u}")
    assert set(units.UNITS) - {u for k in ("time", "bytes", "bandwidth") for u in names[k]} == set(units.PYTHON_ONLY)
    assert units.to_base(25.0, "Gb/s") == (25 * 125e6, "B/s")


def test_parse_size_is_the_config_parser():
    """parse_size reads what _core.parse_bytes reads (exact decimals), refuses a fraction of a byte as a
    ValueError naming the text, and still reads the Python-only TB and TiB."""
    assert units.parse_size("0.1 KB") == 100 and units.parse_size(".5 KiB") == 512
    with pytest.raises(ValueError, match=r"'0.5 B': expected a size .*not a whole number of bytes"):
        units.parse_size("0.5 B")
    assert units.parse_size("2 TiB") == 2 << 40 and units.parse_size("1 TB") == 10**12


def test_one_flag_and_number_reader():
    """overrides.parse_bool is the one reader of flags (1/true/yes/on, 0/false/no/off, any case) for --set and
    calibration parameters; parse_number reads ints exactly and refuses non-finite floats."""
    from kernbench.calibrate import registry
    from kernbench.overrides import coerce, parse_bool, parse_number

    assert [parse_bool(w) for w in ("YES", "on", "1", True, "False", "off", "0")] == [True] * 4 + [False] * 3
    with pytest.raises(ValueError, match="expected true or false, got 'maybe'"):
        parse_bool("maybe")
    assert coerce("on", False) is True and registry.parse_bool is parse_bool
    assert parse_number("12345678901234567890") == 12345678901234567890 and parse_number("1e3") == 1000.0
    with pytest.raises(ValueError, match="finite"):
        parse_number("inf")
