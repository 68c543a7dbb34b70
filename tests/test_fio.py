"""fio job files translated as fio means them (docs/fio.md). Every test writes its own small
job file and quotes the rule of fio's HOWTO (fio commit f5344384) it checks; where the HOWTO
is silent the rule is fio's source or a measurement with fio 3.33, and the test says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.fio import toml_text, translate
from tilemark.fio.translate import examine
from tilemark.workload import plan


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one(tmp_path: Path, text: str) -> dict:
    """The single stream a one-job file translates into."""
    (stream,) = translate(write(tmp_path, text)).doc["stream"]
    return stream


def notes(tmp_path: Path, text: str) -> list[str]:
    return translate(write(tmp_path, text)).notes


def test_fio_defaults_are_written_out(tmp_path):
    # HOWTO: direct "Default: false", ioengine "Default: psync" (on Linux), rw "Default:
    # read", bs "Default: 4096", iodepth "Default: 1".
    t = translate(write(tmp_path, "[j]\nfilename=/x\n"))
    assert (t.doc["backend"], t.doc["direct"]) == ("psync", False)
    (s,) = t.doc["stream"]
    assert (s["rw"], s["bs"], s["qd"]) == ("read", "4k", 1)


@pytest.mark.parametrize(
    "job, align",
    [
        # HOWTO blockalign: "Boundary to which fio will align random I/O units. Default: bs
        # (minimum blocksize)."; fio sets it to the smallest size for sequential IO too
        # (init.c fixup_options: !td_random).
        ("rw=randread\nbs=128k\n", "128k"),
        ("rw=randread\nbssplit=512/10:4k/90\n", "512"),
        ("rw=randread\nbs=8k\nblockalign=4k\n", "4k"),
        ("rw=read\nbs=8k\nblockalign=4k\n", "8k"),  # blockalign is for random IO
    ],
)
def test_random_offsets_are_aligned_as_fio_aligns_them(tmp_path, job, align):
    assert one(tmp_path, f"[j]\nfilename=/x\n{job}")["align"] == align


def test_a_job_overrides_global_whatever_spelling_global_used(tmp_path):
    # HOWTO "Job file format": "A job may override a global section parameter"; rwmixwrite
    # sets rwmixread to 100 minus it (options.c str_rwmix_write_cb) and buffered sets direct
    # to its opposite, so the job's rwmixread=80 wins over [global]'s rwmixread=60 and
    # rwmixwrite=40 (fio-rand-RW as shipped), and its direct=0 over direct=1 buffered=0.
    s = one(
        tmp_path,
        "[global]\nrwmixread=60\nrwmixwrite=40\ndirect=1\nbuffered=0\nfilename=/x\n"
        "[j]\nrw=randrw\nrwmixread=80\ndirect=0\n",
    )
    assert s["read"] == 80.0
    t = translate(write(tmp_path, "[global]\ndirect=1\nbuffered=0\nfilename=/x\n[j]\ndirect=0\n"))
    assert t.doc["direct"] is False
    # Within one section fio sorts options before applying them: conflicting ones are refused.
    with pytest.raises(UsageError, match="rwmixwrite cannot be translated: it sets the same"):
        translate(write(tmp_path, "[j]\nfilename=/x\nrw=randrw\nrwmixread=70\nrwmixwrite=40\n"))


@pytest.mark.parametrize(
    "split, expected",
    [
        # HOWTO bssplit: "an empty percentage ... fio will split the remaining percentage
        # evenly among the blocksizes with no percentage set" (whole percents; options.c).
        ("4k/10:64k/50:32k/", "4k:10,64k:50,32k:40"),
        ("4k/:64k/50:32k/", "4k:25,64k:50,32k:25"),
        ("4k/0:8k/", "4k:50,8k:50"),  # "/0" too splits the rest (options.c: !perc)
        # Shares that do not add up to 100: io_u.c get_next_buflen() walks the entries sorted
        # by share and gives what is missing to the last, the largest.
        ("4k/10:64k/50:32k/30", "4k:10,64k:60,32k:30"),
        # ... and never reaches shares past 100.
        ("4k/70:8k/60", "4k:40,8k:60"),
    ],
)
def test_bssplit_shares_are_fios(tmp_path, split, expected):
    s = one(tmp_path, f"[j]\nfilename=/x\nrw=randread\nbssplit={split}\n")
    assert s["bs"] == expected


def test_bssplit_whose_missing_share_fio_hands_out_by_sort_order_is_refused(tmp_path):
    with pytest.raises(UsageError, match="depends on the C library"):
        translate(write(tmp_path, "[j]\nfilename=/x\nbssplit=4k/40:8k/40\n"))


def test_rates_keep_fios_depth_and_caps(tmp_path):
    # HOWTO iodepth "Default: 1", also for a rate-limited job (tilemark's open loop would
    # otherwise keep up to 64 in flight).
    s = one(tmp_path, "[j]\nfilename=/x\nrw=randread\nrate_iops=500\nioengine=io_uring\n")
    assert (s["rate"], s["qd"], s["arrival"]) == (500, 1, "constant")
    # HOWTO rate_iops: "Cap the bandwidth to this number of IOPS ... comma-separated values
    # may be specified for reads, writes": each direction is capped, which decides the mix
    # (measured with fio 3.33: rwmixread=60 rate_iops=1000 gives 1000 reads and 1000 writes).
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randrw\nrwmixread=60\nrate_iops=1000\n"))
    (s,) = t.doc["stream"]
    assert (s["rate"], s["read"]) == (2000, 50.0)
    assert any("caps reads at 1000 and writes at 1000" in n for n in t.notes)
    s = one(tmp_path, "[j]\nfilename=/x\nrw=randrw\nrate_iops=300,100\n")
    assert (s["rate"], s["read"]) == (400, 75.0)
    # HOWTO rate: bytes per second, in fio's units: 10m is 10 MiB/s, exactly.
    assert one(tmp_path, "[j]\nfilename=/x\nrw=write\nrate=10m\n")["rate_bytes"] == 10 << 20
    with pytest.raises(UsageError, match="paces only one direction"):
        translate(write(tmp_path, "[j]\nfilename=/x\nrw=randrw\nrate_iops=300,0\n"))


def test_percentage_random_applies_to_random_jobs_only(tmp_path):
    # HOWTO percentage_random: "For a random workload, set how big a percentage should be
    # random" (io_u.c consults it only when td_random).
    assert one(tmp_path, "[j]\nfilename=/x\nrw=randread\npercentage_random=30\n")["random"] == 30
    path = write(tmp_path, "[j]\nfilename=/x\nrw=read\npercentage_random=30\n")
    t = translate(path)
    assert "random" not in t.doc["stream"][0]
    assert any("fio ignores it for rw=read" in n for n in t.notes)


def test_zoned_placement_and_sequential_mixes_are_fios(tmp_path):
    # HOWTO random_distribution: "zoned:50/5:30/15:20/ ... 50% of the accesses to the first 5%
    # of the file (50/5), 30% to the next 15% (30/15), and finally 20% of the IO will end up
    # in the remaining 80%" (fio's rand-zones.fio); an empty size takes what is left.
    s = one(tmp_path, "[j]\nfilename=/x\nrw=randread\nrandom_distribution=zoned:50/5:30/15:20/\n")
    assert s["pattern"] == "zoned:50/5:30/15:20/80"
    s = one(tmp_path, "[j]\nfilename=/x\nrw=randread\nrandom_distribution=zoned:90/10:10/90\n")
    assert s["pattern"] == "hotspot:90/10"
    # io_u.c get_next_seq_offset keeps last_pos per direction: reads and writes of rw=rw each
    # continue their own sequence.
    assert one(tmp_path, "[j]\nfilename=/x\nrw=rw\n")["cursors"] == "per-op"
    assert "cursors" not in one(tmp_path, "[j]\nfilename=/x\nrw=randrw\n")


def test_thinktime_is_an_exact_burst(tmp_path):
    # HOWTO thinktime: "Stall the job for the specified period of time after an I/O has
    # completed before issuing the next ... Value is in microseconds if a unit is omitted";
    # fio waits for the IOs in flight first (backend.c handle_thinktime, io_u_quiesce).
    s = one(tmp_path, "[j]\nfilename=/x\nthinktime=1234567\nthinktime_blocks=8\n")
    assert s["burst"] == "8/1234.567ms"
    assert one(tmp_path, "[j]\nfilename=/x\nthinktime=2ms\n")["burst"] == "1/2ms"


def test_compression_is_kept_or_refused_never_rounded(tmp_path):
    s = one(tmp_path, "[j]\nfilename=/x\nrw=write\nbuffer_compress_percentage=99\n")
    assert s["compress"] == 99.0
    with pytest.raises(UsageError, match="all-zero blocks"):
        translate(write(tmp_path, "[j]\nfilename=/x\nrw=write\nbuffer_compress_percentage=100\n"))


def test_engines_and_their_depth(tmp_path):
    # HOWTO ioengine libaio: "Linux may only support queued behavior with non-buffered I/O
    # (set direct=1 or buffered=0)": buffered libaio runs one IO at a time.
    t = translate(write(tmp_path, "[j]\nfilename=/x\nioengine=libaio\niodepth=16\n"))
    assert t.doc["stream"][0]["qd"] == 1
    assert any("buffered libaio is synchronous on Linux" in n for n in t.notes)
    # fio stamps an IO when it prepares it (io_u.c get_io_u) and reaps completions only when
    # its queue of iodepth is full (backend.c), so its lat counts the wait for the others.
    assert any("fio reports about 16 times tilemark's latency" in n for n in t.notes)
    t = translate(write(tmp_path, "[j]\nfilename=/x\nioengine=libaio\niodepth=16\ndirect=1\n"))
    assert (t.doc["backend"], t.doc["stream"][0]["qd"]) == ("uring", 16)
    # The sync engines do one IO at a time whatever iodepth says (HOWTO iodepth: "increasing
    # iodepth beyond 1 will not affect synchronous ioengines").
    t = translate(write(tmp_path, "[j]\nfilename=/x\nioengine=pvsync2\niodepth=8\n"))
    assert (t.doc["backend"], t.doc["stream"][0]["qd"]) == ("psync", 1)
    # fio's sync engines issue from the job's thread (engines/sync.c); tilemark's psync
    # backend hands each IO to a worker thread, and the note says so.
    assert any("issued by a worker thread" in n for n in t.notes)
    with pytest.raises(UsageError, match="ioengine=http is network and remote storage"):
        translate(write(tmp_path, "[j]\nfilename=/x\nioengine=http\n"))


def test_random_map_notes_say_what_they_mean(tmp_path):
    # HOWTO norandommap: "Normally fio will cover every block of the file when doing random
    # I/O. If this option is given, fio will just get a new random offset".
    text = "[j]\nfilename=/x\nrw=randread\n"
    assert any("visits every block once per pass" in n for n in notes(tmp_path, text))
    assert not any("visits every" in n for n in notes(tmp_path, text + "norandommap\n"))
    assert any("visits every" in n for n in notes(tmp_path, text + "norandommap=0\n"))


def test_jobs_named_alike_get_distinct_streams(tmp_path):
    # HOWTO name: "ASCII name of the job"; fio lets jobs share it ([global] name=).
    path = write(tmp_path, "[global]\nname=test\nfilename=/x\n[a]\n[b]\n")
    t = translate(path)
    assert [s["name"] for s in t.doc["stream"]] == ["test.a", "test.b"]


def test_jobs_without_files_get_regions_of_one_target(tmp_path):
    # HOWTO "Job file format": "As no filename option is given, fio makes up a filename for
    # each of the jobs"; numjobs: each clone gets its own (HOWTO filename).
    path = write(
        tmp_path,
        "[global]\ndirectory=/data1\nsize=512m\nrw=randread\n[a]\nnumjobs=2\n[b]\noffset=128m\n",
    )
    t = translate(path)
    got = [(s["name"], s.get("offset", "0"), s["length"]) for s in t.doc["stream"]]
    assert got == [("a0", "0", "512m"), ("a1", "512m", "512m"), ("b", "1152m", "384m")]
    assert t.doc["size"] == "1536m" and "target" not in t.doc
    assert any("fio makes 3 files, one per job and clone, in /data1" in n for n in t.notes)
    # A named file is shared by the clones; directory prefixes it (HOWTO directory).
    t = translate(write(tmp_path, "[j]\ndirectory=/mnt\nfilename=f.dat\nnumjobs=3\nsize=1g\n"))
    assert (t.doc["target"], t.doc["stream"][0]["copies"]) == ("/mnt/f.dat", 3)


def test_offset_increment_gives_each_clone_its_offset(tmp_path):
    # HOWTO offset_increment: "the real offset becomes offset + offset_increment *
    # thread_number".
    path = write(tmp_path, "[j]\nfilename=/x\nsize=1g\noffset=4k\noffset_increment=2g\nnumjobs=2\n")
    got = [(s["name"], s["offset"]) for s in translate(path).doc["stream"]]
    assert got == [("j0", "4k"), ("j1", "2097156k")]


def test_jobs_on_different_files_use_several_targets(tmp_path):
    t = translate(write(tmp_path, "[a]\nfilename=/dev/loop1\n[b]\nfilename=/dev/loop2\n"))
    assert t.doc["target"] == [
        {"name": "loop1", "path": "/dev/loop1"},
        {"name": "loop2", "path": "/dev/loop2"},
    ]
    assert [s["target"] for s in t.doc["stream"]] == ["loop1", "loop2"]


def test_jobs_that_are_not_time_based_end_by_their_bytes(tmp_path):
    # HOWTO size: "Fio will run until this many bytes has been transferred"; io_size: "fio
    # will only do io_size bytes"; loops: "Run the specified number of iterations";
    # number_ios: "When fio reaches this number, it will exit normally"; runtime: "until it
    # completes the configured I/O workload or until it has run for this specified amount
    # of time, whichever occurs first".
    s = one(tmp_path, "[j]\nfilename=/x\nsize=1g\nloops=3\n")
    assert (s["length"], s["passes"]) == ("1g", 3)
    s = one(tmp_path, "[j]\nfilename=/x\nsize=1g\nio_size=64m\nloops=2\n")
    assert (s["io_size"], s["passes"]) == ("64m", 2)
    s = one(tmp_path, "[j]\nfilename=/x\nsize=1g\nnumber_ios=100\nbs=8k\n")
    assert s["io_size"] == "800k"
    t = translate(write(tmp_path, "[j]\nfilename=/x\nsize=1g\n"))
    assert "duration" not in t.doc  # until every stream has done its bytes
    t = translate(write(tmp_path, "[j]\nfilename=/x\nsize=1g\nruntime=30\n"))
    assert (t.doc["duration"], t.doc["stream"][0]["passes"]) == ("30s", 1)
    # time_based: "fio will run for the duration of the runtime specified even if the
    # file(s) are completely read or written".
    t = translate(write(tmp_path, "[j]\nfilename=/x\nsize=1g\nruntime=30\ntime_based\n"))
    assert "passes" not in t.doc["stream"][0] and t.doc["duration"] == "30s"


def test_stonewall_wait_for_startdelay_and_runtimes_are_phases(tmp_path):
    # HOWTO stonewall: "Wait for preceding jobs in the job file to exit, before starting this
    # one"; wait_for: "the current job won't be started until all workers of the specified
    # waitee job are done"; startdelay: "Delay the start of job"; ramp_time: "the ramp_time
    # is considered lead in time for a job, thus it will increase the total runtime".
    path = write(
        tmp_path,
        "[global]\nfilename=/x\ntime_based\n"
        "[a]\nruntime=10\n[b]\nruntime=5\n[c]\nstonewall\nruntime=20\n"
        "[d]\nwait_for=c\nruntime=1m\n",
    )
    t = translate(path)
    phases = [(s["name"], s.get("start"), s.get("stop")) for s in t.doc["stream"]]
    assert phases == [
        ("a", None, "10s"),
        ("b", None, "5s"),
        ("c", "10s", "30s"),
        ("d", "30s", None),
    ]
    assert t.doc["duration"] == "90s"
    path = write(
        tmp_path,
        "[global]\nfilename=/x\ntime_based\nruntime=10\nramp_time=2\n[a]\n[b]\nramp_time=1\n",
    )
    with pytest.raises(UsageError, match="fio ramps every job at its own start"):
        translate(path)
    path = write(
        tmp_path,
        "[global]\nfilename=/x\ntime_based\nruntime=10\nramp_time=2\n[a]\n"
        "[b]\nstartdelay=500ms\nramp_time=0\n",
    )
    with pytest.raises(UsageError, match="it starts during the other jobs' ramp_time"):
        translate(path)
    path = write(
        tmp_path, "[global]\nfilename=/x\ntime_based\nruntime=10\n[a]\n[b]\nstartdelay=4\n"
    )
    t = translate(path)
    assert [(s.get("start"), s.get("stop")) for s in t.doc["stream"]] == [
        (None, "10s"),
        ("4s", None),
    ]
    assert t.doc["duration"] == "14s"


def test_a_phase_after_a_job_bounded_by_bytes_is_noted_or_waits_for_it(tmp_path):
    # Not time_based: the job ends at its runtime or when its bytes are done; tilemark starts
    # the next phase at the runtime and says so. Without a runtime the time is unknown, and
    # the next phase waits for the job to end (the stream's after; tests/test_fio_gates.py).
    path = write(tmp_path, "[global]\nfilename=/x\nsize=1g\n[a]\nruntime=60\n[b]\nstonewall\n")
    t = translate(path)
    assert [(s.get("start"), s.get("stop")) for s in t.doc["stream"]] == [
        (None, "60s"),
        ("60s", None),
    ]
    assert any(
        "tilemark at 60 s, so if it finishes earlier the storage idles" in n for n in t.notes
    )
    path = write(tmp_path, "[global]\nfilename=/x\nsize=1g\n[a]\n[b]\nstonewall\n")
    assert translate(path).doc["stream"][1]["after"] == ["a"]


def test_exitall_ends_the_group_when_its_job_ends(tmp_path):
    # HOWTO exitall: "terminate all jobs in the same group, as soon as one job of that group
    # finishes".
    path = write(
        tmp_path, "[global]\nfilename=/x\ntime_based\n[a]\nruntime=5\nexitall\n[b]\nruntime=60\n"
    )
    t = translate(path)
    assert t.doc["duration"] == "5s"


def test_verify_maps_onto_tilemarks_verification(tmp_path):
    # HOWTO verify: "If writing to a file, fio can verify the file contents after each
    # iteration of the job"; verify=0 is no verification (options.c).
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randwrite\nverify=crc32c\n"))
    assert t.doc["verify"] is True
    assert any("a pass tilemark leaves to `tilemark verify RUN`" in n for n in t.notes)
    assert "verify" not in translate(write(tmp_path, "[j]\nfilename=/x\nverify=0\n")).doc
    with pytest.raises(UsageError, match="in tilemark verify applies to the whole run"):
        translate(write(tmp_path, "[a]\nfilename=/x\nverify=md5\n[b]\nfilename=/x\n"))


def test_zones_translate_only_where_they_map_exactly(tmp_path):
    # HOWTO zonemode: "none: The zonerange, zonesize ... parameters are ignored"; "strided:
    # I/O happens in a single zone until zonesize bytes have been transferred".
    assert one(tmp_path, "[j]\nfilename=/x\nzonemode=none\nzonesize=1m\n")["rw"] == "read"
    s = one(tmp_path, "[j]\nfilename=/x\nzonemode=strided\nzonesize=256m\nsize=128m\n")
    assert s["length"] == "128m"
    # io_u.c: the next zone starts zonerange (default zonesize) + zoneskip further on.
    with pytest.raises(UsageError, match="256m of IO there, then moves 2304m on to the next"):
        translate(
            write(
                tmp_path,
                "[j]\nfilename=/x\nrw=randread\nzonemode=strided\nzonesize=256m\nzoneskip=2g\n",
            )
        )
    with pytest.raises(UsageError, match="zoned block devices"):
        translate(write(tmp_path, "[j]\nfilename=/x\nzonemode=zbd\n"))


def test_filesize_of_one_file_is_its_region(tmp_path):
    # HOWTO size: "If this option is not specified, fio will use the full size of the given
    # files"; filesize: "Individual file sizes".
    assert one(tmp_path, "[j]\nfilename=/x\nfilesize=128m\n")["length"] == "128m"
    with pytest.raises(UsageError, match="names its filename uses that file"):
        translate(write(tmp_path, "[j]\nfilename=/x\nnrfiles=4\nfilesize=128m\n"))


@pytest.mark.parametrize(
    "line, names",
    [
        # The tracebacks and workloads that failed only later, now one sentence each.
        ("random_distribution=zoned:abc/5:50/95", "random_distribution zoned needs whole"),
        ("bssplit=4k/abc:8k/50", "bssplit shares must be whole percents"),
        ("random_distribution=zipf:abc", "random_distribution zipf needs a number"),
        ("random_distribution=zipf:-1", "random_distribution zipf theta must be above 0"),
        ("bs=0", "bs must be above 0"),
        ("size=0", "size must be above 0"),
        ("iodepth=100000", "iodepth must be from 1 to 65536"),
        ("rate_iops=999999999", "rate_iops asks for 999,999,999 IOs per second"),
        ("runtime=30sec", "runtime '30sec': fio reads the unit 'sec' as microseconds"),
        ("bs=1.5k", "bs '1.5k' has a decimal point"),
        ("rw=", "rw cannot be translated: it needs a value"),
        ("rw=sideways", "rw must be one of read"),
        ("bs=4k,", "bs '4k,' leaves a direction empty"),
        ("size=50%", "size cannot be translated: a size given as a share"),
        ("rw=trim", "rw cannot be translated: rw=trim issues trims"),
        ("rw=randread:0", "rw suffix :0 of a random mode must be the IOs per random offset"),
        ("rw=read:8q", "rw suffix :8q must be a number"),
        ("frobnicate=3", "frobnicate cannot be translated: tilemark has no equivalent"),
        ("iodepth=many", "iodepth must be a whole number"),
        ("kb_base=42", "kb_base must be 1000 or 1024"),
    ],
)
def test_bad_values_are_refused_in_one_sentence_naming_the_option(tmp_path, line, names):
    path = write(tmp_path, f"[j]\nfilename=/x\n{line}\n")
    with pytest.raises(UsageError) as e:
        translate(path)
    message = str(e.value)
    assert message.startswith("job.fio:3: fio option "), message
    assert names in message, message
    assert message.endswith(".") and ". " not in message.replace("e.g. ", "")


def test_every_problem_of_a_file_is_counted(tmp_path):
    # The refusal names the engine first; examine() lists every blocker (docs/fio.md).
    path = write(
        tmp_path, "[j]\nfilename=/x\nstonewall\nverify=pattern\nioengine=sg\nlatency_target=1ms\n"
    )
    outcome = examine(path)
    assert outcome.translation is None
    assert {p.key for p in outcome.problems} == {"ioengine", "verify", "latency_target"}
    with pytest.raises(UsageError, match="ioengine=sg"):
        translate(path)


def test_translations_are_workloads_tilemark_accepts(tmp_path):
    path = write(
        tmp_path,
        "[global]\nioengine=io_uring\ndirect=1\nsize=64m\nbs=4k\n"
        "[r]\nrw=randread\niodepth=8\nrandom_distribution=zoned:90/10:10/90\n"
        "[w]\nrw=write\nrate_iops=100\nfsync=8\nthinktime=500\n",
    )
    t = translate(path)
    out = tmp_path / "w.toml"
    out.write_text(toml_text(t))
    doc = plan.load_toml(out)
    assert doc["stream"] == t.doc["stream"]
    doc["target"] = str(tmp_path / "t.dat")
    workload = plan.parse_workload(doc, source=str(out))
    assert [s.pattern for s in workload.streams] == ["hotspot:90/10", "uniform"]
    assert workload.streams[1].sync == "fsync:8" and workload.streams[1].burst == (1, 0.5)


def test_import_fio_cli(tmp_path, capsys):
    job = write(tmp_path, "[j]\nfilename=/x\nioengine=libaio\ndirect=1\niodepth=4\n")
    out = tmp_path / "w.toml"
    assert main(["import-fio", str(job), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert "note: ioengine=libaio runs on io_uring" in captured.err
    assert plan.load_toml(out)["stream"][0]["qd"] == 4
    assert main(["import-fio", str(job), "-o", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    bad = write(tmp_path, "[j]\nfilename=/x\nbssplit=4k/abc:8k/50\n", "bad.fio")
    assert main(["import-fio", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bssplit shares must be whole percents" in err and "Traceback" not in err
    assert main(["import-fio", str(tmp_path / "missing.fio")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_fadvise_hint_is_kept_or_said(tmp_path):
    # fio's fadvise_hint defaults to 1 (options.c), "Advise using fio IO pattern": at open,
    # POSIX_FADV_RANDOM for a random job, POSIX_FADV_SEQUENTIAL otherwise (ioengines.c
    # td_io_open_file). tilemark's fadvise = "pattern" gives a target that advice.
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randread\n"))
    assert t.doc["fadvise"] == "pattern"
    assert not any("fadvise" in n for n in t.notes)
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randread\nfadvise_hint=0\n"))
    assert "fadvise" not in t.doc
    assert not any("fadvise" in n for n in t.notes)
    # The hint 1 would give is the same (as tilemark's export writes it).
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randread\nfadvise_hint=random\n"))
    assert t.doc["fadvise"] == "pattern"
    # Another hint than the job's pattern is not tilemark's: no advice, and the note says so.
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=read\nfadvise_hint=random\n"))
    assert "fadvise" not in t.doc
    assert any("fadvise_hint=random: POSIX_FADV_RANDOM" in n for n in t.notes)
    # One open file carries one advice: random and sequential jobs on one target get none.
    t = translate(write(tmp_path, "[global]\nfilename=/x\n[a]\nrw=write\n[b]\nrw=randread\n"))
    assert t.doc["fadvise"] == "pattern"
    assert any("this mix of both gets no advice" in n for n in t.notes)
    # O_DIRECT IO bypasses the cache: nothing to advise.
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randread\ndirect=1\n"))
    assert "fadvise" not in t.doc
    with pytest.raises(UsageError, match="fadvise_hint must be one of"):
        translate(write(tmp_path, "[j]\nfilename=/x\nfadvise_hint=sometimes\n"))


def test_buffered_time_based_jobs_drop_the_cache_between_passes(tmp_path):
    # fio's time_based buffered job drops the file's cache when a sequential job wraps to its
    # start and when a random job's map is full (io_u.c get_next_seq_offset,
    # get_next_rand_block -> loop_cache_invalidate, if invalidate and not odirect).
    def stream(opts: str) -> dict:
        return translate(write(tmp_path, f"[j]\nfilename=/x\nsize=1m\n{opts}\n")).doc["stream"][0]

    assert stream("rw=write\ntime_based\nruntime=1")["invalidate"] == "pass"
    assert stream("rw=randread\ntime_based\nruntime=1")["invalidate"] == "pass"
    # A random job without a map never ends a pass; a job that is not time_based ends after
    # its bytes; invalidate=0 and O_DIRECT never drop anything.
    for opts in (
        "rw=randread\nnorandommap\ntime_based\nruntime=1",
        "rw=write",
        "rw=write\ntime_based\nruntime=1\ninvalidate=0",
        "rw=write\ntime_based\nruntime=1\ndirect=1",
    ):
        assert "invalidate" not in stream(opts), opts


def test_a_random_map_shortens_split_sizes_and_the_note_says_so(tmp_path):
    # io_u.c mark_random_map: fio trims an IO to the blocks of its random map still free in
    # the pass, so a bssplit job without norandommap issues smaller IOs than its split.
    job = "[j]\nfilename=/x\nrw=randread\nbssplit=4k/50:64k/50\n"
    t = translate(write(tmp_path, job))
    assert any("mark_random_map" in n for n in t.notes)
    t = translate(write(tmp_path, job + "norandommap\n"))
    assert not any("mark_random_map" in n for n in t.notes)
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=randread\nbs=4k\n"))
    assert not any("mark_random_map" in n for n in t.notes)
