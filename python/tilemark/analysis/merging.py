"""Interval snapshots merged (analysis/qos.py's QoS windows, run/steady.py's rounds): counts
summed, histograms merged, backlog levels from the last snapshot, each stream's first fields
kept. `MergedSnapshot` adds snapshots up in place and renders the merged document once asked;
`merge_snapshot` merges one snapshot into a document, as the QoS windows did before a tile run
of 1,200 streams made that the front end's largest cost (issue 25)."""

from __future__ import annotations

from tilemark.hist import Histogram

OPS = ("read", "write", "sync")


def merge_snapshot(into: dict, snap: dict) -> None:
    """Add `snap` to the merged snapshot `into`: counts summed, histograms merged, backlog
    levels from the later one."""
    into["end_ns"] = snap["end_ns"]
    into["interval"] = snap["interval"]
    by_stream = {s["stream"]: s for s in into["streams"]}
    for s in snap["streams"]:
        mine = by_stream.get(s["stream"])
        if mine is None:
            into["streams"].append(dict(s))
            continue
        for op in OPS:
            mine[op] = _OpSum(mine[op]).add(s[op]).render()
        _merge_levels(mine, s)


def _merge_levels(mine: dict, s: dict) -> None:
    mine["lag_max_ns"] = max(mine.get("lag_max_ns", 0), s.get("lag_max_ns", 0))
    mine["ios_issued_late"] = mine.get("ios_issued_late", 0) + s.get("ios_issued_late", 0)
    for level in ("behind_ios", "inflight"):
        mine[level] = s.get(level, 0)


class _OpSum:
    """One op kind of a stream over merged snapshots, added up in place; `render` gives what
    merging their JSON one snapshot at a time gave (merge_snapshot)."""

    __slots__ = ("ops", "bytes", "errors", "service", "response")

    def __init__(self, doc: dict) -> None:
        self.ops = doc["ops"]
        self.bytes = doc["bytes"]
        self.errors = dict(doc["errors"])
        # None: no snapshot had this histogram (closed loop has no response histogram).
        self.service = None if doc.get("service") is None else Histogram.from_json(doc["service"])
        response = doc.get("response")
        self.response = None if response is None else Histogram.from_json(response)

    def add(self, doc: dict) -> _OpSum:
        self.ops += doc["ops"]
        self.bytes += doc["bytes"]
        errors = self.errors
        for errno, n in doc["errors"].items():
            errors[errno] = errors.get(errno, 0) + n
        service, response = doc.get("service"), doc.get("response")
        if service is not None:
            if self.service is None:
                self.service = Histogram()
            self.service.merge_json(service)
        if response is not None:
            if self.response is None:
                self.response = Histogram()
            self.response.merge_json(response)
        return self

    def add_sum(self, other: _OpSum) -> _OpSum:
        """`add(other.render())` without rendering it."""
        self.ops += other.ops
        self.bytes += other.bytes
        errors = self.errors
        for errno, n in other.errors.items():
            errors[errno] = errors.get(errno, 0) + n
        if other.service is not None:
            self.service = (self.service or Histogram()).merge(other.service)
        if other.response is not None:
            self.response = (self.response or Histogram()).merge(other.response)
        return self

    def copy(self) -> _OpSum:
        new = _OpSum.__new__(_OpSum)
        new.ops, new.bytes, new.errors = self.ops, self.bytes, dict(self.errors)
        new.service = None if self.service is None else _copied(self.service)
        new.response = None if self.response is None else _copied(self.response)
        return new

    def render(self) -> dict:
        return {
            "ops": self.ops,
            "bytes": self.bytes,
            "errors": dict(self.errors),
            "service": None if self.service is None else self.service.to_json(),
            "response": None if self.response is None else self.response.to_json(),
        }


def _copied(h: Histogram) -> Histogram:
    return Histogram(dict(h.counts), h.n, h.sum, h.min, h.max)


def _copied_stream(mine: dict) -> dict:
    out = dict(mine)
    for op in OPS:
        if type(out[op]) is _OpSum:
            out[op] = out[op].copy()
    return out


class MergedSnapshot:
    """Snapshots merged as merge_snapshot merges them (the first one's fields, counts summed,
    histograms merged, backlog levels from the last), added up in place: `render()` gives the
    merged snapshot. An op kind seen in one snapshot only keeps that snapshot's own document."""

    __slots__ = ("head", "start_ns", "end_ns", "interval", "streams", "_rendered")

    def __init__(self, snap: dict) -> None:
        self._rendered: dict | None = None
        self.head = snap
        self.start_ns = snap["start_ns"]
        self.end_ns = snap["end_ns"]
        self.interval = snap["interval"]
        self.streams: dict[int, dict] = {s["stream"]: dict(s) for s in snap["streams"]}

    def add(self, snap: dict) -> None:
        self._rendered = None
        self.end_ns = snap["end_ns"]
        self.interval = snap["interval"]
        streams = self.streams
        for s in snap["streams"]:
            mine = streams.get(s["stream"])
            if mine is None:
                streams[s["stream"]] = dict(s)
                continue
            for op in OPS:
                acc = mine[op]
                if type(acc) is not _OpSum:
                    acc = mine[op] = _OpSum(acc)
                acc.add(s[op])
            _merge_levels(mine, s)

    def add_merged(self, other: MergedSnapshot) -> None:
        """`add(other.render())` without rendering it (merging QoS windows into totals)."""
        self._rendered = None
        self.end_ns = other.end_ns
        self.interval = other.interval
        streams = self.streams
        for index, theirs in other.streams.items():
            mine = streams.get(index)
            if mine is None:
                streams[index] = _copied_stream(theirs)
                continue
            for op in OPS:
                acc, add = mine[op], theirs[op]
                if type(acc) is not _OpSum:
                    acc = mine[op] = _OpSum(acc)
                if type(add) is _OpSum:
                    acc.add_sum(add)
                else:
                    acc.add(add)
            _merge_levels(mine, theirs)

    def copy(self) -> MergedSnapshot:
        new = MergedSnapshot.__new__(MergedSnapshot)
        new._rendered = self._rendered
        new.head, new.start_ns, new.end_ns = self.head, self.start_ns, self.end_ns
        new.interval = self.interval
        new.streams = {index: _copied_stream(mine) for index, mine in self.streams.items()}
        return new

    def render(self) -> dict:
        """The merged snapshot (the same document until more is added: a finished QoS window
        is rendered once however often a run is judged)."""
        if self._rendered is not None:
            return self._rendered
        streams = []
        for mine in self.streams.values():
            out = dict(mine)
            for op in OPS:
                if type(out[op]) is _OpSum:
                    out[op] = out[op].render()
            streams.append(out)
        self._rendered = {
            **self.head,
            "end_ns": self.end_ns,
            "interval": self.interval,
            "streams": streams,
        }
        return self._rendered


def copy_snapshot(snap: dict) -> dict:
    """A snapshot to merge others into (its stream entries copied)."""
    return {**snap, "streams": [dict(s) for s in snap["streams"]]}
