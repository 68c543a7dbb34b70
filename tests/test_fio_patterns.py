"""fio's block sequences, strided zones, block sizes per direction and priorities per block size
(python/tilemark/fio/patterns.py), each rule taken from fio's HOWTO (fio commit f5344384) and
fio's source where the HOWTO is silent; and the stream keys they become (pattern sequence:,
zones, write_bs, priority_by_size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fio_examples import example
from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.fio import translate
from tilemark.fio.translate import examine
from tilemark.targets.header import TargetInfo
from tilemark.workload import compiler, plan


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def streams(tmp_path: Path, text: str) -> list[dict]:
    return translate(write(tmp_path, text)).doc["stream"]


def one(tmp_path: Path, text: str) -> dict:
    (stream,) = streams(tmp_path, f"[j]\nfilename=/x\n{text}")
    return stream


def problem(tmp_path: Path, text: str) -> str:
    outcome = examine(write(tmp_path, f"[j]\nfilename=/x\n{text}"))
    assert outcome.translation is None
    return "; ".join(f"{p.key}: {p.why}" for p in outcome.problems)


def bad(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as e:
        translate(write(tmp_path, f"[j]\nfilename=/x\n{text}"))
    message = str(e.value)
    assert message.endswith(".") and message.count(". ") == 0, message
    return message


# -- random_distribution=sequence ----------------------------------------------------------


SEQUENCE_JOB = (
    "[global]\nioengine=null\nrw=randread\nbs=4k\nsize=48k\nio_size=24k\n"
    "[repeating_sequence]\nrandom_distribution=sequence:2,0,1\nrandom_sequence_stride=0\n"
    "[strided_sequence]\nstonewall\nrandom_distribution=sequence:2,0,1\n"
    "random_sequence_stride=1\n"
)


def test_a_sequence_and_its_strided_form_translate(tmp_path):
    # HOWTO random_distribution: "to access block indices 2, 0, and 1 in that exact order [...]
    # random_distribution=sequence:2,0,1. This repeats the block access pattern indefinitely."
    # HOWTO random_sequence_stride: "If set to true (1) [...] After completing each full cycle
    # of the sequence, the base block index automatically advances by the sequence length".
    fixed, strided = streams(tmp_path, SEQUENCE_JOB)
    assert fixed["pattern"] == "sequence:2,0,1" and fixed["io_size"] == "24k"
    assert strided["pattern"] == "sequence:2,0,1:stride" and strided["io_size"] == "24k"
    assert fixed["align"] == strided["align"] == "4k"


def test_a_strided_sequence_ends_where_fio_ends_it(tmp_path):
    # io_u.c __get_next_rand_offset_sequence: a block past f->io_size / min_bs fails the
    # offset, which ends the job. sequence:2,0 over 5 blocks: 2, 0, 4, 2, then 6 (fio f5344384
    # logs 4 reads with write_iolog).
    s = one(tmp_path, "rw=randread\nbs=4k\nsize=20k\nrandom_distribution=sequence:2,0\n"
                      "random_sequence_stride=1\n")  # fmt: skip
    assert s["io_size"] == "16k"
    text = "rw=randread\nsize=48k\nrandom_distribution=sequence:2,0,1\nrandom_sequence_stride=1\n"
    t = translate(write(tmp_path, "[j]\nfilename=/x\n" + text))
    assert t.doc["stream"][0]["io_size"] == "48k"  # 12 IOs of 4k
    assert any("after 12 IOs" in n for n in t.notes)


def test_a_sequence_on_a_sequential_job_is_unused(tmp_path):
    # fio reads the distribution only for random offsets (io_u.c get_next_rand_block).
    assert "pattern" not in one(tmp_path, "rw=read\nrandom_distribution=sequence:2,0,1\n")


@pytest.mark.parametrize(
    "lines, says",
    [
        # options.c parse_sequence_distribution: "invalid or negative element".
        ("rw=randread\nrandom_distribution=sequence:2,-1", "sequence needs block indices"),
        ("rw=randread\nrandom_distribution=sequence:", "sequence needs block indices"),
        # thread_options.h FIO_SEQ_MAX.
        (
            "rw=randread\nrandom_distribution=sequence:" + ",".join(["1"] * 65),
            "at most 64 blocks",
        ),
        # io_u.c: "sequence block out of bounds".
        ("rw=randread\nsize=8k\nrandom_distribution=sequence:2,0", "block 2 is past the 2"),
    ],
)
def test_bad_sequences_are_one_sentence(tmp_path, lines, says):
    assert says in bad(tmp_path, lines + "\n")


@pytest.mark.parametrize(
    "lines, says",
    [
        ("percentage_random=50", "counts the IOs placed sequentially"),
        ("time_based\nruntime=1\nsize=48k\nrandom_sequence_stride=1", "ends a strided sequence"),
        ("random_sequence_stride=1", "the file's size is not given"),
        ("bs=4k,8k\nrw=randrw", "one block for both"),
    ],
)
def test_what_a_sequence_cannot_mean_in_tilemark_is_refused(tmp_path, lines, says):
    head = "rw=randread\nrandom_distribution=sequence:2,0,1\n"
    if "rw=randrw" in lines:
        head = "random_distribution=sequence:2,0,1\n"
    assert says in problem(tmp_path, head + lines + "\n")


# -- zonemode=strided --------------------------------------------------------------------------


def test_strided_zones_of_a_sequential_job_move_through_the_file(tmp_path):
    # HOWTO zonemode strided: "I/O happens in a single zone until zonesize bytes have been
    # transferred. After that number of bytes has been transferred processing of the next zone
    # starts"; zoneskip: "the number of bytes to skip after zonesize bytes of data have been
    # transferred". examples/disk-zone-profile.fio.
    s = one(tmp_path, "rw=read\nbs=64k\nzonemode=strided\nzonesize=256m\nzoneskip=2g\n")
    assert s["zones"] == "256m:256m:2g" and s["passes"] == 1 and "length" not in s
    # io_u.c setup_strided_zone_mode: zones wrap at real_file_size, so size only counts bytes.
    s = one(tmp_path, "rw=write\nsize=3m\nzonemode=strided\nzonesize=256k\nzoneskip=512k\n")
    assert s["io_size"] == "3m" and "length" not in s
    # HOWTO zonerange: "Size of a single zone"; zonesize larger than it goes over it again.
    s = one(tmp_path, "rw=read\nzonemode=strided\nzonesize=1m\nzonerange=256k\nzoneskip=1m\n")
    assert s["zones"] == "1m:256k:1m"


def test_strided_zones_with_holes_are_refused(tmp_path):
    assert "within each zone" in problem(
        tmp_path, "rw=read:4k\nzonemode=strided\nzonesize=256k\nzoneskip=512k\n"
    )


# -- bs and bssplit per direction -------------------------------------------------------------


def test_block_sizes_per_direction_translate(tmp_path):
    # HOWTO blocksize: "bs=8k,32k means 8k for reads, 32k for writes and trims."
    s = one(tmp_path, "rw=randrw\nbs=8k,32k\n")
    assert (s["bs"], s["write_bs"], s["align"]) == ("8k", "32k", "8k")
    assert one(tmp_path, "rw=randwrite\nbs=8k,32k\n")["bs"] == "32k"
    read = one(tmp_path, "rw=randread\nbs=8k,32k\n")
    assert read["bs"] == "8k" and "write_bs" not in read
    # HOWTO bssplit: "bssplit=2k/50:4k/50,4k/90:8k/10"; examples/cmdprio-bssplit.fio.
    t = translate(
        write(tmp_path, "[j]\nfilename=/x\nrw=randrw\nbssplit=64k/40:1024k/60,1024k/100\n")
    )
    (s,) = t.doc["stream"]
    assert (s["bs"], s["write_bs"], s["align"]) == ("64k:40,1m:60", "1m", "64k")
    # fio aligns each direction to its own smallest size (init.c): said in a note.
    assert any("writes' to the smallest write size (1m)" in n for n in t.notes)
    assert "write_bs" not in one(tmp_path, "rw=randrw\nbs=8k,8k\n")


# -- cmdprio_bssplit ------------------------------------------------------------------------


def test_the_example_of_priorities_per_block_size_translates(tmp_path):
    # examples/cmdprio-bssplit.fio, each job's comment says what fio does.
    t = translate(example(tmp_path, "cmdprio-bssplit"))
    by_name = {s["name"]: s for s in t.doc["stream"]}
    # "100% of the 64kB reads are executed with prio class 1 and prio level 0."
    assert by_name["cmdprio"]["priority_by_size"] == "read:64k:100:rt/0"
    assert by_name["cmdprio"]["write_bs"] == "1m"
    # "25% of the 64kB reads [...] class 1 and prio level 1, 75% [...] class 3"
    assert by_name["cmdprio-adv"]["priority_by_size"] == "read:64k:25:rt/1,read:64k:75:idle"
    # "All other I/Os are executed with prio class 2 and prio level 7."
    assert by_name["cmdprio-adv-def"]["priority"] == "be/7"
    # bs/percentage/class/level/hint: "Prio hint 1 means CDL descriptor 1".
    assert by_name["cmdprio-hints"]["priority_by_size"] == (
        "read:1m:10:be/0+1,read:1m:30:be/0+2,read:1m:60:be/0,read:2m:10:be/0+3,read:2m:90:be/0"
    )
    assert any("idle level 2" in n for n in t.notes)


def test_cmdprio_bssplit_reads_its_defaults_per_direction(tmp_path):
    # HOWTO cmdprio_class: "If not specified when cmdprio_percentage or cmdprio_bssplit is
    # set, this defaults to the highest priority class"; cmdprio: "this defaults to 0".
    s = one(tmp_path, "ioengine=io_uring\nrw=randrw\nbssplit=4k/50:8k/50\ncmdprio_bssplit=4k/30\n")
    assert s["priority_by_size"] == "read:4k:30:rt/0,write:4k:30:rt/0"
    s = one(
        tmp_path,
        "ioengine=io_uring\nrw=randrw\nbs=4k\ncmdprio_bssplit=4k/30,4k/10\n"
        "cmdprio_class=2,3\ncmdprio=5,0\n",
    )
    assert s["priority_by_size"] == "read:4k:30:be/5,write:4k:10:idle"
    # An entry of a size the job never issues is never looked up (cmdprio.c).
    assert "priority_by_size" not in one(
        tmp_path, "ioengine=io_uring\nrw=randread\nbs=4k\ncmdprio_bssplit=64k/50\n"
    )


@pytest.mark.parametrize(
    "lines, says",
    [
        # HOWTO cmdprio_bssplit: "mutually exclusive with the cmdprio_percentage option".
        ("ioengine=io_uring\ncmdprio_bssplit=4k/50\ncmdprio_percentage=10", "mutually exclusive"),
        # cmdprio_bssplit=str[,str] : [io_uring] [libaio].
        ("cmdprio_bssplit=4k/50", "belongs to the io_uring and libaio engines"),
        # cmdprio.c: "cmdprio_bssplit total percentage for bs exceeds 100".
        ("ioengine=io_uring\ncmdprio_bssplit=4k/60/1/0:4k/50/2/0", "add up to more than 100"),
        ("ioengine=io_uring\ncmdprio_bssplit=4k/50/4/0", "class must be 0 to 3"),
        ("ioengine=io_uring\ncmdprio_bssplit=4k/50/1", "entries are bs/perc"),
    ],
)
def test_bad_priorities_per_size_are_one_sentence(tmp_path, lines, says):
    assert says in bad(tmp_path, lines + "\n")


# -- the stream keys ---------------------------------------------------------------------------


def compiled(stream: dict) -> dict:
    doc = {"target": "/x", "stream": [{"name": "s", **stream}]}
    workload = plan.parse_workload(doc, source="w.toml")
    info = TargetInfo(
        path="/x", kind="file", data_offset=4096, data_length=1 << 30, direct=True,
        dio_alignment=4096, exists=True, tilemark=True, file_data_length=1 << 30,
        filled_length=1 << 30,
    )  # fmt: skip
    return compiler.compile_plan(workload, info)["streams"][0]


def test_stream_keys_become_the_engines_fields():
    s = compiled({"rw": "randread", "pattern": "sequence:2,0,1:stride"})
    assert s["pattern"] == {"kind": "sequence", "blocks": [2, 0, 1], "stride": True}
    s = compiled({"rw": "read", "zones": "256m:2g"})
    assert s["zones"] == {"size": 256 << 20, "range": 256 << 20, "skip": 2 << 30}
    s = compiled(
        {"rw": "randrw", "bs": "4k", "write_bs": "64k",
         "priority_by_size": "read:4k:25:rt/1,read:4k:75:idle,write:64k:10:be/0+3"}
    )  # fmt: skip
    assert s["write_sizes"] == [[65536, 1.0]]
    assert s["ioprio_by_size"] == [
        {"op": "read", "size": 4096, "shares": [
            {"pct": 25.0, "class": "rt", "level": 1}, {"pct": 75.0, "class": "idle", "level": 0}]},
        {"op": "write", "size": 65536, "shares": [
            {"pct": 10.0, "class": "be", "level": 0, "hint": 3}]},
    ]  # fmt: skip
    plain = compiled({"rw": "randread"})
    assert not {"write_sizes", "zones", "ioprio_by_size"} & set(plain)


@pytest.mark.parametrize(
    "stream, says",
    [
        ({"rw": "randread", "pattern": "sequence:"}, "sequence:B,B,...[:stride]"),
        ({"rw": "randread", "random": 50, "pattern": "sequence:1"}, "places every IO itself"),
        ({"rw": "randread", "zones": "256m:2g"}, "moves a sequential stream"),
        ({"rw": "read", "zones": "0:2g"}, "SIZE:SKIP or SIZE:RANGE:SKIP"),
        ({"rw": "read", "priority_by_size": "read:4k:120:rt"}, "OP:SIZE:PCT"),
        ({"rw": "read", "priority_by_size": "read:4k:60:rt,read:4k:60:be/1"}, "more than 100%"),
        ({"rw": "read", "priority_by_size": "read:4k:6:rt+2000"}, "HINT 0 to 1023"),
        (
            {"rw": "read", "priority_by_size": "read:4k:6:rt", "priority_share": "5:idle"},
            "give one of them",
        ),
        ({"rw": "randrw", "write_bs": "0"}, "write_bs"),
    ],
)
def test_bad_stream_keys_are_one_sentence(stream, says):
    with pytest.raises(UsageError) as e:
        plan.parse_workload({"target": "/x", "stream": [{"name": "s", **stream}]}, source="w")
    assert says in str(e.value)


def test_a_bad_value_exits_2_naming_the_option(tmp_path, capsys):
    job = write(tmp_path, "[j]\nfilename=/x\nrw=randread\nrandom_distribution=sequence:a\n")
    assert main(["import-fio", str(job)]) == 2
    err = capsys.readouterr().err
    assert "random_distribution" in err and "Traceback" not in err


def test_export_fio_writes_them_back():
    # `export --fio` gives fio the same sizes per direction, sequence, zones and priorities.
    from tilemark.fio.export import job_text

    stream = {
        "name": "s",
        "regions": [{"target": 0, "offset": 0, "length": 1 << 20}],
        "read_pct": 50,
        "sizes": [[4096, 40], [65536, 60]],
        "write_sizes": [[65536, 1]],
        "pattern": {"kind": "sequence", "blocks": [2, 0, 1], "stride": True},
        "random_pct": 100,
        "align": 4096,
        "qd": 1,
        "arrival": {"kind": "closed"},
        "sync": {"kind": "none"},
        "ioprio_by_size": [
            {"op": "read", "size": 4096, "shares": [{"pct": 25, "class": "rt", "level": 1}]},
            {"op": "write", "size": 65536, "shares": [{"pct": 50, "class": "be", "hint": 1}]},
        ],
    }
    zoned = {**stream, "name": "z", "pattern": {"kind": "sequential"}, "random_pct": 0}
    zoned.update(zones={"size": 65536, "range": 65536, "skip": 131072}, ioprio_by_size=None)
    plan = {
        "backend": "uring",
        "duration_ms": 1000,
        "targets": [{"path": "/x", "offset": 4096, "length": 1 << 20, "direct": True}],
        "streams": [stream, zoned],
    }
    lines = job_text(plan, title="t").splitlines()
    for line in (
        "bssplit=4096/40:65536/60,65536/100",
        "random_distribution=sequence:2,0,1",
        "random_sequence_stride=1",
        "cmdprio_bssplit=4096/25/1/1,65536/50/2/0/1",
        "zonemode=strided",
        "zoneskip=131072",
    ):
        assert line in lines, line
