//! When an open-loop thread goes to sleep before an issue time, and when it stays awake.
//!
//! A thread that sleeps until an IO's intended issue time is woken late: on the development VM
//! a timed wake-up comes 15-25 us after the time asked for (the timer interrupt of a halted
//! vCPU goes through the hypervisor). That lateness is charged to the storage twice: the IO
//! goes out late, which the response time counts, and a completion that arrives while the
//! thread sleeps is reaped late, which the service time counts. So the thread learns how late
//! its own timed wake-ups are and
//!
//! - asks to be woken early by their 90th percentile, spinning the rest of the way, so nine
//!   wake-ups in ten come before the issue time (the mean, used before, left about half of
//!   them late: at 20,000 IOPS on the VM's RAM disk response p50 was 1.2x service p50);
//! - does not sleep at all when the sleep would be shorter than a mean wake-up is late: such a
//!   sleep saves no CPU worth having and makes the IO late. At 20,000 IOPS on the RAM disk that
//!   keeps the thread awake between IOs, which reaps completions as they come: service p50 31
//!   us instead of 49 us, response p50 equal to it, for 1.8x the CPU per IO of fio at the same
//!   rate (the budget is 2x; bench/README.md). On a machine whose wake-ups are prompt both
//!   margins shrink to a few microseconds and the thread sleeps as before.
//!
//! A thread that stays awake yields the CPU at every turn (worker.rs, uring.rs), so it never
//! holds up the device's completion work when that shares its CPU.

/// At most this much earlier than an issue time does the thread ask to be woken, and at most
/// this long is a sleep that would be skipped: the CPU an open-loop thread spends awake per
/// IO stays bounded whatever the wake-ups measure.
pub(crate) const MAX_EARLY_NS: u64 = 50_000;
/// Lateness samples are clipped here, so one preempted wake-up does not make every following
/// one early.
const MAX_LATE_SAMPLE_NS: u64 = 100_000;
/// The quantile of wake-up lateness that the early wake-up covers.
const COVERED: u64 = 90;

/// What the thread has learnt of its timed wake-ups.
#[derive(Debug, Default)]
pub(crate) struct WakeLateness {
    /// Moving average of the lateness, ns (about the last 8 wake-ups).
    mean_ns: u64,
    /// Running estimate of the `COVERED` percentile of the lateness, ns: it steps up by 9
    /// units on a sample above it and down by 1 on a sample below, which settles where one
    /// sample in ten is above (a frugal streaming quantile; no samples are kept).
    high_ns: u64,
}

impl WakeLateness {
    /// A timed wake-up asked for at `asked` came at `woke` (CLOCK_MONOTONIC ns).
    pub(crate) fn observe(&mut self, asked: u64, woke: u64) {
        let late = woke.saturating_sub(asked).min(MAX_LATE_SAMPLE_NS);
        self.mean_ns = if self.mean_ns == 0 {
            late
        } else {
            (7 * self.mean_ns + late) / 8
        };
        // Steps of 1/256 of the estimate (at least 25 ns): it moves by 3.5% on a late sample,
        // so it follows a change of the machine within a few hundred wake-ups (a few ms at the
        // rates where the margin matters) and jitters little.
        let unit = (self.high_ns / 256).max(25);
        if late > self.high_ns {
            self.high_ns += unit * COVERED / (100 - COVERED);
        } else {
            self.high_ns = self.high_ns.saturating_sub(unit);
        }
    }

    /// How much earlier than an issue time to ask to be woken.
    pub(crate) fn early_ns(&self) -> u64 {
        self.high_ns.min(MAX_EARLY_NS)
    }

    /// A sleep shorter than this is not worth taking.
    pub(crate) fn min_sleep_ns(&self) -> u64 {
        self.mean_ns.min(MAX_EARLY_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    const US: u64 = 1000;

    /// Feed `n` wake-ups late by `late()`.
    fn feed(w: &mut WakeLateness, n: usize, mut late: impl FnMut() -> u64) {
        for i in 0..n as u64 {
            let asked = i * 1_000_000;
            w.observe(asked, asked + late());
        }
    }

    #[test]
    fn the_early_wake_up_covers_nine_wake_ups_in_ten() {
        // Lateness as on the development VM: 12 us and up, a long tail to 40 us.
        let mut rng = Rng::new(7);
        let mut late = || {
            let u = rng.next_u64() % 1000;
            12 * US + u * u * 28 * US / 1_000_000
        };
        let mut w = WakeLateness::default();
        feed(&mut w, 2_000, &mut late);
        // From then on, how many wake-ups come before the issue time with the margin in use?
        let mut covered = 0;
        for i in 0..20_000u64 {
            let (asked, l) = (i * 1_000_000, late());
            covered += (l <= w.early_ns()) as u32;
            w.observe(asked, asked + l);
        }
        assert!((17_600..=18_800).contains(&covered), "{covered} of 20,000");
        let (early, mean) = (w.early_ns(), w.min_sleep_ns());
        assert!((17 * US..=25 * US).contains(&mean), "mean {mean}");
        assert!((30 * US..=39 * US).contains(&early), "p90 {early}");
    }

    #[test]
    fn margins_follow_the_machine_down_and_stay_bounded() {
        let mut w = WakeLateness::default();
        feed(&mut w, 2_000, || 300 * US);
        assert_eq!(w.early_ns(), MAX_EARLY_NS, "clipped, then capped");
        assert_eq!(w.min_sleep_ns(), MAX_EARLY_NS);
        // Prompt wake-ups (bare metal): both margins shrink to a few microseconds.
        feed(&mut w, 5_000, || 3 * US);
        assert!(w.early_ns() <= 4 * US, "{}", w.early_ns());
        assert!(w.min_sleep_ns() <= 4 * US, "{}", w.min_sleep_ns());
    }

    #[test]
    fn a_wake_up_before_its_time_counts_as_on_time() {
        let mut w = WakeLateness::default();
        w.observe(1_000_000, 999_000);
        assert_eq!((w.early_ns(), w.min_sleep_ns()), (0, 0));
    }
}
