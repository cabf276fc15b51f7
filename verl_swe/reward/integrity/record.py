"""Read the probe's record: HMAC-checked lines, grouped into the pytest sessions that wrote them."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field


@dataclass
class Session:
    """One pytest process that loaded the probe with the grading's key."""

    pid: int
    starts: int = 0  # more than one: the process re-executed itself and loaded the probe again
    config: dict | None = None  # the `configure` line: rootdir, python_functions, tbstyle, xdist
    collects: list[dict] = field(default_factory=list)
    tests: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    exitstatus: int | None = None  # pytest's own, at the end of its session
    ended: bool = False  # pytest_unconfigure ran: the process did not exit or exec before pytest finished


@dataclass
class Record:
    sessions: list[Session] = field(default_factory=list)
    forged: int = 0  # lines that fail the HMAC check or do not parse
    gaps: int = 0  # missing or repeated sequence numbers


def read_record(raw: bytes, key: str) -> Record:
    rec = Record()
    by_pid: dict[int, Session] = {}
    expected: dict[int, int] = {}
    secret = key.encode()
    for line in raw.decode("utf-8", errors="replace").splitlines():
        mac, _, body = line.partition(" ")
        if not hmac.compare_digest(mac, hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()):
            rec.forged += 1
            continue
        try:
            entry = json.loads(body)
            pid, n, kind = int(entry["pid"]), int(entry["n"]), entry["k"]
        except (ValueError, KeyError, TypeError):
            rec.forged += 1
            continue
        if n == 0 and kind == "start":
            expected[pid] = 0  # a (re)start of the probe in this process numbers its lines from 0 again
        if expected.get(pid) != n:
            rec.gaps += 1
        expected[pid] = n + 1
        session = by_pid.get(pid)
        if session is None:
            session = by_pid[pid] = Session(pid)
            rec.sessions.append(session)
        _add(session, kind, entry)
    return rec


def _add(session: Session, kind: str, entry: dict) -> None:
    if kind == "start":
        session.starts += 1
    elif kind == "configure":
        session.config = entry
    elif kind == "collect":
        session.collects.append(entry)
    elif kind == "test":
        session.tests.append(entry)
    elif kind == "problem":
        session.problems.append(entry)
    elif kind == "sessionfinish":
        session.exitstatus = entry.get("exitstatus")
    elif kind == "end":
        session.ended = True
