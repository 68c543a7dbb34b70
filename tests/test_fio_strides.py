"""fio's `rw=...:N` suffix and IO priorities (python/tilemark/fio/strides.py), each rule taken
from fio's HOWTO (fio commit f5344384) and fio's source where the HOWTO is silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilemark.errors import UsageError
from tilemark.fio import translate
from tilemark.fio.translate import examine
from tilemark.workload import plan


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one(tmp_path: Path, text: str) -> dict:
    (stream,) = translate(write(tmp_path, f"[j]\nfilename=/x\n{text}")).doc["stream"]
    return stream


def problem(tmp_path: Path, text: str) -> str:
    outcome = examine(write(tmp_path, f"[j]\nfilename=/x\n{text}"))
    assert outcome.translation is None
    return "; ".join(f"{p.key}: {p.why}" for p in outcome.problems)


# -- rw suffix --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rw, skip",
    [
        # HOWTO readwrite: "If the suffix is used with a sequential I/O pattern, then the <nr>
        # value specified will be added to the generated offset for each I/O turning
        # sequential I/O into sequential I/O with holes. For instance, using rw=write:4k will
        # skip 4k for every write."
        ("write:4k", "4k"),
        ("read:-8k", "-8k"),  # examples/backwards-read.fio
        ("rw:8k", "8k"),
        ("read:0", None),  # adds nothing
    ],
)
def test_a_sequential_suffix_is_added_after_each_io(tmp_path, rw, skip):
    stream = one(tmp_path, f"rw={rw}\nbs=4k\n")
    assert stream.get("skip") == skip
    assert "run_length" not in stream


@pytest.mark.parametrize("rw, runs", [("randread:8", 8), ("randrw:16", 16), ("randread:1", None)])
def test_a_random_suffix_is_the_ios_per_random_offset(tmp_path, rw, runs):
    # HOWTO rw_sequencer: "If you append e.g. 8 to randread, i.e. rw=randread:8 you would get
    # a new random offset for every 8 I/Os."
    stream = one(tmp_path, f"rw={rw}\n")
    assert stream.get("run_length") == runs
    assert "skip" not in stream


def test_backwards_read_example_translates_to_the_same_ios(tmp_path):
    # examples/backwards-read.fio: bs=4k, rw=read:-8k, size=128m: one pass of 128m of reads.
    t = translate(
        write(tmp_path, "[backwards-read]\nbs=4k\nrw=read:-8k\nfilename=128m\nsize=128m\n")
    )
    (s,) = t.doc["stream"]
    assert (s["rw"], s["bs"], s["skip"], s["length"], s["passes"]) == (
        "read", "4k", "-8k", "128m", 1,
    )  # fmt: skip
    assert any("8k before the previous one's end (going backwards)" in n for n in t.notes)


def test_what_the_suffix_cannot_mean_in_tilemark_is_refused(tmp_path):
    # An offset that is not a whole number of blocks: tilemark aligns sequential IO to bs.
    assert "not a multiple of the block size (4096)" in problem(tmp_path, "rw=write:2k\n")
    # fio restarts each loop at the start (backend.c clear_io_state -> fio_file_reset).
    assert "2 loops at the region's start" in problem(tmp_path, "rw=write:4k\nloops=2\n")
    # HOWTO rw_sequencer: "identical ... sends the same offset 8 number of times".
    assert "sends the same offset N times" in problem(
        tmp_path, "rw=randread:8\nrw_sequencer=identical\n"
    )
    assert one(tmp_path, "rw=randread:8\nrw_sequencer=sequential\n")["run_length"] == 8


@pytest.mark.parametrize(
    "line, says",
    [
        # options.c str_rw_cb: "randrw postfix parsing out of range" for val <= 0 or > UINT_MAX.
        ("rw=randread:0", "IOs per random offset, 1 to 4294967295"),
        ("rw=randread:-2", "IOs per random offset"),
        ("rw=read:abc", "suffix :abc must be a number"),
    ],
)
def test_a_bad_suffix_is_one_sentence(tmp_path, line, says):
    with pytest.raises(UsageError) as e:
        translate(write(tmp_path, f"[j]\nfilename=/x\n{line}\n"))
    assert str(e.value).startswith("job.fio:3: fio option rw suffix")
    assert says in str(e.value)


def test_cross_stripe_verify_keeps_fio_meaning_or_says_why_not(tmp_path):
    # examples/cross-stripe-verify.fio: refused for verify_backlog (fio reads back while it
    # writes); without it, for loops=2 with holes; with one loop it translates: 16k every
    # 128k from 120k, offset_increment per clone, io_size bytes, verification.
    text = (
        "[global]\nbs=16k\ndirect=1\nrw=write:112k\nverify=crc32c\nfilename=/dev/nvme0n1\n"
        "verify_backlog=1\noffset_increment=124g\nio_size=120g\noffset=120k\n"
        "group_reporting\nverify_dump=1\nloops=2\n[write-verify]\nnumjobs=3\n"
    )
    keys = {p.key for p in examine(write(tmp_path, text)).problems}
    assert keys == {"verify_backlog"}
    text = text.replace("verify_backlog=1\n", "")
    assert {p.key for p in examine(write(tmp_path, text)).problems} == {"rw"}
    t = translate(write(tmp_path, text.replace("loops=2\n", "")))
    assert t.doc["verify"] is True
    offsets = [s["offset"] for s in t.doc["stream"]]
    assert offsets == ["120k", f"{(124 << 20) + 120}k", f"{(248 << 20) + 120}k"]
    assert {(s["skip"], s["bs"], s["io_size"]) for s in t.doc["stream"]} == {
        ("112k", "16k", "120g")
    }


# -- IO priorities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines, priority",
    [
        # HOWTO prio: "Linux limits us to a positive value between 0 and 7"; without prioclass
        # fio's ioprio_value() "If no class is set, assume BE" (os/os-linux.h).
        ("prio=3", "be/3"),
        ("prioclass=1", "rt/0"),
        ("prioclass=2\nprio=7", "be/7"),
        ("prioclass=3", "idle"),
        ("prioclass=0\nprio=2", "be/2"),
    ],
)
def test_a_jobs_priority_becomes_the_streams(tmp_path, lines, priority):
    assert one(tmp_path, f"{lines}\n")["priority"] == priority


def test_cmdprio_percentage_example_translates_with_its_classes(tmp_path):
    # examples/cmdprio-percentage.fio: 20% of the IOs at cmdprio_class=1, the rest at
    # prioclass=3. HOWTO cmdprio_class: "If not specified ... this defaults to the highest
    # priority class"; cmdprio: "this defaults to 0".
    text = (
        "[global]\nfilename=/dev/sda\ndirect=1\nwrite_lat_log=prio-run.log\nlog_prio=1\n"
        "[randread]\nrw=randread\nbs=128k\nioengine=libaio\niodepth=8\nprioclass=3\n"
        "cmdprio_percentage=20\ncmdprio_class=1\n"
    )
    t = translate(write(tmp_path, text))
    (s,) = t.doc["stream"]
    assert (s["priority"], s["priority_share"], s["qd"]) == ("idle", "20:rt/0", 8)
    assert any("reported apart in the stream's priority summary" in n for n in t.notes)
    # The defaults, and a level.
    base = "ioengine=io_uring\ncmdprio_percentage=5\n"
    assert one(tmp_path, base)["priority_share"] == "5:rt/0"
    assert one(tmp_path, base + "cmdprio_class=2\ncmdprio=6\n")["priority_share"] == "5:be/6"
    assert "priority" not in one(tmp_path, base)
    # cmdprio.c: a percentage of 0 changes no IO.
    assert "priority_share" not in one(tmp_path, "ioengine=io_uring\ncmdprio_class=1\n")


def test_what_priorities_cannot_mean_in_tilemark_is_refused(tmp_path):
    # HOWTO cmdprio_percentage=int[,int]: "Comma-separated values may be specified for reads
    # and writes".
    assert "differs for reads and writes" in problem(
        tmp_path, "ioengine=io_uring\ncmdprio_percentage=20,30\n"
    )
    # HOWTO priohint: command duration limits.
    assert "no IO priority hints" in problem(tmp_path, "priohint=1\n")
    # A priority per block size translates (test_fio_patterns.py); a hint of the job's own
    # does not.


@pytest.mark.parametrize(
    "lines, says",
    [
        # HOWTO cmdprio_percentage=int[,int] : [io_uring] [libaio]: an engine option.
        ("cmdprio_percentage=20", "belongs to the io_uring and libaio engines"),
        ("prio=8", "must be 0 (the highest) to 7"),
        ("prioclass=4", "must be 0 to 3"),
        ("ioengine=io_uring\ncmdprio_percentage=120", "must be 0 to 100"),
    ],
)
def test_bad_priorities_are_one_sentence(tmp_path, lines, says):
    with pytest.raises(UsageError) as e:
        translate(write(tmp_path, f"[j]\nfilename=/x\n{lines}\n"))
    assert says in str(e.value) and str(e.value).endswith(".")


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("priority", "rt/8", "rt/LEVEL or be/LEVEL"),
        ("priority", "idle/2", "rt/LEVEL or be/LEVEL"),
        ("priority_share", "0:rt", "PCT:CLASS[/LEVEL]"),
        ("priority_share", "20", "PCT:CLASS[/LEVEL]"),
        ("run_length", 0, "run_length"),
    ],
)
def test_workload_options_refuse_what_the_kernel_would(key, value, says):
    doc = {"target": "/x", "stream": [{"name": "s", "rw": "randread", key: value}]}
    with pytest.raises(UsageError) as e:
        plan.parse_workload(doc, source="w.toml")
    assert says in str(e.value)


def test_export_fio_writes_the_suffix_and_priorities_back():
    # `export --fio` gives fio the same placement and priorities (docs/fio.md, export --fio).
    from tilemark.fio.export import job_text

    stream = {
        "name": "s",
        "regions": [{"target": 0, "offset": 0, "length": 1 << 20}],
        "read_pct": 100,
        "sizes": [[4096, 1]],
        "pattern": {"kind": "sequential"},
        "random_pct": 0,
        "align": 4096,
        "qd": 1,
        "arrival": {"kind": "closed"},
        "sync": {"kind": "none"},
        "skip": [-8192, -8192],
        "ioprio": {"class": "idle", "level": 0},
        "ioprio_share": {"pct": 20, "class": "rt", "level": 0},
    }
    plan = {
        "backend": "uring",
        "duration_ms": 1000,
        "targets": [{"path": "/x", "offset": 4096, "length": 1 << 20, "direct": True}],
        "streams": [stream],
    }
    lines = job_text(plan, title="t").splitlines()
    for line in ("rw=read:-8192", "prioclass=3", "prio=0", "cmdprio_percentage=20",
                 "cmdprio_class=1", "cmdprio=0"):  # fmt: skip
        assert line in lines, line
    runs = {**stream, "pattern": {"kind": "random"}, "random_pct": 100, "run_length": 8}
    del runs["skip"]
    assert "rw=randread:8" in job_text({**plan, "streams": [runs]}, title="t").splitlines()
    # fio's psync engine has no cmdprio_percentage: said, not dropped silently.
    text = job_text({**plan, "backend": "psync"}, title="t")
    assert "cmdprio_percentage" not in text.replace("no cmdprio_percentage", "")
    assert "share at another priority is dropped" in text


def test_holes_on_a_region_short_of_the_files_end_say_fio_ends_the_job_there(tmp_path):
    # io_u.c get_next_seq_offset wraps holes to the start only at the file's end (pos >=
    # real_file_size); short of it get_next_offset ends the job (offset >= io_size). Measured
    # with fio 3.33: rw=read:48k bs=16k size=1m on a 4 MiB device issues 16 reads.
    def says(text: str) -> bool:
        t = translate(write(tmp_path, text))
        return any("fio ends the job after one pass of 16 IOs" in n for n in t.notes)

    assert says("[j]\nfilename=/dev/loop9\nbs=16k\nsize=1m\nrw=read:48k\n")
    assert not says("[j]\nfilename=/dev/loop9\nbs=16k\nrw=read:48k\n")  # to the end: wraps
    assert not says("[j]\nfilename=/dev/loop9\nbs=16k\nsize=1m\nrw=read:48k\ntime_based\n")
    assert not says("[j]\nfilename=/dev/loop9\nbs=16k\nsize=1m\nrw=read:-32k\n")
