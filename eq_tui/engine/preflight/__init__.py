"""Before the first tick: every host checked (host_checks), each job's command (command_words),
and a job no allowed GPU can ever hold refused (fit)."""
