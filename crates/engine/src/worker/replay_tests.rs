//! Replayed IO lists in the worker, over the scripted backend with a manual clock: issue times,
//! dependencies and depths are checked exactly, as the backend saw them.

use std::path::PathBuf;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use super::*;
use crate::backend::script::{Log, Script, ScriptBackend};
use crate::backend::Op;
use crate::plan::Plan;
use crate::replay::{self, Cursor, RecOp, Record, FLAG_FUA, FLAG_WRITEBACK};
use crate::stream::TargetFiles;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// The target starts 4096 bytes into file 0; its O_DSYNC file is file 1.
const TARGET: [TargetFiles; 1] = [TargetFiles {
    raw_fd: -1,
    is_block: false,
    offset: 4096,
    file: 0,
    file_dsync: 1,
    file_buffered: 2,
    verify: None,
}];

/// A list file unique to this test, removed when dropped.
struct List(PathBuf);

impl List {
    fn new(name: &str, records: &[Record]) -> List {
        let path = std::env::temp_dir().join(format!(
            "tilemark-worker-replay-{}-{name}",
            std::process::id()
        ));
        replay::write_list(&path, records);
        List(path)
    }
}

impl Drop for List {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn rec(time_ns: u64, offset: u64, len: u32, op: RecOp, deps: u64) -> Record {
    Record {
        time_ns,
        offset,
        deps,
        len,
        op,
        flags: 0,
    }
}

/// Reads of 4 KiB at 4 KiB steps, due at `times`.
fn reads_at(times: &[u64]) -> Vec<Record> {
    times
        .iter()
        .enumerate()
        .map(|(i, &t)| rec(t, i as u64 * 4096, 4096, RecOp::Read, 0))
        .collect()
}

/// The state of a stream replaying `list` in `mode` with `extra` stream keys, over a 1 MiB
/// region of the target.
fn replaying(list: &List, count: usize, mode: &str, extra: serde_json::Value) -> StreamState {
    let arrival = if mode == "timed" {
        serde_json::json!({"kind": "open", "rate_iops": 1000, "dist": "constant"})
    } else {
        serde_json::json!({"kind": "closed"})
    };
    let mut stream = serde_json::json!({"name": "trace", "regions": [{"target": 0,
        "length": 1048576}], "read_pct": 100, "sizes": [[4096, 1]],
        "pattern": {"kind": "random"}, "align": 4096, "qd": 64, "arrival": arrival,
        "ios": {"path": list.0.to_str().unwrap(), "count": count, "mode": mode}});
    let mut plan = serde_json::json!({"plan_version": 3, "backend": "null", "threads": 1,
        "interval_ms": 1000, "targets": [{"path": "/x", "length": 1048576}]});
    for (k, v) in extra.as_object().expect("an object") {
        match k.as_str() {
            "loop_ns" => stream["ios"]["loop_ns"] = v.clone(),
            "duration_ms" => plan["duration_ms"] = v.clone(),
            _ => stream[k] = v.clone(),
        }
    }
    plan["streams"] = serde_json::json!([stream]);
    let spec = Plan::from_json(&plan.to_string())
        .expect("valid test plan")
        .streams
        .remove(0);
    let ios = spec.ios.as_ref().unwrap();
    let info = replay::check(ios, 1048576, spec.align, "trace").expect("a good list");
    let (start, stop) = spec.active_ns();
    let mut state = StreamState::new(0, &spec, &TARGET);
    state.attach_replay(Cursor::open(ios, start, stop, "trace").unwrap(), info);
    state
}

struct Replayed {
    total: StreamStats,
    log: Arc<Mutex<Log>>,
    result: ThreadResult,
}

fn run(state: StreamState, latency_ns: u64, clock: RunClock) -> Replayed {
    let (backend, log) = ScriptBackend::new(Script {
        latency_ns,
        ..Default::default()
    });
    let (tx, rx) = channel();
    let mut totals = Totals::new(vec![state.new_stats()]);
    let result = Worker::new(0, vec![state], Box::new(backend))
        .run(clock, tx)
        .expect("run succeeds");
    rx.try_iter().for_each(|m| totals.add(&m));
    Replayed {
        total: totals.streams()[0].clone(),
        log,
        result,
    }
}

/// A clock without a planned end: the run ends when the list is done.
fn until_done() -> RunClock {
    RunClock::manual(0, None, 1000 * MS)
}

#[test]
fn timed_replay_issues_every_record_at_its_time_and_ends_with_the_list() {
    let times = [0, 250 * US, 260 * US, 3 * MS, 3 * MS, 900 * MS, 1700 * MS];
    let list = List::new("timed", &reads_at(&times));
    let state = replaying(&list, times.len(), "timed", serde_json::json!({}));
    let out = run(state, 100 * US, until_done());
    let log = out.log.lock().unwrap();
    assert_eq!(log.times, times, "submitted exactly when recorded");
    let offsets: Vec<u64> = log.requests.iter().map(|r| r.1).collect();
    assert_eq!(offsets, (0..7).map(|i| 4096 + i * 4096).collect::<Vec<_>>());
    assert_eq!(
        out.result.stop_reason, None,
        "ended by itself: the list is done"
    );
    assert!(out.result.end_ns >= 1700 * MS + 100 * US);
    let replay = out.total.replay.as_ref().expect("replay counters");
    assert_eq!(replay.issued, 7);
    let lateness = replay.lateness.as_ref().expect("timed keeps lateness");
    assert_eq!((lateness.count(), lateness.max()), (7, 0));
    assert_eq!(
        (replay.first_submit_ns, replay.last_submit_ns),
        (Some(0), 1700 * MS)
    );
    assert_eq!(
        (replay.first_due_ns, replay.last_due_ns),
        (Some(0), 1700 * MS)
    );
    let read = &out.total.ops[OpKind::Read as usize];
    assert_eq!((read.ops, read.bytes), (7, 7 * 4096));
    assert_eq!(read.response.as_ref().unwrap().max(), 100 * US);
}

#[test]
fn timed_replay_starts_with_the_stream_and_speed_is_in_the_times() {
    // Python divides recorded times by --speed: the engine only adds the stream's start.
    let list = List::new("start", &reads_at(&[0, 5 * MS, 10 * MS]));
    let state = replaying(&list, 3, "timed", serde_json::json!({"start_ms": 100}));
    let out = run(
        state,
        10 * US,
        RunClock::manual(0, Some(1000 * MS), 1000 * MS),
    );
    assert_eq!(
        out.log.lock().unwrap().times,
        [100 * MS, 105 * MS, 110 * MS]
    );
}

#[test]
fn a_record_waiting_for_a_slot_is_late_never_dropped() {
    // qd 1 and IOs of 3 ms: records due every 1 ms go out as slots free, each later.
    let list = List::new("late", &reads_at(&[0, MS, 2 * MS, 3 * MS]));
    let state = replaying(&list, 4, "timed", serde_json::json!({"qd": 1}));
    let out = run(state, 3 * MS, until_done());
    assert_eq!(out.log.lock().unwrap().times, [0, 3 * MS, 6 * MS, 9 * MS]);
    let replay = out.total.replay.as_ref().unwrap();
    let lateness = replay.lateness.as_ref().unwrap();
    assert_eq!((lateness.count(), lateness.max()), (4, 6 * MS));
    assert_eq!(out.total.ios_issued_late, 3, "2, 4 and 6 ms late");
    assert_eq!(out.total.lag_max_ns, 6 * MS);
    assert_eq!(
        out.total.ops[0].response.as_ref().unwrap().max(),
        9 * MS,
        "response time runs from the recorded time"
    );
}

#[test]
fn afap_issues_each_record_once_its_dependencies_have_completed() {
    // Recorded: two IOs together, then two that waited for both, then one that waited for
    // three. Times say nothing in afap.
    let records = [
        rec(0, 0, 4096, RecOp::Read, 0),
        rec(5 * MS, 4096, 4096, RecOp::Read, 0),
        rec(9 * MS, 8192, 4096, RecOp::Read, 2),
        rec(9 * MS, 12288, 4096, RecOp::Read, 2),
        rec(20 * MS, 16384, 4096, RecOp::Read, 3),
    ];
    let list = List::new("afap", &records);
    let state = replaying(&list, 5, "afap", serde_json::json!({}));
    let out = run(state, 100 * US, until_done());
    let log = out.log.lock().unwrap();
    assert_eq!(log.times, [0, 0, 100 * US, 100 * US, 200 * US]);
    let replay = out.total.replay.as_ref().unwrap();
    assert!(replay.lateness.is_none(), "no lateness without times");
    assert_eq!(replay.issued, 5);
    assert_eq!(out.result.stop_reason, None);
}

#[test]
fn qd_replay_keeps_its_depth_in_list_order() {
    let list = List::new("qd", &reads_at(&[0, 0, 0, 0, 0, 0, 0]));
    let state = replaying(&list, 7, "qd", serde_json::json!({"qd": 3}));
    let out = run(state, 100 * US, until_done());
    let log = out.log.lock().unwrap();
    assert_eq!(log.times, [0, 0, 0, 100 * US, 100 * US, 100 * US, 200 * US]);
    let offsets: Vec<u64> = log.requests.iter().map(|r| r.1 - 4096).collect();
    assert_eq!(offsets, (0..7).map(|i| i * 4096).collect::<Vec<_>>());
}

#[test]
fn a_looping_timed_list_repeats_shifted_by_its_period_until_the_stop() {
    let list = List::new("loop", &reads_at(&[0, 2 * MS]));
    let state = replaying(
        &list,
        2,
        "timed",
        serde_json::json!({"loop_ns": 5 * MS, "stop_ms": 13}),
    );
    let out = run(state, 10 * US, until_done());
    let log = out.log.lock().unwrap();
    assert_eq!(
        log.times,
        [0, 2 * MS, 5 * MS, 7 * MS, 10 * MS, 12 * MS],
        "passes at 0, 5 and 10 ms; the stop at 13 ms cuts the fourth"
    );
    assert_eq!(out.result.stop_reason, None);
}

#[test]
fn a_looping_afap_list_runs_until_the_end_of_the_run() {
    // Every record waits for all before it: one at a time, 100 us each, for 10 ms.
    let records: Vec<Record> = (0..3)
        .map(|i| rec(0, i * 4096, 4096, RecOp::Read, i))
        .collect();
    let list = List::new("afaploop", &records);
    let state = replaying(
        &list,
        3,
        "afap",
        serde_json::json!({"loop_ns": 1, "duration_ms": 10}),
    );
    let out = run(
        state,
        100 * US,
        RunClock::manual(0, Some(10 * MS), 1000 * MS),
    );
    assert_eq!(out.total.ops[0].ops, 100);
    let log = out.log.lock().unwrap();
    assert_eq!(&log.times[..5], [0, 100 * US, 200 * US, 300 * US, 400 * US]);
}

#[test]
fn reads_writes_fua_writeback_flushes_and_discards_are_submitted_as_such() {
    let mut fua = rec(3 * US, 8192, 4096, RecOp::Write, 0);
    fua.flags = FLAG_FUA;
    let mut writeback = rec(6 * US, 131072, 8192, RecOp::Write, 0);
    writeback.flags = FLAG_WRITEBACK;
    let records = [
        rec(0, 0, 8192, RecOp::Read, 0),
        rec(US, 4096, 16384, RecOp::Write, 0),
        fua,
        rec(4 * US, 0, 0, RecOp::Flush, 0),
        rec(5 * US, 65536, 32768, RecOp::Discard, 0),
        writeback,
    ];
    let list = List::new("ops", &records);
    let state = replaying(&list, 6, "timed", serde_json::json!({"read_pct": 40}));
    let out = run(state, 10 * US, until_done());
    let log = out.log.lock().unwrap();
    assert_eq!(
        log.requests,
        [
            (Op::Read, 4096, 8192, 0),
            (Op::Write, 8192, 16384, 0),
            (Op::Write, 12288, 4096, 1),
            (Op::Fsync, 0, 0, 0),
            (Op::Discard, 4096 + 65536, 32768, 0),
            (Op::WriteUncached, 4096 + 131072, 8192, 2),
        ],
        "(op, absolute offset, length, file): the FUA write through the O_DSYNC file, the \
         writeback write uncached through the page-cache file"
    );
    let ops = |k: OpKind| {
        let o = &out.total.ops[k as usize];
        (o.ops, o.bytes)
    };
    assert_eq!(ops(OpKind::Read), (1, 8192));
    assert_eq!(ops(OpKind::Write), (3, 28672));
    assert_eq!(ops(OpKind::Sync), (1, 0));
    assert_eq!(
        ops(OpKind::Discard),
        (1, 32768),
        "a discard's bytes are its range"
    );
}

#[test]
fn a_replaying_stream_reports_discards_and_replay_counters_others_do_not() {
    let list = List::new("json", &reads_at(&[0]));
    let state = replaying(&list, 1, "timed", serde_json::json!({}));
    let out = run(state, 10 * US, until_done());
    let json = |stats: &StreamStats| {
        let indexed = crate::stats::IndexedStats {
            stream: 0,
            stats,
            totals: true,
            targets: &[],
        };
        serde_json::to_value(&indexed).unwrap()
    };
    let v = json(&out.total);
    assert_eq!(v["replay"]["issued"], 1);
    assert_eq!(v["replay"]["lateness"]["n"], 1);
    assert_eq!(v["discard"]["ops"], 0);
    let plain = json(&StreamStats::new(true));
    assert!(plain.get("replay").is_none() && plain.get("discard").is_none());
}
