"""Studies: sequences of stored runs with a purpose, on one framework (base.py).

One module per kind of study: scale.py (tile count and knob searches), points.py (sweeps of one
stream's parameters and Orion's matrix), curve.py (the load/latency curve and the highest rate
that meets an objective). settle.py waits for storage to settle after a fill. docs/studies.md
describes the design and study.json.
"""

from tilemark.study.base import (
    CONFIRM,
    EXTEND,
    FAIL,
    NEW,
    NOISE,
    PASS,
    RECHECK,
    STUDIES_DIR,
    STUDY_FILE,
    STUDY_SCHEMA_VERSION,
    Attempt,
    StepBook,
    StepRecord,
    StepRunner,
    StepSpec,
    Study,
    StudyOutcome,
    StudyRecord,
    StudyStopped,
    combine,
    majority,
    run_study,
)
from tilemark.study.scale import (
    KnobStudy,
    TileCountStudy,
    TileStepRunner,
    attempt_of,
    parse_knob,
    parse_knob_range,
    parse_tile_counts,
    tile_definition,
)
from tilemark.study.settle import Settling, settle

__all__ = [
    "CONFIRM",
    "EXTEND",
    "FAIL",
    "NEW",
    "NOISE",
    "PASS",
    "RECHECK",
    "STUDIES_DIR",
    "STUDY_FILE",
    "STUDY_SCHEMA_VERSION",
    "Attempt",
    "KnobStudy",
    "Settling",
    "StepBook",
    "StepRecord",
    "StepRunner",
    "StepSpec",
    "Study",
    "StudyOutcome",
    "StudyRecord",
    "StudyStopped",
    "TileCountStudy",
    "TileStepRunner",
    "attempt_of",
    "combine",
    "majority",
    "parse_knob",
    "parse_knob_range",
    "parse_tile_counts",
    "run_study",
    "settle",
    "tile_definition",
]
