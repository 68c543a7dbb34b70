//! Streams that wait for others to end (plan.rs `after`, fio's stonewall) and streams stopped
//! from outside while the run goes on, on the scripted backend and a manual clock: a gated
//! stream's first IO is issued at the very time the last IO of what it waited for completed.

use std::sync::mpsc::channel;
use std::sync::Arc;

use super::*;
use crate::backend::script::{Script, ScriptBackend};
use crate::backend::Op;
use crate::plan::{Plan, StreamSpec};
use crate::stop::{Span, StopSignal};
use crate::stream::TargetFiles;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;
pub(super) const FILES: [TargetFiles; 1] = [TargetFiles {
    raw_fd: -1,
    is_block: false,
    offset: 0,
    file: 0,
    file_dsync: 0,
    file_buffered: 0,
    verify: None,
}];

/// Plan streams from `extra` key sets over a 4 KiB random reader at QD1 (this plan version).
pub(super) fn specs(extra: &[serde_json::Value]) -> Vec<StreamSpec> {
    let streams: Vec<serde_json::Value> = extra
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut s = serde_json::json!({"name": format!("s{i}"),
                "regions": [{"target": 0, "length": 1048576}], "read_pct": 100,
                "sizes": [[4096, 1]], "pattern": {"kind": "random"}, "align": 4096, "qd": 1,
                "arrival": {"kind": "closed"}, "seed": 7});
            for (k, v) in e.as_object().expect("an object") {
                s[k] = v.clone();
            }
            s
        })
        .collect();
    let plan = serde_json::json!({"plan_version": crate::plan::PLAN_VERSION, "backend": "null", "threads": 1,
        "interval_ms": 1000, "targets": [{"path": "/x", "length": 1048576}],
        "streams": streams});
    Plan::from_json(&plan.to_string()).expect("valid").streams
}

pub(super) struct Ran {
    /// (op, submission time) of every request, in order.
    pub requests: Vec<(Op, u64)>,
    pub spans: Vec<Span>,
    pub reads: Vec<u64>,
}

/// Run `specs` on one thread over `script` (every IO takes `script.latency_ns`).
pub(super) fn run(specs: &[StreamSpec], script: Script, end_ns: Option<u64>) -> Ran {
    let mut flows = crate::flow::Groups::default();
    let streams = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut st = StreamState::new(i, s, &FILES);
            st.pacing = flows.pacing_for(s);
            st
        })
        .collect();
    let mut clock = RunClock::manual(0, end_ns, 1000 * MS);
    clock.stop = Arc::new(StopSignal::for_streams(specs.len()));
    let (backend, log) = ScriptBackend::new(script);
    let (tx, rx) = channel();
    Worker::new(0, streams, Box::new(backend))
        .run(clock.clone(), tx)
        .expect("run succeeds");
    let mut totals = Totals::new(vec![StreamStats::new(false); specs.len()]);
    rx.try_iter().for_each(|m| totals.add(&m));
    let log = log.lock().unwrap();
    Ran {
        requests: log
            .requests
            .iter()
            .zip(&log.times)
            .map(|(r, &t)| (r.0, t))
            .collect(),
        spans: clock.stop.spans(),
        reads: totals.streams().iter().map(|s| s.ops[0].ops).collect(),
    }
}

pub(super) fn latency(ns: u64) -> Script {
    Script {
        latency_ns: ns,
        ..Default::default()
    }
}

#[test]
fn a_gated_stream_starts_when_the_last_io_of_the_streams_it_waits_for_completes() {
    // A sequential fill of 64 writes at QD4 (each 10 us), then reads at QD1 gated on it.
    let specs = specs(&[
        serde_json::json!({"read_pct": 0, "pattern": {"kind": "sequential"}, "random_pct": 0,
            "qd": 4, "io_limit": 64 * 4096}),
        serde_json::json!({"after": [0], "io_limit": 20 * 4096}),
    ]);
    let ran = run(&specs, latency(10 * US), None);
    let writes: Vec<u64> = ran
        .requests
        .iter()
        .filter(|r| r.0 == Op::Write)
        .map(|r| r.1)
        .collect();
    let reads: Vec<u64> = ran
        .requests
        .iter()
        .filter(|r| r.0 == Op::Read)
        .map(|r| r.1)
        .collect();
    assert_eq!((writes.len(), reads.len()), (64, 20));
    let last_write_done = writes.last().unwrap() + 10 * US;
    assert_eq!(ran.spans[0].ended_ns, Some(last_write_done));
    assert_eq!(
        reads[0], last_write_done,
        "the first read goes out when the fill's last write completed"
    );
    assert_eq!(ran.spans[1].started_ns, Some(last_write_done));
    assert_eq!(ran.spans[1].ended_ns, Some(reads[19] + 10 * US));
    assert_eq!(ran.reads, [0, 20]);
}

#[test]
fn a_gated_streams_phase_and_rate_count_from_its_gate() {
    // s0 runs until 3 ms; s1 (open loop, 1000 IOPS in step) waits for it, starts 2 ms later
    // and stops 12 ms after the gate: IOs due at gate + 2, 3, ..., 11 ms.
    let specs = specs(&[
        serde_json::json!({"stop_ms": 3}),
        serde_json::json!({"after": [0], "start_ms": 2, "stop_ms": 12, "qd": 8,
            "arrival": {"kind": "open", "rate_iops": 1000, "dist": "constant", "in_step": true}}),
    ]);
    let ran = run(&specs, latency(300 * US), None);
    let gate = ran.spans[0].ended_ns.expect("s0 ended");
    assert!(
        (3 * MS..3 * MS + 300 * US).contains(&gate),
        "s0 ended with its last IO after 3 ms: {gate}"
    );
    assert_eq!(ran.spans[1].started_ns, Some(gate + 2 * MS));
    let s1: Vec<u64> = ran
        .requests
        .iter()
        .skip_while(|r| r.1 < gate)
        .map(|r| r.1)
        .collect();
    let due: Vec<u64> = (2..12).map(|k| gate + k * MS).collect();
    assert_eq!(s1, due);
    assert_eq!(ran.reads[1], 10);
}

#[test]
fn a_stop_from_outside_ends_only_the_named_streams_and_opens_their_gates() {
    // Three endless readers in a 50 ms run; s1 is stopped at 20 ms; s3 waits for s1.
    let specs = specs(&[
        serde_json::json!({}),
        serde_json::json!({}),
        serde_json::json!({}),
        serde_json::json!({"after": [1]}),
    ]);
    let script = Script {
        latency_ns: 100 * US,
        stop_streams_at: Some((20 * MS, vec![1])),
        ..Default::default()
    };
    let ran = run(&specs, script, Some(50 * MS));
    // Every IO takes 100 us at QD1: 500 in 50 ms; s1 issued those it began before 20 ms.
    assert_eq!(ran.reads[0], 500);
    assert_eq!(ran.reads[2], 500);
    assert_eq!(ran.reads[1], 200);
    assert_eq!(ran.spans[1].ended_ns, Some(20 * MS));
    assert_eq!(ran.spans[3].started_ns, Some(20 * MS));
    assert_eq!(ran.reads[3], 300, "s3 ran from 20 ms to the end");
    assert_eq!(
        ran.spans[0].ended_ns,
        Some(50 * MS),
        "the others ran to the end"
    );
}

#[test]
fn a_stream_stopped_while_waiting_never_starts_and_the_run_ends_without_it() {
    let specs = specs(&[
        serde_json::json!({"io_limit": 100 * 4096}),
        serde_json::json!({"after": [0], "io_limit": 4096}),
    ]);
    let script = Script {
        latency_ns: 100 * US,
        stop_streams_at: Some((MS, vec![1])),
        ..Default::default()
    };
    let ran = run(&specs, script, None);
    assert_eq!(ran.reads, [100, 0]);
    assert_eq!(ran.spans[1].started_ns, None);
    assert!(ran.spans[1].ended_ns.is_some());
}
