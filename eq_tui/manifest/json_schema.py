"""The manifest's JSON Schema (draft 2020-12): the one list of keys the loader checks against
(schema.py takes its known-key sets from here), what `eq-tui schema` prints and what editors
with the YAML language server complete from.

The schema is never stricter than the loader: whatever it rejects, the loader rejects too
(tests check this on fuzzed manifests). Rules that need more than one key at a time (a job
id unique after expansion, a dependency on a phase with jobs) are the loader's alone.
"""

from __future__ import annotations

import json
from typing import Any

from eq_tui.manifest.expand import LAUNCH_TIME_VARS

_ID = "^[A-Za-z0-9_.-]+$"
_SSH = r"^(?:[^@\s]+@)?[^@:\s]+(?::\d+)?$"
_ENV_NAME = "^[A-Za-z_][A-Za-z0-9_]*$"
_ARG_KEY = "^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_GRID_KEY = "^[A-Za-z_][A-Za-z0-9_]*$"

_NULL = {"type": "null"}
_TEXT = {"type": ["string", "number"]}  # numbers keep the text written
_IDENT = {"anyOf": [{"type": "string", "pattern": _ID}, {"type": "number"}]}


def _doc(schema: dict[str, Any], text: str, **extra: Any) -> dict[str, Any]:
    return {**schema, "description": text, **extra}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The loader treats an explicit null like a missing key here."""
    return {"anyOf": [schema, _NULL]}


def _int(minimum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum}


def _num(minimum: float = 0) -> dict[str, Any]:
    return {"type": "number", "minimum": minimum}


def _obj(properties: dict[str, Any], *, required: tuple[str, ...] = (),
         **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return {**schema, **extra}


_GPUS = _doc({"anyOf": [{"const": "all"}, {"type": "array", "minItems": 1, "uniqueItems": True,
                                          "items": _int(0)}]},
             "GPU indices this host may use, or \"all\".", default="all",
             examples=[[0, 1, 2, 3], "all"])
_MAX_PARALLEL = _doc(_int(1), "At most this many jobs at once on a host (unset: 8 jobs "
                     "that take GPUs alone; jobs placed by mem_mib are capped by memory "
                     "and max_jobs_per_gpu).", default=8)
_HOST_LIMITS = {
    "max_jobs_per_gpu": _doc(_nullable(_int(1)), "At most this many jobs share one GPU of a "
                             "host (default: only their mem_mib limits it; nothing on Slurm "
                             "hosts)."),
    "max_cpu_jobs": _doc(_nullable(_int(0)), "At most this many CPU-only jobs (gpus_per_job: "
                         "0) at once on a host (default: half its cores)."),
}
_SCALAR = {"type": ["string", "number", "boolean"]}

_SIMULATE = _obj({
    "gpus": _doc(_int(1), "How many simulated GPUs.", default=4),
    "memory_mib": _doc(_int(1), "Memory of each simulated GPU in MiB.", default=24576),
    "model": _doc(_TEXT, "The GPU name nvidia-smi reports.", default="NVIDIA Simulated GPU"),
    "linger_s": _doc(_num(), "Memory stays used this long after a fake job exits.",
                     default=0),
}, description="Simulated GPUs on this machine (the demo and the tests).")

_SLURM = _obj({
    "ssh": _doc(_nullable({"type": "string", "pattern": _SSH}),
                "Login node (ssh alias or [user@]host[:port]); absent: the local Slurm client."),
    "partition": _doc(_nullable(_TEXT), "sbatch --partition."),
    "account": _doc(_nullable(_TEXT), "sbatch --account."),
    "qos": _doc(_nullable(_TEXT), "sbatch --qos."),
    "time": _doc(_nullable(_TEXT), "sbatch --time, e.g. 04:00:00."),
    "mem": _doc(_nullable(_TEXT), "sbatch --mem, e.g. 32G."),
    "cpus_per_task": _doc(_nullable(_int(1)), "sbatch --cpus-per-task."),
    "sbatch_args": _doc(_nullable({"type": "array", "items": _TEXT}),
                        "More sbatch arguments, one per item."),
}, description="A Slurm cluster: jobs are submitted with sbatch --gres=gpu:N (none for a "
               "CPU-only job).")

_HOST = _obj({
    "name": _doc(_IDENT, "The host's name in the UI, the state and the session names."),
    "ssh": _doc(_nullable({"type": "string", "pattern": _SSH}),
                "ssh alias (from ~/.ssh/config) or [user@]host[:port]."),
    "gpus": _GPUS,
    "max_parallel": _MAX_PARALLEL,
    "simulate": _doc(_nullable({"$ref": "#/$defs/simulate"}), "Simulated GPUs."),
    "slurm": _doc(_nullable({"$ref": "#/$defs/slurm"}), "A Slurm cluster."),
    "log_dir": _doc(_nullable({"type": "string"}),
                    "Where attempt logs live on the host (default chosen by the host)."),
    "claims_dir": _doc(_nullable({"type": "string", "pattern": "^/[A-Za-z0-9_.+/-]*$"}),
                       "Where every engine on the host keeps its GPU claims (default "
                       "$EQ_TUI_CLAIMS there, else /tmp/eq-tui-claims)."),
    "rules": _doc(_nullable({"type": "string", "pattern": "^/[A-Za-z0-9_.+/-]*$"}),
                  "The lab's rules file on the host (default $EQ_TUI_RULES there, else "
                  "/etc/eq-tui/rules.yaml)."),
    **_HOST_LIMITS,
}, required=("name",), description="One machine: ssh, simulate or slurm; none of them: this "
                                   "machine.")

_PRECONDITION = _obj({
    "type": _doc({"enum": ["checkpoint_exists"]}, "The only kind so far.",
                 default="checkpoint_exists"),
    "path": _doc({"type": "string"}, "A path or glob on the host, relative to cwd; ${var} "
                                     "is substituted."),
}, required=("path",), description="Checked on the host right before launch.")

_ARGS = _doc(_nullable({
    "type": "object", "propertyNames": {"pattern": _ARG_KEY},
    "additionalProperties": {"anyOf": [_SCALAR, _NULL,
                                       {"type": "array", "items": _SCALAR}]},
}), "Rendered as --key value after the command; true: a bare --key; false or null: dropped; "
    "a list: --key a b.", examples=[{"seed": 42, "lr": "3e-4", "fast": True}])
_PRECONDITIONS = _doc(_nullable({"type": "array", "items": {"$ref": "#/$defs/precondition"}}),
                      "Checked on the host right before launch; an unmet one keeps the job "
                      "pending.")
_OUTPUT_CHECK = _doc(_nullable({"type": "string"}),
                     "A glob on the host that must match for the job to count as completed.")
_GPUS_PER_JOB = _doc(_nullable(_int(0)), "GPUs each job gets (on one host); 0: a CPU-only "
                     "job.", default=1)
_SHARING = {
    "mem_mib": _doc(_nullable({"anyOf": [_int(1), {"const": "auto"}]}),
                    "The job's peak GPU memory per GPU in MiB, or auto (learned from the runs "
                    "of its siblings: the same template or phase); jobs whose mem_mib fit share "
                    "a GPU. Default: none, the job has its GPUs to itself. Nothing on Slurm "
                    "hosts.", examples=[18000, "auto"]),
    "exclusive": _doc(_nullable({"type": "boolean"}),
                      "The job wants its GPUs alone, even where others would fit beside it.",
                      default=False),
}

# a path or glob the host expands (results_keys.check_host_pattern): no shell metacharacters
# but `${NAME}`, never `..`
_HOST_PATTERN = (r"^(?!(.*/)?\.\.(/|$))"
                 r"([A-Za-z0-9_./*?\[\]~+@%=,: -]|\$\{[A-Za-z_][A-Za-z0-9_]*\})+$")
_METRICS = _obj({
    "json": _doc({"type": "string", "minLength": 1}, "A JSON file: every numeric leaf, with "
                 "dotted keys."),
    "jsonl": _doc({"type": "string", "minLength": 1}, "One JSON record per line: the last "
                  "value and the series of each key."),
    "csv": _doc({"type": "string", "minLength": 1}, "A CSV file in Lightning's metrics.csv "
                "shape."),
    "log": _doc({"type": "boolean"}, "Numbers written as key=value or key: value in the log.",
                default=False),
    "pattern": _doc({"type": "string", "minLength": 1}, "A regular expression with named "
                    "groups over log lines; each group names a metric."),
    "hf_state": _doc({"type": "string", "minLength": 1, "pattern": _HOST_PATTERN},
                     "HF Trainer's trainer_state.json (its log_history); a glob reads the newest "
                     "written while the job ran.", examples=["out/${JOB_ID}/trainer_state.json"]),
    "tensorboard": _doc({"type": "string", "minLength": 1, "pattern": _HOST_PATTERN},
                        "A TensorBoard event file, or a directory: the newest event file written "
                        "in it (or two levels below) while the job ran; needs eq-tui[tensorboard].",
                        examples=["runs/${JOB_ID}"]),
}, description="Where a job's numbers are; paths take the launch-time variables. Without it, or "
               "without a file named, the conventional files in the attempt dir, what HF Trainer, "
               "Lightning and TensorBoard write in the job's cwd while it runs, and the log are "
               "read.")
_METRICS_REF = _doc(_nullable({"$ref": "#/$defs/metrics"}), "Where the jobs' metrics are.")
_RESULTS = {
    "goal": _doc(_nullable({"type": "object", "additionalProperties": {"enum": ["max", "min"]}}),
                 "Which way is better, per metric.", examples=[{"val_acc": "max", "loss": "min"}]),
    "group_over": _doc(_nullable(_TEXT), "The grid key averaged over in the results.",
                       default="seed"),
    "on_complete": _doc(_nullable({"type": "string", "minLength": 1}),
                        "A command run where the engine runs when the phase (or, at the top "
                        "level, the queue) is done; EQ_RESULTS and EQ_PHASE are set."),
    "early_stop": _doc(_nullable({"anyOf": [{"const": False}, {"$ref": "#/$defs/early_stop"}]}),
                       "Stop losing jobs early from the reports of a metric they print; "
                       "null or false: off."),
}
_EARLY_STOP = _obj({
    "metric": _doc({"type": "string", "minLength": 1}, "The metric the jobs report (any shape "
                   "metrics: reads from the log); a job's step is its count of reports.",
                   examples=["val_acc"]),
    "goal": _doc({"enum": ["max", "min"]}, "Which way is better (default: the metric's goal:)."),
    "rule": _doc({"enum": ["asha", "median", "hyperband"]}, "asha: keep the best 1/eta at "
                 "each rung; median: stop below the median of the others at the same report; "
                 "hyperband (a search only): Optuna's HyperbandPruner. A search's trials are "
                 "judged by Optuna's pruner for the rule.", default="asha"),
    "grace": _doc({"type": "integer", "minimum": 1}, "Reports a job makes before it can be "
                  "stopped (asha's first rung).", default=1),
    "eta": _doc({"type": "integer", "minimum": 2}, "asha: rungs at grace x eta^k reports; the "
                "best 1/eta of the jobs at a rung go on.", default=3),
}, required=("metric",), description="Early stopping: asynchronous successive halving or the "
               "median rule, per configuration (the mean over its seeds).")

_CHECKPOINT_DEF = _obj({
    "path": _doc({"type": "string", "minLength": 1},
                 "A glob of the job's checkpoint files on its host, relative to its working "
                 "directory; ${var} as in cmd (${id}: the job's id).",
                 examples=["ckpt/${id}/*.pt"]),
    "resume": _doc({"type": "string", "pattern": r"\{checkpoint\}"},
                   "The arguments appended to the command on a restart when a checkpoint "
                   "exists; {checkpoint} is the newest complete one, quoted.",
                   examples=["--resume {checkpoint}"]),
    "signal": _doc({"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9]*$"},
                   "The signal a preempted job (or one stopped by drain --now) gets first, to "
                   "save its checkpoint (a real signal name: TERM, USR1, INT, ...).",
                   default="TERM", examples=["USR1"]),
    "grace": _doc(_num(), "Seconds between that signal and SIGKILL.", default=60),
}, required=("path", "resume"), description="A job's checkpoint contract.")
_CHECKPOINT = _doc(_nullable({"$ref": "#/$defs/checkpoint"}),
                   "Every restart (OOM retry, requeue, retry, stall restart) resumes from the "
                   "newest complete checkpoint the path matches.")

_PRIORITY = _doc(_nullable({"type": "integer"}), "Higher launches first; ties in manifest "
                 "order. A person's priority (+/-, eq-tui priority) wins from then on.",
                 default=0)
_PREEMPTION = {
    "preempt": _doc(_nullable({"enum": [True, False, "force"]}),
                    "A job that fits on no GPU may stop a running job of lower priority that "
                    "has a checkpoint contract (force: any job of lower priority); the stopped "
                    "job resumes later from its checkpoint.", default=False),
    "max_preemptions": _doc(_nullable(_int(0)), "This job is preempted at most this many "
                            "times; after that it is left to finish.", default=3),
    "retry_lost": _doc(_nullable(_int(0)), "A job whose session vanished with its host is "
                       "requeued up to this many times (default: 1)."),
}

NOTIFY_EVENTS = ("stuck", "stalled", "quarantined", "host_down", "phase_done", "finished")
_STALL = {
    "stall_after": _doc(_nullable({"anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d)?\s*$"}]}),
        "How long a running job may show no sign of life before it counts as stalled "
        "(20m, 90s, 1h; 0 turns it off). Default: the larger of 10 minutes and 3 times the "
        "job's longest gap between log lines."),
    "on_stall": _doc(_nullable({"enum": ["alert", "restart", "kill"]}),
                     "What a stalled job gets: an alert, a restart (requeued as stalled), or "
                     "killed.", default="alert"),
}
_NOTIFY = _obj({
    "on": _doc({"anyOf": [{"enum": list(NOTIFY_EVENTS)},
                          {"type": "array", "items": {"enum": list(NOTIFY_EVENTS)}}]},
               "The events this target wants."),
    "command": _doc({"type": "string"}, "Run where the engine runs, the event as JSON on stdin."),
    "url": _doc({"type": "string"}, "POST JSON (with a `text` field) here; no credentials or "
                "query string in the manifest (use url_env)."),
    "url_env": _doc({"type": "string", "pattern": _ENV_NAME},
                    "The environment variable holding the URL (with its token)."),
}, required=("on",), description="One notification target: exactly one of command, url, "
                                 "url_env.")

_JOB_FIELDS = {
    "id": _doc(_TEXT, "Unique after expansion; [A-Za-z0-9_.-]+; ${var} is substituted."),
    "cmd": _doc(_nullable({"type": "string"}), "The command (else the scope's default_cmd)."),
    "args": _ARGS,
    "output_check": _OUTPUT_CHECK,
    "preconditions": _PRECONDITIONS,
    "gpus_per_job": _GPUS_PER_JOB,
    **_SHARING,
    "metrics": _METRICS_REF,
    "priority": _PRIORITY,
    **_PREEMPTION,
    **_STALL,
    "checkpoint": _CHECKPOINT,
}
_JOB = _obj(_JOB_FIELDS, description="One job: an id, and cmd or args after default_cmd.")
_TEMPLATE = _obj(_JOB_FIELDS, description="A job for every grid point; without id, jobs are "
                                          "named from the grid point (N64_seed42).")

_GRID = _doc(_nullable({
    "type": "object", "minProperties": 1,
    "propertyNames": {"pattern": _GRID_KEY, "not": {"enum": sorted(LAUNCH_TIME_VARS)}},
    "additionalProperties": {"type": "array", "minItems": 1, "items": _SCALAR},
}), "Variables and their values: one job per point of the Cartesian product (the last key "
    "varies fastest).", examples=[{"lr": ["1e-3", "3e-4"], "seed": [1, 2, 3]}])

_SEARCH_RANGE = _obj({
    "low": _doc({"type": "number"}, "The smallest value."),
    "high": _doc({"type": "number"}, "The largest value (above low)."),
    "log": _doc({"type": "boolean"}, "Sample on a log scale (low above 0).", default=False),
    "step": _doc({"type": "number", "exclusiveMinimum": 0},
                 "Only values low + k*step (dividing the range); not with log."),
}, required=("low", "high"))
_SEARCH = _obj({
    "space": _doc({"type": "object", "minProperties": 1,
                   "propertyNames": {"pattern": _GRID_KEY},
                   "additionalProperties": {"anyOf": [
                       {"$ref": "#/$defs/search_range"},
                       {"type": "array", "minItems": 1, "items": _SCALAR}]}},
                  "The names Optuna chooses: a range or a list of choices; the template "
                  "uses them as ${name}.",
                  examples=[{"lr": {"low": 1e-4, "high": 1.0, "log": True},
                             "width": [64, 128, 256]}]),
    "trials": _doc(_int(1), "Configurations to try."),
    "budget": _obj({"gpu_hours": _doc({"type": "number", "exclusiveMinimum": 0},
                                      "Stop asking once the trials used this many GPU-hours "
                                      "(running ones finish).")},
                   required=("gpu_hours",), description="When to stop asking."),
    "sampler": _doc({"enum": ["tpe", "gp", "cmaes", "random", "qmc"]}, "Optuna's sampler.",
                    default="tpe"),
    "seed": _doc(_int(0), "The sampler's seed: the same study twice asks the same."),
    "metric": _doc({"type": "string", "minLength": 1},
                   "The metric told to Optuna (default: the goal's only metric)."),
    "goal": _doc({"enum": ["max", "min"]}, "Which way is better (default: its goal:)."),
}, required=("space",), description="Optuna chooses each trial's configuration; needs "
                                    "eq-tui[search].")

_SCOPE = {
    "default_cmd": _doc(_nullable({"type": "string"}),
                        "The command of jobs that give no cmd; their args follow it."),
    "args": _ARGS,
    "preconditions": _PRECONDITIONS,
    "output_check": _OUTPUT_CHECK,
    "gpus_per_job": _GPUS_PER_JOB,
    **_SHARING,
    "jobs": _doc(_nullable({"type": "array", "items": {"$ref": "#/$defs/job"}}),
                 "Explicit jobs."),
    "grid": _GRID,
    "template": _doc(_nullable({"$ref": "#/$defs/template"}), "The job made for every grid "
                                                               "point."),
    "search": _doc(_nullable({"$ref": "#/$defs/search"}),
                   "Trials Optuna chooses, each running the template (a grid beside it: its "
                   "points for every trial)."),
    "metrics": _METRICS_REF,
    "priority": _PRIORITY,
    **_PREEMPTION,
    **_STALL,
    "checkpoint": _CHECKPOINT,
}

_PHASE = _obj({
    "name": _doc(_IDENT, "The phase's name; depends_on refers to it."),
    "depends_on": _doc(_nullable({"anyOf": [{"type": ["string", "number"]},
                                            {"type": "array", "items": _TEXT}]}),
                       "Phase(s) whose jobs must all complete first."),
    "on_dependency_failure": _doc({"enum": ["block", "run"]},
                                  "When a dependency ends stuck or killed: block this phase's "
                                  "jobs, or run them anyway.", default="block"),
    **_SCOPE,
    **_RESULTS,
}, required=("name",), description="A group of jobs that may wait for other phases.")

_ENV_VAR = _doc({"anyOf": [
    {"type": ["string", "number", "boolean"]},
    _obj({"value": _doc({"type": ["string", "number", "boolean"]}, "The value itself."),
          "secret": _doc({"type": "boolean"}, "Never written to disk or shown; with from_env "
                         "and from_file always true.", default=False),
          "from_env": _doc({"type": "string", "pattern": _ENV_NAME},
                           "A secret read from the environment of the eq-tui command."),
          "from_file": _doc({"type": "string", "minLength": 1},
                            "A secret read from this file, which only its owner may read.")},
         oneOf=[{"required": ["value"]}, {"required": ["from_env"]},
                {"required": ["from_file"]}]),
]}, "A value, {value, secret}, {from_env: NAME} or {from_file: PATH}.")

_OOM_RETRY = _obj({
    "delay": _doc(_num(), "Seconds to wait before retrying a CUDA out-of-memory failure.",
                  default=120),
    "max_attempts": _doc(_int(1), "Attempts in all before the job is stuck.", default=3),
}, description="Retrying CUDA out-of-memory failures.")

_DURATION = {"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                      {"type": "string", "pattern": r"^\s*[0-9]+(\.[0-9]*)?\s*(ms|s|m|h)?\s*$"}]}
_CRASH_GUARD = _obj({
    "after": _doc(_int(1), "This many jobs of a phase failing alike, in a row, hold the phase.",
                  default=3),
    "within": _doc(_DURATION, "... each within this long of its start (seconds, or 60s, 2m, "
                   "1h).", default="60s"),
}, description="Stop launching a phase whose jobs all fail the same way at once.")

_TOP = {
    "project": _doc(_IDENT, "Names the run dir and the sessions (default: the file's stem)."),
    "cwd": _doc(_nullable(_TEXT), "Working directory of the jobs on the hosts."),
    "conda": _doc(_nullable(_TEXT), "Conda env activated before each job."),
    "venv": _doc(_nullable(_TEXT), "A virtualenv activated before each job (its directory)."),
    "conda_hook": _doc(_nullable(_TEXT), "A conda.sh path or a shell snippet that makes "
                                         "`conda activate` work (default: auto-detected)."),
    "env": _doc(_nullable({"type": "object", "propertyNames": {"pattern": _ENV_NAME},
                           "additionalProperties": {"$ref": "#/$defs/env_var"}}),
                "Extra environment variables for every job.",
                examples=[{"WANDB_MODE": "offline",
                           "WANDB_API_KEY": {"from_env": "WANDB_API_KEY"}}]),
    "ssh": _doc({"type": "string", "pattern": _SSH},
                "One ssh host (alias or [user@]host[:port]); instead of hosts."),
    "hosts": _doc({"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/host"}},
                  "The machines to run on (default: this machine)."),
    "gpus": _GPUS,
    "max_parallel": _MAX_PARALLEL,
    **_HOST_LIMITS,
    "gpu_free_threshold_mib": _doc(_int(1), "A GPU is free when its used memory is below "
                                            "this.", default=500),
    "gpu_margin_mib": _doc(_int(0), "Memory (MiB) kept free on every GPU that jobs share.",
                           default=1024),
    "launcher": _doc({"enum": ["screen", "tmux"]}, "What runs each job's detached session.",
                     default="screen"),
    "waves": _doc({"enum": ["rolling", "strict"]}, "rolling: a GPU takes its next job as soon "
                  "as it is free; strict: a whole wave ends before the next starts.",
                  default="rolling"),
    "oom_retry": _doc(_nullable({"$ref": "#/$defs/oom_retry"}), "CUDA OOM retries."),
    "poll": _doc(_nullable({"type": "number", "exclusiveMinimum": 0}),
                 "Seconds between full probes (--poll wins).", default=2),
    "stale_grace_s": _doc(_num(), "Seconds a session may outlive its process before it is "
                                  "killed as stale.", default=5),
    "retry_delay_s": _doc(_num(), "Delay before retrying a port-in-use failure.", default=30),
    "crash_guard": _doc(_nullable({"anyOf": [{"type": "boolean"},
                                             {"$ref": "#/$defs/crash_guard"}]}),
                        "false turns the crash guard off; true or a mapping keeps it on.",
                        default=True),
    **_SCOPE,
    **_RESULTS,
    "notify": _doc(_nullable({"type": "array", "items": {"$ref": "#/$defs/notify"}}),
                   "Where to send a message when a person is needed."),
    "phases": _doc(_nullable({"type": "array", "minItems": 1,
                              "items": {"$ref": "#/$defs/phase"}}),
                   "Groups of jobs with dependencies; top-level jobs/grid/template then go "
                   "into the phases."),
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "eq-tui manifest",
    "description": "A batch of ML jobs for eq-tui; see docs/manifest.md.",
    **_obj(_TOP),
    "not": {"required": ["ssh", "hosts"]},
    "$defs": {"host": _HOST, "simulate": _SIMULATE, "slurm": _SLURM, "env_var": _ENV_VAR,
              "oom_retry": _OOM_RETRY, "precondition": _PRECONDITION, "job": _JOB,
              "template": _TEMPLATE, "phase": _PHASE, "metrics": _METRICS,
              "crash_guard": _CRASH_GUARD, "notify": _NOTIFY,
              "early_stop": _EARLY_STOP, "checkpoint": _CHECKPOINT_DEF,
              "search": _SEARCH, "search_range": _SEARCH_RANGE},
}


def keys(where: str) -> frozenset[str]:
    """The keys allowed at `where`: "top" or a $defs name ("host", "phase", ...)."""
    if where == "top":
        return frozenset(SCHEMA["properties"])
    return frozenset(SCHEMA["$defs"][where]["properties"])


def env_var_keys() -> frozenset[str]:
    """The keys of an `env: {NAME: {...}}` mapping."""
    return frozenset(SCHEMA["$defs"]["env_var"]["anyOf"][1]["properties"])


def schema_text() -> str:
    return json.dumps(SCHEMA, indent=2) + "\n"
