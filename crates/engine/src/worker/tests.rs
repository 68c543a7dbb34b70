//! `Worker` on its own, over the null backend and the scripted backend with a manual clock:
//! every run is a deterministic simulation, so the tests count IOs, never time them.

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use super::limits::STOP_DRAIN_NS;
use super::*;
use crate::backend::null::NullBackend;
use crate::backend::script::{Log, Script, ScriptBackend};
use crate::plan::{Plan, StreamSpec};
use crate::stats::OpKind;
use crate::stop::StopReason;
use crate::stream::TargetFiles;

const MS: u64 = 1_000_000;
/// Target 0 is file 0 from offset 0; target 1 is file 1 from offset 4096.
const TARGET_FILES: [TargetFiles; 2] = [
    TargetFiles {
        raw_fd: -1,
        is_block: false,
        offset: 0,
        file: 0,
        file_dsync: 0,
        file_buffered: 0,
        verify: None,
    },
    TargetFiles {
        raw_fd: -1,
        is_block: false,
        offset: 4096,
        file: 1,
        file_dsync: 1,
        file_buffered: 1,
        verify: None,
    },
];

/// A 1 MiB random 4 KiB read stream, closed loop at QD1, with `extra` keys overriding.
fn spec(extra: serde_json::Value) -> StreamSpec {
    let mut stream = serde_json::json!({"name": "s", "regions": [{"target": 0, "length": 1048576}],
        "read_pct": 100, "sizes": [[4096, 1]], "pattern": {"kind": "random"}, "align": 4096,
        "qd": 1, "arrival": {"kind": "closed"}, "seed": 7});
    for (k, v) in extra.as_object().expect("an object") {
        stream[k] = v.clone();
    }
    let plan = serde_json::json!({"plan_version": 4, "backend": "null", "threads": 1,
        "interval_ms": 1000, "targets": [{"path": "/x", "length": 1048576},
            {"path": "/y", "length": 4194304}],
        "streams": [stream]});
    Plan::from_json(&plan.to_string())
        .expect("valid test plan")
        .streams
        .remove(0)
}

fn streams(specs: &[StreamSpec]) -> Vec<StreamState> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| StreamState::new(i, s, &TARGET_FILES))
        .collect()
}

struct Outcome {
    result: ThreadResult,
    intervals: Vec<IntervalMsg>,
    /// Folded from the intervals, as the engine's aggregator folds them.
    totals: Totals,
}

impl Outcome {
    fn total(&self, stream: usize) -> &StreamStats {
        &self.totals.streams()[stream]
    }

    /// Read ops of `stream` in every interval, in order.
    fn read_ops(&self, stream: usize) -> Vec<u64> {
        self.intervals
            .iter()
            .map(|m| m.streams.iter().find(|(i, _)| *i == stream).unwrap().1.ops[0].ops)
            .collect()
    }
}

fn run(streams: Vec<StreamState>, backend: Box<dyn Backend>, clock: &RunClock) -> Outcome {
    run_limited(streams, backend, clock, Limits::default())
}

fn run_limited(
    streams: Vec<StreamState>,
    backend: Box<dyn Backend>,
    clock: &RunClock,
    limits: Limits,
) -> Outcome {
    let (tx, rx) = channel();
    let mut totals = Totals::new(streams.iter().map(StreamState::new_stats).collect());
    let result = Worker::new(0, streams, backend)
        .with_limits(limits)
        .run(clock.clone(), tx)
        .expect("run succeeds");
    let intervals: Vec<IntervalMsg> = rx.try_iter().collect();
    intervals.iter().for_each(|m| totals.add(m));
    Outcome {
        result,
        intervals,
        totals,
    }
}

fn scripted(script: Script) -> (Box<dyn Backend>, Arc<Mutex<Log>>) {
    let (b, log) = ScriptBackend::new(script);
    (Box::new(b), log)
}

/// Every n-th data IO fails with EIO; the others take 10 us.
fn eio_every(n: u64) -> Script {
    Script {
        latency_ns: 10_000,
        fail_every: n,
        fail_errno: libc::EIO,
        ..Default::default()
    }
}

fn max_errors(n: u64) -> Limits {
    Limits {
        max_errors: Some(n),
        io_timeout_ns: None,
    }
}

fn latency(ns: u64) -> Script {
    Script {
        latency_ns: ns,
        ..Default::default()
    }
}

#[test]
fn closed_loop_over_null_issues_exactly_each_streams_io_limit() {
    let specs = [
        spec(serde_json::json!({"qd": 4, "io_limit": 1000 * 4096})),
        spec(serde_json::json!({"qd": 1, "sizes": [[8192, 1]], "io_limit": 500 * 8192})),
    ];
    // Time stands still: the run ends because both limits are used up.
    let clock = RunClock::manual(0, None, 1000 * MS);
    let out = run(streams(&specs), Box::new(NullBackend::default()), &clock);
    assert_eq!(out.total(0).ops[0].ops, 1000);
    assert_eq!(out.total(0).ops[0].bytes, 1000 * 4096);
    assert_eq!(out.total(1).ops[0].ops, 500);
    assert_eq!(out.total(1).ops[0].bytes, 500 * 8192);
    assert_eq!(out.total(0).ops[0].service.count(), 1000);
    assert_eq!(out.result.stop_reason, None);
    assert!(out.result.hung.is_empty());
    assert_eq!(out.intervals.len(), 1);
    assert!(out.intervals[0].last);
}

#[test]
fn open_loop_issues_every_scheduled_io_and_warmup_is_not_totalled() {
    let open = serde_json::json!({"arrival": {"kind": "open", "rate_iops": 1000,
        "dist": "constant", "in_step": true}, "qd": 8});
    let clock = RunClock::manual(1000 * MS, Some(3000 * MS), 1000 * MS);
    let out = run(
        streams(&[spec(open)]),
        Box::new(NullBackend::default()),
        &clock,
    );
    // IOs are due at 0, 1, 2, ... ms; the run ends at 3 s.
    assert_eq!(out.read_ops(0), vec![1000, 1000, 1000]);
    let phases: Vec<Phase> = out.intervals.iter().map(|m| m.phase).collect();
    assert_eq!(phases, [Phase::Warmup, Phase::Measure, Phase::Measure]);
    let total = out.total(0);
    assert_eq!(total.ops[0].ops, 2000, "warm-up excluded");
    let response = total.ops[0]
        .response
        .as_ref()
        .expect("open loop keeps response");
    assert_eq!(response.count(), 2000);
    assert_eq!(total.lag_max_ns, 0, "issued on time");
    assert_eq!(total.ios_issued_late, 0);
}

#[test]
fn poisson_arrivals_average_the_requested_rate() {
    let open = serde_json::json!({"arrival": {"kind": "open", "rate_iops": 2000,
        "dist": "poisson"}, "qd": 64, "seed": 3});
    let clock = RunClock::manual(0, Some(10_000 * MS), 1000 * MS);
    let out = run(
        streams(&[spec(open)]),
        Box::new(NullBackend::default()),
        &clock,
    );
    let ops = out.total(0).ops[0].ops as f64;
    // 20,000 expected; a Poisson count's standard deviation is 141 (0.7%).
    assert!((ops / 20_000.0 - 1.0).abs() < 0.03, "ops {ops}");
}

#[test]
fn closed_loop_keeps_its_depth_and_makes_one_backend_call_per_batch() {
    let (backend, log) = scripted(latency(100_000));
    let clock = RunClock::manual(0, Some(1000 * MS), 1000 * MS);
    let out = run(
        streams(&[spec(serde_json::json!({"qd": 4}))]),
        backend,
        &clock,
    );
    // Batches of 4 complete every 100 us: at 0.1, 0.2, ... 1000 ms.
    let read = &out.total(0).ops[0];
    assert_eq!(read.ops, 40_000);
    assert_eq!((read.service.min(), read.service.max()), (100_000, 100_000));
    let log = log.lock().unwrap();
    assert_eq!(log.reads, 40_000);
    // Per batch: submit (and reap what is ready) without waiting, record, then wait.
    assert_eq!(log.waits, 10_000);
    assert_eq!(log.submits, 20_000);
    assert_eq!(log.outstanding, 0, "drained");
}

#[test]
fn ios_count_in_the_interval_where_they_complete() {
    let (backend, _) = scripted(latency(600 * MS));
    let clock = RunClock::manual(0, Some(3000 * MS), 1000 * MS);
    let out = run(streams(&[spec(serde_json::json!({}))]), backend, &clock);
    // Completions at 0.6, 1.2, 1.8, 2.4 and 3.0 s; the last interval stays open to the end.
    assert_eq!(out.read_ops(0), vec![1, 2, 2]);
    assert_eq!(out.intervals.last().unwrap().end_ns, 3000 * MS);
}

#[test]
fn an_open_loop_stream_that_falls_behind_reports_lag_and_response_time() {
    // 1,000 IOs/s requested, one at a time, each taking 2.5 ms: 400 IOs/s are possible.
    let open = serde_json::json!({"arrival": {"kind": "open", "rate_iops": 1000,
        "dist": "constant", "in_step": true}, "qd": 1});
    let (backend, _) = scripted(latency(2_500_000));
    let clock = RunClock::manual(0, Some(1000 * MS), 1000 * MS);
    let out = run(streams(&[spec(open)]), backend, &clock);
    let total = out.total(0);
    let read = &total.ops[0];
    assert_eq!(read.ops, 400);
    assert_eq!(
        (read.service.min(), read.service.max()),
        (2_500_000, 2_500_000)
    );
    // IO i is due at i ms and issued at 2.5 i ms: it waited 1.5 i ms for the device.
    let response = read.response.as_ref().unwrap();
    assert_eq!(response.max(), 1_500_000 * 399 + 2_500_000);
    assert_eq!(total.lag_max_ns, 1_500_000 * 399);
    assert_eq!(
        total.ios_issued_late, 399,
        "all but the first later than 1 ms"
    );
    // At the end 1,000 were due and 400 issued.
    let last = &out.intervals.last().unwrap().streams[0].1;
    assert_eq!(last.behind_ios, 601);
}

#[test]
fn stop_ends_the_run_drains_in_flight_ios_and_marks_it_stopped() {
    let (backend, log) = scripted(latency(100_000));
    let clock = RunClock::manual(0, None, 10 * MS);
    let stop = clock.stop.clone();
    let (tx, rx) = channel();
    let specs = [spec(serde_json::json!({"qd": 8}))];
    let worker = Worker::new(0, streams(&specs), backend);
    let handle = std::thread::spawn({
        let clock = clock.clone();
        move || worker.run(clock, tx)
    });
    // Runs until told otherwise: stop after the first interval is reported.
    let first = rx.recv().expect("an interval");
    assert!(!first.last);
    stop.stop(StopReason::Requested);
    let result = handle.join().unwrap().expect("run succeeds");
    assert_eq!(result.stop_reason, Some(StopReason::Requested));
    assert!(result.hung.is_empty());
    let rest: Vec<IntervalMsg> = rx.try_iter().collect();
    assert!(
        rest.last().unwrap().last,
        "the partial interval is reported"
    );
    let log = log.lock().unwrap();
    assert_eq!(log.outstanding, 0, "every in-flight IO was reaped");
    let reported: u64 = std::iter::once(&first)
        .chain(&rest)
        .map(|m| m.streams[0].1.ops[0].ops)
        .sum();
    assert_eq!(reported, log.reads, "every IO issued is accounted for");
}

#[test]
fn failed_ios_count_by_errno_and_not_as_ops() {
    let (backend, _) = scripted(eio_every(10));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let specs = [spec(serde_json::json!({"qd": 2, "io_limit": 1000 * 4096}))];
    let out = run(streams(&specs), backend, &clock);
    let read = &out.total(0).ops[0];
    assert_eq!(read.ops, 900);
    assert_eq!(read.bytes, 900 * 4096);
    assert_eq!(read.errors, vec![(libc::EIO, 100)]);
    assert_eq!(read.service.count(), 900);
}

#[test]
fn fsync_follows_every_nth_write() {
    let (backend, log) = scripted(latency(20_000));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let specs = [spec(serde_json::json!({"read_pct": 0, "qd": 4,
        "sync": {"kind": "fsync", "every": 4}, "io_limit": 400 * 4096}))];
    let out = run(streams(&specs), backend, &clock);
    let total = out.total(0);
    assert_eq!(total.ops[OpKind::Write as usize].ops, 400);
    assert_eq!(total.ops[OpKind::Sync as usize].ops, 100);
    assert_eq!(log.lock().unwrap().fsyncs, 100);
}

#[test]
fn fsync_with_data_issues_fdatasyncs() {
    let (backend, log) = scripted(latency(20_000));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let specs = [spec(serde_json::json!({"read_pct": 0, "qd": 2,
        "sync": {"kind": "fsync", "every": 2, "data": true}, "io_limit": 100 * 4096}))];
    let out = run(streams(&specs), backend, &clock);
    assert_eq!(out.total(0).ops[OpKind::Sync as usize].ops, 50);
    let log = log.lock().unwrap();
    assert_eq!((log.fsyncs, log.fdatasyncs), (50, 50));
}

#[test]
fn writeback_writes_go_uncached_through_the_buffered_file_and_reads_stay_direct() {
    let (backend, log) = scripted(latency(20_000));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let files = [TargetFiles {
        raw_fd: -1,
        is_block: false,
        offset: 0,
        file: 0,
        file_dsync: 0,
        file_buffered: 3,
        verify: None,
    }];
    let sp = spec(
        serde_json::json!({"read_pct": 50, "qd": 4, "writeback": true,
        "io_limit": 400 * 4096}),
    );
    let out = run(vec![StreamState::new(0, &sp, &files)], backend, &clock);
    let writes = out.total(0).ops[OpKind::Write as usize].ops;
    let reads = out.total(0).ops[OpKind::Read as usize].ops;
    assert_eq!(reads + writes, 400);
    assert!(
        writes > 100 && reads > 100,
        "a 50/50 mix: {reads} reads, {writes} writes"
    );
    let log = log.lock().unwrap();
    assert_eq!(log.uncached_writes, writes);
    assert_eq!(log.files.iter().filter(|&&f| f == 3).count() as u64, writes);
    assert_eq!(log.files.iter().filter(|&&f| f == 0).count() as u64, reads);
}

#[test]
fn skip_places_sequential_ios_before_or_after_the_previous_end() {
    // a log rewriting its last 8 KiB page: each 24 KiB write starts 8 KiB before the last end
    let (backend, log) = scripted(latency(10_000));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let sp = spec(serde_json::json!({"read_pct": 0, "sizes": [[24576, 1]],
        "pattern": {"kind": "sequential"}, "random_pct": 0, "skip": [-8192, -8192],
        "io_limit": 20 * 24576}));
    run(streams(&[sp]), backend, &clock);
    let offsets = log.lock().unwrap().offsets.clone();
    assert_eq!(offsets.len(), 20);
    for w in offsets.windows(2) {
        assert_eq!(w[1], w[0] + 24576 - 8192);
    }
    // a sorted sweep: 8 KiB writes, each 16 KiB to 1 MiB after the previous end
    let (backend, log) = scripted(latency(10_000));
    let sp = spec(serde_json::json!({"read_pct": 0, "sizes": [[8192, 1]],
        "pattern": {"kind": "sequential"}, "random_pct": 0, "skip": [16384, 1048576],
        "regions": [{"target": 1, "length": 4194304 - 4096}], "io_limit": 200 * 8192}));
    run(streams(&[sp]), backend, &clock);
    let offsets = log.lock().unwrap().offsets.clone();
    let gaps: Vec<i64> = offsets
        .windows(2)
        .map(|w| w[1] as i64 - (w[0] as i64 + 8192))
        .filter(|&g| g >= 0) // not the wraps at the region's end
        .collect();
    assert!(gaps.len() > 100);
    assert!(gaps
        .iter()
        .all(|&g| (16384..=1048576).contains(&g) && g % 4096 == 0));
    let small = gaps.iter().filter(|&&g| g < 131072).count();
    assert!(
        small > gaps.len() / 4 && small < gaps.len() * 3 / 4,
        "log-uniform: {small}"
    );
}

#[test]
fn a_burst_issues_its_ios_then_waits_the_transfer_delay() {
    let clock = RunClock::manual(0, Some(1000 * MS), 1000 * MS);
    let specs = [spec(
        serde_json::json!({"qd": 5, "burst": {"ios": 5, "delay_ms": 10}}),
    )];
    let out = run(streams(&specs), Box::new(NullBackend::default()), &clock);
    // Bursts of 5 at 0, 10, ... 990 ms.
    assert_eq!(out.total(0).ops[0].ops, 500);
}

#[test]
fn streams_on_one_thread_keep_their_own_statistics() {
    let specs = [
        spec(serde_json::json!({"qd": 2})),
        spec(serde_json::json!({"qd": 1, "read_pct": 0})),
        spec(
            serde_json::json!({"arrival": {"kind": "open", "rate_iops": 100,
            "dist": "constant", "in_step": true}}),
        ),
    ];
    let (backend, log) = scripted(latency(MS));
    let clock = RunClock::manual(0, Some(1000 * MS), 500 * MS);
    let out = run(streams(&specs), backend, &clock);
    assert_eq!(out.total(0).ops[0].ops, 2000);
    assert_eq!(out.total(0).ops[1].ops, 0);
    assert_eq!(out.total(1).ops[1].ops, 1000);
    assert_eq!(out.total(1).ops[0].ops, 0);
    assert_eq!(out.total(2).ops[0].ops, 100);
    assert!(out.total(2).ops[0].response.is_some());
    assert!(out.total(0).ops[0].response.is_none());
    assert_eq!(out.intervals.len(), 2);
    let log = log.lock().unwrap();
    assert_eq!(log.reads + log.writes, 2000 + 1000 + 100);
}

#[test]
fn more_errors_than_max_errors_stop_the_run() {
    let (backend, log) = scripted(eio_every(1));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let specs = [spec(serde_json::json!({}))];
    let out = run_limited(streams(&specs), backend, &clock, max_errors(10));
    assert_eq!(out.result.stop_reason, Some(StopReason::Errors));
    // One at a time: the 11th error exceeds the limit. It is counted after the IO that
    // replaces it went out (statistics are kept off the critical path), so that one is the
    // last: it fails too while the run drains.
    assert_eq!(out.total(0).ops[0].errors, vec![(libc::EIO, 12)]);
    assert_eq!(log.lock().unwrap().reads, 12);
}

#[test]
fn errors_up_to_max_errors_do_not_stop_the_run() {
    let (backend, _) = scripted(eio_every(100));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let specs = [spec(serde_json::json!({"io_limit": 1000 * 4096}))];
    let out = run_limited(streams(&specs), backend, &clock, max_errors(10));
    assert_eq!(out.result.stop_reason, None);
    assert_eq!(out.total(0).ops[0].errors, vec![(libc::EIO, 10)]);
}

#[test]
fn an_io_outstanding_longer_than_the_timeout_stops_the_run_and_is_listed() {
    // IOs take 1 ms; the sixth never completes.
    let (backend, log) = scripted(Script {
        latency_ns: MS,
        hang_from: Some(5),
        ..Default::default()
    });
    let clock = RunClock::manual(0, None, 10 * MS);
    let limits = Limits {
        max_errors: None,
        io_timeout_ns: Some(100 * MS),
    };
    let out = run_limited(
        streams(&[spec(serde_json::json!({}))]),
        backend,
        &clock,
        limits,
    );
    assert_eq!(out.result.stop_reason, Some(StopReason::Hung));
    assert_eq!(out.total(0).ops[0].ops, 5);
    let hung = &out.result.hung;
    assert_eq!(hung.len(), 1);
    let log = log.lock().unwrap();
    assert_eq!((hung[0].stream, hung[0].op), (0, "read"));
    assert_eq!((hung[0].offset, hung[0].len), (log.offsets[5], 4096));
    assert!(hung[0].age_ns > 100 * MS, "age {}", hung[0].age_ns);
    // Submitted at 5 ms: seen hung within a check period (25 ms) of the timeout, then the
    // drain waits one interval (10 ms) for the IOs in flight, not another timeout (issue 28:
    // a run stopped at twice --io-timeout).
    assert!(
        out.result.end_ns <= 5 * MS + 100 * MS + 25 * MS + 10 * MS,
        "ended at {} ms",
        out.result.end_ns / MS
    );
    assert_eq!(
        log.outstanding, 1,
        "the hung IO was given up on, not reaped"
    );
}

#[test]
fn oldest_inflight_age_grows_across_snapshots() {
    let (backend, _) = scripted(Script {
        hang_from: Some(0),
        ..Default::default()
    });
    let clock = RunClock::manual(0, Some(40 * MS), 10 * MS);
    let out = run(streams(&[spec(serde_json::json!({}))]), backend, &clock);
    let oldest: Vec<u64> = out
        .intervals
        .iter()
        .map(|m| m.streams[0].1.oldest_inflight_ns)
        .collect();
    assert_eq!(oldest[..3], [10 * MS, 20 * MS, 30 * MS]);
    // The planned end came, the IO never completed: after the drain it is listed as hung.
    assert_eq!(out.result.stop_reason, Some(StopReason::Hung));
    assert_eq!(out.result.hung.len(), 1);
    assert_eq!(*oldest.last().unwrap(), out.result.hung[0].age_ns);
}

#[test]
fn after_stop_the_drain_waits_seconds_not_minutes_for_a_silent_device() {
    let (backend, _) = scripted(Script {
        hang_from: Some(0),
        ..Default::default()
    });
    let clock = RunClock::manual(0, None, 1000 * MS);
    clock.stop.stop(StopReason::Requested);
    let specs = [spec(serde_json::json!({"qd": 3}))];
    let out = run(streams(&specs), backend, &clock);
    assert_eq!(out.result.stop_reason, Some(StopReason::Requested));
    assert_eq!(out.result.hung.len(), 0, "stopped before issuing anything");

    // Three IOs in flight on a device that never answers; the user stops at 2 s.
    let (backend, _) = scripted(Script {
        hang_from: Some(0),
        stop_at_ns: Some(2000 * MS),
        ..Default::default()
    });
    let clock = RunClock::manual(0, None, 1000 * MS);
    let out = run(streams(&specs), backend, &clock);
    assert_eq!(out.result.stop_reason, Some(StopReason::Requested));
    assert_eq!(out.result.hung.len(), 3);
    assert!(out.result.end_ns <= 2000 * MS + STOP_DRAIN_NS + MAX_WAIT_NS);
}

/// A stream's read ops in every interval, summed over op kinds read and write.
fn data_ops(out: &Outcome, stream: usize) -> Vec<u64> {
    out.intervals
        .iter()
        .map(|m| {
            let s = &m.streams.iter().find(|(i, _)| *i == stream).unwrap().1;
            s.ops[0].ops + s.ops[1].ops
        })
        .collect()
}

#[test]
fn a_stream_over_two_targets_sends_ios_to_both_and_counts_each() {
    let regions = serde_json::json!({"regions": [{"target": 0, "length": 1048576},
        {"target": 1, "length": 1048576}], "qd": 4, "read_pct": 50, "io_limit": 10_000 * 4096});
    let (backend, log) = scripted(latency(10_000));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let out = run(streams(&[spec(regions)]), backend, &clock);
    let total = out.total(0);
    assert_eq!(total.total_ops(), 10_000);
    assert_eq!(total.regions.len(), 2);
    let log = log.lock().unwrap();
    for (r, file) in [(0usize, 0u32), (1, 1)] {
        let part = &total.regions[r];
        let ops: u64 = part.ops.iter().map(|o| o.ops).sum();
        let bytes: u64 = part.ops.iter().map(|o| o.bytes).sum();
        let sent = log.files.iter().filter(|&&f| f == file).count() as u64;
        assert_eq!(ops, sent, "region {r}: counted what went to its file");
        assert_eq!(bytes, 4096 * sent);
        assert_eq!(part.ops[0].service.count(), part.ops[0].ops);
        // Uniform spread: half each, within 4 standard deviations (50 IOs).
        assert!(ops.abs_diff(5000) < 200, "region {r}: {ops} IOs");
    }
    // Reads and writes add up per op kind too.
    for k in 0..2 {
        let sum: u64 = total.regions.iter().map(|p| p.ops[k].ops).sum();
        assert_eq!(sum, total.ops[k].ops);
    }
    // Target 1 starts at offset 4096 of file 1: its IOs lie in [4096, 4096 + 1 MiB).
    for (&f, &off) in log.files.iter().zip(&log.offsets) {
        let base = if f == 1 { 4096 } else { 0 };
        assert!(
            off >= base && off + 4096 <= base + 1048576,
            "file {f} offset {off}"
        );
    }
}

#[test]
fn a_hung_io_names_the_target_it_went_to() {
    let regions = serde_json::json!({"regions": [{"target": 0, "length": 1048576},
        {"target": 1, "length": 1048576}]});
    let (backend, log) = scripted(Script {
        latency_ns: MS,
        hang_from: Some(7),
        ..Default::default()
    });
    let clock = RunClock::manual(0, Some(50 * MS), 10 * MS);
    let out = run(streams(&[spec(regions)]), backend, &clock);
    let hung = &out.result.hung;
    assert_eq!(hung.len(), 1);
    let log = log.lock().unwrap();
    assert_eq!(hung[0].target as u32, log.files[7]);
}

#[test]
fn fsyncs_of_a_stream_over_two_targets_go_to_the_target_written() {
    let regions = serde_json::json!({"regions": [{"target": 0, "length": 1048576},
        {"target": 1, "length": 1048576}], "read_pct": 0,
        "sync": {"kind": "fsync", "every": 1}, "io_limit": 200 * 4096});
    let (backend, log) = scripted(latency(10_000));
    let clock = RunClock::manual(0, None, 1000 * MS);
    let out = run(streams(&[spec(regions)]), backend, &clock);
    assert_eq!(out.total(0).ops[OpKind::Sync as usize].ops, 200);
    let log = log.lock().unwrap();
    // QD1: write, its fsync, write, ... each fsync on the file of the write before it.
    for pair in log.files.chunks(2) {
        assert_eq!(pair[0], pair[1]);
    }
    let syncs: u64 = out.total(0).regions.iter().map(|p| p.ops[2].ops).sum();
    assert_eq!(syncs, 200);
}

#[test]
fn a_closed_loop_stream_issues_only_inside_its_phase() {
    let phased = serde_json::json!({"qd": 2, "start_ms": 300, "stop_ms": 700});
    let (backend, log) = scripted(latency(MS));
    let clock = RunClock::manual(0, Some(1000 * MS), 100 * MS);
    let out = run(
        streams(&[spec(phased), spec(serde_json::json!({}))]),
        backend,
        &clock,
    );
    // Two IOs per ms from 300 ms; the last two, issued at 699 ms, complete at 700 ms and
    // count in the interval of their completion.
    let phased_ops = data_ops(&out, 0);
    assert_eq!(phased_ops, [0, 0, 0, 198, 200, 200, 200, 2, 0, 0]);
    // Its statistics are in every interval, and the other stream ran throughout.
    assert!(data_ops(&out, 1).iter().all(|&n| n >= 99));
    assert_eq!(out.total(0).total_ops(), 800);
    assert_eq!(log.lock().unwrap().outstanding, 0);
}

#[test]
fn an_open_loop_stream_schedules_only_inside_its_phase() {
    let phased = serde_json::json!({"arrival": {"kind": "open", "rate_iops": 1000,
        "dist": "constant", "in_step": true}, "qd": 8, "start_ms": 250, "stop_ms": 750});
    let clock = RunClock::manual(0, Some(1000 * MS), 250 * MS);
    let out = run(
        streams(&[spec(phased)]),
        Box::new(NullBackend::default()),
        &clock,
    );
    assert_eq!(out.read_ops(0), vec![0, 250, 250, 0]);
    let total = out.total(0);
    assert_eq!(
        total.lag_max_ns, 0,
        "the schedule starts at the phase, not at 0"
    );
    // At a boundary the IO due at that very moment is behind (as always); nothing else is
    // due before the phase, and nothing at all after it.
    let behind: Vec<u64> = out
        .intervals
        .iter()
        .map(|m| m.streams[0].1.behind_ios)
        .collect();
    assert_eq!(behind, [1, 1, 0, 0]);
}

#[test]
fn a_run_without_an_end_lasts_until_every_stream_is_done() {
    // One stream ends by its byte limit, the other by its stop time (fio's size and runtime
    // of jobs that are not time_based); nothing ends the run but them.
    let limited = serde_json::json!({"qd": 2, "io_limit": 300 * 4096});
    let stopped = serde_json::json!({"qd": 1, "start_ms": 200, "stop_ms": 500});
    let (backend, log) = scripted(latency(MS));
    let clock = RunClock::manual(0, None, 100 * MS);
    let out = run(streams(&[spec(limited), spec(stopped)]), backend, &clock);
    assert_eq!(out.total(0).total_ops(), 300);
    assert_eq!(out.total(1).total_ops(), 300); // one per ms from 200 to 500 ms
                                               // Two at a time, 1 ms each: the limited stream's last IO completes at 150 ms.
    assert_eq!(out.total(0).done_ns, 150 * MS);
    assert_eq!(
        out.total(1).done_ns,
        0,
        "a stop time is not a finished byte limit"
    );
    assert!(out.result.end_ns >= 500 * MS && out.result.end_ns < 600 * MS);
    assert_eq!(out.result.stop_reason, None);
    assert_eq!(log.lock().unwrap().outstanding, 0);
}

#[test]
fn ios_at_a_share_priority_are_also_counted_and_timed_apart() {
    // cmdprio-percentage.fio: idle, 20% at rt/0. The scripted device serves rt in 10 us and
    // the others in 100 us: the share's own statistics show only the fast ones.
    let rt = 1u16 << 13;
    let (backend, _log) = scripted(Script {
        latency_ns: 100_000,
        prio_latency: Some((rt, 10_000)),
        ..Default::default()
    });
    let clock = RunClock::manual(0, Some(1000 * MS), 1000 * MS);
    let mut sp = spec(serde_json::json!({"ioprio": {"class": "idle"},
        "ioprio_share": {"pct": 20, "class": "rt", "level": 0}}));
    sp.qd = 4;
    let out = run(streams(&[sp]), backend, &clock);
    let total = out.total(0);
    let all = total.ops[OpKind::Read as usize].ops;
    let other = &total.ioprio_other.as_ref().expect("counted apart").ops[OpKind::Read as usize];
    let share = other.ops as f64 / all as f64;
    assert!((share - 0.2).abs() < 0.03, "{share} of {all}");
    assert_eq!(
        other.service.max(),
        other.service.min(),
        "only the 10 us IOs"
    );
    assert!(other.service.max() < 11_000, "{}", other.service.max());
    assert!(total.ops[OpKind::Read as usize].service.max() >= 100_000);
    // A stream without a share keeps no such statistics.
    let (backend, _log) = scripted(latency(10_000));
    let out = run(streams(&[spec(serde_json::json!({}))]), backend, &clock);
    assert!(out.total(0).ioprio_other.is_none());
}

/// An interval message as the receiver read it, each stream's statistics as JSON.
struct Seen {
    interval: u64,
    phase: Phase,
    start_ns: u64,
    end_ns: u64,
    lateness: Histogram,
    streams: Vec<(usize, String)>,
}

/// Every interval message as text (streams in plan order), to compare two runs exactly.
fn interval_json(msgs: &[Seen]) -> Vec<String> {
    msgs.iter()
        .map(|m| {
            let mut streams = m.streams.clone();
            streams.sort();
            let lateness = serde_json::to_string(&m.lateness).unwrap();
            let (k, phase, start, end) = (m.interval, m.phase, m.start_ns, m.end_ns);
            format!("{k} {phase:?} {start} {end} {lateness} {streams:?}")
        })
        .collect()
}

/// Run 300 open-loop Poisson streams over the scripted backend for five 100 ms intervals;
/// with `give_back`, a receiver on another thread hands every interval's statistics back to
/// the worker as soon as it has read them, as the engine's aggregator does.
fn handed_over_run(give_back: bool) -> Vec<String> {
    let open = serde_json::json!({"arrival": {"kind": "open", "rate_iops": 400,
        "dist": "poisson"}, "qd": 4});
    let specs: Vec<StreamSpec> = (0..300)
        .map(|i| {
            let mut s = spec(open.clone());
            s.seed = 11 + i;
            s
        })
        .collect();
    let clock = RunClock::manual(0, Some(500 * MS), 100 * MS);
    // A latency spread over several buckets, so reused histograms hold counts to clear.
    let (backend, _) = scripted(Script {
        latency_ns: 180_000,
        ..Default::default()
    });
    let (tx, rx) = channel::<IntervalMsg>();
    let (back_tx, back_rx) = channel::<Recycled>();
    let reader = std::thread::spawn(move || {
        let mut seen: Vec<Seen> = Vec::new();
        for msg in rx {
            let streams: Vec<(usize, String)> = msg
                .streams
                .iter()
                .map(|(i, s)| {
                    let shown = crate::stats::IndexedStats {
                        stream: *i,
                        stats: s,
                        totals: false,
                        targets: &[],
                    };
                    (*i, serde_json::to_string(&shown).unwrap())
                })
                .collect();
            seen.push(Seen {
                interval: msg.interval,
                phase: msg.phase,
                start_ns: msg.start_ns,
                end_ns: msg.end_ns,
                lateness: msg.lateness,
                streams,
            });
            if give_back {
                let _ = back_tx.send(msg.streams);
            }
        }
        seen
    });
    let mut worker = Worker::new(0, streams(&specs), backend);
    if give_back {
        worker = worker.with_recycling(back_rx);
    }
    worker.run(clock, tx).expect("run succeeds");
    let seen = reader.join().unwrap();
    assert_eq!(seen.len(), 5);
    assert!(
        seen.iter().all(|m| m.streams.len() == 300),
        "every stream in every interval"
    );
    interval_json(&seen)
}

#[test]
fn statistics_handed_back_and_reused_count_exactly_as_fresh_ones() {
    let fresh = handed_over_run(false);
    let reused = handed_over_run(true);
    // Every stream did IO in the interval (Debug quotes the JSON, hence the escapes).
    assert_eq!(fresh[2].matches(r#"\"read\":{\"ops\":0,"#).count(), 0);
    for (k, (a, b)) in fresh.iter().zip(&reused).enumerate() {
        assert_eq!(a, b, "interval {k} differs");
    }
}
