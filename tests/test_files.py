"""File sets and file workloads with real IO on small sets in temporary directories: a set
made and verified (count, sizes, tree shape), reused, every operation counted against what
is on disk afterwards, and each unsafe input refused in one sentence with nothing outside the
set touched (docs/files.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.files.fileset import MARKER, entry_name, layout, leaf_dirs, prepare_fileset
from tilemark.files.run import run_file_workload
from tilemark.files.spec import parse_file_workload


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    """`files run` stores its run under ./tilemark-results: keep it out of the checkout."""
    monkeypatch.chdir(tmp_path)


def workload(path: Path, stream: dict | None = None, **fileset) -> dict:
    fs = {"name": "s", "path": str(path), "files": 60, "size": "4k:1,16k:1", **fileset}
    st = {"name": "m", "threads": 2, **(stream or {})}
    if "sequence" not in st:
        st.setdefault("ops", "stat:1")
    return {"name": "t", "duration": "0.4s", "interval": "0.1s", "fileset": [fs],
            "filestream": [st]}  # fmt: skip


def spec_of(doc: dict):
    return parse_file_workload(doc, "test")


def on_disk(root: Path) -> dict[str, int]:
    """Relative path -> size of every regular file under root, the marker left out."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for f in filenames:
            p = Path(dirpath) / f
            assert not p.is_symlink()
            if f != MARKER:
                out[str(p.relative_to(root))] = p.stat().st_size
    return out


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Everything under root: path -> (size, mtime_ns); for 'nothing outside was touched'."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(Path(dirpath) / name)
            out[str(Path(dirpath, name).relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def test_a_set_is_made_with_its_count_sizes_and_tree_shape(tmp_path):
    w = spec_of(workload(tmp_path / "set", depth=2, width=3, files=100, prealloc=80))
    spec = w.filesets[0]
    p = prepare_fileset(spec)
    files = on_disk(tmp_path / "set")
    assert len(files) == 80 == p.files
    leaves = leaf_dirs(spec)
    assert len(leaves) == 9 and all(d.count("/") == 1 for d in leaves)
    assert sorted({str(Path(f).parent) for f in files}) == sorted(leaves)
    want = layout(spec)
    for i, (d, size) in enumerate(want):
        path = f"{leaves[d]}/{entry_name(i)}"
        assert files.get(path) == size, path
    assert set(files.values()) == {4096, 16384}
    assert sum(files.values()) == p.bytes
    marker = json.loads((tmp_path / "set" / MARKER).read_text())
    assert marker["state"] == "ready" and marker["description"] == spec.description()


def test_a_gamma_sized_set_has_the_mean_it_was_given(tmp_path):
    w = spec_of(workload(tmp_path / "set", files=2000, size="gamma:16k"))
    p = prepare_fileset(w.filesets[0])
    sizes = list(on_disk(tmp_path / "set").values())
    assert len(sizes) == 2000 and len(set(sizes)) > 1000
    assert abs(sum(sizes) / len(sizes) / 16384 - 1) < 0.1
    assert p.bytes == sum(sizes)


def test_a_matching_set_is_reused_and_made_whole_again(tmp_path):
    root = tmp_path / "set"
    spec = spec_of(workload(root, files=50, prealloc=60)).filesets[0]
    prepare_fileset(spec)
    again = prepare_fileset(spec)
    assert again.reused and (again.created, again.rewritten, again.removed) == (0, 0, 0)
    # What a run leaves: a file deleted, one appended to, one created in a free entry.
    (root / entry_name(0)).unlink()
    with open(root / entry_name(1), "ab") as f:
        f.write(b"x" * 100)
    (root / entry_name(45)).write_bytes(b"new")
    fixed = prepare_fileset(spec)
    assert fixed.reused and (fixed.created, fixed.rewritten, fixed.removed) == (1, 1, 1)
    assert on_disk(root) == {entry_name(i): s for i, (_, s) in enumerate(layout(spec)) if s}


def test_a_set_with_sync_is_made_and_reused_the_same(tmp_path):
    # sync = true ends prepare with syncfs (the set on disk before the run), changes nothing.
    root = tmp_path / "set"
    spec = spec_of(workload(root, files=20, sync=True)).filesets[0]
    assert spec.sync and "sync" not in spec.description()
    made = prepare_fileset(spec)
    again = prepare_fileset(spec)
    assert made.files == again.files == 20 and again.reused
    with pytest.raises(UsageError, match="sync must be true or false"):
        spec_of(workload(root, sync="yes"))


def test_a_set_of_directories_is_made_and_made_good_again(tmp_path):
    # kind = "dirs": the prepared entries are empty directories (fio's dirstat, dirdelete).
    root = tmp_path / "set"
    spec = spec_of(workload(root, files=10, prealloc=50, kind="dirs")).filesets[0]
    made = prepare_fileset(spec)
    assert (made.entry_dirs, made.files, made.created) == (5, 0, 5)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [entry_name(i) for i in range(5)]
    # What a run leaves: one rmdir'd, one mkdir'd in a free entry, a file where a dir was.
    (root / entry_name(0)).rmdir()
    (root / entry_name(7)).mkdir()
    (root / entry_name(1)).rmdir()
    (root / entry_name(1)).write_bytes(b"x")
    fixed = prepare_fileset(spec)
    assert fixed.reused and (fixed.created, fixed.rewritten, fixed.removed) == (1, 1, 1)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [entry_name(i) for i in range(5)]
    assert on_disk(root) == {}
    # A directory entry holding anything was not made by tilemark: refused, left alone.
    (root / entry_name(2) / "mine.txt").write_text("keep")
    with pytest.raises(UsageError, match="mine.txt was not made by tilemark"):
        prepare_fileset(spec)
    assert (root / entry_name(2) / "mine.txt").read_text() == "keep"
    # A set of files over the same directory: the directories go, the files come.
    (root / entry_name(2) / "mine.txt").unlink()
    files = spec_of(workload(root, files=10, prealloc=50)).filesets[0]
    swapped = prepare_fileset(files)
    assert len(on_disk(root)) == 5 and not [p for p in root.iterdir() if p.is_dir()]
    assert swapped.files == 5


def test_a_changed_description_replaces_only_tilemarks_files(tmp_path):
    root = tmp_path / "set"
    prepare_fileset(spec_of(workload(root, files=30, depth=1, width=2)).filesets[0])
    p = prepare_fileset(spec_of(workload(root, files=10)).filesets[0])
    assert p.removed == 30 and p.created == 10
    assert sorted(on_disk(root)) == [entry_name(i) for i in range(10)]


def _refused(spec, match: str) -> str:
    with pytest.raises(UsageError, match=match) as e:
        prepare_fileset(spec)
    text = str(e.value)
    assert text.count(". ") == 0 and text.endswith("."), text  # one sentence
    return text


def test_a_path_climbing_out_with_dotdot_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"climbs out with '\.\.'"):
        spec_of(workload(Path(f"{tmp_path}/set/../../etc")))
    assert list(tmp_path.iterdir()) == []


def test_a_set_directory_that_is_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "set").symlink_to(outside)
    _refused(spec_of(workload(tmp_path / "set")).filesets[0], "symbolic link")
    assert list(outside.iterdir()) == []


def test_a_link_inside_a_set_is_refused_and_its_target_untouched(tmp_path):
    root = tmp_path / "set"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("mine")
    spec = spec_of(workload(root, files=20, depth=1, width=2)).filesets[0]
    prepare_fileset(spec)
    before = snapshot(outside)
    # A link where an entry or a directory should be: both refused, nothing followed.
    (root / "d00" / entry_name(0)).unlink()
    (root / "d00" / entry_name(0)).symlink_to(outside / "precious")
    _refused(spec, "is a symbolic link")
    (root / "d00" / entry_name(0)).unlink()
    import shutil

    shutil.rmtree(root / "d01")
    (root / "d01").symlink_to(outside)
    _refused(spec, "d01 is a symbolic link")
    assert snapshot(outside) == before and (outside / "precious").read_text() == "mine"


def test_a_directory_holding_foreign_files_is_refused_untouched(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "thesis.tex").write_text("do not delete")
    before = snapshot(root)
    _refused(spec_of(workload(root)).filesets[0], "files tilemark did not create")
    assert snapshot(root) == before
    # A foreign file inside tilemark's own set is refused too (never deleted).
    root2 = tmp_path / "set"
    spec = spec_of(workload(root2, files=5)).filesets[0]
    prepare_fileset(spec)
    (root2 / "notes.txt").write_text("mine")
    _refused(spec, "notes.txt was not made by tilemark")
    assert (root2 / "notes.txt").read_text() == "mine"


def test_a_set_whose_parent_is_missing_is_refused(tmp_path):
    _refused(spec_of(workload(tmp_path / "no" / "set")).filesets[0], "does not exist")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        ({"ops": "open:1,chmod:1"}, "names 'chmod'; operations are"),
        ({"ops": "open:1", "sequence": "open"}, "either ops"),
        ({"sequence": "open:2,close"}, "no weights"),
        ({"ops": "stat", "select": "zipf:0"}, "select must be"),
        ({"ops": "stat", "select": "hot:1:0.8"}, "'hot:SHARE:PROB'"),
        ({"ops": "stat", "select": "hot:0.2:1.5"}, "'hot:SHARE:PROB'"),
        ({"ops": "stat", "select": "hot:0.2"}, "'hot:SHARE:PROB'"),
        ({"ops": "stat", "rate": 100, "arrival": "closed"}, "arrival must be"),
    ],
)
def test_bad_stream_options_are_one_sentence(tmp_path, stream, match):
    doc = workload(tmp_path / "set")
    doc["filestream"][0] = {"name": "m", **stream}
    with pytest.raises(UsageError, match=match):
        spec_of(doc)


def _counts(result, stream: str = "m") -> dict[str, int]:
    s = next(x for x in result.streams if x.name == stream)
    return {o.op: o.ops for o in s.ops}


@pytest.mark.parametrize("backend", ["psync", "uring"])
def test_every_operation_is_counted_and_matches_the_disk(tmp_path, backend):
    root = tmp_path / "set"
    mix = (
        "open:1,read:4,close:1,stat:2,create:0.5,append:1,fsync:0.5,delete:0.5,rename:0.5,"
        "mkdir:0.4,rmdir:0.2,statdir:0.3,setattr:0.5,truncate:0.3,fallocate:0.3"
    )
    stream = {"ops": mix, "append": "1k", "truncate": "2k", "select": "zipf:1.1", "limit": 3000}
    doc = workload(root, stream, files=200, prealloc=50, depth=1, width=4)
    doc["backend"] = backend
    doc["duration"] = "60s"  # the limit ends it: a loaded machine still reaches every op
    w = spec_of(doc)
    r = run_file_workload(w)
    assert r.status == "complete", r.error
    n = _counts(r)
    assert all(n[op] > 0 for op in n), n
    files = on_disk(root)
    assert len(files) == 100 + n["create"] - n["delete"] == r.filesets[0].files
    assert sum(files.values()) == r.filesets[0].bytes
    made = [d for d in root.glob("d*/f*") if d.is_dir()]  # mkdir's entries, emptied by none
    assert len(made) == n["mkdir"] - n["rmdir"] == r.filesets[0].dirs
    s = r.streams[0]
    assert s.op("append").bytes == 1024 * n["append"]
    assert s.op("fallocate").bytes == 1024 * n["fallocate"]
    assert s.op("read").bytes > 0 and s.op("fsync").p99_us is not None
    # The intervals hold every operation the totals hold.
    per_interval = sum(i["streams"][0]["ops"]["stat"]["ops"] for i in r.intervals)
    assert per_interval == n["stat"]


@pytest.mark.parametrize("backend", ["psync", "uring"])
def test_a_sequence_appends_exactly_what_it_counts(tmp_path, backend):
    root = tmp_path / "set"
    doc = workload(root, {"sequence": "create,append,append,fsync,close", "append": "3000",
                          "io_size": "1k", "limit": 200}, files=100000, prealloc=0,
                   size="0")  # fmt: skip
    doc["backend"] = backend
    doc["duration"] = "60s"
    r = run_file_workload(spec_of(doc))
    n = _counts(r)
    files = on_disk(root)
    assert len(files) == n["create"] > 0
    assert sum(files.values()) == 3000 * n["append"] == r.streams[0].op("append").bytes
    assert r.streams[0].loops == n["create"] == 200


def test_files_run_on_the_command_line_writes_its_result(tmp_path, capsys):
    doc = workload(tmp_path / "set", {"ops": "open:1,read:2,close:1"})
    toml = tmp_path / "w.toml"
    toml.write_text(
        'name = "t"\nduration = "0.3s"\n[[fileset]]\nname = "s"\n'
        f'path = "{tmp_path / "set"}"\nfiles = 20\nsize = "8k"\n'
        '[[filestream]]\nname = "m"\nops = "open:1,read:2,close:1"\nthreads = 2\n'
    )
    assert doc  # the same workload as a document
    out = tmp_path / "r.json"
    assert main(["files", "run", str(toml), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "prepared" in text and "read" in text
    r = json.loads(out.read_text())
    assert r["status"] == "complete" and r["streams"][0]["ops"][1]["op"] == "read"
    assert r["streams"][0]["ops"][1]["bytes"] == 8192 * r["streams"][0]["ops"][1]["ops"]
    # Bad input on the command line: one sentence, exit 2, nothing made.
    bad = tmp_path / "bad.toml"
    bad.write_text(toml.read_text().replace(str(tmp_path / "set"), f"{tmp_path}/x/../y"))
    assert main(["files", "run", str(bad)]) == 2
    assert "climbs out" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


def test_the_worked_example_in_docs_runs_once_its_directory_is_replaced(tmp_path):
    import re
    import tomllib

    text = (Path(__file__).parents[1] / "docs" / "files.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    assert "/mnt/nas/tm" in block
    doc = tomllib.loads(block.replace("/mnt/nas/tm", str(tmp_path)))
    doc["duration"] = "0.3s"
    r = run_file_workload(parse_file_workload(doc, "docs/files.md"))
    assert r.status == "complete", r.error
    mail = next(s for s in r.streams if s.name == "mail")
    assert mail.loops > 0 and mail.op("fsync").ops >= mail.loops
    # The shipped varmail workload is the same as the documented one.
    from tilemark.files.run import builtin_path

    shipped = tomllib.loads(builtin_path("varmail").read_text())
    assert shipped == tomllib.loads(block)


def test_a_set_in_use_by_another_run_is_refused(tmp_path):
    from tilemark.files.run import lock_sets

    w = spec_of(workload(tmp_path / "set"))
    with lock_sets(w), pytest.raises(UsageError, match="in use by another tilemark run"):
        run_file_workload(w)
    assert not (tmp_path / "set").exists()


def test_qos_criteria_are_judged_on_the_totals(tmp_path):
    doc = workload(tmp_path / "set", {"sequence": "open,read,close", "unit": "pages"})
    doc["qos"] = {
        "fast_enough": {"stream": "m", "op": "loop", "stat": "rate", "min_rate": 1},
        "never": {"stream": "m", "op": "read", "stat": "max", "max_ms": 1e-6},
        "reads": {"stream": "m", "op": "read", "stat": "p99", "max_ms": 1000},
    }
    r = run_file_workload(spec_of(doc))
    got = {v.name: v.passed for v in r.qos}
    assert got == {"fast_enough": True, "never": False, "reads": True}
    # Decided as a tile run's are: a max is what happened (a point), a p99 has its interval.
    by_name = {v.name: v for v in r.qos}
    assert by_name["never"].decision == "fail"
    assert by_name["never"].ci_low == by_name["never"].ci_high == by_name["never"].value
    reads = by_name["reads"]
    assert reads.decision == "pass" and reads.ci_low <= reads.value <= reads.ci_high < 1000
    assert r.qos_passed is False and r.streams[0].unit == "pages"
    rate = next(v for v in r.qos if v.name == "fast_enough").value
    assert rate == pytest.approx(r.streams[0].loop_rate)


@pytest.mark.parametrize(
    ("qos", "match"),
    [
        ({"stream": "nope", "op": "read", "max_ms": 1}, "stream must name"),
        ({"stream": "m", "op": "loop", "max_ms": 1}, "op must be one of"),
        ({"stream": "m", "op": "stat", "stat": "rate", "max_ms": 1}, "takes min_rate"),
        ({"stream": "m", "op": "stat", "stat": "p42", "max_ms": 1}, "stat must be one of"),
    ],
)
def test_bad_qos_is_one_sentence(tmp_path, qos, match):
    doc = workload(tmp_path / "set")
    doc["qos"] = {"q": qos}
    with pytest.raises(UsageError, match=match):
        spec_of(doc)


FIO_CREATE = """# fio's examples/filecreate-ioengine.fio, nrfiles scaled down
[global]
create_on_open=1
nrfiles=300
ioengine=filecreate
fallocate=none
filesize=4k
openfiles=1

[t0]
[t1]
[t2]
"""


@pytest.mark.parametrize("backend", ["psync", "uring"])
def test_fio_file_engine_jobs_run_each_file_once(tmp_path, capsys, backend):
    job = tmp_path / "create.fio"
    job.write_text(FIO_CREATE)
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "r.json"
    args = ["files", "run", str(job), "--dir", str(work), "--json", str(out)]
    assert main([*args, "--backend", backend]) == 0
    assert "create_on_open: tilemark creates every file during the run" in capsys.readouterr().err
    r = json.loads(out.read_text())
    for name in ("t0", "t1", "t2"):
        s = next(x for x in r["streams"] if x["name"] == name)
        creates = next(o for o in s["ops"] if o["op"] == "create")
        assert creates["ops"] == 300 and s["loops"] == 300
        assert len(on_disk(work / name)) == 300
    # filestat and filedelete over the same sets: every file stated, then every file deleted.
    stat = FIO_CREATE.replace("ioengine=filecreate", "ioengine=filestat")
    for engine, after in (("filestat", 300), ("filedelete", 0)):
        # create_fsync=0: no syncfs after prepare (seconds on a busy disk; the sync is tested
        # in test_a_set_with_sync_is_made_and_reused_the_same and test_fio_fileengines.py).
        text = FIO_CREATE.replace("ioengine=filecreate", f"ioengine={engine}\ncreate_fsync=0")
        job.write_text(text)
        assert main(["files", "run", str(job), "--dir", str(work), "--json", str(out)]) == 0
        r = json.loads(out.read_text())
        op = "stat" if engine == "filestat" else "delete"
        done = [next(o for o in s["ops"] if o["op"] == op)["ops"] for s in r["streams"]]
        assert done == [300, 300, 300]
        assert [len(on_disk(work / n)) for n in ("t0", "t1", "t2")] == [after] * 3
    assert stat


def test_fio_jobs_of_other_engines_or_options_are_one_sentence(tmp_path):
    from tilemark.files.run import load_file_workload

    job = tmp_path / "j.fio"
    job.write_text("[a]\nioengine=psync\nrw=randread\n")
    with pytest.raises(UsageError, match="translates fio's file and directory engines"):
        load_file_workload(str(job))
    job.write_text("[a]\nioengine=filestat\nfilesize=4k\nbs=8k\n")
    with pytest.raises(
        UsageError,
        match="fio option bs cannot be translated: it has no meaning for ioengine=filestat",
    ):
        load_file_workload(str(job))


def test_json_output_replaces_its_own_file_but_never_a_foreign_one(tmp_path, capsys):
    toml = tmp_path / "w.toml"
    toml.write_text(
        f'duration = "0.2s"\n[[fileset]]\nname = "s"\npath = "{tmp_path / "set"}"\nfiles = 5\n'
        '[[filestream]]\nname = "m"\nops = "stat"\n'
    )
    out = tmp_path / "r.json"
    assert main(["files", "run", str(toml), "--json", str(out)]) == 0
    assert main(["files", "run", str(toml), "--json", str(out)]) == 0  # its own: replaced
    foreign = tmp_path / "notes.json"
    foreign.write_text("mine")
    assert main(["files", "run", str(toml), "--json", str(foreign)]) == 2
    assert foreign.read_text() == "mine"
    capsys.readouterr()


@pytest.mark.parametrize("name", ["varmail", "webserver", "fileserver", "build"])
def test_every_built_in_file_workload_reads_and_places_its_sets(tmp_path, name):
    from tilemark.files.run import load_file_workload

    w = load_file_workload(name, str(tmp_path))
    assert w.name == name and w.streams
    assert all(f.path == str(tmp_path / f.name) for f in w.filesets)


def test_a_damaged_marker_is_one_sentence_and_the_set_is_left_alone(tmp_path):
    root = tmp_path / "set"
    spec = spec_of(workload(root, files=5)).filesets[0]
    prepare_fileset(spec)
    marker = root / MARKER
    doc = json.loads(marker.read_text())
    doc["description"]["depth"] = "deep"
    marker.write_text(json.dumps(doc))
    before = snapshot(root)
    _refused(spec, "is not a tilemark file set marker")
    assert snapshot(root) == before
