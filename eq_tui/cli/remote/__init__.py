"""An engine on an SSH host: start it there (`--detach --on HOST`), and attach, status and stop
through its control socket reached over the SSH connection (`HOST:RUN_DIR`)."""
