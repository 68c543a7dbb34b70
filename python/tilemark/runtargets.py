"""Where a plan runs: on this host (the list of its inspected targets), or on the hosts of a
cluster (RemoteTargets, tilemark.cluster) when the command was given --cluster.

Commands inspect, lock, compile (here), prepare and run (runner.prepare, runner.run_plan)
through these functions and need not know which: `Targets` is either.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tilemark import engine, plan, targets, targetset
from tilemark.targetspec import TargetSpec

if TYPE_CHECKING:
    from tilemark.runner import RunOutcome


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


def inspect_targets(specs: Sequence[TargetSpec], **options: Any) -> Targets:
    """targetset.inspect_targets on this host, or on every host of the open cluster."""
    from tilemark import cluster  # Dask loads only once a command opens a cluster

    session = cluster.current()
    if session is not None:
        return cluster.inspect(session, specs, options)
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
    return plan.compile_plan(workload, infos)


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
