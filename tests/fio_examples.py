"""fio's own example jobs the unit tests translate, as their option lines read at fio commit
f5344384 (examples/NAME.fio; fio's prose comments left out, options and their inline comments
as written), so the tests run without fio's source checkout. bench/fio_corpus.py translates
the files themselves from a checkout.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES: dict[str, str] = {
    "exitwhat": """\
[global]
filename=/tmp/test
filesize=1G
blocksize=4096
group_reporting
exitall=1
[slow1]
rw=read
numjobs=1
ioengine=sync
new_group=1
thinktime=2000
number_ios=1000
exit_what=stonewall
[fast1]
new_group=1
rw=randrw
numjobs=3
ioengine=libaio
iodepth=32
rate=300,300,300
[slow2]
stonewall
rw=write
numjobs=1
ioengine=sync
new_group=1
thinktime=2000
number_ios=1000
exit_what=all
[fast2]
rw=randrw
numjobs=3
ioengine=libaio
iodepth=32
rate=300,300,300
[runsnever]
rw=randrw
numjobs=3
ioengine=libaio
iodepth=32
rate=300,300,300
""",
    "flow": """\
[global]
norandommap
thread
time_based
runtime=30
direct=1
ioengine=libaio
iodepth=256
size=100g
bs=8k
filename=/tmp/testfile
flow_sleep=1000
[job2]
numjobs=1
rw=write
flow=1
[job1]
numjobs=1
rw=randread
flow=8
""",
    "butterfly": """\
[global]
filename=/tmp/testfile
bs=4k
direct=1
[forward]
rw=read
flow=2
[backward]
rw=read:-8k
flow=2
""",
    "cmdprio-bssplit": """\
[global]
filename=/dev/sda
direct=1
write_lat_log=prio-run.log
log_prio=1
rw=randrw
ioengine=libaio
iodepth=16
[cmdprio]
bssplit=64k/40:1024k/60,1024k/100
cmdprio_bssplit=64k/100:1024k/0,1024k/0
cmdprio_class=1
cmdprio=0
[cmdprio-adv]
stonewall
bssplit=64k/40:1024k/60,1024k/100
cmdprio_bssplit=64k/25/1/1:64k/75/3/2:1024k/0,1024k/0
[cmdprio-adv-def]
stonewall
prioclass=2
prio=7
bssplit=64k/40:1024k/60,1024k/100
cmdprio_bssplit=64k/25/1/1:64k/75/3/2:1024k/0,1024k/0
[cmdprio-hints]
stonewall
rw=randread
bssplit=1M/40:2M/60
cmdprio_bssplit=1M/10/2/0/1:1M/30/2/0/2:1M/60/2/0/0:2M/10/2/0/3:2M/90/2/0/0
""",
    "example_latency_steadystate": """\
[global]
ioengine=libaio
iodepth=32
bs=4k
direct=1
rw=randread
numjobs=1
time_based=1
runtime=3600  # Max runtime: 1 hour (will terminate early if steady state reached)
steadystate=lat:5%           # Stop when latency mean deviation < 5% of average
steadystate_duration=300     # Use 5-minute rolling window for measurements
steadystate_ramp_time=60     # Wait 1 minute before starting measurements
steadystate_check_interval=10 # Take measurements every 10 seconds
write_lat_log=lat_steadystate
log_avg_msec=10000           # Log average latency every 10 seconds
[latency_steady_test]
filename=/dev/nvme3n1
size=10G
""",
    "steadystate": """\
[global]
threads=1
group_reporting
time_based
size=128m
[ss-write]
filename=/dev/null
rw=write
bs=128k
numjobs=4
runtime=5m
ss=iops:10%
ss_dur=30s
ss_ramp=10s
[ss-read]
new_group
stonewall
filename=/dev/zero
rw=randread
bs=4k
numjobs=4
runtime=5m
ss=bw_slope:1%
ss_dur=10s
ss_ramp=5s
""",
    "dedupe-global": """\
[global]
ioengine=libaio
iodepth=256
size=100m
dedupe_mode=working_set
dedupe_global=1
dedupe_percentage=50
blocksize=4k
rw=write
buffer_compress_percentage=50
dedupe_working_set_percentage=50
[a]
[b]
""",
}


def example(tmp_path: Path, name: str) -> Path:
    """examples/NAME.fio written into tmp_path under its own name."""
    path = tmp_path / f"{name}.fio"
    path.write_text(EXAMPLES[name])
    return path
