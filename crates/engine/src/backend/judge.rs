//! The judge: settles the io_uring backend's two mode questions by what a benchmark is judged
//! on, IOPS first and CPU per IO second, measured on the running workload rather than assumed.
//!
//! - **Spin**: may the poller spin before sleeping (uring.rs, `Poller`)? The poller decides
//!   wait by wait whether a spin would catch a completion sooner than a sleep, but not what a
//!   spin does to the rest of the machine. On the development VM spinning raised a deep
//!   queue's IOPS by a third; but where the device's completion work ran on the engine's own
//!   CPU, spinning took that CPU from it and lowered the IOPS (61k-65k against 84k-86k without
//!   spinning, at QD1 with the engine and the device's worker on one CPU; bench/README.md).
//! - **Batch**: are the IOs queued in a loop turn handed to the kernel with one system call, or
//!   each as it is queued (as fio does)? Together they cost one system call and the block layer
//!   merges sequential ones (128 KiB reads on a RAM disk: 1.2x fio's IOPS); with a loop
//!   device's worker on the engine's CPU a batch is worth 40% more IOPS at 4 KiB QD32. But on
//!   the development VM's virtio disk a batch of random reads was served slower: 4 KiB QD32
//!   made 60k-67k IOPS batched and 77k-85k one by one, fio's 77k-88k (bench/README.md).
//!
//! Every `SETTLED_NS` the judge runs a trial of one question, the two taking turns: eight
//! `EPOCH_NS` epochs, half in each mode in ABBA order, the other question's verdict holding,
//! measured by completions per second and the thread's CPU time per completion. A benchmark
//! must first not under-report the storage, so the first mode (spinning allowed, batches)
//! stays until the next trial if it gives more IOPS (by more than `SAME_IOPS`) at a price in
//! CPU per IO the IOPS are worth (`IOPS_PER_CPU`), or the same IOPS for less CPU per IO. The
//! price keeps a spin that buys a few percent of IOPS with most of a CPU from setting the CPU
//! per IO of a run where the device, not the wake-up, sets the pace. A trial that says otherwise while the first mode is in force is
//! run again at once, and the verdict leaves the first mode only if the second agrees: 25 ms
//! epochs on a shared VM are noisy (at 4 KiB QD32 on the RAM disk, where spinning gave 15-35%
//! more IOPS, one trial in eight still found the sleeping epochs faster). Without completions
//! (an idle or very slow device) the first mode stays. The batch question needs a queue: with
//! at most one IO in flight the two modes are the same, and the spin question is asked instead.

/// Settled periods last this long between trials.
const SETTLED_NS: u64 = 2_000_000_000;
/// A thread pinned to one CPU (the plan's `cpus`) with at most one IO in flight: after a
/// switch of the spin question's mode, this long runs unmeasured before an epoch starts. The
/// kernel's placement follows the mode with a lag: spinning keeps the thread's CPU busy, so
/// the device's completion work (a loop device's worker) runs on another CPU, and after the
/// switch to sleeping it took 130-330 ms to come back to the thread's CPU (4 KiB QD1 on the
/// RAM disk, six runs; 80k-100k IOPS until then, 120k-150k after, in 10 ms windows;
/// bench/README.md, "QD1 asleep: where the thread runs"). Measured at once, sleeping was judged
/// in the placement spinning had left, and a pinned QD1 thread spun at twice the CPU per IO
/// for no more IOPS. Unpinned the same lag showed no settled state worth waiting for (sleeping
/// stays at 84k-90k) and a settle in every trial cost the other cases their verdicts, so only
/// pinned shallow threads pay it, with `PINNED_SETTLED_NS` between their trials.
pub(super) const SETTLE_NS: u64 = 350_000_000;
const PINNED_SETTLED_NS: u64 = 8_000_000_000;
/// A trial's epochs: this long each, in the modes of `TRIAL`.
pub(super) const EPOCH_NS: u64 = 25_000_000;
/// ABBA order, twice: a drift in the device's rate during a trial favours neither mode.
pub(super) const TRIAL: [bool; 8] = [true, false, false, true, true, false, false, true];
/// The first trial comes after this much running, once the poller has learnt the device.
const FIRST_TRIAL_NS: u64 = 300_000_000;
/// IOPS within this fraction of each other are the same IOPS.
const SAME_IOPS: f64 = 0.03;
/// What more IOPS must be worth: the first mode's gain in IOPS, as a fraction, at least this
/// many times its rise in CPU per IO (0.15: 1% more IOPS may cost up to 6.7% more CPU per
/// IO). Measured on the RAM disk, the cases it separates (bench/results, vs fio): at 4 KiB QD32
/// spinning bought 10.5% more IOPS for 48% more CPU per IO (0.22: it spins, and without it
/// tilemark falls below fio's IOPS); at 128 KiB QD8, 3% more for 73% more (0.04: it sleeps,
/// where it had spun at 1.6x fio's CPU per IO); at 4 KiB QD1 on one CPU sleeping gave more IOPS.
const IOPS_PER_CPU: f64 = 0.15;

/// How long a thread ran in each mode (the engine's result, `poller`): what its CPU per IO
/// was bought with.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ModeShares {
    /// Time judged (from the thread's first submission to its last), s.
    pub seconds: f64,
    /// Share of it with spinning allowed (the poller spins where a spin catches completions),
    /// and with a loop turn's IOs submitted together, %.
    pub spin_allowed_pct: f64,
    pub batched_pct: f64,
}

/// Accumulates `ModeShares`: the modes in force from one submission to the next.
#[derive(Debug, Default)]
pub(super) struct ModeTime {
    last_ns: Option<u64>,
    modes: Modes,
    total_ns: u64,
    spin_ns: u64,
    batch_ns: u64,
}

impl ModeTime {
    /// At `now` the thread runs in `modes` (until the next call).
    pub(super) fn at(&mut self, now: u64, modes: Modes) {
        if let Some(last) = self.last_ns {
            let dt = now.saturating_sub(last);
            self.total_ns += dt;
            self.spin_ns += dt * self.modes[Question::Spin as usize] as u64;
            self.batch_ns += dt * self.modes[Question::Batch as usize] as u64;
        }
        self.last_ns = Some(now);
        self.modes = modes;
    }

    pub(super) fn shares(&self) -> Option<ModeShares> {
        let pct = |ns: u64| 100.0 * ns as f64 / self.total_ns as f64;
        (self.total_ns > 0).then(|| ModeShares {
            seconds: self.total_ns as f64 / 1e9,
            spin_allowed_pct: pct(self.spin_ns),
            batched_pct: pct(self.batch_ns),
        })
    }
}

/// The questions, as indexes into the verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Question {
    /// May the poller spin before sleeping?
    Spin = 0,
    /// Are the IOs of a loop turn submitted together?
    Batch = 1,
}

impl Question {
    fn other(self) -> Question {
        match self {
            Question::Spin => Question::Batch,
            Question::Batch => Question::Spin,
        }
    }
}

/// The modes to run in: `[spin allowed, batch submissions]`.
pub(super) type Modes = [bool; 2];

#[derive(Debug)]
pub(super) struct Judge {
    /// IO completions reaped so far.
    pub completions: u64,
    state: State,
    /// The verdicts in force, by `Question`.
    verdicts: Modes,
    /// The question the next trial asks.
    next: Question,
    /// The last trial of this question went against the first mode; this one confirms it.
    confirming: bool,
    /// What a spin trial with at most one IO in flight lets pass after a switch (`SETTLE_NS`
    /// for a thread pinned to one CPU, else 0).
    settle_ns: u64,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Settled {
        until_ns: u64,
    },
    /// Asking `question`, in epoch `epoch` started at `start_ns` with the thread's CPU time at
    /// `cpu_ns` and `done` completions; `sums[1]` for the epochs in the first mode so far,
    /// `sums[0]` for the others: (completions, CPU ns, elapsed ns). Until `settled` the epoch
    /// has not begun: its modes run unmeasured until `start_ns`, `settle_ns` after a switch.
    Trial {
        question: Question,
        epoch: usize,
        settle_ns: u64,
        settled: bool,
        start_ns: u64,
        cpu_ns: u64,
        done: u64,
        sums: [(u64, u64, u64); 2],
    },
}

impl Judge {
    pub(super) fn new(now: u64) -> Self {
        Judge {
            completions: 0,
            state: State::Settled {
                until_ns: now + FIRST_TRIAL_NS,
            },
            verdicts: [true, true],
            // With a queue, batching first: it decides more (a fifth of a virtio disk's IOPS
            // at QD32), and a short run should get its verdict early.
            next: Question::Batch,
            confirming: false,
            settle_ns: 0,
        }
    }

    /// A judge for a thread pinned to one CPU (see `SETTLE_NS`).
    pub(super) fn pinned(mut self) -> Self {
        self.settle_ns = SETTLE_NS;
        self
    }

    /// The modes in force for `question` at `epoch` of its trial.
    fn trial_modes(&self, question: Question, epoch: usize) -> Modes {
        let mut modes = self.verdicts;
        modes[question as usize] = TRIAL[epoch];
        modes
    }

    /// Start a trial of `question` at `now`, the thread's CPU time being `cpu_ns`, after
    /// `before` were the modes in force, settling `settle_ns` after each switch.
    fn start_trial(
        &mut self,
        question: Question,
        now: u64,
        cpu_ns: u64,
        before: Modes,
        settle_ns: u64,
    ) -> Modes {
        self.enter_epoch(question, settle_ns, [(0, 0, 0); 2], 0, now, cpu_ns, before)
    }

    /// Epoch `epoch` of a trial of `question` with `sums` so far begins at `now`, the thread's
    /// CPU time being `cpu`, after `before` were the modes in force: it is measured from now,
    /// or after `settle_ns` if the modes switched.
    #[allow(clippy::too_many_arguments)]
    fn enter_epoch(
        &mut self,
        question: Question,
        settle_ns: u64,
        sums: [(u64, u64, u64); 2],
        epoch: usize,
        now: u64,
        cpu: u64,
        before: Modes,
    ) -> Modes {
        let modes = self.trial_modes(question, epoch);
        let settled = settle_ns == 0 || modes == before;
        self.state = State::Trial {
            question,
            epoch,
            settle_ns,
            settled,
            start_ns: if settled { now } else { now + settle_ns },
            cpu_ns: cpu,
            done: self.completions,
            sums,
        };
        modes
    }

    /// The modes to run in now. Moves the trials along as time passes; `deep` says whether more
    /// than one IO is in flight; `cpu` reads the thread's CPU time (only at an epoch's start
    /// and end).
    pub(super) fn modes(&mut self, now: u64, deep: bool, cpu: impl Fn() -> u64) -> Modes {
        match self.state {
            State::Settled { until_ns } => {
                if now < until_ns {
                    return self.verdicts;
                }
                let question = if deep { self.next } else { Question::Spin };
                let settle_ns = if deep { 0 } else { self.settle_ns };
                self.start_trial(question, now, cpu(), self.verdicts, settle_ns)
            }
            State::Trial {
                question,
                epoch,
                settle_ns,
                settled,
                start_ns,
                cpu_ns,
                done,
                mut sums,
            } => {
                if !settled {
                    let modes = self.trial_modes(question, epoch);
                    if now >= start_ns {
                        // Settled into the epoch's modes: its measurement starts now.
                        return self.enter_epoch(
                            question,
                            settle_ns,
                            sums,
                            epoch,
                            now,
                            cpu(),
                            modes,
                        );
                    }
                    return modes;
                }
                if now - start_ns < EPOCH_NS {
                    return self.trial_modes(question, epoch);
                }
                let cpu_now = cpu();
                let sum = &mut sums[TRIAL[epoch] as usize];
                sum.0 += self.completions - done;
                sum.1 += cpu_now.saturating_sub(cpu_ns);
                sum.2 += now - start_ns;
                if epoch + 1 < TRIAL.len() {
                    let before = self.trial_modes(question, epoch);
                    return self.enter_epoch(
                        question,
                        settle_ns,
                        sums,
                        epoch + 1,
                        now,
                        cpu_now,
                        before,
                    );
                }
                let rate = |(ios, cpu, ns): (u64, u64, u64)| {
                    (ios > 0).then(|| (ios as f64 * 1e9 / ns as f64, cpu as f64 / ios as f64))
                };
                let first = match (rate(sums[1]), rate(sums[0])) {
                    (Some(with), Some(without)) => first_mode_pays(with, without),
                    // No completions: nothing to judge by.
                    _ => true,
                };
                if !first && self.verdicts[question as usize] && !self.confirming {
                    // Away from the first mode, says one trial: ask a second before believing
                    // it. (Staying away, or coming back to it, needs no second opinion.)
                    self.confirming = true;
                    let before = self.trial_modes(question, epoch);
                    return self.start_trial(question, now, cpu_now, before, settle_ns);
                }
                self.confirming = false;
                self.verdicts[question as usize] = first;
                self.next = question.other();
                self.state = State::Settled {
                    until_ns: now
                        + if settle_ns > 0 {
                            PINNED_SETTLED_NS
                        } else {
                            SETTLED_NS
                        },
                };
                self.verdicts
            }
        }
    }
}

/// Does the first mode pay? Each argument is (IOPS, CPU ns per IO), measured in the first mode
/// and in the other: more IOPS, bought at a fair price in CPU (`IOPS_PER_CPU`), or the same
/// IOPS for less CPU.
fn first_mode_pays(first: (f64, f64), other: (f64, f64)) -> bool {
    let gain = first.0 / other.0 - 1.0;
    let cost = first.1 / other.1 - 1.0;
    if gain > SAME_IOPS {
        gain >= cost * IOPS_PER_CPU
    } else if gain >= -SAME_IOPS {
        // A tie keeps the first mode.
        first.1 <= other.1
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One epoch's (IOs, CPU ns) at `iops` and `us` of CPU per IO.
    fn epoch(iops: u64, us: f64) -> (u64, u64) {
        let ios = iops * EPOCH_NS / 1_000_000_000;
        (ios, (ios as f64 * us * 1000.0) as u64)
    }

    /// A device whose epochs give `first` (IOPS, us of CPU per IO) in the first mode of
    /// `question` and `other` in the other, whatever the other question's mode and however
    /// long ago it changed.
    fn device(
        q: Question,
        first: (u64, f64),
        other: (u64, f64),
    ) -> impl Fn(Modes, u64) -> (u64, u64) + Copy {
        move |m: Modes, _since: u64| {
            let (iops, us) = if m[q as usize] { first } else { other };
            epoch(iops, us)
        }
    }

    /// Drive a judge through one trial from `*t` in steps of half an epoch, each step adding
    /// half of what `device` gives for an epoch in its modes, `since` they last changed (ns).
    /// Checks that only the question asked changes, in ABBA order, and that an epoch after a
    /// switch is measured only once the trial's settle time has passed; leaves `*t` at the
    /// trial's end and returns its question and the modes right after it.
    fn trial(
        j: &mut Judge,
        t: &mut u64,
        deep: bool,
        device: impl Fn(Modes, u64) -> (u64, u64),
    ) -> (Question, Modes) {
        let cpu = std::cell::Cell::new(0u64);
        let before = j.verdicts;
        let mut modes = j.modes(*t, deep, || cpu.get());
        let State::Trial {
            question,
            settle_ns,
            ..
        } = j.state
        else {
            panic!("a trial starts at {t}: {:?}", j.state)
        };
        let q = question as usize;
        let mut changed_at = if modes == before { 0 } else { *t };
        // (epoch, its mode, ns in that mode when its measurement began)
        let mut measured: Vec<(usize, bool, u64)> = vec![];
        loop {
            assert_eq!(modes[1 - q], before[1 - q], "the other verdict holds");
            if let State::Trial {
                epoch,
                settled: true,
                ..
            } = j.state
            {
                if measured.last().is_none_or(|m| m.0 != epoch) {
                    measured.push((epoch, modes[q], *t - changed_at));
                }
            }
            let (ios, ns) = device(modes, *t - changed_at);
            j.completions += ios / 2;
            cpu.set(cpu.get() + ns / 2);
            *t += EPOCH_NS / 2;
            let next = j.modes(*t, deep, || cpu.get());
            if next != modes {
                changed_at = *t;
            }
            modes = next;
            let over = match j.state {
                State::Settled { .. } => true,
                State::Trial { epoch, .. } => measured.last().is_some_and(|m| epoch < m.0),
            };
            if over {
                break;
            }
        }
        let epochs: Vec<usize> = measured.iter().map(|m| m.0).collect();
        assert_eq!(epochs, (0..TRIAL.len()).collect::<Vec<_>>());
        let asked: Vec<bool> = measured.iter().map(|m| m.1).collect();
        assert_eq!(asked, TRIAL, "epochs in ABBA order");
        for w in measured.windows(2).filter(|w| w[0].1 != w[1].1) {
            assert!(
                w[1].2 >= settle_ns,
                "epoch {} measured {} ns in",
                w[1].0,
                w[1].2
            );
        }
        (question, modes)
    }

    /// When the judge's settled period ends.
    fn settled_until(j: &Judge) -> u64 {
        let State::Settled { until_ns } = j.state else {
            panic!("settled: {:?}", j.state)
        };
        until_ns
    }

    /// Pinned 4 KiB QD1 on the RAM disk: spinning 125k IOPS at 7.0 us of CPU per IO; asleep
    /// 130k at 3.2 us, but 94k at 4.4 us for up to 330 ms after spinning, while the device's
    /// worker stays on the CPU spinning had pushed it to.
    fn lagging(m: Modes, since: u64) -> (u64, u64) {
        if m[Question::Spin as usize] {
            epoch(125_000, 7.0)
        } else if since < 330_000_000 {
            epoch(94_000, 4.4)
        } else {
            epoch(130_000, 3.2)
        }
    }

    #[test]
    fn a_pinned_thread_is_judged_once_the_placement_has_followed_the_mode() {
        let mut j = Judge::new(0).pinned();
        let mut t = FIRST_TRIAL_NS;
        let (q, modes) = trial(&mut j, &mut t, false, lagging);
        assert_eq!((q, modes[0]), (Question::Spin, true), "not yet believed");
        let (_, modes) = trial(&mut j, &mut t, false, lagging);
        assert_eq!(modes, [false, true], "it sleeps");
        assert_eq!(settled_until(&j) - t, PINNED_SETTLED_NS);
        // With a queue there is nothing to wait for: the batch question is asked at once.
        t = settled_until(&j);
        let qd32 = device(Question::Batch, (330_000, 1.4), (234_000, 2.2));
        let (q, _) = trial(&mut j, &mut t, true, qd32);
        assert_eq!(q, Question::Batch);
        assert_eq!(settled_until(&j) - t, SETTLED_NS);
    }

    #[test]
    fn an_unpinned_thread_is_judged_at_once() {
        // The same device measured at once: 94k against 125k keeps spinning (33% more IOPS
        // for 59% more CPU per IO), and trials come every SETTLED_NS.
        let mut j = Judge::new(0);
        let mut t = FIRST_TRIAL_NS;
        let (_, modes) = trial(&mut j, &mut t, false, lagging);
        assert_eq!(modes, [true, true]);
        assert_eq!(settled_until(&j) - t, SETTLED_NS);
    }

    #[test]
    fn spinning_is_allowed_only_where_it_gives_iops_or_saves_cpu() {
        let mut j = Judge::new(0);
        assert_eq!(
            j.modes(0, true, || 0),
            [true, true],
            "until the first trial"
        );
        let mut t = FIRST_TRIAL_NS;
        // A shallow queue: only the spin question is asked.
        // 4 KiB QD1 with the device's completion work on the engine's CPU: spinning loses IOPS.
        // One trial saying so starts a second at once; the thread sleeps when that agrees.
        let qd1 = device(Question::Spin, (70_000, 7.4), (85_000, 5.3));
        let (q, modes) = trial(&mut j, &mut t, false, qd1);
        assert_eq!((q, modes[0]), (Question::Spin, true), "not yet believed");
        let (q, modes) = trial(&mut j, &mut t, false, qd1);
        assert_eq!((q, modes), (Question::Spin, [false, true]));
        t = settled_until(&j);
        assert_eq!(j.modes(t - 1, false, || 0), [false, true]);
        // Open loop: the same IOPS either way; spinning costs more CPU per IO.
        let open = device(Question::Spin, (20_000, 36.0), (20_100, 20.0));
        assert_eq!(
            trial(&mut j, &mut t, false, open).1,
            [false, true],
            "no confirming"
        );
        t = settled_until(&j);
        // 4 KiB QD32 on the VM's RAM disk: 263k IOPS at 3.4 us spinning, 238k at 2.3 us asleep.
        let qd32 = device(Question::Spin, (263_000, 3.4), (238_000, 2.3));
        assert_eq!(trial(&mut j, &mut t, false, qd32).1, [true, true]);
        t = settled_until(&j);
        // An idle device: nothing to judge by, spinning is left to the poller.
        assert_eq!(trial(&mut j, &mut t, false, |_, _| (0, 0)).1, [true, true]);
    }

    #[test]
    fn with_a_queue_the_questions_take_turns_and_a_noisy_trial_is_outvoted() {
        let mut j = Judge::new(0);
        let mut t = FIRST_TRIAL_NS;
        // A virtio disk at 4 KiB QD32: spinning buys nothing, batches lose a fifth of the IOPS.
        let virtio = device(Question::Batch, (65_000, 4.0), (82_000, 4.2));
        // With a queue the batch question comes first.
        let (q, _) = trial(&mut j, &mut t, true, virtio);
        assert_eq!(q, Question::Batch);
        let (q, modes) = trial(&mut j, &mut t, true, virtio);
        assert_eq!((q, modes), (Question::Batch, [true, false]), "confirmed");
        t = settled_until(&j);
        assert_eq!(j.modes(t - 1, true, || 0), [true, false]);
        // Then the spin question, with IOs submitted one by one meanwhile: the same IOPS and
        // CPU either way, and a tie keeps spinning allowed.
        let (q, modes) = trial(&mut j, &mut t, true, virtio);
        assert_eq!((q, modes), (Question::Spin, [true, false]));
        t = settled_until(&j);
        // The device changes: batches now pay (a loop device whose worker shares the CPU).
        // A trial for the first mode is believed at once.
        let ram = device(Question::Batch, (330_000, 1.4), (234_000, 2.2));
        assert_eq!(
            trial(&mut j, &mut t, true, ram),
            (Question::Batch, [true, true])
        );
        t = settled_until(&j);
        // A noisy trial against spinning, outvoted by the second.
        trial(
            &mut j,
            &mut t,
            true,
            device(Question::Spin, (266_000, 3.2), (275_000, 2.0)),
        );
        assert!(
            matches!(j.state, State::Trial { epoch: 0, .. }),
            "confirming"
        );
        let spin_pays = device(Question::Spin, (300_000, 3.1), (228_000, 2.5));
        assert_eq!(
            trial(&mut j, &mut t, true, spin_pays),
            (Question::Spin, [true, true])
        );
    }

    #[test]
    fn mode_time_shares_the_time_between_submissions_by_the_modes_in_force() {
        let mut t = ModeTime::default();
        assert_eq!(t.shares(), None);
        t.at(0, [true, true]);
        t.at(3_000_000_000, [false, true]); // 3 s spinning allowed
        t.at(4_000_000_000, [false, false]); // 1 s not
        t.at(5_000_000_000, [true, false]); // 1 s neither
        let s = t.shares().expect("time judged");
        assert_eq!(s.seconds, 5.0);
        assert!((s.spin_allowed_pct - 60.0).abs() < 1e-9, "{s:?}");
        assert!((s.batched_pct - 80.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn the_first_mode_pays_with_more_iops_or_the_same_iops_for_less_cpu() {
        assert!(first_mode_pays((110.0, 6.0), (100.0, 5.0)));
        assert!(
            !first_mode_pays((110.0, 9.0), (100.0, 5.0)),
            "10% more IOPS for 80% more CPU per IO"
        );
        // 128 KiB QD8 on the RAM disk: 3.5% more IOPS for 73% more CPU per IO.
        assert!(!first_mode_pays((61_600.0, 9.83), (59_500.0, 5.69)));
        // 4 KiB QD32: 10.5% more for 48% more.
        assert!(first_mode_pays((263_000.0, 3.4), (238_000.0, 2.3)));
        assert!(
            !first_mode_pays((102.0, 9.0), (100.0, 5.0)),
            "2% is the same IOPS"
        );
        assert!(first_mode_pays((100.0, 4.0), (100.0, 5.0)));
        assert!(
            first_mode_pays((100.0, 5.0), (100.0, 5.0)),
            "a tie keeps it"
        );
        assert!(!first_mode_pays((90.0, 4.0), (100.0, 5.0)));
    }
}
