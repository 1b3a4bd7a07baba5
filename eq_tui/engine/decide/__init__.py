"""Deciding what launches where, now: the scheduler and the placement rules it applies
(placement, packing, gpu_floor), the crash guard, holds and priorities, and why a job waits."""
