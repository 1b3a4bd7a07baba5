"""GPU health rules, fed probes directly (tests/unit/test_gpu_health.py runs them through an
engine): when a GPU is quarantined and the exact reason a person reads, how often the health
query is asked, what outlasts a restart (gpu_health.json), and a person's release."""

from __future__ import annotations

import json
from pathlib import Path

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.tick.gpu_health import (
    FAULT_WINDOW_S,
    HEALTH_EVERY_S,
    HEALTH_FILE,
    GpuHealthWatch,
    quarantine,
    release,
)
from eq_tui.hosts.base import GpuHealth, GpuReading, HostSnapshot
from tests.unit.test_memory_book import Bed


def watch(tmp_path: Path) -> tuple[Bed, GpuHealthWatch]:
    bed = Bed(tmp_path, [], [])
    return bed, GpuHealthWatch(bed.ctx)


def probe(bed: Bed, w: GpuHealthWatch, gpus: dict[int, str], *, host: str = "h",
          health: tuple[GpuHealth, ...] = (), ok: bool = True) -> None:
    readings = tuple(GpuReading(i, uuid, "Sim", 0, 80 * 1024, 0) for i, uuid in gpus.items())
    bed.hosts[host].snapshot = HostSnapshot(host, ok, bed.clock(), gpus=readings, health=health)
    w.check({host})


def alerts(bed: Bed) -> list[tuple[str, str | None, str]]:
    return [(a["level"], a["job"], a["message"]) for a in bed.ctx.bus.alerts]


def quarantined_events(bed: Bed) -> list[dict[str, object]]:
    return [e for e in bed.ctx.run_dir.read_events() if e["type"] == "gpu_quarantined"]


def test_a_gpu_no_longer_listed_is_quarantined_with_its_uuid(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    probe(bed, w, {0: "GPU-a", 1: "GPU-b"})
    assert bed.hosts["h"].quarantined == set()
    probe(bed, w, {0: "GPU-a", 1: ""})  # a reading without a uuid lists nothing
    reason = "GPU 1 (GPU-b) is no longer listed by nvidia-smi (fell off the bus?)"
    assert bed.hosts["h"].quarantined == {1}
    assert bed.hosts["h"].quarantine_reasons == {1: reason}
    assert bed.ledger.unsaved
    assert [(e["host"], e["gpu"], e["reason"], e["released"]) for e in quarantined_events(bed)] \
        == [("h", 1, reason, False)]
    assert alerts(bed) == [("error", None, f"h: GPU 1 quarantined: {reason}; nothing launches "
                            "there until it is released (release-gpu)")]
    assert bed.ctx.bus.alerts[-1]["host"] == "h"
    probe(bed, w, {0: "GPU-a"})  # still missing: quarantined once
    assert len(quarantined_events(bed)) == 1


def test_a_failed_probe_or_one_without_gpus_checks_nothing(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    probe(bed, w, {0: "GPU-a", 1: "GPU-b"})
    probe(bed, w, {}, ok=True)
    probe(bed, w, {0: "GPU-a"}, ok=False)
    w.check({"nowhere"})
    assert bed.hosts["h"].quarantined == set()
    probe(bed, w, {0: "GPU-a"}, host="g")  # another host's GPUs are its own
    assert bed.hosts["h"].quarantined == set() == bed.hosts["g"].quarantined


def test_growing_ecc_errors_and_pending_pages_quarantine(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    gpus = {0: "GPU-a", 1: "GPU-b", 2: "GPU-c"}
    probe(bed, w, gpus, health=(GpuHealth(0, "GPU-a", 3, False), GpuHealth(1, "GPU-b", None,
                                                                            None)))
    assert bed.hosts["h"].quarantined == set()  # a first reading is not growth
    probe(bed, w, gpus, health=(GpuHealth(0, "GPU-a", 3, False), GpuHealth(1, "GPU-b", 0, None)))
    assert bed.hosts["h"].quarantined == set()  # the same count, or a first count
    probe(bed, w, gpus, health=(GpuHealth(0, "GPU-a", 4, False), GpuHealth(1, "GPU-b", 0, None),
                                GpuHealth(2, "GPU-c", None, True)))
    assert bed.hosts["h"].quarantine_reasons == {
        0: "uncorrected ECC errors grew from 3 to 4",
        2: "retired pages pending (the GPU needs a reset)"}


def test_the_health_query_is_asked_at_most_every_health_every_s(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    assert w.want_health("h") and not w.want_health("h")
    bed.clock.now += HEALTH_EVERY_S - 1
    assert not w.want_health("h")
    assert w.want_health("new")  # a host first seen now
    bed.clock.now += 1
    assert w.want_health("h") and not w.want_health("h")


def faulted(job_id: str, gpus: list[int], host: str | None = "h") -> JobState:
    job = JobState(id=job_id, phase="main", cmd="x", status=JobStatus.PENDING)
    if host is not None:
        job.history.append(Attempt(1, host, gpus, "s", "/d", "/d/log"))
    return job


def test_two_gpu_faults_on_a_gpu_within_the_window_quarantine_it(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    w.note_fault(faulted("a", [0, 1]))
    assert bed.hosts["h"].quarantined == set()
    bed.clock.now += FAULT_WINDOW_S - 1
    w.note_fault(faulted("b", [1]))
    reason = "2 jobs ended with a GPU fault there within an hour (last: b)"
    assert bed.hosts["h"].quarantine_reasons == {1: reason}
    assert alerts(bed)[-1] == ("error", "b", f"h: GPU 1 quarantined: {reason}; nothing "
                               "launches there until it is released (release-gpu)")
    bed.clock.now += 1  # a's fault on GPU 0 is an hour old now: it no longer counts
    w.note_fault(faulted("c", [0]))
    assert bed.hosts["h"].quarantined == {1}
    w.note_fault(faulted("d", [0], host=None))  # never placed: nothing to count
    assert bed.hosts["h"].quarantined == {1}
    saved = json.loads((tmp_path / HEALTH_FILE).read_text())
    assert saved["hosts"]["h"]["faults"]["0"] == [bed.clock.now]


def test_readings_and_faults_outlast_a_restart(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    probe(bed, w, {0: "GPU-a", 1: "GPU-b"}, health=(GpuHealth(0, "GPU-a", 3, False),))
    w.note_fault(faulted("a", [1]))
    assert json.loads((tmp_path / HEALTH_FILE).read_text()) == {"hosts": {
        "g": {"ecc": {}, "faults": {}, "listed": {}},
        "h": {"ecc": {"GPU-a": 3}, "faults": {"1": [1000.0]},
              "listed": {"GPU-a": 0, "GPU-b": 1}}}}
    again = GpuHealthWatch(bed.ctx)
    assert again.hosts["h"].listed == {"GPU-a": 0, "GPU-b": 1}
    assert again.hosts["h"].ecc == {"GPU-a": 3} and again.hosts["h"].faults == {1: [1000.0]}
    probe(bed, again, {0: "GPU-a"}, health=(GpuHealth(0, "GPU-a", 5, False),))
    assert set(bed.hosts["h"].quarantine_reasons) == {0, 1}
    again.note_fault(faulted("b", [1]))  # already quarantined: not twice
    assert len(quarantined_events(bed)) == 2


def test_a_health_file_of_an_older_run_or_a_torn_one_is_read_as_far_as_it_goes(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, [], [])
    (tmp_path / HEALTH_FILE).write_text('{"hosts": {"old": {"listed": {"GPU-z": "2"}}, '
                                        '"h": {"ecc": null}}}')
    w = GpuHealthWatch(bed.ctx)
    assert w.hosts["old"].listed == {"GPU-z": 2} and w.hosts["old"].faults == {}
    assert w.hosts["h"].ecc == {} and w.hosts["h"].listed == {}
    (tmp_path / HEALTH_FILE).write_text('{"hosts": ')
    assert GpuHealthWatch(bed.ctx).hosts["h"].listed == {}
    (tmp_path / HEALTH_FILE).write_text('{}')
    assert set(GpuHealthWatch(bed.ctx).hosts) == {"h", "g"}


def test_the_health_file_is_written_only_when_it_changes(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    probe(bed, w, {0: "GPU-a"})
    path = tmp_path / HEALTH_FILE
    path.write_text("touched")
    probe(bed, w, {0: "GPU-a"})
    assert path.read_text() == "touched"
    probe(bed, w, {0: "GPU-a", 1: "GPU-b"})
    assert json.loads(path.read_text())["hosts"]["h"]["listed"] == {"GPU-a": 0, "GPU-b": 1}


def test_a_person_releases_a_quarantined_gpu(tmp_path: Path) -> None:
    bed, _w = watch(tmp_path)
    assert release(bed.ctx, "nowhere", 0) == "no host 'nowhere'"
    assert release(bed.ctx, "h", 0) == "GPU 0 of h is not quarantined"
    quarantine(bed.ctx, "h", 0, "bad", job="j")
    bed.ledger.unsaved = False
    assert release(bed.ctx, "h", 0) == "ok"
    assert bed.hosts["h"].quarantined == set() and bed.hosts["h"].quarantine_reasons == {}
    assert bed.ledger.unsaved
    assert [(e["host"], e["gpu"], e["reason"], e["released"]) for e in quarantined_events(bed)] \
        == [("h", 0, "bad", False), ("h", 0, "bad", True)]
    assert bed.ctx.bus.alerts[-1] == {
        "project": "p", "at": 1000.0, "level": "info", "host": "h", "job": None,
        "message": "h: GPU 0 released from quarantine", "type": "alert"}
    assert release(bed.ctx, "h", 0) == "GPU 0 of h is not quarantined"


def test_events_carry_the_project_and_the_time(tmp_path: Path) -> None:
    bed, _w = watch(tmp_path)
    quarantine(bed.ctx, "h", 0, "bad")
    release(bed.ctx, "h", 0)
    assert [(e["project"], e["at"]) for e in quarantined_events(bed)] == [("p", 1000.0)] * 2


def test_a_gpu_quarantined_without_a_reason_on_record_is_released_with_none(
        tmp_path: Path) -> None:
    bed, _w = watch(tmp_path)
    bed.hosts["h"].quarantined.add(3)  # as restored from an older state file
    assert release(bed.ctx, "h", 3) == "ok"
    assert quarantined_events(bed)[-1]["reason"] == ""


def test_a_fault_on_a_host_the_run_no_longer_has_is_still_recorded(tmp_path: Path) -> None:
    _bed, w = watch(tmp_path)
    w.note_fault(faulted("a", [0], host="gone"))
    assert json.loads((tmp_path / HEALTH_FILE).read_text())["hosts"]["gone"]["faults"] == {
        "0": [1000.0]}


def test_the_health_file_is_sorted_json(tmp_path: Path) -> None:
    bed, w = watch(tmp_path)
    probe(bed, w, {0: "GPU-a"})
    assert (tmp_path / HEALTH_FILE).read_text() == (
        '{"hosts": {"g": {"ecc": {}, "faults": {}, "listed": {}}, '
        '"h": {"ecc": {}, "faults": {}, "listed": {"GPU-a": 0}}}}')
