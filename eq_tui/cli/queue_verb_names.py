"""The verbs that act on a running queue, by name alone: `eq-tui --help` and the verb table
(main.py) need the names, not queue_verbs.py's parsers and the command model they import."""

JOB_VERBS = ("kill", "retry", "requeue", "hold", "release")
QUEUE_VERBS = ("pause", "resume")
HOST_VERBS = ("drain", "undrain")
VERBS = (*JOB_VERBS, *QUEUE_VERBS, "priority", "edit", "clone", "add", "reload", *HOST_VERBS)
