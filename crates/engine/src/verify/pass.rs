//! A verification pass: read a whole data area back and judge every block (Jetstress's
//! checksum pass). Several threads read 1 MiB chunks from a shared cursor; progress is a byte
//! count any thread can read while the pass runs.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::block::{self, Class, Expect, Verdict};
use super::{Finding, Findings, GenTable, Prior};
use crate::buf::AlignedBuf;
use crate::error::{EngineError, Result};

const CHUNK: u64 = 1 << 20;

/// What to check (docs/engine-boundary.md, Verification pass).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassSpec {
    pub path: String,
    pub data_offset: u64,
    pub data_length: u64,
    pub block_size: u64,
    pub target_id: u64,
    #[serde(default = "yes")]
    pub direct: bool,
    #[serde(default = "four")]
    pub threads: usize,
    /// The epoch blocks are judged against: the journal's run, or the target's latest epoch.
    pub epoch: u32,
    /// The target's latest epoch: blocks of later epochs up to it were rewritten by later runs.
    pub latest_epoch: u32,
    /// What blocks the journal's run never wrote hold (without a journal: every block).
    pub prior: Prior,
    /// Blocks that are not tilemark data are accepted (the target was written without
    /// verification since).
    #[serde(default)]
    pub foreign_ok: bool,
    #[serde(default)]
    pub journal: Option<String>,
    /// The machine restarted since the journal's run: writes that were not O_DSYNC may have
    /// been lost with the page cache, and the journal may lag the data.
    #[serde(default)]
    pub rebooted: bool,
}

fn yes() -> bool {
    true
}

fn four() -> usize {
    4
}

#[derive(Serialize)]
struct PassResult {
    complete: bool,
    bytes: u64,
    blocks: u64,
    seconds: f64,
    mbps: f64,
    threads: usize,
    journal_closed: Option<bool>,
    io_errors: BTreeMap<String, u64>,
    first_io_error: Option<String>,
    #[serde(flatten)]
    findings: Findings,
}

struct Shared {
    spec: PassSpec,
    journal: Option<GenTable>,
    cursor: AtomicU64,
    done: AtomicU64,
    stop: AtomicBool,
    finished: (Mutex<bool>, Condvar),
}

/// A running pass.
pub struct Pass {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<Result<String>>>,
    result: Option<Result<String>>,
}

impl Pass {
    /// Check the spec, open the journal, start the readers.
    pub fn start(spec: PassSpec) -> Result<Pass> {
        let b = spec.block_size;
        if !(512..=crate::data::MAX_BLOCK as u64).contains(&b) || b % 512 != 0 {
            return Err(EngineError::Plan(format!(
                "block_size {b} is not a multiple of 512 up to 64 KiB"
            )));
        }
        if spec.threads == 0 || spec.threads > 256 {
            return Err(EngineError::Plan("threads must be 1..256".into()));
        }
        let (journal, closed) = match &spec.journal {
            Some(path) => {
                let (table, header) = GenTable::open_journal(path)
                    .map_err(|e| EngineError::io(format!("cannot read journal {path}"), e))?;
                let doc: serde_json::Value = serde_json::from_str(&header).unwrap_or_default();
                // A pass may read less than the journal covers (the front end limits a pass
                // over a file cut short to what is left), never more.
                if (table.len() as u64) * b < spec.data_length {
                    return Err(EngineError::Plan(format!(
                        "journal {path} covers {} blocks, the data area {}",
                        table.len(),
                        spec.data_length / b
                    )));
                }
                (Some(table), doc["closed"].as_bool())
            }
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            spec,
            journal,
            cursor: AtomicU64::new(0),
            done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            finished: (Mutex::new(false), Condvar::new()),
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("tilemark-verify".into())
            .spawn(move || {
                let r = run(&s, closed);
                *s.finished.0.lock().unwrap() = true;
                s.finished.1.notify_all();
                r
            })
            .map_err(|e| EngineError::io("spawning the verification pass", e))?;
        Ok(Pass {
            shared,
            handle: Some(handle),
            result: None,
        })
    }

    /// Bytes judged so far and the data area's length.
    pub fn progress(&self) -> (u64, u64) {
        (
            self.shared.done.load(Ordering::Relaxed),
            self.shared.spec.data_length,
        )
    }

    /// Stop early; the result says what was read.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// Wait up to `timeout` for the pass to end; true if it has.
    pub fn wait(&self, timeout: Duration) -> bool {
        let (done, cv) = &self.shared.finished;
        let guard = done.lock().unwrap();
        let (guard, _) = cv.wait_timeout_while(guard, timeout, |d| !*d).unwrap();
        *guard
    }

    /// Block until the pass ends; its result as JSON.
    pub fn result_json(&mut self) -> Result<String> {
        if let Some(h) = self.handle.take() {
            self.result = Some(h.join().unwrap_or_else(|_| {
                Err(EngineError::Thread("the verification pass panicked".into()))
            }));
        }
        match self.result.as_ref().expect("joined") {
            Ok(s) => Ok(s.clone()),
            Err(e) => Err(EngineError::Thread(e.to_string())),
        }
    }
}

struct Reader {
    findings: Findings,
    io_errors: BTreeMap<String, u64>,
    first_io_error: Option<String>,
    bytes: u64,
}

fn run(s: &Arc<Shared>, journal_closed: Option<bool>) -> Result<String> {
    let started = Instant::now();
    let threads = s
        .spec
        .threads
        .min(s.spec.data_length.div_ceil(CHUNK).max(1) as usize);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || read_all(&s))
        })
        .collect();
    let mut total = Reader {
        findings: Findings::default(),
        io_errors: BTreeMap::new(),
        first_io_error: None,
        bytes: 0,
    };
    for h in handles {
        let r = h
            .join()
            .map_err(|_| EngineError::Thread("a verification reader panicked".into()))??;
        total.findings.merge(r.findings);
        total.bytes += r.bytes;
        for (k, v) in r.io_errors {
            *total.io_errors.entry(k).or_default() += v;
        }
        total.first_io_error = total.first_io_error.or(r.first_io_error);
    }
    total.findings.findings.sort_by_key(|f| f.offset);
    let seconds = started.elapsed().as_secs_f64();
    let result = PassResult {
        complete: !s.stop.load(Ordering::Relaxed) && total.bytes == s.spec.data_length,
        bytes: total.bytes,
        blocks: total.bytes / s.spec.block_size,
        seconds,
        mbps: if seconds > 0.0 {
            total.bytes as f64 / seconds / 1e6
        } else {
            0.0
        },
        threads,
        journal_closed,
        io_errors: total.io_errors,
        first_io_error: total.first_io_error,
        findings: total.findings,
    };
    serde_json::to_string(&result)
        .map_err(|e| EngineError::Thread(format!("serializing the pass: {e}")))
}

fn read_all(s: &Shared) -> Result<Reader> {
    let spec = &s.spec;
    let open = |direct: bool| {
        OpenOptions::new()
            .read(true)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(&spec.path)
    };
    let file = match open(spec.direct) {
        Err(e) if spec.direct && e.raw_os_error() == Some(libc::EINVAL) => open(false),
        other => other,
    }
    .map_err(|e| EngineError::io(format!("cannot open {} to verify it", spec.path), e))?;
    let mut buf = AlignedBuf::new(CHUNK as usize);
    let mut me = Reader {
        findings: Findings::default(),
        io_errors: BTreeMap::new(),
        first_io_error: None,
        bytes: 0,
    };
    loop {
        if s.stop.load(Ordering::Relaxed) {
            break;
        }
        let at = s.cursor.fetch_add(CHUNK, Ordering::Relaxed);
        if at >= spec.data_length {
            break;
        }
        let len = CHUNK.min(spec.data_length - at) as usize;
        match read_exact(&file, &mut buf.as_mut_slice()[..len], spec.data_offset + at) {
            Ok(()) => {
                for (i, data) in buf.as_slice()[..len]
                    .chunks_exact(spec.block_size as usize)
                    .enumerate()
                {
                    judge(s, at + i as u64 * spec.block_size, data, &mut me.findings);
                }
                me.bytes += len as u64;
            }
            Err(e) => {
                let name = e
                    .raw_os_error()
                    .map_or_else(|| e.kind().to_string(), |n| n.to_string());
                *me.io_errors.entry(name).or_default() += 1;
                me.first_io_error.get_or_insert_with(|| {
                    format!(
                        "reading {} at offset {}: {e}",
                        spec.path,
                        spec.data_offset + at
                    )
                });
            }
        }
        s.done.fetch_add(len as u64, Ordering::Relaxed);
    }
    Ok(me)
}

fn read_exact(file: &std::fs::File, buf: &mut [u8], mut pos: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], pos) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "end of file")),
            Ok(n) => {
                done += n;
                pos += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What a block at `offset` should hold, by the journal (None: not judged).
fn expect(s: &Shared, offset: u64) -> Option<Expect> {
    let spec = &s.spec;
    let prior = || match spec.prior {
        Prior::Unknown => None,
        _ => Some(Expect::Prior {
            before_epoch: spec.epoch,
        }),
    };
    let Some(journal) = &s.journal else {
        return prior();
    };
    let w = journal.word((offset / spec.block_size) as usize);
    if !w.written() {
        return prior();
    }
    if !w.settled() || (spec.rebooted && !w.durable()) {
        return Some(Expect::Loose { epoch: spec.epoch });
    }
    Some(Expect::Exact {
        epoch: spec.epoch,
        gen: w.gen(),
        span: w.span(),
        pool: w.pool(),
    })
}

fn judge(s: &Shared, offset: u64, data: &[u8], out: &mut Findings) {
    let spec = &s.spec;
    let Some(want) = expect(s, offset) else {
        out.skipped += 1;
        return;
    };
    out.checked += 1;
    let (class, found, detail) = match block::judge(data, spec.target_id, offset, &want) {
        Verdict::Ok => return,
        Verdict::NotTilemark
            if spec.foreign_ok
                || (spec.prior == Prior::Mixed && matches!(want, Expect::Prior { .. })) =>
        {
            out.not_tilemark += 1;
            return;
        }
        Verdict::NotTilemark => (Class::Unexpected, None, "not tilemark data".to_string()),
        Verdict::Later(e) if e <= spec.latest_epoch => {
            out.later += 1;
            return;
        }
        Verdict::Later(e) => (
            Class::Unexpected,
            None,
            format!(
                "holds epoch {e}, after the target's latest epoch {}",
                spec.latest_epoch
            ),
        ),
        // After a restart the journal may lag the data it describes by its last sync.
        Verdict::Finding {
            class: Class::Unexpected,
            found: Some(h),
            ..
        } if spec.rebooted && h.epoch == spec.epoch => return,
        Verdict::Finding {
            class,
            found,
            detail,
        } => (class, found, detail),
    };
    out.add(Finding {
        target: 0,
        class,
        offset,
        expected: Some(want),
        found,
        stream: None,
        time_ns: None,
        detail,
    });
}
