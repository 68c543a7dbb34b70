//! File plans run for real on a small set in a temporary directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn tmpdir(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("tm-files-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// A flat set of `n` entries, the first `present` of them existing with `size` bytes.
fn make_set(root: &Path, n: usize, present: usize, size: u64) -> FileSetSpec {
    std::fs::create_dir_all(root.join("d0")).unwrap();
    let entries = (0..n)
        .map(|i| {
            if i < present {
                std::fs::write(
                    root.join("d0").join(entry_name(i)),
                    vec![7u8; size as usize],
                )
                .unwrap();
                (0, Some(size))
            } else {
                (0, None)
            }
        })
        .collect();
    FileSetSpec {
        name: "t".into(),
        root: root.to_str().unwrap().into(),
        dirs: vec!["d0".into()],
        entries,
        entry_kind: EntryKind::Files,
    }
}

fn stream(ops: Vec<(FileOp, f64)>, sequence: bool) -> FileStreamSpec {
    FileStreamSpec {
        name: "s".into(),
        fileset: 0,
        ops,
        sequence,
        select: Select::Uniform,
        threads: 2,
        arrival: FileArrival::Closed,
        read_size: 0,
        append_size: 1000,
        truncate_size: 0,
        io_size: 1 << 16,
        openfiles: 4,
        seed: 5,
        limit: None,
    }
}

fn run_on(backend: FileBackend, set: FileSetSpec, s: FileStreamSpec, ms: u64) -> serde_json::Value {
    let plan = FilePlan {
        plan_version: FILE_PLAN_VERSION,
        backend,
        hung_ms: 5000,
        interval_ms: 100,
        duration_ms: Some(ms),
        max_errors: Some(0),
        filesets: vec![set],
        streams: vec![s],
    };
    let mut r = FileRun::start(plan).unwrap();
    assert!(r.wait(Duration::from_secs(10)));
    serde_json::from_str(&r.result_json().unwrap()).unwrap()
}

fn on_disk(dir: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        files += 1;
        bytes += e.unwrap().metadata().unwrap().len();
    }
    (files, bytes)
}

#[test]
fn a_mixed_stream_leaves_on_disk_what_it_counted() {
    mixed_stream_on(FileBackend::Psync, "mix");
}

#[test]
fn a_mixed_uring_stream_leaves_on_disk_what_it_counted() {
    mixed_stream_on(FileBackend::Uring, "mix-uring");
}

fn mixed_stream_on(backend: FileBackend, tag: &str) {
    use FileOp::*;
    let root = tmpdir(tag);
    let set = make_set(&root, 200, 100, 3000);
    let ops = vec![
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
    let names: Vec<&str> = ops.iter().map(|o| o.0.name()).collect();
    let mut s = stream(ops, false);
    s.append_size = 100_000; // several io_size calls per append
    s.io_size = 4096;
    // A budget, not a duration: on a loaded machine 300 ms did not always reach every op.
    s.limit = Some(1500);
    let doc = run_on(backend, set, s, 30_000);
    assert_eq!(doc["stop_reason"], "done", "{doc}");
    assert_eq!(doc["error"], serde_json::Value::Null, "{doc}");
    let s = &doc["streams"][0]["ops"];
    let n = |op: &str| s[op]["ops"].as_u64().unwrap();
    for op in names {
        assert!(n(op) > 0, "{op} never ran: {doc}");
    }
    let (files, bytes) = on_disk(&root.join("d0"));
    assert_eq!(files, 100 + n("create") - n("delete"));
    assert_eq!(doc["filesets"][0]["files"].as_u64().unwrap(), files);
    assert_eq!(doc["filesets"][0]["bytes"].as_u64().unwrap(), bytes);
    assert_eq!(
        s["append"]["bytes"].as_u64().unwrap(),
        n("append") * 100_000
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_sequence_counts_loops_and_each_op() {
    sequence_on(FileBackend::Psync, "seq");
}

#[test]
fn a_uring_sequence_counts_loops_and_each_op() {
    sequence_on(FileBackend::Uring, "seq-uring");
}

fn sequence_on(backend: FileBackend, tag: &str) {
    use FileOp::*;
    let root = tmpdir(tag);
    let set = make_set(&root, 100, 50, 100);
    let ops = vec![
        (Delete, 1.0),
        (Create, 1.0),
        (Append, 1.0),
        (Fsync, 1.0),
        (Close, 1.0),
    ];
    let mut s = stream(ops, true);
    s.threads = 8;
    let doc = run_on(backend, set, s, 1000);
    let s = &doc["streams"][0];
    let loops = s["loops"]["ops"].as_u64().unwrap();
    let creates = s["ops"]["create"]["ops"].as_u64().unwrap();
    assert!(loops > 0);
    // Every loop creates once; the loop in progress when the run ended is not counted.
    assert!(
        creates >= loops && creates <= loops + 8,
        "{loops} loops, {creates} creates"
    );
    // Each delete makes room for the next create; a loop cut by the run's end may have
    // deleted without creating yet.
    let deletes = s["ops"]["delete"]["ops"].as_u64().unwrap();
    assert!(deletes >= creates && deletes <= creates + 8);
    assert_eq!(on_disk(&root.join("d0")).0, 50 + creates - deletes);
    assert_eq!(
        doc["filesets"][0]["files"].as_u64().unwrap(),
        50 + creates - deletes
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_link_planted_in_the_set_is_never_followed() {
    let root = tmpdir("link");
    let outside = tmpdir("link-outside");
    std::fs::write(outside.join("keep"), b"mine").unwrap();
    let mut set = make_set(&root, 4, 0, 0);
    std::fs::remove_dir(root.join("d0")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("d0")).unwrap();
    set.entries = vec![(0, Some(4))];
    let plan = FilePlan {
        plan_version: FILE_PLAN_VERSION,
        backend: FileBackend::Psync,
        hung_ms: 5000,
        interval_ms: 100,
        duration_ms: Some(100),
        max_errors: Some(0),
        filesets: vec![set],
        streams: vec![stream(vec![(FileOp::Delete, 1.0)], false)],
    };
    let err = FileRun::start(plan).err().expect("refused").to_string();
    assert!(err.contains("no links"), "{err}");
    assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"mine");
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn a_failing_operation_stops_the_run_naming_it_and_keeps_the_intervals() {
    failing_on(FileBackend::Psync, "fail");
}

#[test]
fn a_failing_uring_operation_stops_the_run_naming_it() {
    failing_on(FileBackend::Uring, "fail-uring");
}

fn failing_on(backend: FileBackend, tag: &str) {
    // Entries the table believes exist but the disk does not hold: every open fails ENOENT.
    let root = tmpdir(tag);
    let mut set = make_set(&root, 10, 0, 0);
    set.entries = (0..10).map(|_| (0, Some(1))).collect();
    let mut s = stream(vec![(FileOp::Stat, 1.0), (FileOp::Open, 1.0)], false);
    s.threads = 1;
    let doc = run_on(backend, set, s, 2000);
    assert_eq!(doc["stop_reason"], "errors", "{doc}");
    let msg = doc["error"].as_str().unwrap();
    assert!(msg.contains("failed: errno 2"), "{msg}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_open_loop_stream_keeps_its_rate() {
    open_loop_on(FileBackend::Psync, "open");
}

#[test]
fn an_open_loop_uring_stream_keeps_its_rate() {
    open_loop_on(FileBackend::Uring, "open-uring");
}

fn open_loop_on(backend: FileBackend, tag: &str) {
    let root = tmpdir(tag);
    let set = make_set(&root, 50, 50, 10);
    let mut s = stream(vec![(FileOp::Stat, 1.0)], false);
    s.arrival = FileArrival::Open {
        rate: 200.0,
        poisson: false,
    };
    let doc = run_on(backend, set, s, 500);
    let n = doc["streams"][0]["ops"]["stat"]["ops"].as_u64().unwrap();
    // Never more than the schedule allows up to the moment the run ended (a loaded machine
    // notices the 0.5 s end late: 103 stats were due by then once); behind it may fall.
    let elapsed_s = doc["elapsed_ns"].as_u64().unwrap() as f64 / 1e9;
    let due = (200.0 * elapsed_s).floor() as u64 + 1;
    assert!(
        (50..=due).contains(&n),
        "{n} stats in {elapsed_s:.3} s at 200/s"
    );
    assert!(
        doc["streams"][0]["ops"]["stat"]["response"]["n"]
            .as_u64()
            .unwrap()
            == n
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_entry_name_on_the_stack_is_the_formatted_one() {
    for i in [0, 7, 12_345_678, 99_999_999] {
        let n = EntryName::new(i);
        // SAFETY: EntryName is NUL-terminated.
        let c = unsafe { std::ffi::CStr::from_ptr(n.as_ptr()) };
        assert_eq!(c.to_str().unwrap(), entry_name(i));
    }
}

#[test]
fn a_stream_with_a_limit_ends_the_run_when_it_is_used_up() {
    for (backend, tag) in [
        (FileBackend::Psync, "limit"),
        (FileBackend::Uring, "limit-uring"),
    ] {
        let root = tmpdir(tag);
        let set = make_set(&root, 500, 0, 0);
        let mut s = stream(vec![(FileOp::Create, 1.0), (FileOp::Close, 1.0)], true);
        s.threads = 3;
        s.limit = Some(300);
        let doc = run_on(backend, set, s, 20_000);
        assert_eq!(doc["stop_reason"], "done", "{doc}");
        assert_eq!(doc["streams"][0]["ops"]["create"]["ops"], 300);
        assert_eq!(doc["streams"][0]["loops"]["ops"], 300);
        assert_eq!(on_disk(&root.join("d0")).0, 300);
        assert!(doc["elapsed_ns"].as_u64().unwrap() < 10_000_000_000);
        std::fs::remove_dir_all(&root).unwrap();
    }
}

#[test]
fn a_call_that_never_returns_ends_the_run_as_hung_within_its_wait() {
    // A FIFO where a file should be: opening it for reading waits for a writer for ever.
    // (psync only: io_uring's openat tries non-blocking first, and a FIFO then opens at once;
    // the collector's wait is the same code for both.)
    {
        let (backend, tag) = (FileBackend::Psync, "hung");
        let root = tmpdir(tag);
        let set = make_set(&root, 1, 0, 0);
        let fifo =
            std::ffi::CString::new(root.join("d0").join(entry_name(0)).to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let mut set = set;
        set.entries = vec![(0, Some(0))];
        let mut s = stream(vec![(FileOp::Open, 1.0)], false);
        s.threads = 1;
        let plan = FilePlan {
            plan_version: FILE_PLAN_VERSION,
            backend,
            hung_ms: 300,
            interval_ms: 100,
            duration_ms: Some(200),
            max_errors: Some(0),
            filesets: vec![set],
            streams: vec![s],
        };
        let t0 = std::time::Instant::now();
        let mut r = FileRun::start(plan).unwrap();
        assert!(
            r.wait(Duration::from_secs(5)),
            "{backend:?}: the run did not end"
        );
        let doc: serde_json::Value = serde_json::from_str(&r.result_json().unwrap()).unwrap();
        assert_eq!(doc["stop_reason"], "hung", "{doc}");
        assert_eq!(doc["hung"], 1);
        assert!(doc["error"]
            .as_str()
            .unwrap()
            .contains("did not return within 300 ms"));
        assert!(t0.elapsed() < Duration::from_secs(3));
        drop(r);
        // Let the thread left behind go: a writer opens the FIFO, its open returns.
        let _w = std::fs::OpenOptions::new()
            .write(true)
            .open(root.join("d0").join(entry_name(0)));
        std::thread::sleep(Duration::from_millis(50));
        let _ = std::fs::remove_dir_all(&root);
    }
}

/// Counts of (directories, files) directly in `dir`.
fn dirs_and_files(dir: &Path) -> (u64, u64) {
    let (mut dirs, mut files) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        if e.unwrap().file_type().unwrap().is_dir() {
            dirs += 1;
        } else {
            files += 1;
        }
    }
    (dirs, files)
}

#[test]
fn directory_ops_leave_on_disk_the_directories_they_counted() {
    dir_ops_on(FileBackend::Psync, "dirs");
}

#[test]
fn uring_directory_ops_leave_on_disk_the_directories_they_counted() {
    dir_ops_on(FileBackend::Uring, "dirs-uring");
}

fn dir_ops_on(backend: FileBackend, tag: &str) {
    use FileOp::*;
    let root = tmpdir(tag);
    let mut set = make_set(&root, 200, 0, 0);
    // The first 80 entries are directories (as prepare makes a set of `kind = "dirs"`).
    for i in 0..80 {
        std::fs::create_dir(root.join("d0").join(entry_name(i))).unwrap();
        set.entries[i] = (0, Some(0));
    }
    set.entry_kind = EntryKind::Dirs;
    // stat, delete and setattr find no file in a set of directories: skipped, not failed.
    let mut s = stream(
        vec![
            (Mkdir, 2.0),
            (Rmdir, 1.0),
            (Statdir, 2.0),
            (Stat, 0.5),
            (Delete, 0.5),
        ],
        false,
    );
    s.limit = Some(800);
    let doc = run_on(backend, set, s, 30_000);
    assert_eq!(doc["stop_reason"], "done", "{doc}");
    let ops = &doc["streams"][0]["ops"];
    let n = |op: &str| ops[op]["ops"].as_u64().unwrap();
    for op in ["mkdir", "rmdir", "statdir"] {
        assert!(n(op) > 0, "{op} never ran: {doc}");
    }
    assert_eq!(n("stat") + n("delete"), 0);
    let skipped = &doc["streams"][0]["skipped"];
    let total: u64 = ["mkdir", "rmdir", "statdir", "stat", "delete"]
        .iter()
        .map(|op| n(op) + skipped[op].as_u64().unwrap())
        .sum();
    assert_eq!(total, 800, "every op of the limit counted once: {doc}");
    let (dirs, files) = dirs_and_files(&root.join("d0"));
    assert_eq!(dirs, 80 + n("mkdir") - n("rmdir"));
    assert_eq!(files, 0);
    assert_eq!(doc["filesets"][0]["dirs"].as_u64().unwrap(), dirs);
    assert_eq!(doc["filesets"][0]["files"].as_u64().unwrap(), 0);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn setattr_truncate_and_fallocate_change_what_they_say() {
    attr_ops_on(FileBackend::Psync, "attr");
}

#[test]
fn uring_setattr_truncate_and_fallocate_change_what_they_say() {
    attr_ops_on(FileBackend::Uring, "attr-uring");
}

fn attr_ops_on(backend: FileBackend, tag: &str) {
    use std::os::unix::fs::MetadataExt;
    use FileOp::*;
    let root = tmpdir(tag);
    let set = make_set(&root, 50, 50, 3000);
    // Every file's times a day back: what setattr changes shows.
    let old = std::time::SystemTime::now() - Duration::from_secs(86_400);
    for i in 0..50 {
        let f = std::fs::File::options()
            .write(true)
            .open(root.join("d0").join(entry_name(i)))
            .unwrap();
        f.set_times(
            std::fs::FileTimes::new()
                .set_accessed(old)
                .set_modified(old),
        )
        .unwrap();
    }
    let atimes: Vec<i64> = (0..50)
        .map(|i| {
            std::fs::metadata(root.join("d0").join(entry_name(i)))
                .unwrap()
                .atime()
        })
        .collect();
    let mut s = stream(vec![(Setattr, 1.0)], false);
    s.threads = 1;
    s.limit = Some(20);
    let doc = run_on(backend, set.clone(), s, 30_000);
    let n = doc["streams"][0]["ops"]["setattr"]["ops"].as_u64().unwrap();
    assert_eq!(n, 20, "{doc}");
    let day_ago = old.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let mut touched = 0;
    for (i, atime) in atimes.iter().enumerate() {
        let m = std::fs::metadata(root.join("d0").join(entry_name(i))).unwrap();
        assert_eq!(m.atime(), *atime, "setattr keeps the access time");
        assert_eq!(m.len(), 3000);
        if m.mtime() > day_ago + 60 {
            touched += 1;
        }
    }
    // Files are picked at random: some twice.
    assert!(
        (1..=20).contains(&touched),
        "{touched} files touched by 20 setattrs"
    );

    // A sequence on one held file: truncate to 1000, fallocate 500 more, close.
    let mut s = stream(
        vec![(Open, 1.0), (Truncate, 1.0), (Fallocate, 1.0), (Close, 1.0)],
        true,
    );
    s.threads = 2;
    s.truncate_size = 1000;
    s.append_size = 500;
    s.limit = Some(30);
    let doc = run_on(backend, set, s, 30_000);
    let ops = &doc["streams"][0]["ops"];
    assert_eq!(ops["truncate"]["ops"], 30, "{doc}");
    assert_eq!(ops["fallocate"]["ops"], 30);
    assert_eq!(ops["fallocate"]["bytes"], 30 * 500);
    let (files, bytes) = on_disk(&root.join("d0"));
    assert_eq!(files, 50);
    assert_eq!(doc["filesets"][0]["bytes"].as_u64().unwrap(), bytes);
    // Each file handled is 1500 bytes now, the others still 3000.
    let short = (0..50)
        .filter(|&i| {
            std::fs::metadata(root.join("d0").join(entry_name(i)))
                .unwrap()
                .len()
                == 1500
        })
        .count() as u64;
    assert_eq!(bytes, short * 1500 + (50 - short) * 3000);
    assert!((1..=30).contains(&short));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn sequential_selection_takes_the_entries_in_order_each_once() {
    for (backend, tag) in [
        (FileBackend::Psync, "seqsel"),
        (FileBackend::Uring, "seqsel-uring"),
    ] {
        let root = tmpdir(tag);
        let set = make_set(&root, 90, 90, 10);
        let mut s = stream(vec![(FileOp::Delete, 1.0)], false);
        s.select = Select::Sequential;
        s.threads = 3;
        s.limit = Some(45);
        let doc = run_on(backend, set, s, 30_000);
        assert_eq!(doc["streams"][0]["ops"]["delete"]["ops"], 45, "{doc}");
        assert_eq!(doc["streams"][0]["skipped"]["delete"], 0);
        // The first 45 entries are gone, the last 45 all there: none twice, none skipped.
        let mut left: Vec<String> = std::fs::read_dir(root.join("d0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let want: Vec<String> = (45..90).map(entry_name).collect();
        assert_eq!(left, want, "{backend:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}

#[test]
fn stats_in_a_set_nothing_changes_find_only_its_files_without_the_lock() {
    use FileOp::*;
    let root = tmpdir("fixed-stat");
    // Sparse: 5 files among 1,000 entries, so most picks land far from any file and must be
    // drawn from the list of files; a stat of an absent entry would fail the run (ENOENT).
    let set = make_set(&root, 1000, 5, 10);
    let mut s = stream(
        vec![(Stat, 3.0), (Open, 1.0), (Read, 1.0), (Close, 1.0)],
        false,
    );
    s.limit = Some(3000);
    let doc = run_on(FileBackend::Psync, set, s, 30_000);
    assert_eq!(doc["stop_reason"], "done", "{doc}");
    assert_eq!(doc["error"], serde_json::Value::Null, "{doc}");
    let ops = &doc["streams"][0]["ops"];
    let stats = ops["stat"]["ops"].as_u64().unwrap();
    assert!(stats > 1000, "{doc}");
    assert_eq!(doc["streams"][0]["skipped"]["stat"], 0, "{doc}");
    assert_eq!(on_disk(&root.join("d0")), (5, 50));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_set_is_fixed_only_when_no_stream_on_it_creates_deletes_renames_or_removes() {
    use FileOp::*;
    let root = tmpdir("fixed-sets");
    let set = |name: &str| {
        let mut f = make_set(&root.join(name), 4, 2, 0);
        f.name = name.into();
        f
    };
    let on = |fileset: usize, ops: Vec<(FileOp, f64)>| FileStreamSpec {
        fileset,
        ..stream(ops, false)
    };
    let plan = |streams: Vec<FileStreamSpec>| FilePlan {
        plan_version: FILE_PLAN_VERSION,
        backend: FileBackend::Psync,
        hung_ms: 5000,
        interval_ms: 100,
        duration_ms: Some(10),
        max_errors: Some(0),
        filesets: vec![set("a"), set("b")],
        streams,
    };
    let readers = vec![
        (Stat, 1.0),
        (Open, 1.0),
        (Read, 1.0),
        (Append, 1.0),
        (Setattr, 1.0),
    ];
    assert_eq!(
        run::fixed_sets(&plan(vec![on(0, readers.clone())])),
        [true, true]
    );
    for changes in [Create, Delete, Rename, Mkdir, Rmdir] {
        let p = plan(vec![
            on(0, readers.clone()),
            on(1, vec![(Stat, 1.0), (changes, 0.1)]),
        ]);
        assert_eq!(run::fixed_sets(&p), [true, false], "{changes:?}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}
