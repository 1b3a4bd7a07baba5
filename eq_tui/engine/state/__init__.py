"""The run's state: the ledger of jobs and every change to them, the run dir (store), the state
file and its journal, persistence, the jobs made while the queue runs, names on hosts and
summary.md."""
