"""Parsing of sizes, rates, durations, percentages and size mixes (tilemark.units)."""

from __future__ import annotations

import pytest

from tilemark.errors import UsageError
from tilemark.units import (
    format_size,
    parse_byte_rate,
    parse_duration,
    parse_iops,
    parse_percent,
    parse_size,
    parse_size_mix,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", 512),
        (512, 512),
        ("4k", 4096),
        ("4K", 4096),
        ("4kb", 4096),  # binary like fio: a block size is never 4000 bytes
        ("8KiB", 8192),
        ("1.5m", 1572864),
        ("4g", 4 << 30),
        ("2T", 2 << 40),
        ("64 KiB", 65536),
        ("0", 0),
        ("100b", 100),
    ],
)
def test_sizes_are_binary_bytes(text, expected):
    assert parse_size(text, "bs") == expected


@pytest.mark.parametrize(
    "bad", ["4x", "k", "", "-4k", "100%", "1.1k", "4ki", "4ib", "4 k b", True, None, [4096]]
)
def test_bad_sizes_name_the_field(bad):
    with pytest.raises(UsageError, match=r"^stream 'db': bs ") as err:
        parse_size(bad, "stream 'db': bs")
    assert str(err.value).endswith(".")


def test_fractional_byte_count_is_refused_with_the_byte_count():
    with pytest.raises(UsageError, match=r"whole number of bytes.*1126\.4"):
        parse_size("1.1k", "--bs")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4000", 4000.0), ("2.5k", 2500.0), ("4000iops", 4000.0), ("300/s", 300.0), (12.5, 12.5)],
)
def test_io_rates(text, expected):
    assert parse_iops(text, "rate") == expected


@pytest.mark.parametrize("bad", ["0", 0, "-5", "abc", "4000MB/s", False])
def test_bad_io_rates_name_the_field(bad):
    with pytest.raises(UsageError, match=r"^--rate must be an IO rate above 0"):
        parse_iops(bad, "--rate")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100MB/s", 100e6),  # decimal: matches the MB/s tilemark reports
        ("100 MB/s", 100e6),
        ("1GB/s", 1e9),
        ("100MiB/s", 100 * 2**20),
        ("100m", 100 * 2**20),  # bare letter: binary like fio's rate=
        ("100m/s", 100 * 2**20),
        ("64k", 65536.0),
        ("1000000", 1e6),
        (5e6, 5e6),
    ],
)
def test_byte_rates(text, expected):
    assert parse_byte_rate(text, "rate_bytes") == expected


@pytest.mark.parametrize("bad", ["0", "0MB/s", "-1m", "fast", "10ib/s", "10 mbps"])
def test_bad_byte_rates_name_the_field(bad):
    with pytest.raises(UsageError, match=r"^stream 'log': rate_bytes must be a byte rate"):
        parse_byte_rate(bad, "stream 'log': rate_bytes")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60", 60.0),
        (60, 60.0),
        ("60s", 60.0),
        ("2m", 120.0),
        ("2min", 120.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("0", 0.0),
    ],
)
def test_durations(text, expected):
    assert parse_duration(text, "duration") == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["1x", "1m30", "", "-5", "s", "1m 30s", "1h-2m", None])
def test_bad_durations_name_the_field(bad):
    with pytest.raises(UsageError, match=r"^--warmup must be a duration"):
        parse_duration(bad, "--warmup")


@pytest.mark.parametrize(("text", "expected"), [("70", 70.0), ("70%", 70.0), (12.5, 12.5)])
def test_percentages(text, expected):
    assert parse_percent(text, "read") == expected


@pytest.mark.parametrize("bad", ["170", -1, "abc", "", True])
def test_bad_percentages_name_the_field(bad):
    with pytest.raises(UsageError, match=r"^stream 'oltp': read must be a percentage from 0"):
        parse_percent(bad, "stream 'oltp': read")


def test_size_mix_string_and_toml_list():
    assert parse_size_mix("512:22,1k:15,4k:23", "bs") == [(512, 22.0), (1024, 15.0), (4096, 23.0)]
    assert parse_size_mix([["4k", 60], [8192, 40.5]], "bs") == [(4096, 60.0), (8192, 40.5)]
    assert parse_size_mix("8k", "bs") == [(8192, 1.0)]
    assert parse_size_mix(65536, "bs") == [(65536, 1.0)]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("4k:-1", "weight must be a number 0 or above"),
        ("4k:x", "weight must be a number 0 or above"),
        ("4k:0,8k:0", "weights must not all be 0"),
        ("4k:1,8k", "weighted mix"),
        ("4q:1", "must be a size"),
        ([["4k"]], "list of \\[size, weight\\] pairs"),
        ([], "empty list"),
    ],
)
def test_bad_size_mixes_name_the_field(bad, message):
    with pytest.raises(UsageError, match=rf"^stream 'web': bs .*{message}"):
        parse_size_mix(bad, "stream 'web': bs")


def test_format_size():
    assert format_size(512) == "512 B"
    assert format_size(4096) == "4 KiB"
    assert format_size(3 << 29) == "1.5 GiB"
