"""A cluster session: the Dask client, one agent per host, their clocks and versions.

`open_session` connects (`local:N` starts a LocalCluster of N worker processes listening on
127.0.0.1 only; `tls://HOST:PORT` joins a running scheduler with mutual TLS and
`require_encryption`), places one HostAgent actor on every worker, refuses hosts whose
tilemark, engine or plan format differ from this client's, and measures every host's clock
offset NTP-style: several round trips, keeping the one with the shortest round trip, whose
half is the offset's uncertainty.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Any

import tilemark
from tilemark import engine
from tilemark.cluster.agent import HostAgent
from tilemark.cluster.placement import Host
from tilemark.errors import RunError, UsageError
from tilemark.options.typed import ClusterOptions

MAX_LOCAL_WORKERS = 64
CONNECT_TIMEOUT_S = 10.0
CLOCK_SAMPLES = 8
CLOCK_WARN_NS = 1_000_000  # offsets above 1 ms are a warning in the summary
CALL_TIMEOUT_S = 60.0


@dataclass
class ClusterSpec:
    kind: str  # "local" | "tls"
    workers: int = 0  # local:N
    address: str = ""  # tls://HOST:PORT


def parse_spec(text: str) -> ClusterSpec:
    """local:N or tls://HOST:PORT; a UsageError naming --cluster otherwise."""
    raw = text.strip()
    if m := re.fullmatch(r"local:(\d+)", raw):
        n = int(m[1])
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            raise UsageError(
                f"--cluster local:N needs N from 1 to {MAX_LOCAL_WORKERS} worker processes, "
                f"got {n}."
            )
        return ClusterSpec("local", workers=n)
    if re.fullmatch(r"tls://[^\s/:]+:\d{1,5}", raw):
        return ClusterSpec("tls", address=raw)
    raise UsageError(
        "--cluster must be local:N (N worker processes on this machine) or tls://HOST:PORT "
        f"(a Dask scheduler with TLS), got {text!r}."
    )


def tls_files(options: ClusterOptions, spec: ClusterSpec) -> dict[str, str]:
    """The client's TLS files from --tls-ca/--tls-cert/--tls-key: all three or none (then
    Dask's config supplies them)."""
    flags = {"tls_ca": "--tls-ca", "tls_cert": "--tls-cert", "tls_key": "--tls-key"}
    given = {k: getattr(options, k) for k in flags if getattr(options, k)}
    if not given:
        return {}
    if spec.kind != "tls":
        flag = flags[next(iter(given))]
        raise UsageError(
            f"{flag} applies to tls:// clusters; local:N runs on this machine's loopback only."
        )
    missing = [flags[k] for k in flags if k not in given]
    if missing:
        raise UsageError(
            f"mutual TLS needs --tls-ca, --tls-cert and --tls-key together; {', '.join(missing)} "
            "is missing."
        )
    for key, path in given.items():
        if not os.path.isfile(path):
            raise UsageError(f"{flags[key]} {path} is not a readable file.")
    return given


def security(files: dict[str, str]) -> Any:
    """Dask Security with encryption required: the given files, else Dask's TLS config."""
    from distributed.security import Security

    if not files:
        sec = Security(require_encryption=True)
        if not (sec.tls_ca_file and sec.tls_client_cert and sec.tls_client_key):
            raise UsageError(
                "tls:// clusters use mutual TLS: pass --tls-ca, --tls-cert and --tls-key (or set "
                "distributed.comm.tls.ca-file and .client.cert/.key in Dask's config)."
            )
        return sec
    return Security(
        tls_ca_file=files["tls_ca"],
        tls_client_cert=files["tls_cert"],
        tls_client_key=files["tls_key"],
        require_encryption=True,
    )


@dataclass
class ClockOffset:
    """A host's wall clock minus this client's, from the best of several round trips."""

    offset_ns: int
    rtt_ns: int

    @property
    def uncertainty_ns(self) -> int:
        return self.rtt_ns // 2

    def lower_bound_ns(self) -> int:
        """The smallest offset the round trip allows (0 when it may be none at all)."""
        return max(0, abs(self.offset_ns) - self.uncertainty_ns)

    def to_json(self) -> dict[str, float]:
        return {
            "offset_ms": self.offset_ns / 1e6,
            "uncertainty_ms": self.uncertainty_ns / 1e6,
        }


class Session:
    """Connected hosts, each with its agent; `close()` releases their targets."""

    def __init__(self, client: Any, *, spec: str, cluster: Any = None, force: bool = False):
        self.client = client
        self.spec = spec
        self.cluster = cluster
        self.force = force
        self.hosts: list[Host] = []
        self.agents: list[Any] = []
        self.identities: list[dict[str, Any]] = []
        self.offsets: dict[str, ClockOffset] = {}

    # set-up

    def attach_agents(self) -> None:
        """One HostAgent on every worker; names, versions, clock offsets."""
        workers = self.client.scheduler_info()["workers"]
        addresses = sorted(workers, key=lambda a: str(workers[a].get("name")))
        if not addresses:
            raise RunError(f"the cluster at {self.spec} has no workers; start `dask worker`s.")
        futures = [
            self.client.submit(HostAgent, actor=True, workers=[a], allow_other_workers=False)
            for a in addresses
        ]
        self.agents = [f.result(timeout=CALL_TIMEOUT_S) for f in futures]
        self.identities = [a.hello().result(timeout=CALL_TIMEOUT_S) for a in self.agents]
        check_versions(self.identities)
        names = [i["hostname"] for i in self.identities]
        for ident, address in zip(self.identities, addresses, strict=True):
            name = ident["hostname"]
            if names.count(name) > 1:
                name = f"{name}-{ident['worker']}"
            self.hosts.append(
                Host(name, ident["hostname"], ident["worker"], address, int(ident["pid"]))
            )
        self.measure_clocks()

    def measure_clocks(self, samples: int = CLOCK_SAMPLES) -> None:
        """Each host's clock offset: the round trip with the shortest time decides."""
        for host, agent in zip(self.hosts, self.agents, strict=True):
            best: ClockOffset | None = None
            for _ in range(samples):
                t0 = time.time_ns()
                remote = int(agent.clock().result(timeout=CALL_TIMEOUT_S))
                t1 = time.time_ns()
                sample = ClockOffset(remote - (t0 + t1) // 2, t1 - t0)
                if best is None or sample.rtt_ns < best.rtt_ns:
                    best = sample
            assert best is not None
            self.offsets[host.name] = best

    def clock_notes(self, interval_s: float) -> list[str]:
        """Warnings for offsets certainly above 1 ms; a UsageError for one above the interval
        unless --force (intervals of different hosts would not cover the same time)."""
        notes = []
        for name, off in self.offsets.items():
            certain = off.lower_bound_ns()
            shown = f"{off.offset_ns / 1e6:+.3f} ms (+-{off.uncertainty_ns / 1e6:.3f} ms)"
            if certain > interval_s * 1e9 and not self.force:
                raise UsageError(
                    f"host {name}'s clock is {shown} off this client's, more than one interval "
                    f"({interval_s:g} s): its intervals would not cover the same time as the "
                    "others'. Synchronize the clocks (chrony, ntpd), or pass --force to run "
                    "anyway."
                )
            if certain > CLOCK_WARN_NS:
                notes.append(
                    f"host {name}'s clock is {shown} off this client's (above 1 ms): its "
                    "intervals are shifted by as much"
                )
        return notes

    def elsewhere(self) -> list[str]:
        """The hosts that are not this machine (their targets cannot be read from here)."""
        here = socket.gethostname()
        return [h.name for h in self.hosts if h.hostname != here]

    def close(self) -> None:
        """Release every host's targets, then disconnect (and stop a local cluster)."""
        for agent in self.agents:
            try:
                agent.release().result(timeout=10)
            except Exception:
                pass  # a lost worker holds nothing any more
        self.agents = []
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()

    def each(self, method: str, *args: Any, hosts: list[int] | None = None) -> list[Any]:
        """Call an agent method on every host (or `hosts`) at once; results in host order.
        An exception from a host is re-raised naming it (UsageError stays a UsageError)."""
        chosen = range(len(self.agents)) if hosts is None else hosts
        futures = [(i, getattr(self.agents[i], method)(*args)) for i in chosen]
        out = []
        for i, f in futures:
            try:
                out.append(f.result(timeout=None))
            except (UsageError, RunError, engine.EngineError) as e:
                raise type(e)(f"host {self.hosts[i].name}: {e}") from None
        return out


def check_versions(identities: list[dict[str, Any]]) -> None:
    """Refuse hosts whose tilemark, engine or plan format differ from this client's."""
    mine = {
        "tilemark_version": tilemark.__version__,
        "engine_version": engine.version(),
        "plan_version": engine.PLAN_VERSION,
    }
    for ident in identities:
        for key, value in mine.items():
            if ident.get(key) != value:
                what = key.replace("_", " ").replace("plan version", "plan format")
                raise UsageError(
                    f"host {ident['hostname']} (worker {ident['worker']}) runs {what} "
                    f"{ident.get(key)}, this client {value}; install the same tilemark on every "
                    "host before running across them."
                )


def _check_local_processes() -> None:
    """Worker processes share locks through POSIX shared memory (/dev/shm): say what is
    missing before Dask fails with a page of tracebacks per worker."""
    import multiprocessing

    try:
        multiprocessing.get_context("spawn").Lock()
    except OSError as e:
        raise UsageError(
            "--cluster local:N starts worker processes, which need POSIX shared memory: "
            f"{e.strerror or e} creating a semaphore in /dev/shm; mount /dev/shm writable "
            "(a tmpfs) or run without --cluster."
        ) from None


def open_session(options: ClusterOptions, *, force: bool = False) -> Session:
    """Connect to the cluster of --cluster (module doc); `force` accepts host clocks more than
    one interval apart."""
    spec = parse_spec(str(options.cluster))
    files = tls_files(options, spec)
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - a dependency of tilemark
        raise RunError("--cluster needs the Python package distributed (Dask).") from None
    if spec.kind == "local":
        _check_local_processes()
        try:
            cluster = LocalCluster(
                n_workers=spec.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",  # loopback only: nothing off this machine can join or connect
                dashboard_address=None,
                silence_logs=logging.CRITICAL,  # a failure is one sentence, below
            )
        except Exception as e:
            raise RunError(
                f"--cluster local:{spec.workers} could not start its worker processes: "
                f"{type(e).__name__}: {e}."
            ) from None
        try:
            client = Client(cluster)
            client.wait_for_workers(spec.workers, timeout=CONNECT_TIMEOUT_S)
        except BaseException:
            cluster.close()
            raise
        session = Session(client, spec=f"local:{spec.workers}", cluster=cluster, force=force)
    else:
        sec = security(files)
        try:
            client = Client(spec.address, security=sec, timeout=CONNECT_TIMEOUT_S)
        except Exception as e:  # refused, timed out, or a TLS handshake Dask reports otherwise
            raise RunError(
                f"cannot connect to the Dask scheduler at {spec.address}: {e}; check that it "
                "runs and that --tls-ca/--tls-cert/--tls-key (or Dask's TLS config) name a "
                "certificate its CA signed."
            ) from None
        session = Session(client, spec=spec.address, force=force)
    try:
        session.attach_agents()
    except BaseException:
        session.close()
        raise
    return session
