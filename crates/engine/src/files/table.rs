//! The file set as the engine keeps it during a run: which entries exist, their sizes, which
//! are busy (an operation or a thread's open file holds them), and how a stream draws the next
//! operation and the next file. Pure logic, no IO: unit-tested below.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{FileOp, Select, FILE_OPS};
use crate::rng::{Rng, Zipf};

/// What an entry is now: free (nothing by its name), a file, or an empty directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    #[default]
    Free = 0,
    File = 1,
    Dir = 2,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
    pub dir: u32,
    pub kind: Kind,
    /// Held by an operation or an open file: no other thread touches it.
    pub busy: bool,
    pub size: u64,
}

impl Entry {
    /// True for a file that exists now.
    pub fn exists(&self) -> bool {
        self.kind == Kind::File
    }
}

/// The entries of one file set (behind a mutex shared by the set's streams).
///
/// Besides the entries, a list per kind (free, files, directories), with each entry's place in
/// its list, so that a pick in a sparse set (a few files among millions of entries) or a nearly
/// full one does not scan the set: a pick probes `NEAR` entries from where selection pointed,
/// then draws from the right list.
#[derive(Debug)]
pub struct Table {
    pub entries: Vec<Entry>,
    /// Files that exist now.
    pub present: u64,
    lists: [Vec<u32>; 3],
    /// Each entry's index in the list of its kind.
    place: Vec<u32>,
}

/// Entries probed from a selection's pick before drawing from the lists.
const NEAR: usize = 64;
/// Draws from a list before the last resort, a scan (many busy entries).
const DRAWS: u64 = 16;

/// An existing entry taken for an operation: (index, directory, size).
pub type Taken = (usize, u32, u64);

impl Table {
    /// A table of `entries` (directory, size if it exists); existing entries are directories
    /// when `dirs`.
    pub fn with_kind(entries: &[(u32, Option<u64>)], dirs: bool) -> Self {
        let existing = if dirs { Kind::Dir } else { Kind::File };
        let entries: Vec<Entry> = entries
            .iter()
            .map(|&(dir, size)| Entry {
                dir,
                kind: if size.is_some() { existing } else { Kind::Free },
                busy: false,
                size: if dirs { 0 } else { size.unwrap_or(0) },
            })
            .collect();
        let mut lists: [Vec<u32>; 3] = Default::default();
        let place = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let list = &mut lists[e.kind as usize];
                list.push(i as u32);
                (list.len() - 1) as u32
            })
            .collect();
        Table {
            present: lists[Kind::File as usize].len() as u64,
            entries,
            lists,
            place,
        }
    }

    pub fn new(entries: &[(u32, Option<u64>)]) -> Self {
        Self::with_kind(entries, false)
    }

    /// Directories that exist now.
    pub fn dirs_present(&self) -> u64 {
        self.lists[Kind::Dir as usize].len() as u64
    }

    /// Bytes of all files that exist now.
    pub fn bytes(&self) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.exists())
            .map(|e| e.size)
            .sum()
    }

    /// Take an existing, idle file, starting at `start` and probing forward (so a busy or
    /// deleted pick lands on its neighbour rather than failing). Marks it busy.
    pub fn take_existing(&mut self, start: usize) -> Option<usize> {
        self.take(start, Kind::File)
    }

    /// `take_existing`, with the entry's directory and size (one lock for all three).
    pub fn take_existing_entry(&mut self, start: usize) -> Option<Taken> {
        let i = self.take(start, Kind::File)?;
        Some((i, self.entries[i].dir, self.entries[i].size))
    }

    /// An existing, idle directory entry, with its directory (size 0).
    pub fn take_dir_entry(&mut self, start: usize) -> Option<Taken> {
        let i = self.take(start, Kind::Dir)?;
        Some((i, self.entries[i].dir, 0))
    }

    /// `take_free`, with the entry's directory.
    pub fn take_free_entry(&mut self, start: usize) -> Option<(usize, u32)> {
        let i = self.take(start, Kind::Free)?;
        Some((i, self.entries[i].dir))
    }

    /// Take a free (not existing, idle) entry for a create, from `start` forward.
    pub fn take_free(&mut self, start: usize) -> Option<usize> {
        self.take(start, Kind::Free)
    }

    /// A rename's two entries: an existing idle file (from `start`) and a free entry (from
    /// `free_start`), both taken, or neither (whichever was found is given back).
    pub fn take_rename_pair(
        &mut self,
        start: usize,
        free_start: usize,
    ) -> Option<(Taken, (usize, u32))> {
        match (
            self.take_existing_entry(start),
            self.take_free_entry(free_start),
        ) {
            (Some(from), Some(to)) => Some((from, to)),
            (from, to) => {
                if let Some((i, _, size)) = from {
                    self.release(i, true, size);
                }
                if let Some((j, _)) = to {
                    self.release(j, false, 0);
                }
                None
            }
        }
    }

    /// The entry an operation by name acts on (stat, delete, setattr: an existing file;
    /// statdir, rmdir: an existing directory; mkdir: a free entry), taken; None to skip.
    pub fn take_for(&mut self, op: FileOp, start: usize) -> Option<Taken> {
        match op {
            FileOp::Mkdir => self.take_free_entry(start).map(|(i, d)| (i, d, 0)),
            FileOp::Rmdir | FileOp::Statdir => self.take_dir_entry(start),
            _ => self.take_existing_entry(start),
        }
    }

    /// Give back the entry of an operation by name (`take_for`), as the call left it.
    pub fn release_after(&mut self, op: FileOp, (i, _, size): Taken, ok: bool) {
        match op {
            FileOp::Delete => self.release(i, !ok, size),
            FileOp::Mkdir => self.release_dir(i, ok),
            FileOp::Rmdir => self.release_dir(i, !ok),
            FileOp::Statdir => self.release_dir(i, true),
            _ => self.release(i, true, size),
        }
    }

    fn take(&mut self, start: usize, kind: Kind) -> Option<usize> {
        let n = self.entries.len();
        let list = &self.lists[kind as usize];
        if list.is_empty() {
            return None;
        }
        let ok = |e: &Entry| e.kind == kind && !e.busy;
        let found = (0..NEAR.min(n))
            .map(|k| (start + k) % n)
            .find(|&i| ok(&self.entries[i]))
            .or_else(|| {
                // Sparse where selection pointed: an entry of the right kind at random (drawn
                // from `start`, so a run stays deterministic), then a scan as a last resort.
                let mut h = start as u64;
                (0..DRAWS)
                    .map(|_| {
                        h = crate::data::mix64(h.wrapping_add(0x9E37_79B9_7F4A_7C15));
                        list[(h % list.len() as u64) as usize] as usize
                    })
                    .find(|&i| ok(&self.entries[i]))
                    .or_else(|| {
                        list.iter()
                            .map(|&i| i as usize)
                            .find(|&i| ok(&self.entries[i]))
                    })
            })?;
        self.entries[found].busy = true;
        Some(found)
    }

    fn move_to(&mut self, i: usize, kind: Kind) {
        let from_kind = self.entries[i].kind;
        let at = self.place[i] as usize;
        let from = &mut self.lists[from_kind as usize];
        from.swap_remove(at);
        if at < from.len() {
            self.place[from[at] as usize] = at as u32;
        }
        let to = &mut self.lists[kind as usize];
        to.push(i as u32);
        self.place[i] = (to.len() - 1) as u32;
        self.entries[i].kind = kind;
        self.present = self.lists[Kind::File as usize].len() as u64;
    }

    /// Give a file entry back after an operation: whether the file exists now, and its size.
    pub fn release(&mut self, i: usize, exists: bool, size: u64) {
        self.release_as(i, if exists { Kind::File } else { Kind::Free }, size);
    }

    /// Give a directory entry back: whether the directory exists now.
    pub fn release_dir(&mut self, i: usize, exists: bool) {
        self.release_as(i, if exists { Kind::Dir } else { Kind::Free }, 0);
    }

    fn release_as(&mut self, i: usize, kind: Kind, size: u64) {
        if self.entries[i].kind != kind {
            self.move_to(i, kind);
        }
        let e = &mut self.entries[i];
        e.size = if kind == Kind::File { size } else { 0 };
        e.busy = false;
    }
}

/// The entries of a set no stream can create, delete, rename or remove (every stream on it
/// only opens, reads, writes into, stats or sets times of what is there): which exist never
/// changes during the run, so a stat picks its entry here without the table's lock. The lock
/// and the busy mark only keep an entry from vanishing or appearing under a call; with
/// several threads on two cores, taking it twice per stat was what kept tilemark's stat
/// rate at 0.92x of the same calls in C (bench/file_ops.py).
#[derive(Debug)]
pub struct FixedSet {
    /// Per entry: its directory and kind (never changes).
    entries: Vec<(u32, Kind)>,
    /// Per kind: the entries of that kind.
    lists: [Vec<u32>; 3],
}

impl FixedSet {
    /// The fixed view of `table` as the run starts.
    pub fn of(table: &Table) -> Self {
        FixedSet {
            entries: table.entries.iter().map(|e| (e.dir, e.kind)).collect(),
            lists: table.lists.clone(),
        }
    }

    /// An entry of `kind` (File or Dir) and its directory: from `start`, probing `NEAR`
    /// entries forward as `Table::take` does, then one drawn from the kind's list; None if
    /// the set has none of that kind. Nothing is marked busy: stats do not conflict.
    pub fn pick(&self, start: usize, kind: Kind) -> Option<(usize, u32)> {
        let n = self.entries.len();
        let list = &self.lists[kind as usize];
        if list.is_empty() {
            return None;
        }
        let i = (0..NEAR.min(n))
            .map(|k| (start + k) % n)
            .find(|&i| self.entries[i].1 == kind)
            .unwrap_or_else(|| {
                let h = crate::data::mix64((start as u64).wrapping_add(0x9E37_79B9_7F4A_7C15));
                list[(h % list.len() as u64) as usize] as usize
            });
        Some((i, self.entries[i].0))
    }
}

/// Where a stream's picks start: uniform over the entries, a scrambled zipf rank, or the next
/// entry in order (a cursor shared by the stream's threads).
#[derive(Clone, Debug)]
pub enum Picker {
    Uniform(u64),
    Zipf {
        zipf: Zipf,
        n: u64,
        scramble: u64,
    },
    Sequential {
        next: Arc<AtomicU64>,
        n: u64,
    },
    /// Ranks below `hot` drawn with probability `prob`, the others otherwise.
    Hot {
        n: u64,
        hot: u64,
        prob: f64,
        scramble: u64,
    },
}

impl Picker {
    /// `cursor`: the stream's shared place in the entries (used by sequential selection).
    pub fn new(select: &Select, n: usize, cursor: &Arc<AtomicU64>) -> Self {
        let n = n as u64;
        match select {
            Select::Uniform => Picker::Uniform(n),
            Select::Sequential => Picker::Sequential {
                next: cursor.clone(),
                n,
            },
            Select::Zipf { theta } => Picker::Zipf {
                zipf: Zipf::new(n, *theta),
                n,
                // Popular files spread over the directories, not the first ones in order.
                scramble: crate::stream::coprime_multiplier(n),
            },
            Select::Hot { share, prob } => Picker::Hot {
                n,
                // At least one entry is hot, and at least one cold when there are two.
                hot: ((share * n as f64).round() as u64).clamp(1, n.saturating_sub(1).max(1)),
                prob: *prob,
                scramble: crate::stream::coprime_multiplier(n),
            },
        }
    }

    /// Where a create or mkdir looks for a free entry: uniform, except in order for a
    /// sequential stream.
    pub fn free_start(&self, rng: &mut Rng) -> usize {
        match self {
            Picker::Sequential { .. } => self.pick(rng),
            Picker::Uniform(n) | Picker::Zipf { n, .. } | Picker::Hot { n, .. } => {
                rng.below(*n) as usize
            }
        }
    }

    pub fn pick(&self, rng: &mut Rng) -> usize {
        match self {
            Picker::Uniform(n) => rng.below(*n) as usize,
            Picker::Sequential { next, n } => (next.fetch_add(1, Ordering::Relaxed) % n) as usize,
            Picker::Zipf { zipf, n, scramble } => {
                let rank = zipf.sample(rng) - 1;
                ((rank as u128 * *scramble as u128) % *n as u128) as usize
            }
            Picker::Hot {
                n,
                hot,
                prob,
                scramble,
            } => {
                let rank = if *hot >= *n || rng.next_f64() < *prob {
                    rng.below(*hot)
                } else {
                    hot + rng.below(n - hot)
                };
                ((rank as u128 * *scramble as u128) % *n as u128) as usize
            }
        }
    }
}

/// The next operation of a stream: drawn from the weighted mix, or the sequence in order.
#[derive(Clone, Debug)]
pub struct OpMix {
    /// (cumulative weight share, op), or the sequence.
    cdf: Vec<(f64, FileOp)>,
    sequence: bool,
    next: usize,
}

impl OpMix {
    pub fn new(ops: &[(FileOp, f64)], sequence: bool) -> Self {
        if sequence {
            return OpMix {
                cdf: ops.iter().map(|&(op, _)| (0.0, op)).collect(),
                sequence,
                next: 0,
            };
        }
        let total: f64 = ops.iter().map(|o| o.1).sum();
        let mut acc = 0.0;
        let cdf = ops
            .iter()
            .filter(|o| o.1 > 0.0)
            .map(|&(op, w)| {
                acc += w / total;
                (acc, op)
            })
            .collect();
        OpMix {
            cdf,
            sequence,
            next: 0,
        }
    }

    /// The next op, and whether it starts a new loop of a sequence (a mix: always true).
    pub fn next(&mut self, rng: &mut Rng) -> (FileOp, bool) {
        if self.sequence {
            let first = self.next == 0;
            let op = self.cdf[self.next].1;
            self.next = (self.next + 1) % self.cdf.len();
            return (op, first);
        }
        let u = rng.next_f64();
        let op = self
            .cdf
            .iter()
            .find(|c| u < c.0)
            .unwrap_or(self.cdf.last().expect("validated mix"))
            .1;
        (op, true)
    }

    /// Operations per loop (1 for a mix).
    pub fn loop_len(&self) -> usize {
        if self.sequence {
            self.cdf.len()
        } else {
            1
        }
    }
}

/// Per-op counts, for the tests.
pub fn count_ops(mix: &mut OpMix, rng: &mut Rng, n: usize) -> [u64; FILE_OPS] {
    let mut counts = [0u64; FILE_OPS];
    for _ in 0..n {
        counts[mix.next(rng).0 as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(text: &[(FileOp, f64)]) -> OpMix {
        OpMix::new(text, false)
    }

    #[test]
    fn a_mix_draws_each_op_in_proportion_to_its_weight() {
        use FileOp::*;
        let weights = [
            (Open, 1.0),
            (Read, 4.0),
            (Close, 1.0),
            (Stat, 2.0),
            (Create, 0.5),
            (Append, 1.0),
            (Fsync, 0.5),
            (Delete, 0.5),
            (Rename, 0.5),
        ];
        let total: f64 = weights.iter().map(|w| w.1).sum();
        let n = 200_000;
        let counts = count_ops(&mut mix(&weights), &mut Rng::new(7), n);
        for (op, w) in weights {
            let share = counts[op as usize] as f64 / n as f64;
            assert!((share - w / total).abs() < 0.005, "{op:?}: {share}");
        }
    }

    #[test]
    fn a_zero_weight_op_is_never_drawn() {
        use FileOp::*;
        let counts = count_ops(
            &mut mix(&[(Stat, 1.0), (Delete, 0.0)]),
            &mut Rng::new(1),
            10_000,
        );
        assert_eq!(counts[Delete as usize], 0);
        assert_eq!(counts[Stat as usize], 10_000);
    }

    #[test]
    fn a_sequence_is_walked_in_order_and_marks_each_loop_start() {
        use FileOp::*;
        let mut m = OpMix::new(&[(Delete, 1.0), (Create, 1.0), (Fsync, 0.0)], true);
        let mut rng = Rng::new(1);
        let got: Vec<_> = (0..6).map(|_| m.next(&mut rng)).collect();
        assert_eq!(
            got,
            vec![
                (Delete, true),
                (Create, false),
                (Fsync, false),
                (Delete, true),
                (Create, false),
                (Fsync, false)
            ]
        );
        assert_eq!(m.loop_len(), 3);
    }

    #[test]
    fn taking_skips_busy_and_missing_entries_and_release_keeps_the_count() {
        let mut t = Table::new(&[(0, Some(10)), (0, None), (0, Some(20))]);
        assert_eq!(t.present, 2);
        assert_eq!(t.take_existing(0), Some(0));
        // Entry 0 is busy, 1 does not exist: the next existing idle one is 2.
        assert_eq!(t.take_existing(0), Some(2));
        assert_eq!(t.take_existing(1), None);
        assert_eq!(t.take_free(0), Some(1));
        assert_eq!(t.take_free(0), None);
        t.release(1, true, 5); // created
        t.release(0, false, 0); // deleted
        t.release(2, true, 30); // appended to
        assert_eq!(t.present, 2);
        assert_eq!(t.bytes(), 35);
        assert_eq!(t.take_free(2), Some(0));
    }

    #[test]
    fn a_sparse_set_finds_its_few_files_and_keeps_its_lists_right() {
        // 1,000,000 entries, 5 of them existing: picks land on those, wherever they start.
        let mut spec = vec![(0u32, None); 1_000_000];
        for i in [3usize, 250_000, 500_001, 750_002, 999_999] {
            spec[i] = (0, Some(1));
        }
        let mut t = Table::new(&spec);
        let mut rng = Rng::new(9);
        for _ in 0..10_000 {
            let start = rng.below(1_000_000) as usize;
            let i = t.take_existing(start).expect("an existing entry");
            assert!(t.entries[i].exists());
            // Delete it and create another in a free entry: the count stays 5.
            t.release(i, false, 0);
            let j = t.take_free(rng.below(1_000_000) as usize).unwrap();
            assert!(!t.entries[j].exists());
            t.release(j, true, 1);
        }
        assert_eq!(t.present, 5);
        let listed: Vec<usize> = (0..1_000_000).filter(|&i| t.entries[i].exists()).collect();
        assert_eq!(listed.len(), 5);
        for &i in &listed {
            assert_eq!(t.lists[1][t.place[i] as usize] as usize, i);
        }
        assert_eq!(t.lists[1].len() + t.lists[0].len(), 1_000_000);
    }

    #[test]
    fn files_and_directories_are_taken_apart_and_released_as_the_call_left_them() {
        use FileOp::*;
        // Entries 0 and 1 are directories, 2 is free.
        let mut t = Table::with_kind(&[(0, Some(0)), (0, Some(0)), (0, None)], true);
        assert_eq!((t.present, t.dirs_present()), (0, 2));
        // A file op finds no file; a directory op finds a directory, never the free entry.
        assert_eq!(t.take_for(Stat, 2), None);
        assert_eq!(t.take_for(Setattr, 0), None);
        let d = t.take_for(Rmdir, 2).expect("a directory");
        assert!(d.0 < 2);
        t.release_after(Rmdir, d, true); // removed: free now
        assert_eq!(t.dirs_present(), 1);
        let m = t.take_for(Mkdir, 0).expect("a free entry");
        assert!(t.entries[m.0].kind == Kind::Free);
        t.release_after(Mkdir, m, true);
        assert_eq!(t.dirs_present(), 2);
        // A failed mkdir leaves the entry free; a statdir leaves a directory a directory.
        let f = t.take_for(Mkdir, 0).expect("the last free entry");
        t.release_after(Mkdir, f, false);
        assert!(t.entries[f.0].kind == Kind::Free && !t.entries[f.0].busy);
        let s = t.take_for(Statdir, 0).unwrap();
        t.release_after(Statdir, s, true);
        assert_eq!((t.present, t.dirs_present()), (0, 2));
        // The rename pair gives back what it took when half is missing (no file here).
        assert_eq!(t.take_rename_pair(0, 0), None);
        assert!(t.entries.iter().all(|e| !e.busy));
    }

    #[test]
    fn a_full_set_has_no_free_entry_and_an_empty_one_none_existing() {
        let mut full = Table::new(&[(0, Some(1)), (0, Some(1))]);
        assert_eq!(full.take_free(0), None);
        let mut empty = Table::new(&[(0, None)]);
        assert_eq!(empty.take_existing(0), None);
    }

    #[test]
    fn zipf_selection_favours_few_files_and_uniform_does_not() {
        let n = 1000;
        let mut rng = Rng::new(3);
        let top_share = |p: &Picker, rng: &mut Rng| {
            let mut counts = vec![0u64; n];
            for _ in 0..100_000 {
                counts[p.pick(rng)] += 1;
            }
            counts.sort_unstable_by(|a, b| b.cmp(a));
            counts[..10].iter().sum::<u64>() as f64 / 100_000.0
        };
        let zipf = top_share(
            &Picker::new(&Select::Zipf { theta: 1.2 }, n, &Arc::default()),
            &mut rng,
        );
        let uniform = top_share(&Picker::new(&Select::Uniform, n, &Arc::default()), &mut rng);
        assert!(zipf > 0.5, "zipf top 1% share {zipf}");
        assert!(uniform < 0.03, "uniform top 1% share {uniform}");
    }

    #[test]
    fn a_hot_set_takes_its_probability_of_the_picks_over_its_share_of_the_entries() {
        let (n, picks) = (1000, 200_000);
        let mut rng = Rng::new(5);
        let picker = Picker::new(
            &Select::Hot {
                share: 0.2,
                prob: 0.8,
            },
            n,
            &Arc::default(),
        );
        let mut counts = vec![0u64; n];
        for _ in 0..picks {
            counts[picker.pick(&mut rng)] += 1;
        }
        // The 200 most picked entries are the hot set: 80% of the picks (+-1%), each about
        // 0.4%; every cold entry about 0.025%, none left out.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by(|&a, &b| counts[b].cmp(&counts[a]));
        let hot_picks: u64 = order[..200].iter().map(|&i| counts[i]).sum();
        let share = hot_picks as f64 / picks as f64;
        assert!((share - 0.8).abs() < 0.01, "hot share {share}");
        let (coldest_hot, hottest_cold) = (counts[order[199]], counts[order[200]]);
        assert!(
            coldest_hot > 2 * hottest_cold,
            "{coldest_hot} vs {hottest_cold}"
        );
        assert!(counts.iter().all(|&c| c > 0));
        // Scattered over the entries (so over the directories), not the first 200 in order.
        let first: usize = order[..200].iter().filter(|&&i| i < 200).count();
        assert!(first < 100, "{first} of the hot entries are the first 200");
        // Creates look for a free entry anywhere, not only in the hot set.
        let starts: std::collections::HashSet<usize> =
            (0..5000).map(|_| picker.free_start(&mut rng)).collect();
        assert!(starts.len() > 900);
    }
}
