"""fio's write data content options (python/tilemark/fio/datareduce.py), each rule taken from
fio's HOWTO (fio commit f5344384, "Buffers and memory") and fio's source where the HOWTO is
silent (io_u.c get_buf_state, dedupe.c, init.c)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fio_examples import example
from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.fio import translate


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.fio"
    path.write_text(text)
    return path


def streams(tmp_path: Path, text: str) -> tuple[list[dict], list[str]]:
    t = translate(write(tmp_path, text))
    return t.doc["stream"], t.notes


JOB = "[j]\nfilename=/x\nrw=write\nsize=64m\n"


def test_working_set_becomes_a_dedupe_set(tmp_path):
    # HOWTO dedupe_mode: "working_set ... fio will use the initial unique write buffers as its
    # working set. Upon deciding to dedupe, fio will randomly choose a buffer from the working
    # set." HOWTO dedupe_working_set_percentage: "the percentage of size of the file or device
    # used as the buffers fio will choose to generate the dedupe buffers from".
    (s,), notes = streams(
        tmp_path,
        JOB + "dedupe_percentage=25\ndedupe_mode=working_set\ndedupe_working_set_percentage=40\n",
    )
    assert (s["dedupe"], s["dedupe_set"]) == (pytest.approx(100 / 75), 40.0)
    assert "dedupe_global" not in s
    assert any("dedupe_set = 40" in n and "at random" in n for n in notes)


def test_the_working_set_defaults_to_five_percent(tmp_path):
    # options.c dedupe_working_set_percentage: .def = "5".
    (s,), _ = streams(tmp_path, JOB + "dedupe_percentage=50\ndedupe_mode=working_set\n")
    assert s["dedupe_set"] == 5.0


def test_repeat_mode_keeps_the_ratio_and_says_where_copies_come_from(tmp_path):
    # HOWTO dedupe_mode: "repeat is the default option for fio. Dedupe buffers are generated
    # by repeating previous unique write." dedupe.c: dedupe_global only acts in working_set.
    (s,), notes = streams(tmp_path, JOB + "dedupe_percentage=50\ndedupe_global=1\n")
    assert s["dedupe"] == 2.0 and "dedupe_set" not in s and "dedupe_global" not in s
    (note,) = [n for n in notes if "dedupe_percentage=50" in n]
    assert "previous unique buffer" in note and "only with dedupe_mode=working_set" in note


def test_dedupe_global_shares_one_pool_between_jobs(tmp_path):
    # HOWTO dedupe_global: "whether the deduplication buffers will be shared amongst all jobs
    # that have this option set. The buffers are spread evenly between participating jobs."
    doc = translate(example(tmp_path, "dedupe-global")).doc
    for s in doc["stream"]:
        assert (s["compress"], s["dedupe"], s["dedupe_set"], s["dedupe_global"]) == (
            50.0,
            2.0,
            50.0,
            True,
        )


@pytest.mark.parametrize(
    "text, words",
    [
        # init.c: "impossible to reach expected dedupe percentage ... since ... percentage of
        # size is reserved to dedupe working set (those are unique pages)".
        (
            "dedupe_percentage=60\ndedupe_mode=working_set\ndedupe_working_set_percentage=50\n",
            "dedupe_working_set_percentage=50 and dedupe_percentage=60 add up to more than 100",
        ),
        # options.c dedupe_mode: posval repeat, working_set.
        ("dedupe_percentage=50\ndedupe_mode=random\n", "must be repeat or working_set"),
        ("dedupe_percentage=50\ndedupe_working_set_percentage=101\n", "dedupe_working_set"),
        (
            "dedupe_percentage=50\ndedupe_mode=working_set\ndedupe_working_set_percentage=0\n",
            "no buffers to copy",
        ),
    ],
)
def test_bad_values_are_one_sentence(tmp_path, text, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        translate(write(tmp_path, JOB + text))


def test_working_set_needs_a_size_as_fio_does(tmp_path):
    # init.c: "pregenerated dedupe working set requires size to be set".
    with pytest.raises(UsageError, match="needs size set"):
        translate(
            write(
                tmp_path,
                "[j]\nfilename=/x\nrw=write\ndedupe_percentage=5\ndedupe_mode=working_set\n",
            )  # fmt: skip
        )


def test_a_bad_value_exits_2_without_a_traceback(tmp_path, capsys):
    path = write(tmp_path, JOB + "dedupe_percentage=50\ndedupe_mode=sometimes\n")
    assert main(["import-fio", str(path), "-o", str(tmp_path / "w.toml")]) == 2
    err = capsys.readouterr().err
    assert "dedupe_mode" in err and "Traceback" not in err


def test_the_compress_chunk_is_kept_at_fios_default_and_noted_otherwise(tmp_path):
    # HOWTO buffer_compress_chunk: "how big the random/fixed data region is ... When set to 0,
    # fio will use a chunk size that matches the block size ... Defaults to 512."
    # tilemark's compress lays out every 512-byte sector as random bytes, then zeros.
    base = JOB + "bs=64k\nbuffer_compress_percentage=40\n"
    (s,), notes = streams(tmp_path, base + "buffer_compress_chunk=512\n")
    assert s["compress"] == 40.0 and not [n for n in notes if "buffer_compress_chunk" in n]
    (s,), notes = streams(tmp_path, base + "buffer_compress_chunk=0\n")
    assert s["compress"] == 40.0
    assert any("buffer_compress_chunk=0" in n and "of each block" in n for n in notes)
    (_,), notes = streams(tmp_path, base + "buffer_compress_chunk=4k\n")
    assert any("4096-byte chunk" in n for n in notes)


def test_dedupe_options_without_a_dedupe_share_are_named(tmp_path):
    t = translate(write(tmp_path, JOB + "dedupe_mode=working_set\n"))
    assert "dedupe" not in t.doc["stream"][0]
    assert any("dedupe_mode" in n and "only with dedupe_percentage" in n for n in t.notes)


def test_export_fio_writes_the_dedupe_settings_back():
    # `export --fio` (docs/fio.md): the ratio as dedupe_percentage, a named pool as fio's
    # working set (HOWTO dedupe_working_set_percentage: a percentage of size), a shared one
    # as dedupe_global.
    from tilemark.fio.export import job_text
    from tilemark.workload.dedupe import SHARED_POOL

    stream = {
        "name": "s",
        "regions": [{"target": 0, "offset": 0, "length": 8 << 20}],
        "read_pct": 0,
        "sizes": [[4096, 1]],
        "pattern": {"kind": "sequential"},
        "random_pct": 0,
        "align": 4096,
        "qd": 1,
        "arrival": {"kind": "closed"},
        "sync": {"kind": "none"},
        "compress_pct": 50.0,
        "dedupe_ratio": 2.0,
        "dedupe_pool": {"blocks": 1024, "over_blocks": 4096, "id": SHARED_POOL},
    }
    plan = {
        "backend": "uring",
        "duration_ms": 1000,
        "targets": [{"path": "/x", "offset": 4096, "length": 8 << 20, "direct": True}],
        "streams": [stream],
    }
    lines = job_text(plan, title="t").splitlines()
    for line in ("buffer_compress_percentage=50", "dedupe_percentage=50",
                 "dedupe_mode=working_set", "dedupe_working_set_percentage=50",
                 "dedupe_global=1"):  # fmt: skip
        assert line in lines, line
    plain = {k: v for k, v in stream.items() if k != "dedupe_pool"} | {"dedupe_ratio": 3.0}
    text = job_text({**plan, "streams": [plain]}, title="t")
    lines = text.splitlines()
    assert "dedupe_percentage=67" in lines and not [x for x in lines if x.startswith("dedupe_mode")]
    assert "66.67% copies; fio takes whole percentages (67)" in text
    assert "dedupe_mode=repeat" in text
