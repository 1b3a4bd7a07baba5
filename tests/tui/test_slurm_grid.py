"""The GPU grid's Slurm panel: job slots, and one line per node with GPUs used / total and our
jobs there (Pilot, fixed data)."""

from __future__ import annotations

from eq_tui.api.events import HostProbed
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import GRID_PANELS, HostPanel
from tests.tui.fake_client import T0, FakeClient, node, slurm_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)


def cluster_panel(app: EqTuiApp) -> HostPanel:
    [panel] = [p for p in app.query(GRID_PANELS) if "cluster" in str(p.border_title)]
    return panel


def lines(panel: HostPanel) -> list[str]:
    return [line.rstrip() for line in str(panel.render()).splitlines()]


async def test_a_slurm_host_shows_its_nodes_with_gpus_used_and_our_jobs() -> None:
    client = FakeClient(slurm_snapshot())
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert len(app.query(GRID_PANELS)) == 3
        panel = cluster_panel(app)
        text = lines(panel)
        assert text[0].split() == ["slots", "2/4", "·", "1", "running", "·", "1", "queued"]
        gpu01, gpu02, gpu03 = text[1:4]
        assert gpu01.startswith("gpu01 MIXED ") and "██████░░ 3/4 student_s8" in gpu01
        assert gpu02.startswith("gpu02 MIXED+DRAIN ") and gpu02.endswith("██░░░░░░ 1/4")
        assert gpu03.startswith("gpu03 IDLE ") and gpu03.endswith("░░░░░░░░ 0/4")
        assert "Slurm slot" not in str(panel.render())  # slots are a count, not GPU lines
        assert str(panel.border_subtitle) == "3 nodes, 4/12 GPUs in use"

        # the next probe: student_s9 starts on gpu03, gpu02's job left
        client.publish(HostProbed(
            project="demo", at=T0 + 2, host="cluster", ok=True, rtt_s=0.02,
            gpus=tuple(client.state["hosts"][2]["gpus"]),
            nodes=(node("gpu01", "MIXED", 3, jobs=("student_s8",)),
                   node("gpu02", "IDLE+DRAIN", 0),
                   node("gpu03", "MIXED", 1, jobs=("student_s9",)))))
        await eventually(pilot, lambda: "student_s9" in str(cluster_panel(app).render()))
        text = lines(cluster_panel(app))
        assert text[0].split()[-4:] == ["running", "·", "0", "queued"]
        assert text[3].startswith("gpu03 MIXED ") and text[3].endswith("1/4 student_s9")
        assert "IDLE+DRAIN" in text[2]


async def test_a_node_with_many_of_our_jobs_lists_two_and_counts_the_rest() -> None:
    snapshot = slurm_snapshot()
    snapshot["hosts"][2]["nodes"] = [node("gpu01", "ALLOCATED", 4,
                                          jobs=("a", "b", "c", "d"))]
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert lines(cluster_panel(app))[1].endswith("4/4 a, b +2")
