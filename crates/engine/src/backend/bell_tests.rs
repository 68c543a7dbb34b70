//! A backend's doorbell (`Backend::bell`) ends its wait in `submit` at once, from another
//! thread: how an engine thread asleep with nothing in flight learns, without waiting for its
//! next deadline, that a stream of another thread ended or was stopped (stop.rs).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{open_backend, BackendKind};
use crate::clock::{monotonic_ns, RunClock};

/// A backend of `kind` made on a thread of its own, waiting in `submit` for a completion that
/// never comes (nothing queued) with a deadline 20 s away; the bell rung from here. Returns
/// how long the wait lasted.
fn wait_rung(kind: BackendKind, ring_before_wait: bool) -> Duration {
    let (bell_tx, bell_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let waiter = std::thread::spawn(move || {
        let mut backend = open_backend(kind, &[], 4, Duration::ZERO, false).expect("a backend");
        let bell = backend
            .bell()
            .expect("a bell")
            .expect("this backend has a bell");
        bell_tx.send(bell).unwrap();
        go_rx.recv().unwrap();
        let clock = RunClock::monotonic(monotonic_ns(), 0, None, 1_000_000_000);
        let started = Instant::now();
        let mut out = Vec::new();
        backend
            .submit(&mut out, Some(clock.now() + 20_000_000_000), &clock)
            .expect("a wait");
        assert!(
            out.is_empty(),
            "{kind:?}: nothing was queued, nothing completes"
        );
        started.elapsed()
    });
    let bell = bell_rx.recv().unwrap();
    if ring_before_wait {
        bell();
        go_tx.send(()).unwrap();
    } else {
        go_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(100)); // well into its wait
        bell();
    }
    waiter.join().unwrap()
}

#[test]
fn a_rung_bell_ends_every_backends_wait_at_once() {
    for kind in [BackendKind::Null, BackendKind::Psync, BackendKind::Uring] {
        for before in [false, true] {
            // Without the bell each wait lasts its 20 s; a few seconds is a loaded machine's
            // slack, far from both.
            let waited = wait_rung(kind, before);
            assert!(
                waited < Duration::from_secs(5),
                "{kind:?} (rung before the wait: {before}): waited {waited:?}"
            );
        }
    }
}

#[test]
fn a_uring_wait_after_a_ring_still_sleeps_until_its_deadline() {
    // The ring is consumed by the wait it ended: the next wait runs to its deadline.
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut backend = open_backend(BackendKind::Uring, &[], 4, Duration::ZERO, false).unwrap();
        let bell = backend.bell().unwrap().unwrap();
        let clock = RunClock::monotonic(monotonic_ns(), 0, None, 1_000_000_000);
        let mut out = Vec::new();
        bell();
        backend
            .submit(&mut out, Some(clock.now() + 20_000_000_000), &clock)
            .unwrap();
        let deadline = clock.now() + 200_000_000;
        backend.submit(&mut out, Some(deadline), &clock).unwrap();
        tx.send(clock.now() >= deadline).unwrap();
    });
    waiter.join().unwrap();
    assert!(
        rx.recv().unwrap(),
        "the second wait ran to its 200 ms deadline"
    );
}
