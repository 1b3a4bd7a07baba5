"""One tick's seeing and judging: probe the hosts and keep their watchers (observation,
host_watchers, tick_timing), judge each running job from what the probes saw (reconcile, judge,
classify, stall, oversize), look after the GPUs (gpu_health, memory, leftover_memory), launch
what was decided (launcher) and read the results of what ended (harvest)."""
