"""fio job file syntax as fio reads it: values (units, times), sections, comments, includes,
variables. Each test quotes the HOWTO rule it checks (fio commit f5344384) and, where fio's
parser does something else than its HOWTO says, what fio 3.33 measurably does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.jobfile import parse
from tilemark.fio.translate import translate


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, kb_base, expected",
    [
        # HOWTO "int": "With kb_base=1024 (the default), the unit prefixes are opposite from
        # those specified in the SI and IEC 80000-13 standards ... 4k means 4096."
        ("4k", 1024, 4096),
        ("4KB", 1024, 4096),
        ("1m", 1024, 1 << 20),
        ("1mib", 1024, 1_000_000),
        ("1MiB", 1024, 1_000_000),
        ("1g", 1024, 1 << 30),
        # ... "1 MB: 1000000, 1mi, 1000ki" says the HOWTO, but fio's parser matches only the
        # full "mib" (parse.c __get_mult_bytes): fio 3.33 reads size=1mi as 1048576.
        ("1mi", 1024, 1 << 20),
        # "With kb_base=1000, fio follows international standards for unit prefixes."
        ("1m", 1000, 1_000_000),
        ("1mib", 1000, 1 << 20),
        ("4096", 1024, 4096),
        ("4096b", 1024, 4096),
        # "The optional integer prefix specifies the number's base ... 0x specifies hexadecimal."
        ("0x1000", 1024, 4096),
    ],
)
def test_sizes_follow_kb_base(text, kb_base, expected):
    assert values.parse_size(text, "bs", kb_base=kb_base) == expected


def test_a_decimal_point_is_refused_because_fio_drops_the_fraction_and_the_unit():
    # fio 3.33: size=1.5m is 1 byte ("size too small ... 1 < 512"), bs=1.5k issues 1-byte IOs.
    with pytest.raises(UsageError, match=r"decimal point, which fio does not read .* 1536m"):
        values.parse_size("1.5k", "fio option bs")
    with pytest.raises(UsageError, match="unit fio does not know"):
        values.parse_size("4q", "fio option bs")


@pytest.mark.parametrize(
    "text, bare_seconds, us",
    [
        # HOWTO "time": "Without a unit value is interpreted as seconds ... Accepts a suffix of
        # 'd' for days, 'h' for hours, 'm' for minutes, 's' for seconds, 'ms' (or 'msec') for
        # milliseconds and 'us' (or 'usec') for microseconds."
        ("30", True, 30_000_000),
        ("1d", True, 86_400_000_000),
        ("2h", True, 7_200_000_000),
        ("10m", True, 600_000_000),
        ("30s", True, 30_000_000),
        ("500msec", True, 500_000),
        ("500ms", True, 500_000),
        ("250usec", True, 250),
        ("30S", True, 30_000_000),  # "units are not case sensitive"
        # HOWTO thinktime: "Value is in microseconds if a unit is omitted."
        ("2000", False, 2000),
    ],
)
def test_times(text, bare_seconds, us):
    assert values.parse_time_us(text, "runtime", bare_seconds=bare_seconds) == us


def test_sec_is_refused_because_fio_reads_it_as_microseconds():
    # The HOWTO lists "s -- or sec means seconds", but parse.c get_mult_time() compares the
    # whole suffix with "s": fio 3.33 ran runtime=2sec for under a second, runtime=2s for two.
    with pytest.raises(UsageError, match=r"reads the unit 'sec' as microseconds"):
        values.parse_time_us("30sec", "fio option runtime")
    with pytest.raises(UsageError, match=r"'min' as microseconds"):
        values.parse_time_us("10min", "fio option runtime")


def test_sections_comments_and_global_prefixes(tmp_path):
    # HOWTO "Job file format": "If the first character in a line is a ';' or a '#', the entire
    # line is discarded as a comment"; fio also cuts an option line at its first ';' or '#'
    # (parse.c strip_blank_end), as fio's own tiobench-example relies on ("numjobs=4 ; 4
    # simultaneous threads"); a section named global* is global (init.c, strncmp 6).
    path = write(
        tmp_path,
        "; comment\n  # indented comment\n[global-defaults]\nbs=8k ; eight\n[a]\n"
        "numjobs=4\t; clones\nrw=randread # random\n",
    )
    (job,) = parse(path)
    assert job.name == "a"
    assert [(o.key, o.value) for o in job.options] == [
        ("bs", "8k"),
        ("numjobs", "4"),
        ("rw", "randread"),
    ]


def test_unset_variables_are_empty_and_refused_by_the_option_that_needs_them(tmp_path, monkeypatch):
    # HOWTO "Environment variables": "If no such environment variable is defined, or VARNAME
    # is the empty string, the empty string will be substituted."
    monkeypatch.delenv("TM_TEST_BS", raising=False)
    path = write(tmp_path, "[j]\nfilename=/x\nbs=${TM_TEST_BS}\ndescription=a${TM_TEST_BS}b\n")
    with pytest.raises(
        UsageError, match=r"job.fio:3: fio option bs .*\$\{TM_TEST_BS\}, which is empty"
    ):
        translate(path)
    monkeypatch.setenv("TM_TEST_BS", "16k")
    assert translate(path).doc["stream"][0]["bs"] == "16k"


def test_reserved_keywords_and_their_arithmetic(tmp_path):
    # HOWTO "Reserved keywords": $pagesize, $mb_memory, $ncpus (without braces), and "Simple
    # math is also supported on these keywords ... size=8*$mb_memory".
    page = os.sysconf("SC_PAGE_SIZE")
    mb = page * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    cpus = os.sysconf("SC_NPROCESSORS_CONF")
    path = write(
        tmp_path,
        "[j]\nfilename=/x\nbs=$pagesize\nsize=5*$mb_memory/8\nnumjobs=$ncpus\nrw=randread\n",
    )
    t = translate(path)
    (stream,) = t.doc["stream"]
    # bc's integer arithmetic: 5*mb/8, truncated; size is in bytes.
    assert stream["bs"] == values_text(page)
    assert stream["length"] == values_text(5 * mb // 8)
    assert stream.get("copies", 1) == cpus
    assert any("$mb_memory, $ncpus, $pagesize took this machine's values" in n for n in t.notes)


def values_text(n: int) -> str:
    from tilemark.fio.layout import fmt_size

    return fmt_size(n)


def test_includes_read_in_place_and_may_not_hold_sections(tmp_path):
    # HOWTO: "any section may pull in an external filename.fio file with include filename
    # ... Include files may not contain [] sections."
    write(tmp_path, "bs=16k\n", "common.inc")
    path = write(tmp_path, "[global]\ninclude common.inc\n[j]\nfilename=/x\n")
    assert translate(path).doc["stream"][0]["bs"] == "16k"
    write(tmp_path, "[sneaky]\nbs=16k\n", "bad.inc")
    path = write(tmp_path, "[j]\nfilename=/x\ninclude bad.inc\n")
    with pytest.raises(UsageError, match="holds options only"):
        translate(path)


def test_escaped_colons_are_part_of_a_filename(tmp_path):
    # HOWTO filename: "Each colon in the wanted path must be escaped with a \ character."
    path = write(tmp_path, "[j]\nfilename=/dev/bsg/0\\:0\\:0\\:0\nrw=read\n")
    assert translate(path).doc["target"] == "/dev/bsg/0:0:0:0"
    path = write(tmp_path, "[j]\nfilename=/dev/a:/dev/b\nrw=read\n")
    with pytest.raises(UsageError, match=r"several files \(/dev/a:/dev/b\) in one job"):
        translate(path)


def test_section_selects_jobs_as_fio_section_does(tmp_path):
    # fio --section=name: "Only run specified section name in job file ... [global] is
    # always parsed."
    path = write(tmp_path, "[global]\nfilename=/x\nbs=8k\n[a]\nrw=read\n[b]\nrw=${TM_UNSET_RW}\n")
    t = translate(path, sections=("a",))
    assert [(s["name"], s["bs"]) for s in t.doc["stream"]] == [("a", "8k")]
    with pytest.raises(UsageError, match=r"no section \[c\]"):
        translate(path, sections=("c",))
