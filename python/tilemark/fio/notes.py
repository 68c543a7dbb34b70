"""What a translation's notes say about fio's behaviour around each job (docs/fio.md): the
differences tilemark keeps on purpose or cannot avoid, each with the place in fio's source."""

from __future__ import annotations

from tilemark.fio.job import FioJob

NULLS = ("null", "cpp_null")


def job_notes(jobs: list[FioJob]) -> list[str]:
    """What every job's translation should say about fio's behaviour around it."""
    notes: list[str] = []
    by_note: dict[str, list[str]] = {}
    for job in jobs:
        for item in job.notes + job.by_design:
            by_note.setdefault(item, []).append(job.name)
        real = job.engine not in NULLS  # the null engine touches no storage
        random_map = job.is_random() and not job.norandommap and real
        if random_map and len(job.sizes) > 1:
            by_note.setdefault(
                "fio shortens an IO to the blocks of its random map not yet visited in the "
                "pass (io_u.c mark_random_map), so as a pass fills its IOs get smaller than "
                "the block size split says (measured: iometer-file-access-server, 4.9 KB on "
                "average against the split's 11.3 KB); tilemark issues the split's sizes "
                "(with norandommap fio does too)",
                [],
            ).append(job.name)
        if random_map and (job.blockalign in (None, job.min_bs())):
            by_note.setdefault(
                "fio visits every block once per pass over the region (its random map, HOWTO "
                "norandommap); tilemark draws every offset independently, as fio does with "
                "norandommap, so some blocks are hit twice and some not in a pass",
                [],
            ).append(job.name)
        if not job.direct and real and job.fadvise != "0" and not job.advises_its_pattern():
            advice = {
                "1": "POSIX_FADV_RANDOM for a random job, which turns readahead off, and "
                "POSIX_FADV_SEQUENTIAL for a sequential one, which doubles it",
                "random": "POSIX_FADV_RANDOM, which turns readahead off",
                "sequential": "POSIX_FADV_SEQUENTIAL, which doubles readahead",
                "noreuse": "POSIX_FADV_NOREUSE",
            }[job.fadvise]
            by_note.setdefault(
                f"buffered: fio advises the kernel when it opens the file (fadvise_hint="
                f"{job.fadvise}: {advice}; ioengines.c td_io_open_file); tilemark advises only "
                'each target\'s own pattern (fadvise = "pattern"), so here it gives none and '
                "the kernel's readahead decides how much a buffered miss reads",
                [],
            ).append(job.name)
        if job.time_based and not job.direct and job.invalidate and real:
            by_note.setdefault(
                "buffered and time_based: after every pass over the file fio writes back and "
                "drops its cached pages (io_u.c loop_cache_invalidate; on a block device a "
                "BLKFLSBUF that flushes the whole device and waits for the writeback), and so "
                'does tilemark (invalidate = "pass"); a pass is the region\'s length in '
                "bytes, which for a random job is when fio's random map is full only on "
                "average (tilemark keeps no map), and the flush holds every stream of the "
                "engine thread, where fio holds only the job"
                if not job.is_random() or not job.norandommap
                else "buffered and time_based with norandommap: fio drops the file's cached "
                "pages once, at the start (a random job without a map never ends a pass), and "
                "so does tilemark",
                [],
            ).append(job.name)
        if job.verify is not None:
            by_note.setdefault(
                f"verify={job.verify}: tilemark writes its own verifiable blocks and checks "
                "every read of them during the run; fio"
                + (
                    " also reads back and checks all the job wrote once it has written it "
                    "(do_verify), a pass tilemark leaves to `tilemark verify RUN`"
                    if job.do_verify and job.rw not in ("read", "randread")
                    else " checks its reads against its own headers"
                    if job.rw in ("read", "randread")
                    else " does not read back what this job wrote (do_verify=0)"
                )
                + (
                    f"; fio's verify_interval={job.verify_interval} is tilemark's verification "
                    "block (the target's O_DIRECT alignment)"
                    if job.verify_interval
                    else ""
                ),
                [],
            ).append(job.name)
    hinted = [j for j in jobs if not j.direct and j.advises_its_pattern() and j.engine not in NULLS]
    if len({j.is_random() for j in hinted}) > 1:
        # One open file carries one advice: a target shared by random and sequential jobs
        # gets none in tilemark (workload/compiler.py _advice), where fio advises each job.
        by_note.setdefault(
            "buffered: fio advises the kernel of each job's pattern when the job opens the "
            "file (fadvise_hint=1: POSIX_FADV_RANDOM turns readahead off for a random job, "
            "POSIX_FADV_SEQUENTIAL doubles it for a sequential one; ioengines.c "
            "td_io_open_file); tilemark advises a target only when all its streams are random "
            "or all sequential, so this mix of both gets no advice and the kernel's own "
            "readahead",
            [],
        ).extend(j.name for j in hinted)
    for item, names in by_note.items():
        if len(names) == len(jobs) > 1:
            label = "every job"
        else:
            label = ("job " if len(names) == 1 else "jobs ") + ", ".join(names)
        notes.append(item if len(jobs) == 1 else f"{label}: {item}")
    return notes
