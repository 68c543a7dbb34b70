//! CPU affinity of the engine's threads (the plan's `cpus`, fio's `cpus_allowed`).
//!
//! Unpinned, where an engine thread runs is the kernel's choice, and at low queue depth that
//! choice can decide the IOPS: on the development VM a QD1 reader sleeping for each completion
//! made 85-97k IOPS with the loop device's worker on the other vCPU, and 110-145k pinned, where
//! the worker runs on the reader's vCPU (bench/README.md, "QD1 asleep: where the thread runs").
//! Pinning is the user's decision, as in fio: the plan lists the CPUs and thread i runs on
//! `cpus[i % len]`.

use std::io;

/// The CPUs this process may run on (its affinity mask), in increasing order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size is that of `set`.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set filled above, at indexes below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pin the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in allowed_cpus; CPU_SET writes inside the set (cpu checked above).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the set lives across the call.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A CPU list as the kernel writes one: `0-3,6`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", sorted[i], sorted[j])
        } else {
            sorted[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_written_as_ranges() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(cpu_list(&[5, 1, 0]), "0-1,5");
        assert_eq!(cpu_list(&[2, 2]), "2");
        assert_eq!(cpu_list(&[]), "");
    }

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_and_only_there() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let cpu = *allowed.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(
                allowed_cpus().unwrap(),
                vec![cpu],
                "the mask is that one CPU"
            );
            for _ in 0..1000 {
                // SAFETY: sched_getcpu takes no arguments.
                assert_eq!(unsafe { libc::sched_getcpu() }, cpu as i32);
                std::hint::black_box(0u64);
            }
        })
        .join()
        .unwrap();
        assert_eq!(
            allowed_cpus().unwrap(),
            allowed,
            "other threads keep the process's mask"
        );
    }

    #[test]
    fn a_cpu_outside_the_set_is_refused() {
        std::thread::spawn(|| {
            let e = pin_current_thread(libc::CPU_SETSIZE as usize).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        })
        .join()
        .unwrap();
    }
}
