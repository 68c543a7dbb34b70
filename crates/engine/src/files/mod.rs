//! File-set workloads: streams of file and metadata operations (open, read, close, stat,
//! create, append, fsync, delete, rename; mkdir, rmdir and statdir on directory entries;
//! setattr, truncate, fallocate) over a directory tree of files that Python prepared
//! (docs/files.md). A plan of its own (`FilePlan`, JSON), run by `FileRun`.
//!
//! Every operation goes through a directory fd the engine opened beneath the set's root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, and names a file in it (never a path with
//! a slash) with `O_NOFOLLOW`: a link planted in the set mid-run cannot send an operation
//! outside it.

pub mod ops;
mod psync;
pub mod run;
pub mod table;
mod uring;

use serde::Deserialize;

use crate::error::{EngineError, Result};

pub use run::FileRun;

/// Version of the file plan format (docs/files.md).
pub const FILE_PLAN_VERSION: u32 = 1;
/// Upper bound on the threads of one stream and of a whole file plan.
pub const MAX_THREADS: usize = 1024;
/// Upper bound on the entries of a file set.
pub const MAX_ENTRIES: usize = 50_000_000;

/// Operations a file stream issues. The discriminant indexes per-op counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum FileOp {
    Open = 0,
    Read = 1,
    Close = 2,
    Stat = 3,
    Create = 4,
    Append = 5,
    Fsync = 6,
    Delete = 7,
    Rename = 8,
    /// mkdirat of a free entry: the entry becomes an (empty) directory.
    Mkdir = 9,
    /// unlinkat(AT_REMOVEDIR) of an existing directory entry.
    Rmdir = 10,
    /// fstatat of an existing directory entry (fio's dirstat).
    Statdir = 11,
    /// utimensat of an existing file: its modification time set to now, access time left
    /// alone (vdbench's setattr, Java's File.setLastModified).
    Setattr = 12,
    /// ftruncate of the last held file to `truncate_size` bytes.
    Truncate = 13,
    /// fallocate (mode 0) of `append_size` bytes at the end of the last held file.
    Fallocate = 14,
}

/// Count of `FileOp` kinds.
pub const FILE_OPS: usize = 15;

impl FileOp {
    pub const ALL: [FileOp; FILE_OPS] = [
        FileOp::Open,
        FileOp::Read,
        FileOp::Close,
        FileOp::Stat,
        FileOp::Create,
        FileOp::Append,
        FileOp::Fsync,
        FileOp::Delete,
        FileOp::Rename,
        FileOp::Mkdir,
        FileOp::Rmdir,
        FileOp::Statdir,
        FileOp::Setattr,
        FileOp::Truncate,
        FileOp::Fallocate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FileOp::Open => "open",
            FileOp::Read => "read",
            FileOp::Close => "close",
            FileOp::Stat => "stat",
            FileOp::Create => "create",
            FileOp::Append => "append",
            FileOp::Fsync => "fsync",
            FileOp::Delete => "delete",
            FileOp::Rename => "rename",
            FileOp::Mkdir => "mkdir",
            FileOp::Rmdir => "rmdir",
            FileOp::Statdir => "statdir",
            FileOp::Setattr => "setattr",
            FileOp::Truncate => "truncate",
            FileOp::Fallocate => "fallocate",
        }
    }

    /// True for the operations that change the file set (they need write access).
    pub fn writes(self) -> bool {
        !matches!(
            self,
            FileOp::Open | FileOp::Read | FileOp::Close | FileOp::Stat | FileOp::Statdir
        )
    }

    /// True for the operations that act on an entry by its name (no file held): stat,
    /// delete, mkdir, rmdir, statdir, setattr (`Table::take_for` picks the entry).
    pub fn by_name(self) -> bool {
        matches!(
            self,
            FileOp::Stat
                | FileOp::Delete
                | FileOp::Mkdir
                | FileOp::Rmdir
                | FileOp::Statdir
                | FileOp::Setattr
        )
    }

    /// True for the operations that act on the file a thread holds open (opening one first
    /// when it holds none).
    pub fn on_held(self) -> bool {
        matches!(
            self,
            FileOp::Read | FileOp::Append | FileOp::Fsync | FileOp::Truncate | FileOp::Fallocate
        )
    }
}

/// A prepared file set: its root, leaf directories and entries.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSetSpec {
    pub name: String,
    /// Absolute path of the set's root directory.
    pub root: String,
    /// Directories holding files, relative to the root ("" is the root itself).
    pub dirs: Vec<String>,
    /// Per entry: (index in `dirs`, size in bytes if the file exists now, else None). Entry i
    /// is the file `f{i:08}` in its directory.
    pub entries: Vec<(u32, Option<u64>)>,
    /// What the existing entries are: files (the default) or empty directories (a set for
    /// statdir and rmdir; sizes are then ignored).
    #[serde(default)]
    pub entry_kind: EntryKind,
}

/// What a set's existing entries are when the run starts.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    #[default]
    Files,
    Dirs,
}

/// How a stream picks the file of an operation among the set's entries.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Select {
    Uniform,
    /// Entries in order, each once per pass, shared by the stream's threads (fio's file
    /// engines: every file once).
    Sequential,
    /// Entry popularity by rank (entry order scrambled), exponent theta.
    Zipf {
        theta: f64,
    },
    /// A hot set: `prob` of the picks go to `share` of the entries (scattered over the
    /// directories like zipf's popular ones), the others to the rest, uniformly within each
    /// (fio's `random_distribution=zoned`, vdbench's hot bands).
    Hot {
        share: f64,
        prob: f64,
    },
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum FileArrival {
    /// Every thread issues its next operation as soon as the last one ended.
    Closed,
    /// `rate` operations per second (loops per second for a sequence) across the stream's
    /// threads, constant or Poisson gaps; latency counts from the intended time.
    Open { rate: f64, poisson: bool },
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileStreamSpec {
    pub name: String,
    /// Index of the file set in the plan.
    pub fileset: usize,
    /// (operation, weight). With `sequence`, the operations in order (weights ignored).
    pub ops: Vec<(FileOp, f64)>,
    #[serde(default)]
    pub sequence: bool,
    pub select: Select,
    /// Threads, each with one operation outstanding (psync).
    pub threads: usize,
    pub arrival: FileArrival,
    /// Bytes a read reads from offset 0; 0 reads the whole file.
    #[serde(default)]
    pub read_size: u64,
    /// Bytes an append writes (a fallocate allocates) at the end of the file.
    pub append_size: u64,
    /// Size a truncate sets the file to.
    #[serde(default)]
    pub truncate_size: u64,
    /// Largest single read or write system call.
    pub io_size: u64,
    /// Files a thread keeps open at most; an open beyond closes the oldest first.
    pub openfiles: usize,
    pub seed: u64,
    /// Operations (a mix) or loops (a sequence) the stream starts over all its threads; then
    /// its threads end (fio's file engines: every file once). None: until the run ends.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// How a file plan's streams issue their calls.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FileBackend {
    /// One engine thread per stream thread, plain system calls.
    #[default]
    Psync,
    /// One engine thread per stream, its threads as io_uring slots (Linux 5.11+ for unlinkat).
    Uring,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePlan {
    pub plan_version: u32,
    #[serde(default)]
    pub backend: FileBackend,
    pub interval_ms: u64,
    pub duration_ms: Option<u64>,
    /// Stop once more than this many operations failed; None = never.
    #[serde(default)]
    pub max_errors: Option<u64>,
    /// Once the run stops, how long its threads may take to finish the call they are in;
    /// beyond, the run ends as hung (the storage stopped answering) and they are left behind.
    #[serde(default = "default_hung_ms")]
    pub hung_ms: u64,
    pub filesets: Vec<FileSetSpec>,
    pub streams: Vec<FileStreamSpec>,
}

fn default_hung_ms() -> u64 {
    5000
}

fn bad(msg: String) -> EngineError {
    EngineError::Plan(msg)
}

impl FilePlan {
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| bad(format!("invalid file plan: {e}")))
    }

    /// Check what the types do not.
    pub fn validate(&self) -> Result<()> {
        if self.plan_version != FILE_PLAN_VERSION {
            return Err(bad(format!(
                "file plan version {} is not {FILE_PLAN_VERSION}",
                self.plan_version
            )));
        }
        if self.interval_ms == 0 {
            return Err(bad("interval_ms must be > 0".into()));
        }
        if self.streams.is_empty() {
            return Err(bad("a file plan needs at least one stream".into()));
        }
        for fs in &self.filesets {
            if !fs.root.starts_with('/') {
                return Err(bad(format!("file set {}: root must be absolute", fs.name)));
            }
            if fs.dirs.is_empty() || fs.entries.is_empty() || fs.entries.len() > MAX_ENTRIES {
                return Err(bad(format!(
                    "file set {}: needs directories and 1..={MAX_ENTRIES} entries",
                    fs.name
                )));
            }
            for d in &fs.dirs {
                if d.starts_with('/') || d.split('/').any(|c| c == ".." || c == ".") {
                    return Err(bad(format!(
                        "file set {}: directory {d:?} must stay beneath the root",
                        fs.name
                    )));
                }
            }
            if fs.entries.iter().any(|e| e.0 as usize >= fs.dirs.len()) {
                return Err(bad(format!(
                    "file set {}: an entry names a directory out of range",
                    fs.name
                )));
            }
        }
        let mut threads = 0;
        for s in &self.streams {
            let name = &s.name;
            if s.fileset >= self.filesets.len() {
                return Err(bad(format!("stream {name}: no file set {}", s.fileset)));
            }
            if s.ops.is_empty() || s.ops.iter().any(|o| !(o.1 >= 0.0 && o.1.is_finite())) {
                return Err(bad(format!("stream {name}: ops need finite weights >= 0")));
            }
            if !s.sequence && s.ops.iter().all(|o| o.1 == 0.0) {
                return Err(bad(format!("stream {name}: every op weight is 0")));
            }
            if s.threads == 0 || s.threads > MAX_THREADS {
                return Err(bad(format!(
                    "stream {name}: threads must be 1..={MAX_THREADS}"
                )));
            }
            threads += s.threads;
            if s.openfiles == 0 || s.io_size == 0 || s.io_size > 64 << 20 {
                return Err(bad(format!(
                    "stream {name}: openfiles >= 1 and io_size 1..=64 MiB"
                )));
            }
            if let FileArrival::Open { rate, .. } = s.arrival {
                if !(rate > 0.0 && rate.is_finite()) {
                    return Err(bad(format!("stream {name}: rate must be > 0")));
                }
            }
            if let Select::Zipf { theta } = s.select {
                if !(theta > 0.0 && theta.is_finite()) {
                    return Err(bad(format!("stream {name}: zipf theta must be > 0")));
                }
            }
            if let Select::Hot { share, prob } = s.select {
                if !(share > 0.0 && share < 1.0 && (0.0..=1.0).contains(&prob)) {
                    return Err(bad(format!(
                        "stream {name}: a hot set's share must be in (0, 1) and its \
                         probability in [0, 1]"
                    )));
                }
            }
        }
        if threads > MAX_THREADS {
            return Err(bad(format!(
                "{threads} threads in all; at most {MAX_THREADS}"
            )));
        }
        Ok(())
    }
}

/// The name of entry `i` in its directory.
pub fn entry_name(i: usize) -> String {
    format!("f{i:08}")
}

/// An entry's name as a NUL-terminated C string on the stack (`f` and 8 digits: entries are
/// fewer than 10^8): no allocation on the path of every operation.
#[derive(Clone, Copy)]
pub struct EntryName([u8; 10]);

impl EntryName {
    pub fn new(i: usize) -> Self {
        let mut b = [0u8; 10];
        b[0] = b'f';
        let mut n = i;
        for k in (1..9).rev() {
            b[k] = b'0' + (n % 10) as u8;
            n /= 10;
        }
        EntryName(b)
    }

    pub fn as_ptr(&self) -> *const libc::c_char {
        self.0.as_ptr().cast()
    }
}

impl Default for EntryName {
    fn default() -> Self {
        EntryName::new(0)
    }
}

#[cfg(test)]
mod tests;
