"""Helpers that put the engine's figures into words for people (durations, a running job's
pace) and read what people type (the job filter); used by the front ends and by the engine's
summary.md."""
