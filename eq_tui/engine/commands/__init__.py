"""What a person asks of a running queue: the control socket's server, the dispatch from a
command to its handler, and the handlers (edit/clone/add, reload, rerun) with their helpers."""
