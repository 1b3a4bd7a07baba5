"""bench/gpu_check.py's `energy` run: what one job's GPU drew, three ways.

One job computes alone on the GPU; meanwhile a thread of this bench reads the card's
`power.draw` ten times a second. Beside eq-tui's own figure for the attempt (its record's
`energy_j`: NVML's total-energy counter where eq-tui reads the card through NVML, else
`power.draw` integrated over its probes, every `poll` seconds), the bench gives:

  counter     NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, Volta and
              later) over the attempt's start..end, interpolated between the thread's reads;
              on the simulated GPU, the simulator's own figure (its power model over the runs
              its job recorded: eq_tui/sim/state.py `energy_split`)
  10 Hz       the thread's power readings over start..end (the trapezoid)

Checks: eq-tui's figure within 10 % of the counter (of the 10 Hz integral where there is no
counter), and GPU-seconds = the attempt's time (one GPU, alone). The counter against the
10 Hz integral is a figure, not a check: on an H100 they agreed to 0.2 % (issue 32)."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.gpu_check_harness import CSV, Jobs, Section, jobs_yaml, smi


@dataclass
class PowerSampler:
    """power.draw (W) and, where NVML answers, the energy counter (J), every `interval` s."""

    jobs: Jobs
    interval: float = 0.1
    env: dict[str, str] | None = None
    samples: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _nvml: Any = None

    def start(self, env: dict[str, str] | None) -> None:
        self.env = env
        if self.jobs.mode == "gpu":
            with contextlib.suppress(Exception):  # no binding or no driver: no counter
                import pynvml

                pynvml.nvmlInit()
                self._nvml = pynvml.nvmlDeviceGetHandleByIndex(self.jobs.gpu), pynvml
        self._thread = threading.Thread(target=self._loop, name="power sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _counter(self) -> float | None:
        if self._nvml is None:
            return None
        handle, nvml = self._nvml
        try:
            return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0
        except Exception:
            return None

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            joules = self._counter()
            rows = smi(self.jobs.smi, ["--query-gpu=index,power.draw", CSV], self.env)
            watts = None
            for row in rows:
                if len(row) > 1 and row[0] == str(self.jobs.gpu):
                    with contextlib.suppress(ValueError):
                        watts = float(row[1])
            self.samples.append((time.time(), watts, joules))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def integral(self, start: float, end: float) -> float | None:
        """The power readings over start..end (trapezoid; the ends held flat)."""
        points = [(t, w) for t, w, _ in self.samples if w is not None]
        if not points or points[0][0] > start or points[-1][0] < end:
            return None
        total = 0.0
        for (t0, w0), (t1, w1) in itertools.pairwise(points):
            a, b = max(t0, start), min(t1, end)
            if b > a:
                total += (w0 + w1) / 2 * (b - a)
        return total

    def counter_over(self, start: float, end: float) -> float | None:
        points = [(t, e) for t, _, e in self.samples if e is not None]

        def at(when: float) -> float | None:
            for (t0, e0), (t1, e1) in itertools.pairwise(points):
                if t0 <= when <= t1:
                    return e0 + (e1 - e0) * (when - t0) / (t1 - t0) if t1 > t0 else e0
            return None

        first, last = at(start), at(end)
        return None if first is None or last is None else last - first


def energy(bench: Any) -> Any:
    seconds = bench.config.pack_seconds
    body = jobs_yaml([("en0", bench.jobs.train(2048, seconds), None)])
    power = PowerSampler(bench.jobs)
    env = bench.jobs.sampler_env(bench.work / "energy" / "run")
    power.start(env)
    try:
        run = bench.run("energy", body, timeout=300)
    finally:
        power.stop()
    section = Section("energy")
    attempt = (run.attempts("en0") or [{}])[-1]
    start, end = attempt.get("start"), attempt.get("end")
    if start is None or end is None:
        section.row("the job ran", "-", "no start/end", ("energy: the job ran", False))
        return section
    eq_joules = attempt.get("energy_j") if not attempt.get("energy_gap") else None
    integral = power.integral(start, end)
    if bench.jobs.mode == "sim":
        from eq_tui.hosts.factory import sim_state_dir
        from eq_tui.sim.state import energy_split

        counter: float | None = energy_split(sim_state_dir(run.run_dir, "sim"), 0, start,
                                             end)[0]
    else:
        counter = power.counter_over(start, end)
    truth = counter if counter is not None else integral
    gpu_s = end - start - float(attempt.get("shared_off_s") or 0)
    section.figures.update({"start": start, "end": end, "eq_energy_j": eq_joules,
                            "counter_j": counter, "power_10hz_j": integral,
                            "power_samples": len(power.samples), "eq_gpu_s": gpu_s,
                            "poll_s": bench.config.poll})
    section.row("energy J: counter (sim: its model) | eq-tui's record", counter, eq_joules,
                ("energy: eq-tui within 10 % of the counter (or of 10 Hz power)",
                 truth is not None and eq_joules is not None
                 and abs(eq_joules - truth) <= 0.1 * truth))
    section.row("energy J: 10 Hz power.draw integral | counter", integral, counter)
    if counter is not None and integral:
        section.figures["counter_vs_10hz_pct"] = 100 * (counter - integral) / integral
        section.row("counter vs 10 Hz integral, %", f"{100 * (counter - integral) / integral:+.2f}")
    section.row("GPU-seconds: attempt's time | eq-tui's", end - start, gpu_s,
                ("energy: GPU-seconds are its time (alone on one GPU)",
                 abs(gpu_s - (end - start)) < 0.01))
    return section
