"""The command line. main.py holds the table from each verb to its module; each module parses
its own arguments (parsing.py has the one parser) and runs the verb: run.py the main command
(`eq-tui MANIFEST...`, the one module that builds an Engine), dry_run.py, detach.py, status.py,
stop.py, attach.py, results.py, init.py, schema.py, completion.py, notify_test.py, and the
queue verbs (queue_verbs.py parses, queue_send.py sends). headless.py is --no-ui's front end;
remote/ runs and reaches an engine on an ssh host."""
