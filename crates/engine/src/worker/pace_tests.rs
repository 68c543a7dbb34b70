//! Streams paced by a flow group (plan.rs `flow`, fio's flow) and streams whose end stops
//! others (plan.rs `on_end`, fio's exitall/exit_what), on the scripted backend and a manual
//! clock.

use super::gate_tests::{latency, run, specs};
use crate::backend::script::Script;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

#[test]
fn streams_of_a_flow_group_issue_in_the_ratio_of_their_weights() {
    // flow.fio: weights 1 and 8, flow_sleep 1000 us, QD 8 each; every IO takes 20 us.
    let flow = |w: u32| {
        serde_json::json!({"flow": {"group": 0, "weight": w, "sleep_us": 1000},
        "qd": 8})
    };
    let ran = run(
        &specs(&[flow(1), flow(8)]),
        latency(20 * US),
        Some(400 * MS),
    );
    let ratio = ran.reads[1] as f64 / ran.reads[0] as f64;
    assert!(ran.reads[0] > 100, "the light stream ran: {:?}", ran.reads);
    assert!(
        (ratio - 8.0).abs() < 8.0 * 0.05,
        "8:1 within 5%: {:?} = {ratio:.2}",
        ran.reads
    );
    // Alone, a QD8 stream would do 400 ms / 20 us * 8 = 160000 IOs: the flow held it back.
    assert!(ran.reads[1] < 160_000);
}

#[test]
fn three_weights_share_their_group_and_another_group_runs_free() {
    // HOWTO "flow": "flow=3, flow=2, flow=1 ... a roughly 3:2:1 ratio"; s3 is in group 7
    // alone and s4 has no flow: both run at full speed.
    let flow =
        |g: u32, w: u32| serde_json::json!({"flow": {"group": g, "weight": w, "sleep_us": 10}});
    let ran = run(
        &specs(&[
            flow(0, 3),
            flow(0, 2),
            flow(0, 1),
            flow(7, 5),
            serde_json::json!({}),
        ]),
        latency(10 * US),
        Some(100 * MS),
    );
    let r = &ran.reads;
    let unit = r[2] as f64;
    assert!(unit > 500.0, "{r:?}");
    assert!((r[0] as f64 / unit - 3.0).abs() < 0.1, "3:2:1: {r:?}");
    assert!((r[1] as f64 / unit - 2.0).abs() < 0.1, "3:2:1: {r:?}");
    assert_eq!(
        r[3], r[4],
        "a group of one and no flow: the same pace: {r:?}"
    );
}

#[test]
fn a_stream_that_ended_leaves_its_group() {
    // s0 (weight 1) stops after 200 IOs; s1 (weight 1) then runs alone at full speed.
    let flow = serde_json::json!({"flow": {"group": 0, "weight": 1, "sleep_us": 10}});
    let mut first = flow.clone();
    first["io_limit"] = serde_json::json!(200 * 4096);
    let ran = run(&specs(&[first, flow]), latency(10 * US), Some(20 * MS));
    assert_eq!(ran.reads[0], 200);
    // 20 ms at QD1 of 10 us IOs is 2000 IOs; both took turns for the first ~4 ms.
    assert!(ran.reads[1] > 1700, "{:?}", ran.reads);
}

#[test]
fn a_streams_end_stops_the_started_streams_it_names() {
    // exit_what=stonewall: s0 (100 IOs) stops s1 (running) when it ends; s2 waits for s0 and
    // s1 and is not stopped (it had not started), so it runs its 50 IOs afterwards.
    let ran = run(
        &specs(&[
            serde_json::json!({"io_limit": 100 * 4096,
                "on_end": {"stop": [1, 2], "started_only": true}}),
            serde_json::json!({}),
            serde_json::json!({"after": [0, 1], "io_limit": 50 * 4096}),
        ]),
        latency(100 * US),
        None,
    );
    let end0 = ran.spans[0].ended_ns.expect("s0 ended");
    assert_eq!(end0, 10 * MS, "100 IOs of 100 us");
    // s1 issues nothing more; it ends when its IO in flight completes, 100 us later.
    assert_eq!(
        ran.spans[1].ended_ns,
        Some(end0 + 100 * US),
        "s1 stopped by s0's end"
    );
    assert!(ran.spans[1].stopped);
    assert!(!ran.spans[2].stopped);
    assert_eq!(ran.reads, [100, 101, 50]);
    assert_eq!(ran.spans[2].started_ns, Some(end0 + 100 * US));
}

#[test]
fn a_streams_end_stops_every_stream_it_names_even_those_not_started() {
    // exit_what=all: s1 (waiting for s0) never starts; s2 running is stopped; the cascade
    // goes on: s2's own on_end stops s3.
    let ran = run(
        &specs(&[
            serde_json::json!({"io_limit": 30 * 4096, "on_end": {"stop": [1, 2]}}),
            serde_json::json!({"after": [0], "io_limit": 50 * 4096}),
            serde_json::json!({"on_end": {"stop": [3]}}),
            serde_json::json!({}),
        ]),
        latency(100 * US),
        None,
    );
    // s0 ends at 3 ms; s2's IO then in flight completes at 3.1 ms, when s2 ends and stops s3,
    // whose IO in flight completes at 3.2 ms.
    assert_eq!(ran.reads, [30, 0, 31, 32]);
    assert_eq!(ran.spans[1].started_ns, None);
    assert!(ran.spans[1].stopped);
    assert_eq!(ran.spans[2].ended_ns, Some(3 * MS + 100 * US));
    assert_eq!(ran.spans[3].ended_ns, Some(3 * MS + 200 * US));
}

#[test]
fn without_on_end_a_streams_end_stops_nothing() {
    let ran = run(
        &specs(&[
            serde_json::json!({"io_limit": 30 * 4096}),
            serde_json::json!({"io_limit": 60 * 4096}),
        ]),
        Script {
            latency_ns: 100 * US,
            ..Default::default()
        },
        None,
    );
    assert_eq!(ran.reads, [30, 60]);
}

#[test]
fn a_flow_sleep_shorter_than_the_wake_up_lead_is_slept_not_spent_awake() {
    // HOWTO flow_sleep: "The period of time, in microseconds, to wait after the flow counter
    // has exceeded its proportion before retrying operations"; fio's job waits it in
    // usleep (flow.c flow_threshold_exceeded), giving its CPU up however short the wait is.
    // Two streams of weight 1 (QD 4 and 1) and flow_sleep 10 us on a thread that has learnt its timed
    // wake-ups come 40 us late, so it stays awake for waits shorter than that (wake.rs). On
    // the manual clock a thread that stays awake never sees time move (the run would not
    // end): it must sleep in the backend through every hold.
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Duration;

    use super::gate_tests::FILES;
    use super::{StreamState, StreamStats, Totals, Worker};
    use crate::backend::script::ScriptBackend;
    use crate::clock::RunClock;
    use crate::stop::StopSignal;

    let flow = serde_json::json!({"flow": {"group": 0, "weight": 1, "sleep_us": 10}});
    let mut deep = flow.clone();
    deep["qd"] = serde_json::json!(4);
    let specs = specs(&[deep, flow]);
    let mut groups = crate::flow::Groups::default();
    let streams = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut st = StreamState::new(i, s, &FILES);
            st.pacing = groups.pacing_for(s);
            st
        })
        .collect();
    let mut clock = RunClock::manual(0, Some(5 * MS), 1000 * MS);
    clock.stop = std::sync::Arc::new(StopSignal::for_streams(2));
    let (backend, log) = ScriptBackend::new(latency(10 * US));
    let mut worker = Worker::new(0, streams, Box::new(backend));
    worker.wake.observe(0, 40 * US);
    assert!(
        worker.wake.min_sleep_ns() > 10 * US,
        "primed: it would stay awake"
    );
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (tx, rx) = std::sync::mpsc::channel();
        let result = worker.run(clock, tx).map(|_| ());
        let reads: Vec<u64> = {
            let mut totals = Totals::new(vec![StreamStats::new(false); 2]);
            rx.try_iter().for_each(|m| totals.add(&m));
            totals.streams().iter().map(|s| s.ops[0].ops).collect()
        };
        let _ = done_tx.send((result, reads));
    });
    let (result, reads) = match done_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(done) => done,
        Err(RecvTimeoutError::Timeout) => panic!("the thread stayed awake through a flow_sleep"),
        Err(e) => panic!("{e}"),
    };
    result.expect("run succeeds");
    let waits = log.lock().unwrap().waits;
    // Both took turns: the deeper stream gets ahead, drains and sleeps until the other
    // issued, so the thread slept about once per IO of the other.
    assert!(reads[0] > 50 && reads[1] > 50, "{reads:?}");
    assert!(
        (reads[0] as i64 - reads[1] as i64).abs() <= 2,
        "1:1: {reads:?}"
    );
    assert!(
        waits >= reads[1],
        "slept through the holds: {waits} waits, {reads:?}"
    );
}
