//! Three placements and choices fio makes that a stream may ask for (plan fields of the next
//! plan version, all optional; a stream without them never reaches this code):
//!
//! - a fixed sequence of block indices (fio's `random_distribution=sequence:2,0,1`, with
//!   `random_sequence_stride`; io_u.c __get_next_rand_offset_sequence),
//! - strided zones on a sequential stream (fio's `zonemode=strided`, `zonesize`, `zonerange`,
//!   `zoneskip`; io_u.c setup_strided_zone_mode): `size` bytes in a zone of `range` bytes,
//!   then on `range + skip` bytes to the next zone, zone after zone in time,
//! - IO priorities by direction and size (fio's `cmdprio_bssplit`; engines/cmdprio.c
//!   fio_cmdprio_set_ioprio).
//!
//! Kept apart from stream.rs so the IO path there only tests whether a stream uses them.

use crate::plan::{SizeOp, SizePrio, StridedZones};
use crate::rng::Rng;

/// The block of IO number `issued` (of its direction) in a sequence: the sequence's entry
/// `issued % len`, plus with `stride` the sequence's length times the cycles done (fio's
/// "moving block group"). Blocks past the region's `blocks` wrap around it (the translation
/// ends the stream before, as fio ends its job there).
#[inline]
pub fn sequence_block(seq: &[u64], stride: bool, issued: u64, blocks: u64) -> u64 {
    let n = seq.len() as u64;
    let entry = seq[(issued % n) as usize];
    let b = if stride {
        (issued / n).saturating_mul(n).saturating_add(entry)
    } else {
        entry
    };
    b % blocks
}

/// Where a stream with strided zones is: the current zone's start and the bytes done in it.
#[derive(Clone, Debug)]
pub struct ZoneState {
    spec: StridedZones,
    start: u64,
    bytes: u64,
}

impl ZoneState {
    pub fn new(spec: StridedZones) -> Self {
        ZoneState {
            spec,
            start: 0,
            bytes: 0,
        }
    }

    /// The offset of a sequential IO of `len` bytes whose direction's position is `pos`, in a
    /// region of `length` bytes, as fio's setup_strided_zone_mode moves it: to the next zone
    /// once `size` bytes were done in this one (a zone at or past the region's end: its
    /// start), and to the zone's start when the position left the zone's range.
    #[inline(never)]
    pub fn place(&mut self, pos: u64, len: u64, length: u64) -> u64 {
        let mut pos = pos;
        if self.bytes >= self.spec.size {
            self.bytes = 0;
            self.start = self.start.saturating_add(self.spec.range + self.spec.skip);
            if self.start >= length {
                self.start = 0;
            }
            pos = self.start;
        }
        if pos >= self.start + self.spec.range {
            pos = self.start;
        }
        self.bytes += len;
        pos
    }
}

/// A stream's `ioprio_by_size` ready for the IO path: per entry its direction (0 read, 1
/// write), size and cumulative shares (fraction, IOPRIO value).
#[derive(Clone, Debug)]
pub struct SizePrios {
    entries: Vec<(usize, u32, Shares)>,
}

/// Cumulative fractions and the IOPRIO value of each share.
type Shares = Vec<(f64, u16)>;

impl SizePrios {
    pub fn new(spec: &[SizePrio]) -> Self {
        let entries = spec
            .iter()
            .map(|e| {
                let mut acc = 0.0;
                let shares = e
                    .shares
                    .iter()
                    .map(|s| {
                        acc += s.pct / 100.0;
                        (acc, s.prio().value())
                    })
                    .collect();
                (
                    matches!(e.op, SizeOp::Write) as usize,
                    e.size as u32,
                    shares,
                )
            })
            .collect();
        SizePrios { entries }
    }

    /// The priority of an IO of direction `op` and `len` bytes: fio's fio_cmdprio_set_ioprio
    /// (one number drawn for an IO whose size has shares; the first share it falls in, else
    /// `own`). IOs of other sizes draw nothing.
    pub fn draw(&self, op: usize, len: u32, own: u16, rng: &mut Rng) -> u16 {
        let Some((_, _, shares)) = self.entries.iter().find(|e| e.0 == op && e.1 == len) else {
            return own;
        };
        let u = rng.next_f64();
        shares.iter().find(|s| u < s.0).map_or(own, |s| s.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::IoPrioShare;

    #[test]
    fn a_fixed_sequence_repeats_and_a_strided_one_moves_by_its_length() {
        // examples/sequence-distribution.fio: "Accessed block indices: 2, 0, 1, 2, 0, 1" and
        // with random_sequence_stride=1 "2, 0, 1, 5, 3, 4".
        let seq = [2, 0, 1];
        let fixed: Vec<u64> = (0..6).map(|i| sequence_block(&seq, false, i, 12)).collect();
        assert_eq!(fixed, [2, 0, 1, 2, 0, 1]);
        let strided: Vec<u64> = (0..6).map(|i| sequence_block(&seq, true, i, 12)).collect();
        assert_eq!(strided, [2, 0, 1, 5, 3, 4]);
        // Past the region: around it.
        assert_eq!(sequence_block(&seq, true, 12, 12), 2);
    }

    #[test]
    fn strided_zones_do_size_bytes_per_zone_then_move_range_plus_skip() {
        // disk-zone-profile.fio in small: 64k IOs, zonesize 256k, zoneskip 512k, 3m region.
        let mut z = ZoneState::new(StridedZones {
            size: 256 << 10,
            range: 256 << 10,
            skip: 512 << 10,
        });
        let (len, length) = (64u64 << 10, 3u64 << 20);
        let mut pos = 0;
        let mut offsets = vec![];
        for _ in 0..20 {
            let off = z.place(pos, len, length);
            offsets.push(off >> 10);
            pos = off + len;
        }
        let zone = |s: u64| (0..4).map(move |i| s + 64 * i);
        let expected: Vec<u64> = zone(0)
            .chain(zone(768))
            .chain(zone(1536))
            .chain(zone(2304))
            .chain(zone(0)) // 3072k is the region's end: back to its start
            .collect();
        assert_eq!(offsets, expected);
    }

    #[test]
    fn a_zone_smaller_than_its_size_is_gone_over_again() {
        // HOWTO zonesize: "larger than zonerange then each zone will be accessed multiple
        // times before skipping to the next zone".
        let mut z = ZoneState::new(StridedZones {
            size: 16,
            range: 8,
            skip: 8,
        });
        let mut pos = 0;
        let mut offsets = vec![];
        for _ in 0..6 {
            let off = z.place(pos, 4, 64);
            offsets.push(off);
            pos = off + 4;
        }
        assert_eq!(offsets, [0, 4, 0, 4, 16, 20]);
    }

    #[test]
    fn priorities_by_size_follow_their_shares_and_leave_other_sizes_alone() {
        use crate::plan::PrioClass;
        let share = |pct, class, level| IoPrioShare {
            pct,
            class,
            level,
            hint: 0,
        };
        // cmdprio-bssplit.fio [cmdprio-adv]: 64k reads 25% rt/1, 75% idle; 1m at the own.
        let p = SizePrios::new(&[SizePrio {
            op: SizeOp::Read,
            size: 65536,
            shares: vec![
                share(25.0, PrioClass::Rt, 1),
                share(75.0, PrioClass::Idle, 0),
            ],
        }]);
        let own = 2 << 13 | 7;
        let mut rng = Rng::new(7);
        let (mut rt, mut idle) = (0, 0);
        for _ in 0..10_000 {
            match p.draw(0, 65536, own, &mut rng) {
                v if v == (1 << 13 | 1) => rt += 1,
                v if v == 3 << 13 => idle += 1,
                v => panic!("unexpected priority {v:#x}"),
            }
        }
        assert!((2300..2700).contains(&rt), "{rt}");
        assert_eq!(rt + idle, 10_000);
        assert_eq!(p.draw(0, 1 << 20, own, &mut rng), own);
        assert_eq!(p.draw(1, 65536, own, &mut rng), own);
    }

    /// A plan (of `version`) of one stream over a 48k region (fio's size=48k), `extra`
    /// replacing its fields.
    fn plan(extra: &str, version: u32) -> crate::error::Result<crate::plan::Plan> {
        let mut stream: serde_json::Value = serde_json::from_str(
            r#"{"name":"s","regions":[{"target":0,"length":49152}],"read_pct":100,
            "sizes":[[4096,1]],"pattern":{"kind":"random"},"align":4096,"qd":1,
            "arrival":{"kind":"closed"},"seed":3}"#,
        )
        .unwrap();
        let extra: serde_json::Value =
            serde_json::from_str(&format!("{{{}}}", extra.trim_start_matches(','))).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            stream[k] = v.clone();
        }
        let plan = serde_json::json!({"plan_version":version,"backend":"null","threads":1,
            "interval_ms":1000,"targets":[{"path":"/x","length":1048576}],"streams":[stream]});
        crate::plan::Plan::from_json(&plan.to_string())
    }

    fn stream(extra: &str) -> crate::stream::StreamState {
        use crate::stream::{StreamState, TargetFiles};
        let plan = plan(extra, crate::plan::PLAN_VERSION).unwrap();
        StreamState::new(0, &plan.streams[0], &[TargetFiles::default()])
    }

    #[test]
    fn a_stream_with_a_sequence_issues_its_blocks_per_direction() {
        let mut s = stream(r#","pattern":{"kind":"sequence","blocks":[2,0,1],"stride":true}"#);
        let blocks: Vec<u64> = (0..6).map(|_| s.next_io().offset / 4096).collect();
        assert_eq!(blocks, [2, 0, 1, 5, 3, 4]);
        // A mix counts each direction on its own (fio's io_issues[ddir]).
        let mut s = stream(r#","read_pct":50,"pattern":{"kind":"sequence","blocks":[2,0,1]}"#);
        let mut per_op: [Vec<u64>; 2] = [vec![], vec![]];
        for _ in 0..40 {
            let io = s.next_io();
            per_op[io.kind as usize].push(io.offset / 4096);
        }
        for seen in &per_op {
            assert!(seen.len() > 5);
            assert!(seen.iter().enumerate().all(|(i, &b)| b == [2, 0, 1][i % 3]));
        }
    }

    #[test]
    fn a_sequential_stream_with_zones_reads_size_then_skips() {
        let mut s = stream(
            r#","pattern":{"kind":"sequential"},"random_pct":0,
            "zones":{"size":8192,"range":8192,"skip":16384}"#,
        );
        let kb: Vec<u64> = (0..10).map(|_| s.next_io().offset >> 10).collect();
        assert_eq!(kb, [0, 4, 24, 28, 0, 4, 24, 28, 0, 4]);
    }

    #[test]
    fn writes_take_their_own_sizes_and_priorities_go_by_size() {
        let mut s = stream(
            r#","read_pct":50,"sizes":[[4096,40],[16384,60]],"write_sizes":[[8192,1]],
            "ioprio":{"class":"be","level":7},
            "ioprio_by_size":[{"op":"read","size":4096,"shares":[{"pct":100,"class":"rt","level":0}]},
                {"op":"write","size":8192,"shares":[{"pct":50,"class":"be","level":0,"hint":1}]}]"#,
        );
        let (be7, rt0, be0h1) = (2 << 13 | 7, 1 << 13, 2 << 13 | 1 << 3);
        let mut n = std::collections::HashMap::new();
        for _ in 0..20_000 {
            let io = s.next_io();
            *n.entry((io.kind as usize, io.len, io.ioprio))
                .or_insert(0u32) += 1;
        }
        let got = |k| *n.get(&k).unwrap_or(&0);
        // Reads: 40% 4k, all rt/0; 60% 16k at the stream's be/7. Writes: 8k, half be/0 hint 1.
        assert_eq!(got((0, 4096, be7)), 0);
        assert!((3600..4400).contains(&got((0, 4096, rt0))));
        assert!((5500..6500).contains(&got((0, 16384, be7))));
        assert!((4500..5500).contains(&got((1, 8192, be0h1))));
        assert!((4500..5500).contains(&got((1, 8192, be7))));
        assert_eq!(n.keys().filter(|k| k.0 == 1).count(), 2, "{n:?}");
    }

    #[test]
    fn plans_refuse_what_these_fields_cannot_mean() {
        let plan = |extra: &str, version| plan(extra, version).map(|_| ());
        let v = crate::plan::PLAN_VERSION;
        assert!(plan(r#","pattern":{"kind":"sequence","blocks":[1]}"#, v).is_ok());
        for bad in [
            r#","pattern":{"kind":"sequence","blocks":[]}"#,
            r#","pattern":{"kind":"sequence","blocks":[1]},"random_pct":50"#,
            r#","zones":{"size":4096,"range":4096}"#,
            r#","pattern":{"kind":"sequential"},"zones":{"size":0,"range":4096}"#,
            r#","write_sizes":[]"#,
            r#","ioprio_by_size":[{"op":"read","size":4096,"shares":[{"pct":60,"class":"rt"},{"pct":50,"class":"be"}]}]"#,
            r#","ioprio_by_size":[],"ioprio_share":{"pct":10,"class":"rt"}"#,
            r#","ioprio":{"class":"be","hint":1024}"#,
        ] {
            assert!(plan(bad, v).is_err(), "{bad}");
        }
        assert!(
            plan(r#","write_sizes":[[8192,1]]"#, 5).is_err(),
            "needs the new version"
        );
    }
}
