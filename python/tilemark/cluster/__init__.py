"""Many hosts, one run, on Dask distributed (docs/cluster.md).

`opened(options)` connects to the cluster of `--cluster` for the duration of a command; while it
is open, run.where.inspect_targets inspects targets on every host and returns HostTargets, through
which the command locks, prepares, compiles and runs exactly as it would on one host. Modules:
session (connect, versions, clocks), agent (what each worker runs), placement (workload ->
per-host workloads), handle (start together, merge, notice lost hosts), hosts (HostTargets and
the run across hosts), merge (adding hosts' counters and histograms).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilemark.cluster.hosts import HostTargets
    from tilemark.cluster.session import Session
    from tilemark.options.typed import ClusterOptions
    from tilemark.targets.spec import TargetSpec

_current: Session | None = None


def current() -> Session | None:
    """The cluster session of the running command, if it was given --cluster."""
    return _current


@contextmanager
def opened(options: ClusterOptions, *, force: bool = False) -> Iterator[Session | None]:
    """Connect to --cluster's cluster for the block (nothing without --cluster; the session
    already open when nested). `force` accepts host clocks more than one interval apart."""
    global _current
    if not options.cluster or _current is not None:
        yield _current
        return
    from tilemark.cluster.session import open_session
    from tilemark.run.where import inspecting_remotely

    session = open_session(options, force=force)
    _current = session
    try:
        with inspecting_remotely(lambda specs, options: inspect(session, specs, options)):
            yield session
    finally:
        _current = None
        session.close()


def inspect(session: Session, specs: Sequence[TargetSpec], options: dict[str, Any]) -> HostTargets:
    """A workload's targets ({host}/{worker} filled in) inspected on every host."""
    from tilemark.cluster.hosts import inspect_hosts

    return inspect_hosts(session, specs, options)
