"""What tilemark does with each fio option it does not translate into a stream key.

Three lists, each read against fio's HOWTO (fio commit f5344384): options that only change
fio's output (passed over silently), options whose effect tilemark has by its own design
(named in a note, with the reason), and options refused with a reason about what the storage
would see. Every option in none of them, and not translated by translate.py, is refused as
having no equivalent. The refusal reasons are grouped (`Reason.group`) for the corpus table
in docs/fio.md.
"""

from __future__ import annotations

from dataclasses import dataclass

# fio engines tilemark stands in for, and the backend that issues the same IO.
ASYNC_ENGINES = ("io_uring", "libaio", "posixaio")
SYNC_ENGINES = ("sync", "psync", "vsync", "pvsync", "pvsync2")
ENGINES = {
    **dict.fromkeys(ASYNC_ENGINES, "uring"),
    **dict.fromkeys(SYNC_ENGINES, "psync"),
    "null": "null",
    "cpp_null": "null",  # fio's C++ external-engine example of the null engine
}
# Engines refused with a reason more telling than "no tilemark backend".
ENGINE_REASONS = {
    "mmap": "it reads and writes through memory mappings (page faults and msync), which "
    "tilemark does not issue",
    "sg": "it sends SCSI commands through the sg driver, not reads and writes through the "
    "block layer",
    "io_uring_cmd": "it sends NVMe or SCSI passthrough commands, not reads and writes through "
    "the block layer",
    "xnvme": "it drives NVMe devices through xNVMe's own paths, not the block layer",
    "libblkio": "it drives the device through libblkio, not the kernel's block layer",
    "libzbc": "it drives zoned devices through libzbc",
    "dev-dax": "it copies to and from persistent memory mapped into the process",
    "libpmem": "it copies to and from persistent memory mapped into the process",
    "e4defrag": "it runs ext4 online defragmentation, not IO",
    "falloc": "it allocates and punches file blocks (fallocate), not reads and writes",
    "ftruncate": "it truncates files, not reads and writes",
    "cpuio": "it burns CPU and issues no IO",
    "exec": "it runs a program and issues no IO",
    "page_fault": "it faults in anonymous memory and issues no storage IO",
}
ENGINE_FAMILIES = {
    "network and remote storage (http, net, rdma, nbd, nfs, rbd, rados, gfapi, dfs, iscsi, "
    "hdfs, ime)": (
        "http",
        "net",
        "netsplice",
        "rdma",
        "nbd",
        "nfs",
        "rbd",
        "rados",
        "gfapi",
        "gfapi_async",
        "dfs",
        "libiscsi",
        "libhdfs",
        "ime_psync",
        "ime_psyncv",
        "ime_aio",
    ),
    "GPU and accelerator copies (libcufile, libhipfile)": ("libcufile", "libhipfile"),
    # fio's file and directory engines are no family here: fio/fileengines.py translates them.
    "MTD flash": ("mtd",),
}

RW_MODES = {
    "read": "read",
    "write": "write",
    "randread": "randread",
    "randwrite": "randwrite",
    "rw": "rw",
    "readwrite": "rw",
    "randrw": "randrw",
}
TRIM_MODES = ("trim", "randtrim", "trimwrite", "randtrimwrite")

# Options that change what fio reports, logs or prints, not the IO it issues.
REPORTING = frozenset(
    {
        "description",
        "group_reporting",
        "new_group",  # a reporting group; it does not order jobs (HOWTO, new_group)
        "thread",
        "threads",
        "gtod_reduce",
        "gtod_cpu",
        "clocksource",
        "write_bw_log",
        "write_lat_log",
        "write_iops_log",
        "write_hist_log",
        "log_avg_msec",
        "log_hist_msec",
        "log_hist_coarseness",
        "log_max_value",
        "log_offset",
        "log_prio",
        "log_compression",
        "log_store_compressed",
        "log_unix_epoch",
        "log_alternate_epoch",
        "log_alternate_epoch_clock_id",
        "job_start_clock_id",
        "per_job_logs",
        "percentile_list",
        "clat_percentiles",
        "lat_percentiles",
        "slat_percentiles",
        "block_error_percentiles",
        "disable_lat",
        "disable_clat",
        "disable_slat",
        "disable_bw_measurement",
        "disable_bw",
        "significant_figures",
        "unified_rw_reporting",
        "stats",
        "unit_base",
        "bwavgtime",
        "iopsavgtime",
        "error_dump",
        "verify_dump",
        "write_iolog",
    }
)

# Options whose effect tilemark has by its own design; named in a note with the reason.
BY_DESIGN = {
    "randrepeat": "tilemark's placement is fixed by --seed",
    "allrandrepeat": "tilemark's placement is fixed by --seed",
    "randseed": "tilemark's placement is fixed by --seed",
    "random_generator": "tilemark draws offsets with its own generator",
    "iodepth_batch": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_submit": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_complete": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_complete_min": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_complete_max": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_low": "tilemark keeps the queue full and submits as completions arrive",
    "io_submit_mode": "a rate runs open loop in tilemark: IOs are issued on schedule and "
    "latency counts from the intended time",
    "fixedbufs": "tilemark's io_uring backend registers its own buffers as it sees fit",
    "registerfiles": "tilemark's io_uring backend registers its own files as it sees fit",
    "nonvectored": "tilemark's io_uring backend chooses its own request form",
    "overwrite": "tilemark lays out (fills) a new target before it measures",
    "fallocate": "tilemark lays out (fills) a new target before it measures",
    "create_on_open": "tilemark opens its target once, before the run",
    "create_serialize": "tilemark lays out its target before the run",
    "allow_file_create": "tilemark creates a new target file itself and names block devices "
    "only when told to (--destroy-data)",
    "unlink": "tilemark never deletes a target",
    "refill_buffers": "tilemark generates new write data for every write",
    "scramble_buffers": "tilemark generates new write data for every write",
    "end_fsync": "the measurement ends with the last IO; no final fsync is measured",
    "mem": "tilemark allocates its own aligned buffers",
    "iomem": "tilemark allocates its own aligned buffers",
    "mem_align": "tilemark allocates its own aligned buffers",
    "iomem_align": "tilemark allocates its own aligned buffers",
    "cpus_allowed": "tilemark places its own threads on CPUs",
    "cpus_allowed_policy": "tilemark places its own threads on CPUs",
    "cpumask": "tilemark places its own threads on CPUs",
    "numa_cpu_nodes": "tilemark places its own threads and memory",
    "numa_mem_policy": "tilemark places its own threads and memory",
    "nice": "tilemark runs at the priority it is started with",
    "verify_async": "tilemark checks data on its own engine threads",
    "verify_fatal": "a data finding fails a tilemark run (max_errors 0 stops it at the first)",
    "exitall_on_error": "a failed IO ends a tilemark run (max_errors 0)",
    "ratecycle": "tilemark's open loop keeps its schedule IO by IO",
    "rate_cycle": "tilemark's open loop keeps its schedule IO by IO",
}


# Options refused with a reason about what the storage would see (or when tilemark would
# stop), grouped for the corpus table. Options not listed anywhere are refused as having no
# equivalent.
@dataclass(frozen=True)
class Reason:
    """Why an option is refused: one clause, and the group it belongs to in docs/fio.md."""

    text: str
    group: str


SEVERAL_FILES = "several files per job (file sets: a later tilemark issue)"
ZBD = "zoned block devices"
VERIFY = "verification other than tilemark's"
PRIORITY = "IO priorities and polling"
TERMINATION = "ending a job on a measurement"
DATA = "write data content"
ORDER = "jobs that pace each other"
ERRORS = "error handling"
SYSTEM = "system settings"

REFUSED = {
    "max_open_zones": Reason(
        "zoned block devices (write pointers, open zones) are not modelled", ZBD
    ),
    "read_beyond_wp": Reason("zoned block devices (write pointers) are not modelled", ZBD),
    "zone_reset_threshold": Reason("zoned block devices (zone resets) are not modelled", ZBD),
    "zone_reset_frequency": Reason("zoned block devices (zone resets) are not modelled", ZBD),
    "verify_backlog": Reason(
        "fio reads back what it wrote while it writes, which adds reads tilemark would not issue",
        VERIFY,
    ),
    "verify_write_sequence": Reason(
        "tilemark checks the write order of every block itself", VERIFY
    ),
    "verify_only": Reason(
        "fio only reads back an earlier run's data; use `tilemark verify RUN`", VERIFY
    ),
    "experimental_verify": Reason("fio's experimental verification is not tilemark's", VERIFY),
    "trim_percentage": Reason(
        "tilemark issues no trims yet (the discard operation is another branch)", "trims"
    ),
    "trim_verify_zero": Reason("tilemark issues no trims yet", "trims"),
    "trim_backlog": Reason("tilemark issues no trims yet", "trims"),
    "priohint": Reason(
        "tilemark sets no IO priority hints (command duration limits); a stream has a "
        "priority class and level",
        PRIORITY,
    ),
    "cmdprio_hint": Reason(
        "tilemark sets no IO priority hints (command duration limits); a stream has a "
        "priority class and level",
        PRIORITY,
    ),
    "hipri": Reason("tilemark does not use polled completions", PRIORITY),
    "sqthread_poll": Reason("tilemark does not use a kernel submission-polling thread", PRIORITY),
    "sqthread_poll_cpu": Reason(
        "tilemark does not use a kernel submission-polling thread", PRIORITY
    ),
    "atomic": Reason("tilemark does not issue atomic (RWF_ATOMIC) writes", "atomic writes"),
    "writefua": Reason("tilemark does not issue FUA writes", PRIORITY),
    "readfua": Reason("tilemark does not issue FUA reads", PRIORITY),
    "latency_target": Reason(
        "fio searches the job's queue depth while it runs (from 1, doubling, then bisecting "
        "up to iodepth) for the deepest at which latency_percentile of the IOs of each "
        "latency_window complete within latency_target, then measures one more window at that "
        "depth and ends the job; a tilemark stream keeps one queue depth for the run, and the "
        "same search is a study: `tilemark scale PROFILE --knob depth --knob-range 1..IODEPTH` "
        'over a profile whose stream has qd = "depth" and a QoS latency bound (docs/fio.md, '
        '"latency_target as a study")',
        TERMINATION,
    ),
    "offset_align": Reason(
        "tilemark does not round offsets given as shares of a file", "placement"
    ),
    "buffer_pattern": Reason(
        "fio fills write buffers with a fixed pattern; tilemark's write "
        "data is set by compress and dedupe",
        DATA,
    ),
    "zero_buffers": Reason(
        "fio writes zeros; tilemark's write data is at most 99% compressible (compress)", DATA
    ),
    "continue_on_error": Reason(
        "fio's choice of errors to carry on after has no tilemark "
        "equivalent (max_errors counts all errors)",
        ERRORS,
    ),
    "ignore_error": Reason("tilemark counts every failed IO as an error", ERRORS),
    "ioscheduler": Reason("tilemark does not change system settings", SYSTEM),
    "fdatasync": Reason(
        "tilemark syncs writes with fsync or O_DSYNC only (fsync=N or sync=1)", "sync"
    ),
    "sprandom": Reason(
        "SanDisk's random preconditioning lays out writes by its own model; "
        "use `tilemark precondition`",
        "placement",
    ),
    "bs_unaligned": Reason(
        "tilemark's IO sizes are whole multiples of the smallest size", "placement"
    ),
    "bs_is_seq_rand": Reason(
        "tilemark's sizes are the same for sequential and random IO", "placement"
    ),
    "thinktime_iotime": Reason("tilemark pauses after a number of IOs, not after a time", "pacing"),
    "rate_ignore_thinktime": Reason(
        "tilemark's bursts and rates are not combined this way", "pacing"
    ),
    "fdp": Reason(
        "tilemark does not place data with NVMe flexible data placement", "data placement hints"
    ),
    "fdp_pli": Reason(
        "tilemark does not place data with NVMe flexible data placement", "data placement hints"
    ),
    "dataplacement": Reason(
        "tilemark does not place data with placement hints", "data placement hints"
    ),
    "write_hint": Reason("tilemark does not send write lifetime hints", "data placement hints"),
    "md_per_io_size": Reason(
        "tilemark does not send NVMe protection information", "protection information"
    ),
    "pi_act": Reason(
        "tilemark does not send NVMe protection information", "protection information"
    ),
    "pi_chk": Reason(
        "tilemark does not send NVMe protection information", "protection information"
    ),
    "read_iolog": Reason("replay a trace with `tilemark trace import` and replay", "traces"),
    "replay_redirect": Reason("replay a trace with `tilemark trace import` and replay", "traces"),
}
