//! `tilemark._engine`: thin PyO3 bindings over `tilemark-engine`. Plans go in and snapshots come
//! out as JSON text (docs/engine-boundary.md); the GIL is released whenever the call may block.

use std::sync::Mutex;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tilemark_engine::engine::Control;
use tilemark_engine::prepare::FillVerify;
use tilemark_engine::stats::frame::{Bitmap, F64Column, Frame, StrColumn};
use tilemark_engine::verify::pass::{Pass, PassSpec};
use tilemark_engine::{Engine, Plan};

create_exception!(
    _engine,
    EngineError,
    PyException,
    "An engine failure, with the reason."
);

fn to_py(e: tilemark_engine::EngineError) -> PyErr {
    EngineError::new_err(e.to_string())
}

/// A running plan.
#[pyclass(module = "tilemark._engine")]
struct Run {
    engine: Mutex<Engine>,
    control: Control,
}

#[pymethods]
impl Run {
    /// JSON list of interval snapshots completed since the last poll.
    fn poll(&self) -> String {
        self.engine.lock().unwrap().poll_json()
    }

    /// Set the group of every plan stream (a list of group indices) for the frames' aggregates.
    fn set_groups(&self, group_of: Vec<u32>) {
        self.engine.lock().unwrap().set_groups(group_of);
    }

    /// Further group sets (lists of group indices per plan stream) whose aggregates every
    /// frame carries besides `set_groups`' (replacing any set before).
    fn set_group_sets(&self, sets: Vec<Vec<u32>>) {
        self.engine.lock().unwrap().set_group_sets(sets);
    }

    /// Merge further group set `set` over measurement windows of `window_s` instead of
    /// handing it over per interval (Engine::set_window).
    fn set_window(&self, set: usize, window_s: f64) {
        let window_ns = (window_s.max(0.0) * 1e9).round() as u64;
        self.engine.lock().unwrap().set_window(set, window_ns);
    }

    /// The window of `set_window` being filled, as a snapshot (JSON), or None.
    fn window_json(&self) -> Option<String> {
        self.engine.lock().unwrap().window_json()
    }

    /// Interval frames completed since the last poll, oldest first: each a tuple
    /// (interval, phase, start_ns, end_ns, columns, groups_json, [set_json, ...], batch_json
    /// or None, window_json or None; the last two: `set_window`). `columns` are the interval
    /// log's columns in Arrow's layout, each (name, type, validity or None, null count,
    /// values, data or None): type "i32", "i64", "f64" or "utf8" (values: i32 offsets).
    /// Built with the GIL released.
    fn poll_frames(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        let frames = py.allow_threads(|| {
            let mut engine = self.engine.lock().unwrap();
            let frames = engine.poll_frames();
            frames
                .into_iter()
                .map(|mut f| {
                    let (groups, sets) = f.take_json();
                    (f, groups, sets)
                })
                .collect::<Vec<_>>()
        });
        frames
            .into_iter()
            .map(|(f, groups, sets)| frame_to_py(py, f, groups, sets))
            .collect()
    }

    /// `poll_frames` and `poll`'s JSON of the same intervals at once: (frames, json). For
    /// tests, which compare what the two paths make of the same measurements.
    fn poll_frames_and_json(&self, py: Python<'_>) -> PyResult<(Vec<PyObject>, String)> {
        let (frames, json) = py.allow_threads(|| {
            let mut engine = self.engine.lock().unwrap();
            let (frames, json) = engine.poll_frames_and_json();
            let frames = frames
                .into_iter()
                .map(|f| {
                    let groups = f.groups_json();
                    let sets = f.sets_json();
                    (f, groups, sets)
                })
                .collect::<Vec<_>>();
            (frames, json)
        });
        let frames = frames
            .into_iter()
            .map(|(f, groups, sets)| frame_to_py(py, f, groups, sets))
            .collect::<PyResult<Vec<_>>>()?;
        Ok((frames, json))
    }

    /// Ask the engine to stop early.
    fn stop(&self) {
        self.control.stop();
    }

    /// Stop plan streams `which` while the run goes on (streams waiting for them may start).
    fn stop_streams(&self, which: Vec<usize>) -> usize {
        self.control.stop_streams(&which)
    }

    /// JSON list, in plan order, of each stream's {started_ns, ended_ns} so far (null: not yet).
    fn spans(&self) -> String {
        serde_json::to_string(&self.control.spans()).unwrap_or_else(|_| "[]".into())
    }

    /// Wait up to `timeout_s` (GIL released) for the run to end; True if it has.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let control = self.control.clone();
        let timeout = Duration::from_secs_f64(timeout_s.max(0.0));
        py.allow_threads(move || control.wait(timeout))
    }

    fn done(&self) -> bool {
        self.control.is_done()
    }

    /// Block (GIL released) until the run ends; the result as JSON.
    fn result(&self, py: Python<'_>) -> PyResult<String> {
        py.allow_threads(|| self.engine.lock().unwrap().result_json())
            .map_err(to_py)
    }
}

/// The bytes of a slice of plain numbers, as Arrow lays them out (little-endian).
fn le_bytes<T: Copy>(values: &[T]) -> &[u8] {
    #[cfg(not(target_endian = "little"))]
    compile_error!("frames hand Arrow buffers over as they are in memory: little-endian only");
    // SAFETY: T is a plain number type (i32, i64, f64) without padding; the slice is valid for
    // its whole length in bytes.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

type Column<'py> = (
    &'static str,
    &'static str,
    Option<Bound<'py, PyBytes>>,
    usize,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
);

fn validity<'py>(py: Python<'py>, b: &Bitmap) -> (Option<Bound<'py, PyBytes>>, usize) {
    if b.nulls == 0 {
        (None, 0)
    } else {
        (Some(PyBytes::new(py, &b.bytes)), b.nulls)
    }
}

fn num<'py, T: Copy>(
    py: Python<'py>,
    name: &'static str,
    kind: &'static str,
    v: &[T],
) -> Column<'py> {
    (name, kind, None, 0, PyBytes::new(py, le_bytes(v)), None)
}

fn utf8<'py>(py: Python<'py>, name: &'static str, c: &StrColumn) -> Column<'py> {
    let (valid, nulls) = validity(py, &c.valid);
    (
        name,
        "utf8",
        valid,
        nulls,
        PyBytes::new(py, le_bytes(&c.offsets)),
        Some(PyBytes::new(py, &c.data)),
    )
}

fn float<'py>(py: Python<'py>, name: &'static str, c: &F64Column) -> Column<'py> {
    let (valid, nulls) = validity(py, &c.valid);
    (
        name,
        "f64",
        valid,
        nulls,
        PyBytes::new(py, le_bytes(&c.values)),
        None,
    )
}

fn frame_to_py(py: Python<'_>, f: Frame, groups: String, sets: Vec<String>) -> PyResult<PyObject> {
    const SERVICE: [&str; 5] = [
        "service_mean_us",
        "service_p50_us",
        "service_p99_us",
        "service_p999_us",
        "service_max_us",
    ];
    const RESPONSE: [&str; 5] = [
        "response_mean_us",
        "response_p50_us",
        "response_p99_us",
        "response_p999_us",
        "response_max_us",
    ];
    let r = &f.rows;
    let mut columns = vec![
        num(py, "stream", "i32", &r.stream),
        utf8(py, "stream_name", &r.stream_name),
        utf8(py, "op", &r.op),
        num(py, "ops", "i64", &r.ops),
        num(py, "bytes", "i64", &r.bytes),
        num(py, "errors", "i64", &r.errors),
        utf8(py, "errors_json", &r.errors_json),
    ];
    for (name, c) in SERVICE.iter().zip(&r.service) {
        columns.push(float(py, name, c));
    }
    for (name, c) in RESPONSE.iter().zip(&r.response) {
        columns.push(float(py, name, c));
    }
    columns.push(num(py, "lag_max_ns", "i64", &r.lag_max_ns));
    columns.push(num(py, "behind_ios", "i64", &r.behind_ios));
    columns.push(utf8(py, "service_hist", &r.service_hist));
    columns.push(utf8(py, "response_hist", &r.response_hist));
    let out = (
        f.interval, f.phase, f.start_ns, f.end_ns, columns, groups, sets, f.batch, f.window,
    );
    Ok(out.into_pyobject(py)?.into_any().unbind())
}

/// Validate a plan (JSON), open its targets and start the engine threads.
#[pyfunction]
fn start(py: Python<'_>, plan_json: &str) -> PyResult<Run> {
    let plan = Plan::from_json(plan_json).map_err(to_py)?;
    let engine = py.allow_threads(|| Engine::start(plan)).map_err(to_py)?;
    let control = engine.control();
    Ok(Run {
        engine: Mutex::new(engine),
        control,
    })
}

/// A running file plan (docs/files.md).
#[pyclass(module = "tilemark._engine")]
struct FileRun {
    run: Mutex<tilemark_engine::files::FileRun>,
}

#[pymethods]
impl FileRun {
    /// JSON list of interval snapshots completed since the last poll.
    fn poll(&self) -> String {
        self.run.lock().unwrap().poll_json()
    }

    fn stop(&self) {
        self.run.lock().unwrap().stop();
    }

    /// Wait up to `timeout_s` (GIL released) for the run to end; True if it has.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let timeout = Duration::from_secs_f64(timeout_s.max(0.0));
        py.allow_threads(|| self.run.lock().unwrap().wait(timeout))
    }

    /// Block (GIL released) until the run ends; the result as JSON.
    fn result(&self, py: Python<'_>) -> PyResult<String> {
        py.allow_threads(|| self.run.lock().unwrap().result_json())
            .map_err(to_py)
    }
}

/// Validate a file plan (JSON), open its sets' directories and start its threads.
#[pyfunction]
fn start_files(py: Python<'_>, plan_json: &str) -> PyResult<FileRun> {
    let plan = tilemark_engine::files::FilePlan::from_json(plan_json).map_err(to_py)?;
    let run = py
        .allow_threads(|| tilemark_engine::files::FileRun::start(plan))
        .map_err(to_py)?;
    Ok(FileRun {
        run: Mutex::new(run),
    })
}

/// Write incompressible data over [offset, offset+length); returns bytes written. With
/// `target_id`, every block is a verifiable fill block of `block_size` bytes whose offset counts
/// from `data_offset`.
#[pyfunction]
#[pyo3(signature = (path, offset, length, direct, seed, target_id=None, block_size=4096, data_offset=0))]
#[allow(clippy::too_many_arguments)]
fn fill(
    py: Python<'_>,
    path: &str,
    offset: u64,
    length: u64,
    direct: bool,
    seed: u64,
    target_id: Option<u64>,
    block_size: usize,
    data_offset: u64,
) -> PyResult<u64> {
    let verify = target_id.map(|target_id| FillVerify {
        target_id,
        block_size,
        data_offset,
    });
    py.allow_threads(|| tilemark_engine::fill(path, offset, length, direct, seed, verify))
        .map_err(to_py)
}

/// `blocks` blocks of write data as a stream with these settings writes them (data.rs).
#[pyfunction]
fn sample_blocks(
    py: Python<'_>,
    block_size: usize,
    compress_pct: f64,
    dedupe_ratio: f64,
    verify: bool,
    blocks: usize,
    seed: u64,
) -> PyResult<pyo3::Py<pyo3::types::PyBytes>> {
    if !(512..=tilemark_engine::data::MAX_BLOCK).contains(&block_size) || block_size % 512 != 0 {
        return Err(EngineError::new_err(format!(
            "block_size {block_size} is not a multiple of 512 up to 64 KiB"
        )));
    }
    let data = py.allow_threads(|| {
        tilemark_engine::data::sample(block_size, compress_pct, dedupe_ratio, verify, blocks, seed)
    });
    Ok(pyo3::types::PyBytes::new(py, &data).unbind())
}

/// A running verification pass over a data area.
#[pyclass(module = "tilemark._engine")]
struct VerifyPass {
    pass: Mutex<Pass>,
}

#[pymethods]
impl VerifyPass {
    /// (bytes judged so far, bytes in the data area).
    fn progress(&self) -> (u64, u64) {
        self.pass.lock().unwrap().progress()
    }

    fn stop(&self) {
        self.pass.lock().unwrap().stop();
    }

    /// Wait up to `timeout_s` (GIL released) for the pass to end; True if it has.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let timeout = Duration::from_secs_f64(timeout_s.max(0.0));
        py.allow_threads(|| self.pass.lock().unwrap().wait(timeout))
    }

    /// Block (GIL released) until the pass ends; its result as JSON.
    fn result(&self, py: Python<'_>) -> PyResult<String> {
        py.allow_threads(|| self.pass.lock().unwrap().result_json())
            .map_err(to_py)
    }
}

/// Start a verification pass (spec as JSON, docs/engine-boundary.md).
#[pyfunction]
fn verify_pass(spec_json: &str) -> PyResult<VerifyPass> {
    let spec: PassSpec = serde_json::from_str(spec_json)
        .map_err(|e| EngineError::new_err(format!("invalid verification pass: {e}")))?;
    let pass = Pass::start(spec).map_err(to_py)?;
    Ok(VerifyPass {
        pass: Mutex::new(pass),
    })
}

/// O_DIRECT alignment for `path` in bytes; 0 if unsupported.
#[pyfunction]
fn dio_alignment(path: &str) -> PyResult<u64> {
    tilemark_engine::dio_alignment(path).map_err(to_py)
}

/// The engine crate's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    m.add_class::<Run>()?;
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(fill, m)?)?;
    m.add_class::<VerifyPass>()?;
    m.add_class::<FileRun>()?;
    m.add_function(wrap_pyfunction!(start_files, m)?)?;
    m.add_function(wrap_pyfunction!(verify_pass, m)?)?;
    m.add_function(wrap_pyfunction!(sample_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(dio_alignment, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    // The one definition of both versions: the package version is the workspace's (maturin
    // builds the wheel with it) and the plan format is the engine's.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PLAN_VERSION", tilemark_engine::plan::PLAN_VERSION)?;
    m.add(
        "FILE_PLAN_VERSION",
        tilemark_engine::files::FILE_PLAN_VERSION,
    )?;
    Ok(())
}
