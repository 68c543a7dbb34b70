//! Typed engine errors; the bindings turn them into `tilemark._engine.EngineError`.

use std::fmt;

#[derive(Debug)]
pub enum EngineError {
    /// The plan is malformed or inconsistent.
    Plan(String),
    /// An OS call failed; the message names what was being done and to which path.
    Io {
        context: String,
        source: std::io::Error,
    },
    /// An engine thread failed mid-run.
    Thread(String),
}

impl EngineError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        EngineError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Plan(m) | EngineError::Thread(m) => f.write_str(m),
            EngineError::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for EngineError {}

pub type Result<T> = std::result::Result<T, EngineError>;
