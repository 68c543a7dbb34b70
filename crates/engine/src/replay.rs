//! Replaying a list of recorded IOs: the file Python compiles from a trace for one stream
//! (python/tilemark/trace/replay.py), read in chunks so memory stays bounded however long the
//! trace is (docs/engine-boundary.md, "Replayed IO lists").
//!
//! The file is a 32-byte header and `count` records of 32 bytes, little-endian:
//!
//! ```text
//! header: magic "TMIOLIST" | version u32 (1) | record size u32 (32) | count u64 | 0 u64
//! record: time_ns u64 | offset u64 | deps u64 | len u32 | op u8 | flags u8 | 0 u16
//! ```
//!
//! `time_ns` is when the IO is due, relative to the stream's start (already divided by the
//! replay speed), non-decreasing; `offset` is relative to the stream's region (already
//! remapped and aligned); `deps` is how many of the stream's IOs had completed when the
//! recorded IO was issued (afap); `op` 0 read, 1 write, 2 flush, 3 discard; flag bit 0 is FUA
//! (a write that is durable when it completes), bit 1 marks a write the traced kernel wrote
//! back from the page cache (no sync flag), replayed as an uncached page-cache write
//! (backend/mod.rs `UncachedKind`) so that it reaches the device as such. The engine checks every record against the
//! stream's region and alignment before the run starts, so a damaged or foreign file can never
//! send IO outside the region the plan gave.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::error::{EngineError, Result};
use crate::plan::{IoListSpec, ReplayMode};

pub const MAGIC: &[u8; 8] = b"TMIOLIST";
pub const FORMAT_VERSION: u32 = 1;
pub const RECORD_BYTES: usize = 32;
pub const HEADER_BYTES: u64 = 32;
/// Flag bit: a write with forced unit access (replayed as a write with O_DSYNC).
pub const FLAG_FUA: u8 = 1;
/// Flag bit: a page-cache writeback write (replayed as an uncached page-cache write).
pub const FLAG_WRITEBACK: u8 = 2;
/// Records read per refill on the engine thread: 64 KiB, a pread every 2,048 IOs.
const CHUNK: usize = 2048;
/// Largest IO a record may ask for (the engine's buffers are sized by 32-bit lengths).
const MAX_LEN: u32 = 1 << 31;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecOp {
    Read = 0,
    Write = 1,
    Flush = 2,
    Discard = 3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub time_ns: u64,
    pub offset: u64,
    pub deps: u64,
    pub len: u32,
    pub op: RecOp,
    pub flags: u8,
}

impl Record {
    fn decode(b: &[u8]) -> std::result::Result<Record, String> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let op = match b[28] {
            0 => RecOp::Read,
            1 => RecOp::Write,
            2 => RecOp::Flush,
            3 => RecOp::Discard,
            other => return Err(format!("op {other} is not 0..3")),
        };
        let flags = b[29];
        if flags & !(FLAG_FUA | FLAG_WRITEBACK) != 0 {
            return Err(format!("flags {flags:#x} has unknown bits"));
        }
        if flags & FLAG_FUA != 0 && flags & FLAG_WRITEBACK != 0 {
            return Err("flags mark a write both FUA and page-cache writeback".into());
        }
        Ok(Record {
            time_ns: u64_at(0),
            offset: u64_at(8),
            deps: u64_at(16),
            len: u32::from_le_bytes(b[24..28].try_into().expect("4 bytes")),
            op,
            flags,
        })
    }

    /// The record's 32 bytes (tests write lists with it).
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..8].copy_from_slice(&self.time_ns.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.deps.to_le_bytes());
        b[24..28].copy_from_slice(&self.len.to_le_bytes());
        b[28] = self.op as u8;
        b[29] = self.flags;
        b
    }

    pub fn fua(&self) -> bool {
        self.flags & FLAG_FUA != 0
    }

    pub fn writeback(&self) -> bool {
        self.flags & FLAG_WRITEBACK != 0
    }
}

/// The header of a list of `count` records.
pub fn header(count: u64) -> [u8; HEADER_BYTES as usize] {
    let mut h = [0u8; HEADER_BYTES as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(RECORD_BYTES as u32).to_le_bytes());
    h[16..24].copy_from_slice(&count.to_le_bytes());
    h
}

/// What a check of a whole list found: what the engine must open the target for and how
/// large its buffers must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListInfo {
    /// Largest read or write.
    pub max_len: u32,
    /// Writes or discards: the target is opened for writing.
    pub writes: bool,
    /// FUA writes: the target's O_DSYNC file is opened.
    pub fua: bool,
    /// Page-cache writeback writes: the target's page-cache file is opened.
    pub writeback: bool,
}

fn open_list(spec: &IoListSpec, stream: &str) -> Result<File> {
    let mut file = File::open(&spec.path).map_err(|e| {
        EngineError::io(
            format!("stream '{stream}': cannot open IO list {}", spec.path),
            e,
        )
    })?;
    let mut h = [0u8; HEADER_BYTES as usize];
    let bad =
        |why: String| EngineError::Plan(format!("stream '{stream}': IO list {} {why}", spec.path));
    file.read_exact(&mut h)
        .map_err(|_| bad("is shorter than its header".into()))?;
    if &h[0..8] != MAGIC {
        return Err(bad("is not a tilemark IO list (no TMIOLIST magic)".into()));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    let size = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION || size as usize != RECORD_BYTES {
        return Err(bad(format!(
            "has format {version} with {size}-byte records; this engine reads format \
             {FORMAT_VERSION} with {RECORD_BYTES}-byte records"
        )));
    }
    let count = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
    if count != spec.count {
        return Err(bad(format!(
            "holds {count} records, the plan says {}",
            spec.count
        )));
    }
    let len = file
        .metadata()
        .map_err(|e| EngineError::io(format!("stream '{stream}': reading {}", spec.path), e))?
        .len();
    if len != HEADER_BYTES + count * RECORD_BYTES as u64 {
        return Err(bad(format!(
            "is {len} bytes, not the {} its {count} records take",
            HEADER_BYTES + count * RECORD_BYTES as u64
        )));
    }
    Ok(file)
}

/// Check every record of a list against the stream's region (`region_len` bytes) and
/// alignment (`align`, for data IOs and discards: 1 when nothing needs aligning), and that a
/// timed list's times never go back; what the engine needs to know to run it.
pub fn check(spec: &IoListSpec, region_len: u64, align: u64, stream: &str) -> Result<ListInfo> {
    let mut file = open_list(spec, stream)?;
    let mut info = ListInfo::default();
    let mut chunk = vec![0u8; 32 * 1024 * RECORD_BYTES];
    let mut index = 0u64;
    let mut last_time = 0u64;
    while index < spec.count {
        let n = ((spec.count - index) as usize).min(chunk.len() / RECORD_BYTES);
        let bytes = &mut chunk[..n * RECORD_BYTES];
        file.read_exact(bytes)
            .map_err(|e| EngineError::io(format!("stream '{stream}': reading {}", spec.path), e))?;
        for raw in bytes.chunks_exact(RECORD_BYTES) {
            let bad = |why: String| {
                EngineError::Plan(format!(
                    "stream '{stream}': IO list {} record {index}: {why}",
                    spec.path
                ))
            };
            let r = Record::decode(raw).map_err(bad)?;
            if spec.mode == ReplayMode::Timed && r.time_ns < last_time {
                return Err(bad(format!(
                    "time {} ns is before the previous record's {last_time} ns",
                    r.time_ns
                )));
            }
            last_time = r.time_ns;
            if r.op != RecOp::Flush {
                if r.len == 0 || r.len > MAX_LEN {
                    return Err(bad(format!("length {} is not 1..2^31", r.len)));
                }
                if r.offset
                    .checked_add(r.len as u64)
                    .is_none_or(|end| end > region_len)
                {
                    return Err(bad(format!(
                        "offset {} + length {} ends past the stream's region of {region_len} \
                         bytes",
                        r.offset, r.len
                    )));
                }
                if r.offset % align != 0 || r.len as u64 % align != 0 {
                    return Err(bad(format!(
                        "offset {} or length {} is not a multiple of the stream's align \
                         {align}",
                        r.offset, r.len
                    )));
                }
            }
            match r.op {
                RecOp::Read => info.max_len = info.max_len.max(r.len),
                RecOp::Write => {
                    info.max_len = info.max_len.max(r.len);
                    info.writes = true;
                    info.fua |= r.fua();
                    info.writeback |= r.writeback();
                }
                RecOp::Discard => info.writes = true,
                RecOp::Flush => {}
            }
            index += 1;
        }
    }
    Ok(info)
}

/// Where a stream is in its list: the next record, which pass of a looping list, how many of
/// its IOs have completed (afap). Records are read CHUNK at a time; the kernel is asked to
/// read the next chunk ahead, so a refill on the engine thread rarely waits for a disk.
pub struct Cursor {
    file: File,
    count: u64,
    mode: ReplayMode,
    loop_ns: Option<u64>,
    /// Timed: records also wait for their dependencies (IoListSpec::deps).
    timed_deps: bool,
    /// Timed: records this far apart in the list go in separate submissions (IoListSpec).
    split_ns: u64,
    /// Run time of the stream's start (record times count from it) and stop (timed: no record
    /// due at or after it is issued).
    start_ns: u64,
    stop_ns: u64,
    buf: Vec<Record>,
    /// Index of `buf[0]` in the list.
    buf_start: u64,
    /// Index of the next record in the list, and the pass over the list (loops).
    pos: u64,
    pass: u64,
    /// The stream's IOs completed so far (every pass).
    pub completed: u64,
    /// No record is left to issue.
    pub done: bool,
}

impl Cursor {
    /// A cursor at the first record of a list that `check` accepted.
    pub fn open(spec: &IoListSpec, start_ns: u64, stop_ns: u64, stream: &str) -> Result<Cursor> {
        let file = open_list(spec, stream)?;
        let mut c = Cursor {
            file,
            count: spec.count,
            mode: spec.mode,
            timed_deps: spec.deps && spec.mode == ReplayMode::Timed,
            split_ns: if spec.mode == ReplayMode::Timed {
                spec.split_ns
            } else {
                0
            },
            loop_ns: spec.loop_ns,
            start_ns,
            stop_ns,
            buf: Vec::with_capacity(CHUNK),
            buf_start: 0,
            pos: 0,
            pass: 0,
            completed: 0,
            done: false,
        };
        c.check_stop()
            .map_err(|e| EngineError::io(format!("stream '{stream}': reading {}", spec.path), e))?;
        Ok(c)
    }

    pub fn mode(&self) -> ReplayMode {
        self.mode
    }

    /// Records in one pass over the list.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The next record to issue, or None when the list is done.
    #[inline]
    pub fn peek(&mut self) -> io::Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        if self.pos < self.buf_start || self.pos >= self.buf_start + self.buf.len() as u64 {
            self.refill()?;
        }
        Ok(Some(self.buf[(self.pos - self.buf_start) as usize]))
    }

    /// Run time at which `rec` (of the current pass) is due.
    #[inline]
    pub fn due_ns(&self, rec: &Record) -> u64 {
        let shift = self.loop_ns.map_or(0, |p| p.saturating_mul(self.pass));
        self.start_ns
            .saturating_add(shift)
            .saturating_add(rec.time_ns)
    }

    /// Afap: have as many of the stream's IOs completed as had when `rec` was recorded?
    #[inline]
    pub fn deps_met(&self, rec: &Record) -> bool {
        self.completed >= self.pass * self.count + rec.deps
    }

    /// Timed with dependencies: must `rec` still wait for IOs to complete?
    #[inline]
    pub fn waits_for_deps(&self, rec: &Record) -> bool {
        self.timed_deps && !self.deps_met(rec)
    }

    /// Timed: was `rec` recorded so long after `prev` (recorded time) that it must go to the
    /// device in a submission of its own?
    #[inline]
    pub fn splits(&self, prev: u64, rec: &Record) -> bool {
        self.split_ns > 0 && rec.time_ns > prev.saturating_add(self.split_ns)
    }

    /// Move past the record `peek` returned.
    pub fn advance(&mut self) -> io::Result<()> {
        self.pos += 1;
        if self.pos == self.count {
            if self.loop_ns.is_some() {
                self.pos = 0;
                self.pass += 1;
            } else {
                self.done = true;
                return Ok(());
            }
        }
        self.check_stop()
    }

    /// Timed: the list is done once its next record falls due at or after the stop.
    fn check_stop(&mut self) -> io::Result<()> {
        if self.mode == ReplayMode::Timed && !self.done {
            if let Some(rec) = self.peek()? {
                if self.due_ns(&rec) >= self.stop_ns {
                    self.done = true;
                }
            }
        }
        Ok(())
    }

    /// Timed: records of the current pass due by run time `now` (and before the stop) and not
    /// yet issued. Found by binary search over the file when more than the buffered chunk are
    /// due: a stream far behind is counted exactly without reading the records in between.
    pub fn due_by(&mut self, now: u64) -> io::Result<u64> {
        let Some(next) = self.peek()? else {
            return Ok(0);
        };
        let limit = now.min(self.stop_ns.saturating_sub(1));
        if self.due_ns(&next) > limit {
            return Ok(0);
        }
        // The first index in (pos, count) whose record is due after `limit`.
        let shift = self.due_ns(&next) - next.time_ns;
        let (mut lo, mut hi) = (self.pos + 1, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if shift.saturating_add(self.time_at(mid)?) > limit {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo - self.pos)
    }

    /// The time of record `i`, from the buffer or the file.
    fn time_at(&self, i: u64) -> io::Result<u64> {
        if i >= self.buf_start && i < self.buf_start + self.buf.len() as u64 {
            return Ok(self.buf[(i - self.buf_start) as usize].time_ns);
        }
        let mut b = [0u8; 8];
        self.file
            .read_exact_at(&mut b, HEADER_BYTES + i * RECORD_BYTES as u64)?;
        Ok(u64::from_le_bytes(b))
    }

    fn refill(&mut self) -> io::Result<()> {
        let n = ((self.count - self.pos) as usize).min(CHUNK);
        let mut raw = vec![0u8; n * RECORD_BYTES];
        let at = HEADER_BYTES + self.pos * RECORD_BYTES as u64;
        self.file.read_exact_at(&mut raw, at)?;
        self.buf.clear();
        for r in raw.chunks_exact(RECORD_BYTES) {
            // `check` accepted every record before the run: decoding cannot fail unless the
            // file changed under the run.
            let rec =
                Record::decode(r).map_err(|why| io::Error::new(io::ErrorKind::InvalidData, why))?;
            self.buf.push(rec);
        }
        self.buf_start = self.pos;
        // Ask the kernel to read the next chunk (or the list's start, for the next pass).
        let next = if self.pos + n as u64 >= self.count {
            0
        } else {
            self.pos + n as u64
        };
        let ahead = (CHUNK * RECORD_BYTES) as i64;
        // SAFETY: posix_fadvise only advises the kernel about this open file's pages.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                (HEADER_BYTES + next * RECORD_BYTES as u64) as i64,
                ahead,
                libc::POSIX_FADV_WILLNEED,
            )
        };
        Ok(())
    }
}

/// Write a list of records to `path` (tests).
#[cfg(test)]
pub(crate) fn write_list(path: &std::path::Path, records: &[Record]) {
    use std::io::Write;
    let mut f = File::create(path).unwrap();
    f.write_all(&header(records.len() as u64)).unwrap();
    for r in records {
        f.write_all(&r.encode()).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn rec(time_ns: u64, offset: u64, len: u32, op: RecOp) -> Record {
        Record {
            time_ns,
            offset,
            deps: 0,
            len,
            op,
            flags: 0,
        }
    }

    fn spec(path: &std::path::Path, count: u64, mode: ReplayMode) -> IoListSpec {
        IoListSpec {
            path: path.to_str().unwrap().into(),
            count,
            mode,
            loop_ns: None,
            deps: false,
            split_ns: 0,
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("tilemark-replay-{}-{name}", std::process::id()))
    }

    #[test]
    fn check_accepts_a_good_list_and_says_what_it_needs() {
        let path = tmp("good");
        let mut fua = rec(20, 8192, 8192, RecOp::Write);
        fua.flags = FLAG_FUA;
        let mut writeback = rec(40, 0, 4096, RecOp::Write);
        writeback.flags = FLAG_WRITEBACK;
        let records = [
            rec(0, 0, 4096, RecOp::Read),
            rec(10, 4096, 4096, RecOp::Discard),
            fua,
            rec(30, 0, 0, RecOp::Flush),
            writeback,
        ];
        // What the target is opened for: the O_DSYNC file for FUA writes, the page-cache file
        // for writeback writes, each only when a record asks for it.
        write_list(&path, &records[..4]);
        let info = check(&spec(&path, 4, ReplayMode::Timed), 16384, 4096, "s").unwrap();
        assert_eq!(
            info,
            ListInfo {
                max_len: 8192,
                writes: true,
                fua: true,
                writeback: false
            }
        );
        write_list(&path, &records);
        let info = check(&spec(&path, 5, ReplayMode::Timed), 16384, 4096, "s").unwrap();
        assert!(info.fua && info.writeback, "{info:?}");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn check_refuses_records_outside_the_region_unaligned_or_out_of_order() {
        let path = tmp("bad");
        let refused = |records: &[Record], count: u64, why: &str| {
            write_list(&path, records);
            match check(&spec(&path, count, ReplayMode::Timed), 16384, 4096, "s") {
                Err(EngineError::Plan(m)) => assert!(m.contains(why), "{m}"),
                other => panic!("expected a refusal about {why}, got {other:?}"),
            }
        };
        refused(&[rec(0, 12288, 8192, RecOp::Read)], 1, "ends past");
        refused(&[rec(0, 512, 4096, RecOp::Write)], 1, "not a multiple");
        refused(&[rec(0, 0, 0, RecOp::Read)], 1, "length 0");
        refused(
            &[rec(5, 0, 4096, RecOp::Read), rec(4, 0, 4096, RecOp::Read)],
            2,
            "before the previous",
        );
        refused(&[rec(0, 0, 4096, RecOp::Read)], 2, "holds 1 records");
        let mut bad_op = rec(0, 0, 4096, RecOp::Read).encode();
        bad_op[28] = 7;
        let mut f = File::create(&path).unwrap();
        f.write_all(&header(1)).unwrap();
        f.write_all(&bad_op).unwrap();
        drop(f);
        match check(&spec(&path, 1, ReplayMode::Timed), 16384, 4096, "s") {
            Err(EngineError::Plan(m)) => assert!(m.contains("op 7"), "{m}"),
            other => panic!("{other:?}"),
        }
        let mut both = rec(0, 0, 4096, RecOp::Write);
        both.flags = FLAG_FUA | FLAG_WRITEBACK;
        refused(&[both], 1, "both FUA and page-cache writeback");
        let mut unknown = rec(0, 0, 4096, RecOp::Write);
        unknown.flags = 4;
        refused(&[unknown], 1, "unknown bits");
        std::fs::write(&path, b"not a list at all, just some text..").unwrap();
        match check(&spec(&path, 1, ReplayMode::Timed), 16384, 4096, "s") {
            Err(EngineError::Plan(m)) => assert!(m.contains("magic"), "{m}"),
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_cursor_walks_chunks_loops_and_counts_what_is_due() {
        let path = tmp("cursor");
        let n = CHUNK as u64 * 2 + 100;
        let records: Vec<Record> = (0..n)
            .map(|i| rec(i * 1000, (i % 16) * 4096, 4096, RecOp::Read))
            .collect();
        write_list(&path, &records);
        let mut s = spec(&path, n, ReplayMode::Timed);
        s.loop_ns = Some(n * 1000);
        let mut c = Cursor::open(&s, 5_000, u64::MAX, "s").unwrap();
        // Due at the start, then one every microsecond.
        assert_eq!(c.due_by(4_999).unwrap(), 0);
        assert_eq!(c.due_by(5_000).unwrap(), 1);
        assert_eq!(
            c.due_by(5_000 + 3_000_000).unwrap(),
            3001,
            "past the buffer: searched"
        );
        for i in 0..n + 3 {
            let r = c.peek().unwrap().unwrap();
            assert_eq!(r.offset, (i % n % 16) * 4096);
            assert_eq!(c.due_ns(&r), 5_000 + i * 1000, "record {i}");
            c.advance().unwrap();
        }
        // A stop ends a timed list at the first record due at or after it.
        let mut c = Cursor::open(&s, 0, 10_500, "s").unwrap();
        let mut issued = 0;
        while c.peek().unwrap().is_some() {
            c.advance().unwrap();
            issued += 1;
        }
        assert_eq!(issued, 11, "records due at 0, 1, ..., 10 us");
        assert!(c.done);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_timed_list_with_deps_holds_a_record_until_its_dependencies_completed() {
        let path = tmp("deps");
        let mut second = rec(1000, 4096, 4096, RecOp::Read);
        second.deps = 1; // recorded after the first IO completed
        write_list(&path, &[rec(0, 0, 4096, RecOp::Read), second]);
        let mut s = spec(&path, 2, ReplayMode::Timed);
        let plain = Cursor::open(&s, 0, u64::MAX, "s").unwrap();
        assert!(
            !plain.waits_for_deps(&second),
            "without deps a timed list never waits"
        );
        s.deps = true;
        let mut c = Cursor::open(&s, 0, u64::MAX, "s").unwrap();
        let first = c.peek().unwrap().unwrap();
        assert!(!c.waits_for_deps(&first));
        c.advance().unwrap();
        assert!(
            c.waits_for_deps(&second),
            "the first IO has not completed yet"
        );
        c.completed += 1;
        assert!(!c.waits_for_deps(&second));
        s.mode = ReplayMode::Qd; // deps only hold timed lists (afap always waits, qd never)
        let qd = Cursor::open(&s, 0, u64::MAX, "s").unwrap();
        assert!(!qd.waits_for_deps(&second));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_timed_list_with_split_ns_parts_records_recorded_apart() {
        let path = tmp("split");
        write_list(&path, &[rec(0, 0, 4096, RecOp::Read)]);
        let mut s = spec(&path, 1, ReplayMode::Timed);
        let at = |t| rec(t, 0, 4096, RecOp::Read);
        let batched = Cursor::open(&s, 0, u64::MAX, "s").unwrap();
        assert!(
            !batched.splits(0, &at(1_000_000)),
            "split_ns 0: one submission"
        );
        s.split_ns = 1000;
        let c = Cursor::open(&s, 0, u64::MAX, "s").unwrap();
        assert!(!c.splits(5000, &at(6000)), "recorded within 1 us: together");
        assert!(c.splits(5000, &at(6001)));
        s.mode = ReplayMode::Afap;
        assert!(!Cursor::open(&s, 0, u64::MAX, "s")
            .unwrap()
            .splits(0, &at(9999)));
        std::fs::remove_file(path).unwrap();
    }
}
