//! Data verification: every block written carries a header naming its target, offset, epoch
//! and generation plus checksums (`block`); a table of generations says what each block
//! should hold (`table`, the journal when kept on disk); reads of blocks whose content is known
//! are judged as they complete, and a full pass reads a whole data area back (`pass`).
//! docs/verification.md describes the format and the classes of finding.

pub mod block;
pub mod pass;
pub mod table;

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};
pub use block::{Class, Expect, Header, Verdict};
pub use table::{GenTable, Word};

/// Findings listed in a result; every one is counted by class.
pub const MAX_LISTED: usize = 1000;

/// What the blocks of a target hold before the run writes them.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Prior {
    /// Every block is tilemark data: the fill or a verified write of an earlier epoch.
    #[default]
    Verified,
    /// Tilemark blocks are checked; blocks that are not tilemark data (written without
    /// verification, or by an older tilemark) are accepted.
    Mixed,
    /// Nothing is known: blocks the run has not written are not judged.
    Unknown,
}

/// A target's verification settings in the plan (docs/engine-boundary.md).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VerifySpec {
    pub target_id: u64,
    /// This run's epoch (> 0; epoch 0 is the fill).
    pub epoch: u32,
    pub block_size: u64,
    #[serde(default)]
    pub prior: Prior,
    /// Keep the generation table in this file (the journal) instead of in memory.
    #[serde(default)]
    pub journal: Option<String>,
}

impl VerifySpec {
    pub fn validate(&self, target_length: u64, what: &str) -> Result<()> {
        let b = self.block_size;
        if !(512..=crate::data::MAX_BLOCK as u64).contains(&b) || b % 512 != 0 {
            return Err(EngineError::Plan(format!(
                "{what}: verify block_size must be a multiple of 512 from 512 to 65536, got {b}"
            )));
        }
        if self.epoch == 0 {
            return Err(EngineError::Plan(format!(
                "{what}: verify epoch must be > 0 (0 is the fill)"
            )));
        }
        if target_length % b != 0 {
            return Err(EngineError::Plan(format!(
                "{what}: length {target_length} is not a whole number of {b}-byte blocks"
            )));
        }
        Ok(())
    }

    /// The journal's JSON header.
    pub fn journal_header(&self, length: u64, closed: bool) -> String {
        serde_json::json!({
            "format": 1,
            "target_id": self.target_id,
            "epoch": self.epoch,
            "block_size": self.block_size,
            "data_length": length,
            "prior": self.prior,
            "closed": closed,
        })
        .to_string()
    }
}

/// One finding: a block that does not hold what it should.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub target: usize,
    pub class: Class,
    /// Byte offset of the block in the target's data area.
    pub offset: u64,
    pub expected: Option<Expect>,
    pub found: Option<Header>,
    /// The stream whose read found it (None in a verification pass).
    pub stream: Option<usize>,
    /// Run time of the finding, ns (None in a verification pass).
    pub time_ns: Option<u64>,
    pub detail: String,
}

/// Counts and the first findings, mergeable across threads.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Findings {
    /// Blocks read back and judged.
    pub checked: u64,
    /// Blocks read back but not judged: a write to them was in flight, or what they hold is
    /// not known.
    pub skipped: u64,
    /// Blocks that are not tilemark data where that is allowed (Prior::Mixed).
    pub not_tilemark: u64,
    /// Blocks rewritten by a later run (verification passes of an older run).
    pub later: u64,
    pub total: u64,
    pub by_class: std::collections::BTreeMap<&'static str, u64>,
    pub findings: Vec<Finding>,
}

impl Findings {
    pub fn add(&mut self, f: Finding) {
        self.total += 1;
        *self.by_class.entry(f.class.name()).or_default() += 1;
        if self.findings.len() < MAX_LISTED {
            self.findings.push(f);
        }
    }

    pub fn merge(&mut self, other: Findings) {
        self.checked += other.checked;
        self.skipped += other.skipped;
        self.not_tilemark += other.not_tilemark;
        self.later += other.later;
        self.total += other.total;
        for (k, v) in other.by_class {
            *self.by_class.entry(k).or_default() += v;
        }
        let room = MAX_LISTED.saturating_sub(self.findings.len());
        self.findings.extend(other.findings.into_iter().take(room));
    }
}

/// A target under verification during a run: its settings and generation table.
pub struct TargetVerify {
    pub index: usize,
    /// The target's offset in its file or device (the plan's `targets[i].offset`).
    pub offset: u64,
    pub spec: VerifySpec,
    pub table: GenTable,
    pub block: usize,
    /// The backend moves data (not the null backend), so reads can be judged.
    pub check_reads: bool,
}

impl TargetVerify {
    pub fn new(
        index: usize,
        offset: u64,
        spec: VerifySpec,
        length: u64,
        check_reads: bool,
    ) -> Result<Self> {
        let blocks = (length / spec.block_size) as usize;
        let table = match &spec.journal {
            Some(path) => {
                GenTable::create_journal(path, blocks, &spec.journal_header(length, false))
                    .map_err(|e| EngineError::io(format!("cannot create journal {path}"), e))?
            }
            None => GenTable::in_memory(blocks),
        };
        Ok(TargetVerify {
            index,
            offset,
            block: spec.block_size as usize,
            spec,
            table,
            check_reads,
        })
    }

    /// Blocks covered by an IO at `offset` (in the data area) of `len` bytes.
    pub fn blocks(&self, offset: u64, len: u32) -> Range<usize> {
        let b = self.block as u64;
        (offset / b) as usize..(offset + len as u64).div_ceil(b) as usize
    }

    /// What a block with this word should hold; None when it is not judged.
    pub fn expect(&self, w: Word) -> Option<Expect> {
        if !w.written() {
            return match self.spec.prior {
                Prior::Unknown => None,
                _ => Some(Expect::Prior {
                    before_epoch: self.spec.epoch,
                }),
            };
        }
        w.settled().then(|| Expect::Exact {
            epoch: self.spec.epoch,
            gen: w.gen(),
            span: w.span(),
            pool: w.pool(),
        })
    }

    /// Judge one block read during the run; adds to `out`.
    pub fn judge_read(
        &self,
        data: &[u8],
        block: usize,
        expect: Expect,
        stream: usize,
        time_ns: u64,
        out: &mut Findings,
    ) {
        let offset = (block * self.block) as u64;
        out.checked += 1;
        let (class, found, detail) = match block::judge(data, self.spec.target_id, offset, &expect)
        {
            Verdict::Ok => return,
            Verdict::NotTilemark
                if self.spec.prior == Prior::Mixed && matches!(expect, Expect::Prior { .. }) =>
            {
                out.not_tilemark += 1;
                return;
            }
            Verdict::NotTilemark => (Class::Unexpected, None, "not tilemark data".to_string()),
            Verdict::Later(e) => (
                Class::Unexpected,
                None,
                format!(
                    "holds epoch {e}, after this run's epoch {}",
                    self.spec.epoch
                ),
            ),
            Verdict::Finding {
                class,
                found,
                detail,
            } => (class, found, detail),
        };
        out.add(Finding {
            target: self.index,
            class,
            offset,
            expected: Some(expect),
            found,
            stream: Some(stream),
            time_ns: Some(time_ns),
            detail,
        });
    }

    /// The journal's header once the run has ended, and everything made durable.
    pub fn close(&self, length: u64) -> Result<()> {
        self.table
            .rewrite_header(&self.spec.journal_header(length, true))
            .map_err(|e| EngineError::io("closing the verification journal", e))
    }
}
