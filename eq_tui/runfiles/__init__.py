"""The files of a run dir that the engine writes and others read: the state file and its
journal (statefile, journal), written durably (atomic). No engine logic: `eq-tui status`, the
dry run and attach read a run's state through here without importing the engine."""
