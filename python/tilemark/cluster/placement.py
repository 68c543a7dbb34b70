"""Placement: one workload -> the workload each host runs.

A host is one Dask worker. It has every target of the workload, each path with `{host}` (the
machine's host name) and `{worker}` (the worker's name) filled in, so several workers on one
machine can each have their own files; a target keeps its name and its index on every host.
Which streams a host runs is given per stream as a set of host indexes (`owners`): a
workload's stream runs on every host unless it names one (`host = "name"`); a tile's streams
run on the host its tile is assigned to, round robin.

Stream indexes of the original workload stay the run's stream indexes ("global"): every host
runs a subset of them, and the merged run has exactly the original workload's streams and
targets, so QoS, application metrics, per-target figures and reports read a cluster run as
they read a one-host run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from tilemark.errors import UsageError
from tilemark.targets.spec import TargetSpec
from tilemark.workload.plan import Workload

PLACEHOLDERS = ("{host}", "{worker}")


@dataclass(frozen=True)
class Host:
    """One worker of the cluster as placement sees it."""

    name: str  # how results name it: unique in the run
    hostname: str  # the machine's host name ({host})
    worker: str  # the Dask worker's name ({worker})
    address: str  # the Dask worker's address
    pid: int = 0  # the worker process


@dataclass
class HostWork:
    """What one host runs: its workload and, for each of its streams, the global index."""

    host: Host
    index: int  # the host's position in the cluster
    workload: Workload
    streams: list[int]


def expand(path: str, host: Host) -> str:
    """A target path on `host`: {host} and {worker} filled in."""
    return path.replace("{host}", host.hostname).replace("{worker}", host.worker)


def host_index(name: str, hosts: Sequence[Host], where: str) -> int:
    """The index of the host a workload or tile names (by results name, worker name or host
    name, the latter only when one worker runs there); UsageError naming `where` otherwise."""
    for i, h in enumerate(hosts):
        if name in (h.name, h.worker):
            return i
    on_machine = [i for i, h in enumerate(hosts) if h.hostname == name]
    if len(on_machine) == 1:
        return on_machine[0]
    known = ", ".join(h.name for h in hosts)
    if on_machine:
        raise UsageError(
            f"{where} '{name}' runs {len(on_machine)} workers; name one of them ({known})."
        )
    raise UsageError(f"{where} '{name}' is not in the cluster; its hosts are {known}.")


def stream_owners(workload: Workload, hosts: Sequence[Host]) -> list[set[int]]:
    """Per stream, the hosts that run it: the one it names, else all of them."""
    everyone = set(range(len(hosts)))
    return [
        {host_index(s.host, hosts, f"stream '{s.name}': host")} if s.host else set(everyone)
        for s in workload.streams
    ]


def tile_owners(workload: Workload, groups: Sequence[int], hosts: Sequence[Host]) -> list[set[int]]:
    """Per stream, the host of its tile, round robin (tile t, 1-based, on host (t - 1) % hosts),
    unless the tile file placed its application (`host = "name"`)."""
    return [
        {host_index(s.host, hosts, f"application of stream '{s.name}': host")}
        if s.host
        else {(g - 1) % len(hosts)}
        for s, g in zip(workload.streams, groups, strict=True)
    ]


def host_workload(workload: Workload, host: Host) -> Workload:
    """`workload` with its target paths as they are on `host`."""
    return dataclasses.replace(
        workload,
        targets=[dataclasses.replace(t, path=expand(t.path, host)) for t in workload.targets],
    )


def check_targets(specs: Sequence[TargetSpec], hosts: Sequence[Host]) -> None:
    """Refuse a target path that would be the same file for two workers on one machine."""
    for spec in specs:
        seen: dict[tuple[str, str], Host] = {}
        for h in hosts:
            key = (h.hostname, expand(spec.path, h))
            if key in seen:
                raise UsageError(
                    f"--target {spec.path} names the same file for workers "
                    f"{seen[key].worker} and {h.worker} on host {h.hostname}; put {{worker}} in "
                    "the path (e.g. --target /data/tm-{worker}.dat) so each worker has its own."
                )
            seen[key] = h


def place(workload: Workload, hosts: Sequence[Host], owners: list[set[int]]) -> list[HostWork]:
    """The workload of every host that runs at least one stream."""
    if len(owners) != len(workload.streams):
        raise ValueError("one owner set per stream")
    check_targets(workload.targets, hosts)
    out = []
    for i, h in enumerate(hosts):
        mine = [g for g, owned in enumerate(owners) if i in owned]
        if not mine:
            continue
        work = dataclasses.replace(
            host_workload(workload, h),
            streams=[dataclasses.replace(workload.streams[g], host=None) for g in mine],
        )
        out.append(HostWork(h, i, work, mine))
    return out
