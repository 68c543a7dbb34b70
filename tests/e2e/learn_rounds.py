"""What the tests of real applications learned share (test_learn_postgresql.py,
test_learn_rocksdb.py, test_learn_sqlite.py): real applications captured, learned, run as a
learned profile on the same device, captured again and compared (issue 24), small and short:
the long measurements are bench/fidelity.py. One module per application, so that the three
(30-40 s each) run on different pytest workers (`make test` distributes by file).

Each test runs one round of bench/fidelity.py (the same code) on a delayed nbdkit device
under a loop device under ext4, and asserts what a round must give whatever the machine's
load: the capture holds the application's IO, the profile loads and holds the streams the
application has, the learned run reaches the device, and fidelity compares them on every
property with an overall score. The accuracy goals (>= 0.90 per property, >= 0.95 overall)
are benchmark results, measured with repetitions in bench/results, not asserted here.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import apprigs  # noqa: E402
import fidelity as bench  # noqa: E402

# Not serial: every assertion holds under load (fidelity goals are benchmark results), and
# most of each test is the application starting and filling its data.
MARKS = [pytest.mark.root, pytest.mark.apps, pytest.mark.nbd]

# The captured windows stay 6 s: in 2-3 s windows the learned run's size mix scored 0.54-0.70
# (asserted > 0.7) in about half the SQLite runs and in one of five RocksDB runs, and a 0.75 s
# lead (the application and the learned run start that long before their capture and end
# that long after it) let pgbench end 0.7 s into a capture on a busy machine (`tilemark trace
# capture` takes 1.3-2.5 s to start tracing), so the lead stays the benchmark's 1.5 s too.
# pgbench warms up for WARMUP_S (bench: 3 s; its connections and first checkpoint are done
# in 1 s at this scale); the learned run's target is made by a run of PREP_S (bench: 1 s;
# the target is created and filled before the run's own time starts).
SECONDS = 6
WARMUP_S = 1
PREP_S = 0.1
DELAYS = dict(rdelay_ms=1, wdelay_ms=1, prep_s=PREP_S)


@pytest.fixture(name="work")
def work_dir():
    # The postgres user walks into it, and pytest's own base directory is 0700: a directory
    # of its own in /tmp, traversable, removed afterwards.
    path = Path(tempfile.mkdtemp(prefix="tilemark-apps-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def one_round(fn, work, **kw):
    try:
        return fn(work, seconds=SECONDS, **DELAYS, **kw)
    except apprigs.Unavailable as e:
        pytest.skip(f"{e} (scripts/system-deps.sh installs what is missing)")


def check(r: bench.Round, streams: set[str]) -> dict:
    doc = tomllib.loads(r.learned)
    names = {s["name"] for s in doc["stream"]}
    assert streams <= names, names
    assert doc["learned"]["ios"] >= 200 and doc["learned"]["source"][0]["fingerprint"]
    scores = r.scores()
    # every property compared (latency too: same device)
    assert all(v is not None for v in scores.values()), scores
    assert 0 < r.fidelity["overall"] <= 1
    # the learned run did reach the device at about the application's rate
    assert scores["rate"] > 0.5 and scores["read_share"] > 0.7 and scores["size_mix"] > 0.7
    # the control: the trace replayed on the same raw device keeps what the replay does not
    # time (ops, sizes, offsets) exactly, whatever the load (its 0.98 goal is measured in
    # bench/fidelity.py)
    control = {p["property"]: p["accuracy"] for p in r.control["properties"]}
    for prop in ("read_share", "size_mix", "seek_distance", "footprint", "skew"):
        assert control[prop] >= 0.98, (prop, control)
    return doc
