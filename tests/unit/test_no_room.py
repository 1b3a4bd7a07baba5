"""Why nothing can be placed now (placement.no_room), word for word, and place_alone with hosts
its maps do not name: the queue's waiting reason is what a person reads first."""

from __future__ import annotations

from typing import Any

from eq_tui.api.model import JobState
from eq_tui.engine.decide.placement import GpuView, HostView, no_room, place_alone


def host(name: str, gpus: int = 2, **kwargs: Any) -> HostView:
    defaults: dict[str, Any] = {"usable": True, "allowed": None, "max_parallel": 3}
    return HostView(name=name, gpus=tuple(GpuView(i, 0, 1024) for i in range(gpus)),
                    **{**defaults, **kwargs})


def test_no_usable_host_says_so_and_ignores_the_unusable_hosts_rules() -> None:
    hosts = [host("a", usable=False, notes=("lab rule: GPU 0 is the lab's",))]
    assert no_room(hosts, {}, {}) == "no host can take a job now (unreachable or stopped)"
    assert no_room([], {}, {}) == "no host can take a job now (unreachable or stopped)"


def test_every_gpu_busy_counts_only_the_gpus_we_may_use() -> None:
    hosts = [host("a", allowed=frozenset({0})), host("b", quarantined=frozenset({1})),
             host("c", usable=False)]
    assert no_room(hosts, {}, {"a": 1, "b": 1}) == "no free GPU (2 of 2 busy; 1 quarantined)"
    assert no_room([host("a", gpus=3)], {}, {"a": 1}) == "no free GPU (3 of 3 busy)"


def test_no_gpu_we_may_use_says_how_many_are_quarantined() -> None:
    assert no_room([host("a", allowed=frozenset())], {}, {}) == "no GPU we may use"
    assert no_room([host("a", quarantined=frozenset({0, 1}))], {}, {}) == \
        "no GPU we may use (2 quarantined)"


def test_hosts_with_a_free_gpu_at_their_max_parallel_are_named() -> None:
    a, b = host("a"), host("b", max_parallel=2)
    assert no_room([a], {"a": [0]}, {"a": 0}) == "host limit max_parallel 3 reached"
    assert no_room([a], {"a": [0]}, {}) == "host limit max_parallel 3 reached"  # no slot known
    assert no_room([a, b], {"a": [0], "b": [1]}, {"a": 0, "b": 0}) == \
        "host limits max_parallel reached (a 3, b 2)"
    # one host at its limit while another with a free GPU has slots: not the limit's fault
    assert no_room([a, b], {"a": [0], "b": [1]}, {"a": 0, "b": 1}) == \
        "no free GPU (4 of 4 busy)"
    # a host with slots, or at its limit with no free GPU, is not limited
    assert no_room([a], {"a": [0]}, {"a": 1}) == "no free GPU (2 of 2 busy)"
    assert no_room([a], {"a": []}, {"a": 0}) == "no free GPU (2 of 2 busy)"
    assert no_room([a], {}, {"a": 0}) == "no free GPU (2 of 2 busy)"


def test_the_lab_rules_that_keep_gpus_from_us_follow_the_reason() -> None:
    hosts = [host("a", notes=("GPU 0 held for the lab", "GPU 1 in use by bob")),
             host("b", notes=("GPU 0 reserved",))]
    assert no_room(hosts, {}, {}) == ("no free GPU (4 of 4 busy); GPU 0 held for the lab; "
                                      "GPU 1 in use by bob; GPU 0 reserved")


def test_a_host_its_maps_do_not_name_takes_no_job() -> None:
    job = JobState(id="j", phase="main", cmd="c")
    hosts = [host("a"), host("b")]
    assert place_alone(job, 1, hosts, {"a": [0]}, {}) is None  # no slot known for a
    assert place_alone(job, 1, hosts, {}, {"a": 1, "b": 1}) is None  # no free GPU known
    assert place_alone(job, 1, hosts, {"b": [1]}, {"b": 1}) == ("b", (1,))
