"""What the probe that saw an exit brought waits for harvest, by attempt dir, and is used only
for exactly the files harvest wants."""

from __future__ import annotations

from eq_tui.engine.tick.exit_files import KEPT, ExitFiles
from eq_tui.hosts.base import AttemptProbe, AttemptRef, HostSnapshot, ProbeRequest
from eq_tui.results.collect import Wanted


def probe(key: str, files: tuple[str | None, ...] | None) -> AttemptProbe:
    return AttemptProbe(key=key, session_alive=False, pid=None, pid_alive=False, started=1.0,
                        exit_code=0, exited_at=2.0, log_size=1, output_ok=None,
                        exit_files=files)


def test_files_are_taken_once_and_only_for_the_same_paths() -> None:
    kept = ExitFiles()
    refs = (AttemptRef("a", "s_a", "/r/a/1", None), AttemptRef("b", "s_b", "/r/b/1", None))
    request = ProbeRequest(attempts=refs, exit_reads=(("a", ("/r/a/1/m.json", "/r/a/1/log")),
                                                      ("b", ("/r/b/1/log",))))
    snap = HostSnapshot(host="h", ok=True, taken_at=0.0,
                        attempts={"a": probe("a", ("{}", None)), "b": probe("b", None)})
    kept.take_in(request, snap)
    wanted = [Wanted("json", "/r/a/1/m.json"), Wanted("log", "/r/a/1/log")]
    assert kept.take("/r/b/1", [Wanted("log", "/r/b/1/log")]) is None  # b was not read
    assert kept.take("/r/a/1", wanted[:1]) is None  # other files: read them anew
    kept.take_in(request, snap)
    assert kept.take("/r/a/1", wanted) == ("{}", None)
    assert kept.take("/r/a/1", wanted) is None  # taken once


def test_a_failed_probe_brings_nothing_and_the_store_is_bounded() -> None:
    kept = ExitFiles()
    refs = tuple(AttemptRef(f"j{i}", f"s{i}", f"/r/{i}", None) for i in range(KEPT + 5))
    request = ProbeRequest(attempts=refs,
                           exit_reads=tuple((f"j{i}", (f"/r/{i}/log",)) for i in range(KEPT + 5)))
    attempts = {f"j{i}": probe(f"j{i}", ("x",)) for i in range(KEPT + 5)}
    kept.take_in(request, HostSnapshot(host="h", ok=False, taken_at=0.0, attempts=attempts))
    assert kept.take("/r/0", [Wanted("log", "/r/0/log")]) is None
    kept.take_in(request, HostSnapshot(host="h", ok=True, taken_at=0.0, attempts=attempts))
    assert kept.take("/r/0", [Wanted("log", "/r/0/log")]) is None  # the oldest went first
    last = KEPT + 4
    assert kept.take(f"/r/{last}", [Wanted("log", f"/r/{last}/log")]) == ("x",)
