//! Group commit (group.rs) on the scripted backend and a manual clock: commits due while a
//! round is in flight join the next one, so a log whose device is slower than its commits keeps
//! up with fewer, larger writes, as a database's log does.

use std::sync::mpsc::channel;
use std::sync::Arc;

use super::gate_tests::{latency, specs, FILES};
use super::*;
use crate::backend::script::ScriptBackend;
use crate::backend::Op;
use crate::stop::StopSignal;

const MS: u64 = 1_000_000;
const KIB: u64 = 1024;

struct Ran {
    /// The stream's totals.
    stats: StreamStats,
    /// (op, offset, len) of every request the device took, in order.
    requests: Vec<(Op, u64, u32)>,
    /// Timers set when the thread ended.
    timers_left: usize,
}

/// A log stream of 8 KiB commits at `rate` a second (constant arrivals), its sync mode
/// `sync`, for `seconds`, every request taking `op_ns`.
fn log(rate: f64, sync: serde_json::Value, op_ns: u64, seconds: u64) -> Ran {
    log_of(serde_json::json!({}), rate, sync, op_ns, seconds)
}

/// `log` with the stream's keys changed by `extra`.
fn log_of(
    extra: serde_json::Value,
    rate: f64,
    sync: serde_json::Value,
    op_ns: u64,
    seconds: u64,
) -> Ran {
    let mut stream = serde_json::json!({"read_pct": 0, "sizes": [[8 * KIB, 1]],
        "pattern": {"kind": "sequential"}, "random_pct": 0, "sync": sync,
        "arrival": {"kind": "open", "dist": "constant", "rate_iops": rate}});
    for (k, v) in extra.as_object().expect("an object") {
        stream[k] = v.clone();
    }
    let specs = specs(&[stream]);
    let streams = vec![StreamState::new(0, &specs[0], &FILES)];
    let mut clock = RunClock::manual(0, Some(seconds * 1000 * MS), 1000 * MS);
    clock.stop = Arc::new(StopSignal::for_streams(1));
    let (backend, log) = ScriptBackend::new(latency(op_ns));
    let (tx, rx) = channel();
    let done = Worker::new(0, streams, Box::new(backend))
        .run(clock, tx)
        .expect("run succeeds");
    let mut totals = Totals::new(vec![StreamStats::new(true)]);
    rx.try_iter().for_each(|m| totals.add(&m));
    let log = log.lock().unwrap();
    Ran {
        stats: totals.streams()[0].clone(),
        requests: log.requests.iter().map(|r| (r.0, r.1, r.2)).collect(),
        timers_left: done.timers_left,
    }
}

impl Ran {
    /// The commits' (writes') response times.
    fn response(&mut self) -> &crate::stats::Histogram {
        let op = self.stats.op(OpKind::Write);
        op.response.as_ref().expect("open loop")
    }
}

fn group() -> serde_json::Value {
    serde_json::json!({"kind": "fsync", "every": 1, "data": true, "group": true})
}

#[test]
fn commits_due_during_a_round_join_the_next_write_and_flush() {
    // 1000 commits a second; a write and a flush take 2.5 ms each, so a round takes 5 ms and
    // about five commits come due during each.
    let mut ran = log(1000.0, group(), 2_500_000, 1);
    let writes: Vec<(u64, u32)> = ran
        .requests
        .iter()
        .filter(|r| r.0 == Op::Write)
        .map(|r| (r.1, r.2))
        .collect();
    let flushes = ran.requests.iter().filter(|r| r.0 == Op::Fdatasync).count();
    // Each write is followed by its flush before the next write.
    let ops: Vec<Op> = ran.requests.iter().map(|r| r.0).collect();
    assert!(
        ops.chunks(2).all(|p| p == [Op::Write, Op::Fdatasync]),
        "write, flush, write, flush..."
    );
    assert_eq!(flushes, writes.len());
    // The log is appended: each write starts where the one before ended (the 1 MiB region
    // wraps round; a round never spans the wrap).
    for w in writes.windows(2) {
        assert_eq!(w[1].0, (w[0].0 + w[0].1 as u64) % (1024 * KIB), "{w:?}");
    }
    let commits = ran.stats.op(OpKind::Write).ops;
    let bytes: u64 = writes.iter().map(|w| w.1 as u64).sum();
    assert_eq!(
        bytes,
        commits * 8 * KIB,
        "every commit's bytes written once"
    );
    assert_eq!(ran.stats.op(OpKind::Write).bytes, bytes);
    assert_eq!(ran.stats.op(OpKind::Sync).ops, flushes as u64);
    // Every commit due in the second is served but those waiting at its end, when the round
    // in flight drains (as any open-loop IO not yet issued at the end): a round's worth.
    assert!((990..=1000).contains(&commits), "{commits}");
    // About 200 rounds of about 5 commits, against 1000 writes and flushes one by one.
    assert!(
        (190..=205).contains(&writes.len()),
        "{} rounds",
        writes.len()
    );
    let largest = writes.iter().map(|w| w.1).max().unwrap();
    assert!(largest >= 5 * 8 * KIB as u32, "{largest}");
    // A commit waits for at most the round in flight and its own: 10 ms, or 15 where the
    // region wraps round and its commits take two rounds; however long the run.
    let response = ran.response();
    assert_eq!(response.count(), commits);
    assert!(response.max() <= 15 * MS, "{}", response.max());
    let p50 = response.percentile(50.0).expect("commits");
    assert!((5e6..=10e6).contains(&p50), "{p50}");
}

#[test]
fn a_log_that_rewrites_its_last_page_writes_each_page_once_per_round() {
    // PostgreSQL's WAL as learned: 24 KiB commits, each starting 8 KiB before the last one
    // ended (it rewrites its partly filled page). A round writes from its first commit's
    // offset to its last commit's end.
    let extra = serde_json::json!({"sizes": [[24 * KIB, 1]], "skip": [-8192, -8192]});
    let mut ran = log_of(extra, 1000.0, group(), 2_500_000, 1);
    let writes: Vec<(u64, u64)> = ran
        .requests
        .iter()
        .filter(|r| r.0 == Op::Write)
        .map(|r| (r.1, r.2 as u64))
        .collect();
    let commits = ran.stats.op(OpKind::Write).ops;
    assert!(
        writes.len() < 250 && commits > 950,
        "{} {commits}",
        writes.len()
    );
    let mut joined = 0;
    for w in writes.windows(2) {
        if w[1].0 < w[0].0 {
            continue; // wrapped round the region
        }
        // The next round starts 8 KiB before the last one ended...
        assert_eq!(w[1].0 + 8 * KIB, w[0].0 + w[0].1, "{w:?}");
        // ...and covers its commits: 24 KiB for the first, 16 KiB more for each other.
        assert_eq!((w[1].1 - 8 * KIB) % (16 * KIB), 0, "{w:?}");
        joined += (w[1].1 > 24 * KIB) as u32;
    }
    assert!(joined > 150, "{joined}");
    assert_eq!(ran.stats.op(OpKind::Write).bytes, commits * 24 * KIB);
}

#[test]
fn poisson_commits_give_the_round_rate_tilemark_learn_inverts() {
    // `tilemark learn` turns a group-commit log's traced writes (rounds) into the Poisson
    // commit rate whose rounds come as often (learn/commits.py `round_rate`): a round and the
    // wait after it take S + E[exp(-rate S)] / rate. 500 commits a second, a write and a
    // flush of 1 ms each (S = 2 ms): 1 / (2 ms + exp(-1) / 500) = 365.6 rounds a second.
    let extra = serde_json::json!({"arrival": {"kind": "open", "dist": "poisson",
        "rate_iops": 500.0}});
    let mut ran = log_of(extra, 500.0, group(), MS, 20);
    let rounds = ran.requests.iter().filter(|r| r.0 == Op::Write).count() as f64 / 20.0;
    let s: f64 = 2e-3;
    let expected = 1.0 / (s + (-500.0 * s).exp() / 500.0);
    assert!(
        (rounds / expected - 1.0).abs() < 0.03,
        "{rounds} rounds a second, {expected} expected"
    );
    let commits = ran.stats.op(OpKind::Write).ops as f64 / 20.0;
    assert!(
        (commits / 500.0 - 1.0).abs() < 0.03,
        "{commits} commits a second"
    );
}

#[test]
fn a_log_without_group_commit_falls_behind_where_the_group_keeps_up() {
    // The same log, each commit written and flushed on its own at QD1: 5 ms each, so 200 a
    // second, and the commits due behind them wait longer and longer.
    let sync = serde_json::json!({"kind": "fsync", "every": 1, "data": true});
    let mut ran = log(1000.0, sync, 2_500_000, 1);
    let writes = ran.stats.op(OpKind::Write).ops;
    assert!((195..=205).contains(&writes), "{writes}");
    let response = ran.response();
    assert!(response.max() > 500 * MS, "{}", response.max());
}

#[test]
fn commits_sparser_than_a_round_each_get_their_own() {
    // 100 commits a second, 1 ms per request: each round is over before the next commit.
    let mut ran = log(100.0, group(), MS, 1);
    let commits = ran.stats.op(OpKind::Write).ops;
    let writes = ran.requests.iter().filter(|r| r.0 == Op::Write).count() as u64;
    assert_eq!(commits, 100);
    assert_eq!(writes, commits);
    assert!(ran
        .requests
        .iter()
        .all(|r| r.0 != Op::Write || r.2 == 8 * KIB as u32));
    let response = ran.response();
    // Its own write and flush: 2 ms from its intended time, every one.
    assert_eq!(response.max(), 2 * MS);
    assert!(ran.timers_left <= 1, "{}", ran.timers_left);
}

#[test]
fn a_log_stream_keeps_one_timer_however_many_syncs_wake_it() {
    // Each write's completion wakes the stream to issue its sync before its next issue time:
    // that wake must not leave a second timer for the issue time each time (a 1000-write log
    // had 400 of them after a second, each running the stream's timer code).
    for sync in [
        serde_json::json!({"kind": "fsync", "every": 1, "data": true}),
        group(),
    ] {
        let ran = log(200.0, sync.clone(), MS, 2);
        assert!(ran.timers_left <= 1, "{sync}: {}", ran.timers_left);
        let flushes = ran.requests.iter().filter(|r| r.0 == Op::Fdatasync).count();
        assert!((399..=400).contains(&flushes), "{sync}: {flushes}");
    }
}

#[test]
fn group_commit_needs_an_appending_open_loop_log() {
    for (extra, why) in [
        (serde_json::json!({"every": 2}), "every = 1"),
        (serde_json::json!({}), "sequential writes"),
    ] {
        let mut sync = group();
        for (k, v) in extra.as_object().unwrap() {
            sync[k] = v.clone();
        }
        let stream = serde_json::json!({"name": "log", "regions": [{"target": 0,
            "length": 1048576}], "read_pct": 0, "sizes": [[4096, 1]], "align": 4096, "qd": 1,
            "pattern": {"kind": if why == "sequential writes" { "random" } else { "sequential" }},
            "arrival": {"kind": "open", "dist": "constant", "rate_iops": 10}, "seed": 1,
            "sync": sync});
        let plan = serde_json::json!({"plan_version": crate::plan::PLAN_VERSION,
            "backend": "null", "threads": 1, "interval_ms": 1000,
            "targets": [{"path": "/x", "length": 1048576}], "streams": [stream]});
        let err = crate::plan::Plan::from_json(&plan.to_string())
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("group commit needs") && err.contains(why),
            "{err}"
        );
    }
}
