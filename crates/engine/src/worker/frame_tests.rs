//! Interval frames (stats/frame.rs) of 10,000 open-loop streams run by two workers over the
//! scripted backend on a manual clock: every stream's rows and counts exact, and the group
//! aggregates the exact merge of their members (issue 25). No timing: the clock is simulated.

use std::collections::BTreeMap;
use std::sync::mpsc::channel;

use super::*;
use crate::backend::script::{Script, ScriptBackend};
use crate::plan::{Plan, StreamSpec};
use crate::stats::frame::Frame;
use crate::stream::TargetFiles;

const MS: u64 = 1_000_000;
const STREAMS: usize = 10_000;
const GROUPS: usize = 40;
const LATENCY_NS: u64 = 30_000;

const TARGET: [TargetFiles; 1] = [TargetFiles {
    offset: 0,
    file: 0,
    file_dsync: 0,
    file_buffered: 0,
    raw_fd: -1,
    is_block: false,
    verify: None,
}];

/// 10,000 streams at 5 IOPS each (constant gaps, each starting at its own random point of the
/// first gap), 4 KiB random reads over 64 MiB.
fn plan() -> Plan {
    let streams: Vec<serde_json::Value> = (0..STREAMS)
        .map(|i| {
            serde_json::json!({"name": format!("s{}@{}", i % GROUPS, i / GROUPS),
            "regions": [{"target": 0, "length": 64 << 20}], "read_pct": 100,
            "sizes": [[4096, 1]], "pattern": {"kind": "random"}, "align": 4096, "qd": 4,
            "arrival": {"kind": "open", "rate_iops": 5.0, "dist": "constant"}, "seed": i + 1})
        })
        .collect();
    let plan = serde_json::json!({"plan_version": 3, "backend": "null", "threads": 2,
        "interval_ms": 1000, "targets": [{"path": "/x", "length": 64 << 20}],
        "streams": streams});
    Plan::from_json(&plan.to_string()).expect("valid plan")
}

/// Run plan streams `indices` on one worker for 2 s of simulated time.
fn run_worker(id: usize, specs: &[StreamSpec], indices: &[usize]) -> Vec<IntervalMsg> {
    let streams = indices
        .iter()
        .map(|&i| StreamState::new(i, &specs[i], &TARGET))
        .collect();
    let (backend, _) = ScriptBackend::new(Script {
        latency_ns: LATENCY_NS,
        ..Script::default()
    });
    let clock = RunClock::manual(0, Some(2000 * MS), 1000 * MS);
    let (tx, rx) = channel();
    Worker::new(id, streams, Box::new(backend))
        .run(clock, tx)
        .expect("run succeeds");
    rx.try_iter().collect()
}

/// Frames as the engine builds them, simulated once for the tests that read them (a debug
/// build takes seconds for the 10,000 streams).
fn frames() -> &'static (Vec<Frame>, Vec<String>) {
    static FRAMES: std::sync::OnceLock<(Vec<Frame>, Vec<String>)> = std::sync::OnceLock::new();
    FRAMES.get_or_init(simulate)
}

/// Both threads' messages of an interval, in plan order.
fn simulate() -> (Vec<Frame>, Vec<String>) {
    let plan = plan();
    let names: Vec<String> = plan.streams.iter().map(|s| s.name.clone()).collect();
    let even: Vec<usize> = (0..STREAMS).step_by(2).collect();
    let odd: Vec<usize> = (1..STREAMS).step_by(2).collect();
    type Parts = (u64, u64, Vec<(usize, Box<StreamStats>)>, Histogram);
    let mut by_interval: BTreeMap<u64, Parts> = BTreeMap::new();
    for msg in run_worker(0, &plan.streams, &even)
        .into_iter()
        .chain(run_worker(1, &plan.streams, &odd))
    {
        let e = by_interval.entry(msg.interval).or_insert((
            msg.start_ns,
            msg.end_ns,
            Vec::new(),
            Histogram::new(),
        ));
        e.2.extend(msg.streams);
        e.3.merge(&msg.lateness);
    }
    let group_of: Vec<u32> = (0..STREAMS).map(|i| (i % GROUPS) as u32).collect();
    let frames = by_interval
        .into_iter()
        .map(|(k, (start, end, mut streams, lateness))| {
            streams.sort_unstable_by_key(|(i, _)| *i);
            let mut frame = Frame::build(
                k,
                "measure",
                (start, end),
                &streams,
                &names,
                (&group_of, GROUPS),
            );
            frame.lateness = lateness;
            frame
        })
        .collect();
    (frames, names)
}

#[test]
fn every_stream_has_its_rows_and_exact_counts_in_every_frame() {
    let (frames, names) = frames();
    assert_eq!(frames.len(), 2, "two 1 s intervals");
    let mut per_stream = vec![0i64; STREAMS];
    for f in frames {
        let r = &f.rows;
        // One read row per stream: each stream issued IOs in each interval.
        assert_eq!(r.len(), STREAMS);
        for row in 0..r.len() {
            let i = r.stream[row] as usize;
            assert_eq!(i, row, "rows in plan order");
            assert_eq!(r.stream_name.get(row), Some(names[i].as_str()));
            assert_eq!(r.op.get(row), Some("read"));
            assert_eq!(r.bytes[row], r.ops[row] * 4096);
            assert_eq!(r.errors[row], 0);
            assert_eq!(r.errors_json.get(row), Some("{}"));
            let hist: serde_json::Value =
                serde_json::from_str(r.service_hist.get(row).expect("a histogram")).unwrap();
            assert_eq!(hist["n"].as_i64(), Some(r.ops[row]));
            // Every IO took the scripted latency: one bucket, mean and max exact.
            assert_eq!(hist["b"].as_array().unwrap().len(), 1);
            assert_eq!(r.service[0].get(row), Some(LATENCY_NS as f64 / 1e3));
            assert_eq!(r.service[4].get(row), Some(LATENCY_NS as f64 / 1e3));
            assert!(
                r.response_hist.get(row).is_some(),
                "open loop keeps response"
            );
            per_stream[i] += r.ops[row];
        }
    }
    // 5 IOPS for 2 s: every stream issued exactly its 10 IOs, however its first was placed.
    assert!(
        per_stream.iter().all(|&n| n == 10),
        "{:?}",
        &per_stream[..8]
    );
}

#[test]
fn group_aggregates_are_the_exact_merge_of_their_members() {
    let (frames, _) = frames();
    let mut run_total = 0;
    let mut issued = 0;
    for f in frames {
        issued += f.lateness.count();
        assert_eq!(f.groups.len(), GROUPS);
        let mut ops = vec![0u64; GROUPS];
        let mut lag = vec![0u64; GROUPS];
        for row in 0..f.rows.len() {
            let g = f.rows.stream[row] as usize % GROUPS;
            ops[g] += f.rows.ops[row] as u64;
            lag[g] = lag[g].max(f.rows.lag_max_ns[row] as u64);
        }
        for (g, stats) in f.groups.iter().enumerate() {
            assert_eq!(stats.streams, (STREAMS / GROUPS) as u64);
            let read = &stats.ops[0];
            assert_eq!(read.ops, ops[g]);
            assert_eq!(read.bytes, ops[g] * 4096);
            assert_eq!(read.service.count(), ops[g], "service histograms merged");
            assert_eq!(
                stats.latency[0].count(),
                ops[g],
                "response histograms merged"
            );
            assert_eq!(
                read.service.buckets().map(|(_, c)| c).sum::<u64>(),
                ops[g],
                "every bucket count merged"
            );
            assert!(stats.open_loop);
            assert_eq!(stats.lag_max_ns, lag[g]);
        }
        let json: serde_json::Value = serde_json::from_str(&f.groups_json()).unwrap();
        let groups = json["streams"].as_array().unwrap();
        assert_eq!(groups.len(), GROUPS);
        let total: u64 = groups
            .iter()
            .map(|g| g["read"]["ops"].as_u64().unwrap())
            .sum();
        assert_eq!(total, ops.iter().sum::<u64>());
        run_total += total;
    }
    // An IO due just before the boundary completes after it: only the run's total is exact.
    assert_eq!(run_total, (STREAMS * 10) as u64, "10 IOs per stream");
    assert_eq!(
        issued, run_total,
        "every IO's issue lateness, one histogram per thread"
    );
}

/// Further group sets (`Frame::add_sets`, issue 25): a set with a group per stream gives each
/// stream's own counters, histograms and levels (what the QoS monitor reads per stream), a
/// coarser one their merge, and a stream without a group in a set is in none of its groups.
#[test]
fn further_group_sets_aggregate_each_their_own_partition() {
    let plan = plan();
    let names: Vec<String> = plan.streams.iter().map(|s| s.name.clone()).collect();
    let picked: Vec<usize> = (0..6).collect();
    let msgs = run_worker(0, &plan.streams, &picked);
    let msg = &msgs[0];
    let mut streams = msg.streams.clone();
    streams.sort_unstable_by_key(|(i, _)| *i);
    let mut frame = Frame::build(
        msg.interval,
        "measure",
        (msg.start_ns, msg.end_ns),
        &streams,
        &names,
        (&[0; 6], 1),
    );
    let identity: Vec<u32> = (0..6).collect();
    let pairs = vec![0, 0, 1, 1, 1, u32::MAX];
    frame.add_sets(&streams, &[(identity, 6), (pairs, 2)]);
    assert_eq!(frame.sets.len(), 2);
    for (i, s) in &streams {
        let g = &frame.sets[0][*i];
        assert_eq!(g.streams, 1);
        assert_eq!(g.ops[0].ops, s.ops[0].ops);
        assert_eq!(g.ops[0].bytes, s.ops[0].bytes);
        assert_eq!(g.ops[0].service.count(), s.ops[0].service.count());
        let response = s.ops[0].response.as_ref().expect("open loop");
        assert_eq!(g.latency[0].count(), response.count());
        assert_eq!(g.latency[0].sum(), response.sum());
        assert_eq!(
            (g.lag_max_ns, g.behind_ios, g.inflight, g.oldest_inflight_ns),
            (s.lag_max_ns, s.behind_ios, s.inflight, s.oldest_inflight_ns)
        );
    }
    let ops = |range: std::ops::Range<usize>| -> u64 {
        streams[range].iter().map(|(_, s)| s.ops[0].ops).sum()
    };
    assert_eq!(frame.sets[1][0].streams, 2);
    assert_eq!(frame.sets[1][0].ops[0].ops, ops(0..2));
    assert_eq!(frame.sets[1][1].streams, 3, "stream 5 is in no group");
    assert_eq!(frame.sets[1][1].ops[0].ops, ops(2..5));
    let json: Vec<serde_json::Value> = frame
        .sets_json()
        .iter()
        .map(|text| serde_json::from_str(text).unwrap())
        .collect();
    assert_eq!(json[0]["streams"].as_array().unwrap().len(), 6);
    assert_eq!(json[1]["streams"][1]["streams"], 3);
    assert_eq!(
        json[0]["streams"][3]["read"]["ops"],
        streams[3].1.ops[0].ops
    );
}
