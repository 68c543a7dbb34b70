//! Run one plan (JSON file) on the engine without Python and print the result JSON.
//!
//! For profiling the engine alone (perf, strace, valgrind --tool=callgrind), without the
//! interpreter and the snapshot polling of the CLI: `cargo run --release --example run_plan --
//! plan.json`. Snapshots are polled every 200 ms, like the Python runner does.

use std::time::Duration;

fn main() {
    let path = std::env::args().nth(1).expect("usage: run_plan PLAN.json");
    let text = std::fs::read_to_string(&path).expect("readable plan file");
    let plan = tilemark_engine::Plan::from_json(&text).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut engine = tilemark_engine::Engine::start(plan).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let mut snapshots = 0usize;
    while !engine.wait(Duration::from_millis(200)) {
        snapshots += engine.poll_json().matches("\"interval\"").count();
    }
    snapshots += engine.poll_json().matches("\"interval\"").count();
    match engine.result_json() {
        Ok(r) => {
            eprintln!("{snapshots} snapshots");
            println!("{r}");
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
