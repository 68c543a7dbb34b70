"""Where a plan runs: on this host (the list of its inspected targets), or on the hosts of a
cluster (RemoteTargets, tilemark.cluster) when the command was given --cluster.

Commands inspect, lock, compile (here), prepare and run (runner.prepare, runner.run_plan)
through these functions and need not know which: `Targets` is either.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from rich.console import Console

from tilemark import engine, targets
from tilemark.run.outcome import RunOutcome
from tilemark.targets import sets as targetset
from tilemark.targets.spec import TargetSpec
from tilemark.workload import compiler, plan


class RemoteTargets(Sequence[targets.TargetInfo]):
    """A workload's targets inspected on other hosts, standing where the list of TargetInfo
    stands for one host. Read as a sequence it holds, per workload target, one TargetInfo
    true of every host (what layouts and checks need: the smallest data area, the largest
    O_DIRECT alignment); locking, preparing, compiling and running go to the hosts."""

    infos: list[targets.TargetInfo]

    def __getitem__(self, index: Any) -> Any:
        return self.infos[index]

    def __len__(self) -> int:
        return len(self.infos)

    @abstractmethod
    def lock(self, argv: list[str]) -> AbstractContextManager[Any]: ...

    @abstractmethod
    def prepare(self, console: Console) -> bool: ...

    @abstractmethod
    def compile(self, workload: plan.Workload, groups: list[int] | None) -> engine.Plan: ...

    @abstractmethod
    def run(self, workload: plan.Workload, compiled: engine.Plan, **options: Any) -> RunOutcome: ...


Targets = list[targets.TargetInfo] | RemoteTargets


# How a command given --cluster inspects its targets: on every host of the cluster. The cluster
# session installs it while it is open (cluster.opened), so this module knows nothing of Dask.
RemoteInspector = Callable[[Sequence[TargetSpec], dict[str, Any]], RemoteTargets]
_remote_inspector: RemoteInspector | None = None


@contextmanager
def inspecting_remotely(inspector: RemoteInspector) -> Iterator[None]:
    """While the block runs, targets are inspected by `inspector` (on a cluster's hosts)."""
    global _remote_inspector
    previous, _remote_inspector = _remote_inspector, inspector
    try:
        yield
    finally:
        _remote_inspector = previous


def inspect_targets(specs: Sequence[TargetSpec], **options: Any) -> Targets:
    """targetset.inspect_targets on this host, or on every host of the open cluster."""
    if _remote_inspector is not None:
        return _remote_inspector(specs, options)
    return targetset.inspect_targets(specs, **options)


def lock(infos: Targets, argv: list[str]) -> AbstractContextManager[Any]:
    """Hold every target for the run or study (UsageError if another run has one)."""
    if isinstance(infos, RemoteTargets):
        return infos.lock(argv)
    return targetset.lock_targets(infos, argv)


def compile_on(
    workload: plan.Workload, infos: Targets, groups: list[int] | None = None
) -> engine.Plan:
    """The plan of `workload` on its inspected targets; `groups` (a tile per stream) places
    streams across a cluster's hosts round robin."""
    if isinstance(infos, RemoteTargets):
        return infos.compile(workload, groups)
    return compiler.compile_plan(workload, infos)


def inspect_and_compile(
    workload: plan.Workload,
    *,
    destroy_data: list[str] | None,
    force: bool,
    fill: bool = False,
) -> tuple[Targets, engine.Plan]:
    """Inspect every target (safety checks) and compile the plan; no IO yet."""
    infos = inspect_targets(
        workload.targets,
        writes=[workload.writes_to(i) for i in range(len(workload.targets))],
        direct=workload.direct,
        destroy_data=destroy_data,
        force=force,
        fill=fill,
        io_timeout_s=workload.io_timeout_s,
    )
    return infos, compile_on(workload, infos)
