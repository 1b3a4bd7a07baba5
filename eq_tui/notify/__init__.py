"""Notifications: telling a person when the queue needs one (manifest `notify:`).

Served beside the engine like its control socket: a `Notifier` reads the engine's snapshot
and events through the front-end contract, turns the ones a target asked for into notes
(notes.py), keeps them in an outbox in the run dir until delivered (outbox.py), and sends them,
coalesced, to commands and URLs (targets.py).
"""
