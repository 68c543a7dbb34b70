//! tilemark's IO engine: many streams per thread over io_uring / psync / null backends, with
//! open- and closed-loop arrival, exact per-stream accounting and mergeable latency histograms.
//!
//! Pure Rust; Python reaches it through the `tilemark-py` bindings crate. The plan and every
//! output are documented in `docs/engine-boundary.md`.

pub mod affinity;
pub mod backend;
pub mod buf;
pub mod clock;
pub mod data;
pub mod engine;
pub mod error;
pub mod files;
pub mod fiopatterns;
pub mod flow;
pub mod layout;
pub mod plan;
pub mod prepare;
pub mod replay;
pub mod rng;
pub mod stats;
pub mod stop;
pub mod stream;
pub mod verify;
pub mod worker;

pub use engine::Engine;
pub use error::{EngineError, Result};
pub use plan::Plan;
pub use prepare::{dio_alignment, fill};
