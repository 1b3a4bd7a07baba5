"""The engine: probe hosts → judge running jobs → decide → launch → persist → publish. Front
ends do not import it (they use eq_tui.api); the one module that builds and runs an Engine is
the CLI's run command. Rooms: tick/ (seeing and judging the hosts), decide/ (what launches
where), state/ (the run dir and every change to the jobs), commands/ (what a person asks),
preflight/ (checks before the first tick)."""
