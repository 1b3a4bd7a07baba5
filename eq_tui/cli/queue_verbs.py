"""The command-line forms of what a person can ask of a running queue: `eq-tui VERB
[HOST:]RUN_DIR ...`. Parsing and checking only; sending is queue_send.py."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

from eq_tui.api.command_args import ArgError, parse_sets
from eq_tui.api.commands import (
    KINDS,
    Add,
    Clone,
    Command,
    Drain,
    Edit,
    Hold,
    Kill,
    OnJobs,
    Release,
    Reload,
    SetEarlyStop,
    SetPriority,
    SetSearch,
    Undrain,
)
from eq_tui.cli.parsing import (
    RUN_DIR_HELP,
    add_ssh_config,
    check_paths,
    new_parser,
    ssh_config_path,
)
from eq_tui.cli.queue_verb_names import HOST_VERBS, JOB_VERBS
from eq_tui.errors import ManifestError, UsageError
from eq_tui.hosts.base import MAX_GRACE_S
from eq_tui.manifest.schema import Context
from eq_tui.manifest.settings import parse_duration
from eq_tui.manifest.sharing import MEM_MIB_HINT, mem_mib_value
from eq_tui.manifest.yaml_lines import Located

WHAT = {
    "kill": "Kill jobs: stop their sessions; they stay killed until retried.",
    "retry": "Retry stuck, killed or blocked jobs (a fresh count of attempts), or an OOM-delayed "
             "one now.",
    "requeue": "Stop running jobs and put them back in the queue.",
    "hold": "Hold waiting jobs: they never launch until released. Or, with --phase, a "
            "phase's search: it asks no new trial until released (its trials out run to their "
            "end and are told).",
    "release": "Release held jobs; or, with --phase, a phase the crash guard holds (the rest "
               "of it launches as it is) or whose search a person held (it asks trials "
               "again).",
    "pause": "Pause launching (running jobs go on).",
    "resume": "Resume launching.",
    "priority": "Set jobs' priority (higher launches first; ties in queue order).",
    "edit": "Change the command of jobs that are not running; a finished one is run again "
            "with a fresh count of attempts. Or, with --early-stop (no JOB), early stopping "
            "for the rest of the run; with --search (no JOB), how many trials a search asks "
            "and its GPU-hours budget.",
    "clone": "A new job from any job, with changed args.",
    "add": "A new job in a phase.",
    "reload": "Read the manifest file again: add new jobs, update waiting ones that changed, "
              "retire waiting ones that are gone. Running and finished jobs are never touched; "
              "what a person changed (an edited command, a priority set, a hold) stays unless "
              "--force, and the answer says which of the file's changes it left out for it.",
    "drain": "Take a host (or some of its GPUs) out of the run for maintenance: nothing new "
             "launches there from the moment this returns; with --now its running jobs there "
             "are stopped (SIGTERM, their grace to save a checkpoint, then SIGKILL) and go back "
             "to the queue, to resume elsewhere from their newest checkpoint. Kept across an "
             "engine's restart until undrain.",
    "undrain": "Give a drained host back: jobs launch there again.",
}
SET_HELP = ("change one flag the command has: --key VALUE (true: the bare flag, false: drop "
            "it); a flag it lacks is refused with the flags it has; repeat for more")
ADD_FLAG_HELP = ("add a flag the command does not have yet: --key VALUE (true: the bare "
                 "flag); repeat for more")
COMMAND_HELP = ("after --: the command; one word is taken as shell text as it is, several are "
                "quoted word by word")


@dataclass
class Request:
    """A verb as given: the typed command it sends (its jobs those named, the filter's added
    when it is sent), where to, and how to answer."""

    verb: str
    where: str
    command: Command
    filter: str | None = None
    as_json: bool = False
    config_path: str | None = None
    command_id: str | None = None
    start: bool = True  # start the run's engine when none is running (--no-start: exit 3)

    @property
    def jobs(self) -> list[str]:
        return [] if isinstance(self.command, Drain | Undrain) else self.command.targets()


def parser(verb: str) -> argparse.ArgumentParser:
    usage_tail = {"edit": " [-- NEW COMMAND...]", "clone": " [-- NEW COMMAND...]",
                  "add": " -- COMMAND..."}.get(verb, "")
    starts = ("" if verb == "pause" else " When none is running (its queue finished, or it "
              "was stopped), starts it in the background first (from the manifest the run "
              "records; it launches nothing before this command, and exits when the queue is "
              "done).")
    bad = ("a host or GPU the run does not have" if verb in HOST_VERBS else
           "a job id the run does not have, a --set flag the command does not have")
    parser = new_parser(verb, WHAT[verb] + " Talks to the run's engine through its control "
                        f"socket.{starts} Exit 0 done, 1 a job could not be acted on, 2 bad "
                        f"usage ({bad}: checked before any engine is started), 3 no engine "
                        "runs there and none could be started.")
    parser.add_argument("run_dir", metavar="[HOST:]RUN_DIR", help=RUN_DIR_HELP)
    if verb in HOST_VERBS:
        parser.add_argument("host", metavar="HOST", help="the host, as the manifest names it")
    if verb == "drain":
        parser.add_argument("--gpus", metavar="0,1",
                            help="drain only these GPUs of the host (default: all of it)")
        parser.add_argument("--now", action="store_true",
                            help="also stop the jobs running there; they go back to the queue "
                                 "and resume elsewhere from their newest checkpoint")
        parser.add_argument("--grace", metavar="DURATION",
                            help="with --now: how long each job has after its SIGTERM to save "
                                 "before SIGKILL (default 60s)")
    if verb == "release":
        parser.add_argument("--phase", metavar="NAME",
                            help="release this phase (instead of jobs): the crash guard's hold "
                                 "after its jobs failed alike at once, and a person's hold on "
                                 "its search")
    if verb == "hold":
        parser.add_argument("--phase", metavar="NAME",
                            help="hold this phase's search (instead of jobs): it asks no new "
                                 "trial until `release --phase NAME`; kept across a restart")
    if verb in (*JOB_VERBS, "edit"):
        parser.add_argument("jobs", nargs="*", metavar="JOB", help="job ids")
        parser.add_argument("--filter", metavar="QUERY",
                            help="the jobs the UI's filter matches, e.g. 'status:stuck "
                                 "phase:distill' (keys: status, host, phase, id, failure; "
                                 "free words match id, command, reason, last line)")
    elif verb == "priority":
        parser.add_argument("jobs", nargs="*", metavar="JOB", help="job ids")
        parser.add_argument("value", metavar="N",
                            help="the priority (a whole number, may be negative)")
        parser.add_argument("--filter", metavar="QUERY",
                            help="the jobs the UI's filter matches")
    elif verb == "clone":
        parser.add_argument("jobs", nargs=1, metavar="JOB", help="the job to clone")
        parser.add_argument("--id", help="the new job's id (default JOB-cloneN)")
    if verb == "add":
        parser.add_argument("--id", required=True, help="the new job's id")
        parser.add_argument("--phase", help="its phase (default: the only phase)")
        parser.add_argument("--gpus", type=int, help="GPUs it needs, 0 for a CPU-only job "
                                                      "(default: its phase's)")
        parser.add_argument("--mem", metavar="MIB|auto",
                            help="its peak GPU memory per GPU in MiB, or auto: jobs that fit "
                                 "share a GPU (default: its phase's mem_mib)")
        parser.add_argument("--exclusive", action="store_true", default=None,
                            help="its GPUs alone, shared with no job")
        parser.add_argument("--preempt", nargs="?", const=True, metavar="force",
                            help="when no GPU fits it, it may stop a running job of lower "
                                 "priority that has a checkpoint contract (force: any); "
                                 "default: its phase's preempt")
    if verb == "kill":
        parser.add_argument("--grace", metavar="DURATION",
                            help="how long each job has after its SIGTERM to save its work "
                                 "before SIGKILL, e.g. 60s or 2m (default 5s; not waited once "
                                 "the job is gone)")
    if verb in ("clone", "add"):
        parser.add_argument("--priority", type=int, help="its priority (default: the source's "
                                                         "or 0)")
    if verb in ("edit", "clone"):
        parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                            help=SET_HELP)
        parser.add_argument("--add-flag", action="append", default=[], metavar="KEY=VALUE",
                            help=ADD_FLAG_HELP)
    if verb == "retry":
        parser.add_argument("--stuck", action="store_true",
                            help="every stuck job (with --phase: of that phase), as the crash "
                                 "guard's advice says; retrying releases a held phase")
        parser.add_argument("--phase", metavar="NAME", help="with --stuck: this phase's only")
    if verb == "edit":
        parser.add_argument("--early-stop", metavar="SETTING",
                            help="early stopping for the rest of the run (no JOB): off; on "
                                 "(the manifest's setting back); eta=N and/or grace=N, "
                                 "comma-separated (e.g. eta=2,grace=3); kept across a restart, "
                                 "and by a reload unless --force")
        parser.add_argument("--search", metavar="SETTING",
                            help="a search's amounts for the rest of the run (no JOB): "
                                 "trials=N and/or gpu_hours=H (or budget.gpu_hours=H), "
                                 "comma-separated (e.g. trials=40); never fewer trials than it "
                                 "has asked; a search that had ended asks again; kept across a "
                                 "restart, and by a reload unless --force")
        parser.add_argument("--phase", metavar="NAME",
                            help="with --early-stop: this phase only (default: every phase "
                                 "that has early_stop); with --search: this phase's search "
                                 "(default: the only phase that has one)")
    if verb == "reload":
        parser.add_argument("--dry-run", action="store_true", help="show what it would do")
        parser.add_argument("--force", action="store_true",
                            help="apply the file also over what a person changed: edited "
                                 "commands, priorities set, and jobs held, edited or "
                                 "prioritised that the file no longer has (retired)")
    parser.add_argument("--json", action="store_true", help="print the engine's answer as JSON")
    if verb != "pause":
        parser.add_argument("--no-start", action="store_true",
                            help="when no engine is running, say so and exit 3 instead of "
                                 "starting one in the background")
    parser.add_argument("--command-id", metavar="ID",
                        help="the command's id (default: a fresh one). The engine applies an id "
                             "once: send the same again when unsure whether it arrived")
    add_ssh_config(parser)
    if usage_tail:
        parser.usage = parser.format_usage().removeprefix("usage: ").rstrip() + usage_tail
    return parser


def command_text(words: list[str]) -> str:
    return words[0] if len(words) == 1 else shlex.join(words)


def parse_verb(verb: str, argv: list[str]) -> Request:
    before, words = argv, []
    if "--" in argv:
        cut = argv.index("--")
        before, words = argv[:cut], argv[cut + 1:]
    options = parser(verb).parse_args(before)
    jobs = list(getattr(options, "jobs", []) or [])
    check_paths([options.run_dir])
    for job_id in jobs:
        if not _valid_id(job_id):
            raise UsageError(f"{verb}: {job_id!r} is not a job id (letters, digits, "
                             "'_', '.', '-')")
    if words and verb not in ("edit", "clone", "add"):
        raise UsageError(f"{verb} takes no command after --")
    cmd = command_text(words) if words else None
    if cmd is not None and not cmd.strip():
        raise UsageError(f"{verb}: the command after -- is empty")
    filter_query = getattr(options, "filter", None)
    needs_jobs = verb in (*JOB_VERBS, "edit", "priority")
    phase = getattr(options, "phase", None)
    early_stop = getattr(options, "early_stop", None)
    if verb == "edit" and getattr(options, "search", None) is not None:
        return _search_request(options, jobs, filter_query, cmd)
    if verb == "edit" and (early_stop is not None or phase is not None):
        return _early_stop_request(options, jobs, filter_query, cmd)
    if verb == "retry":
        filter_query, phase = _stuck_filter(options, jobs, filter_query), None
    if phase is not None and (jobs or filter_query):
        raise UsageError(f"{verb}: --phase {verb}s a phase; name no JOB and no "
                         "--filter with it")
    if needs_jobs and not jobs and not filter_query and phase is None:
        raise UsageError(f"{verb}: name at least one JOB, or --filter QUERY")
    return Request(verb, options.run_dir, _command(verb, options, tuple(jobs), cmd),
                   filter=filter_query, as_json=options.json, command_id=options.command_id,
                   config_path=ssh_config_path(options.ssh_config),
                   start=not getattr(options, "no_start", False))


def _early_stop_request(options: argparse.Namespace, jobs: list[str], filter_query: str | None,
                        cmd: str | None) -> Request:
    """`eq-tui edit RUN_DIR --early-stop SETTING [--phase NAME]`."""
    if options.early_stop is None:
        raise UsageError("eq-tui edit: --phase goes with --early-stop")
    if jobs or filter_query or cmd is not None or options.set:
        raise UsageError("eq-tui edit: --early-stop changes a phase's setting; name no JOB, "
                         "--filter, --set or command with it")
    values: dict[str, str] = {}
    for part in (p.strip() for p in options.early_stop.split(",")):
        key, eq, value = part.partition("=")
        if not eq and key in ("on", "off"):
            values["state"] = key
        elif eq and key in ("eta", "grace") and value.strip().isdigit():
            values[key] = value.strip()
        else:
            raise UsageError(f"eq-tui edit: --early-stop takes off, on, eta=N, grace=N "
                             f"(comma-separated), not {part!r}")
    if values.get("state") == "off" and len(values) > 1:
        raise UsageError("eq-tui edit: --early-stop off takes no eta or grace")
    return Request("edit", options.run_dir, SetEarlyStop(
        phase=options.phase, state=values.get("state"),
        eta=int(values["eta"]) if "eta" in values else None,
        grace=int(values["grace"]) if "grace" in values else None),
        as_json=options.json, command_id=options.command_id,
        config_path=ssh_config_path(options.ssh_config), start=not options.no_start)


def _search_request(options: argparse.Namespace, jobs: list[str], filter_query: str | None,
                    cmd: str | None) -> Request:
    """`eq-tui edit RUN_DIR --search trials=N,gpu_hours=H [--phase NAME]`."""
    if jobs or filter_query or cmd is not None or options.set or options.early_stop:
        raise UsageError("eq-tui edit: --search changes a phase's search; name no JOB, "
                         "--filter, --set, --early-stop or command with it")
    values: dict[str, str] = {}
    for part in (p.strip() for p in options.search.split(",")):
        key, eq, value = part.partition("=")
        key = {"budget.gpu_hours": "gpu_hours"}.get(key.strip(), key.strip())
        if eq and key in ("trials", "gpu_hours") and value.strip():
            values[key] = value.strip()
        else:
            raise UsageError(f"eq-tui edit: --search takes trials=N and/or gpu_hours=H "
                             f"(comma-separated), not {part!r}")
    trials = values.get("trials")
    if trials is not None and not (trials.isdigit() and int(trials) >= 1):
        raise UsageError(f"eq-tui edit: --search trials must be a whole number of at least 1, "
                         f"not {trials!r}")
    hours = _hours(values["gpu_hours"]) if "gpu_hours" in values else None
    return Request("edit", options.run_dir, SetSearch(
        phase=options.phase, trials=int(trials) if trials is not None else None,
        gpu_hours=hours), as_json=options.json, command_id=options.command_id,
        config_path=ssh_config_path(options.ssh_config), start=not options.no_start)


def _hours(text: str) -> float:
    try:
        hours = float(text)
    except ValueError:
        hours = -1.0
    if not 0 < hours < float("inf"):
        raise UsageError(f"eq-tui edit: --search gpu_hours must be a number above 0, not "
                         f"{text!r}")
    return hours


def _command(verb: str, options: argparse.Namespace, jobs: tuple[str, ...],
             cmd: str | None) -> Command:
    """The typed command the verb's options say."""
    sets: dict[str, str] = {}
    added: dict[str, str] = {}
    if verb in ("edit", "clone"):
        try:
            sets = parse_sets(options.set)
            added = parse_sets(options.add_flag, option="--add-flag")
        except ArgError as exc:
            raise UsageError(f"{verb}: {exc}") from None
        if set(sets) & set(added):
            raise UsageError(f"{verb}: --{sorted(set(sets) & set(added))[0]} is given to both "
                             "--set and --add-flag")
    if verb in ("clone", "add") and options.id is not None and not _valid_id(options.id):
        raise UsageError(f"{verb}: --id {options.id!r} is not a job id (letters, "
                         "digits, '_', '.', '-')")
    if verb == "edit":
        if cmd is None and not sets and not added:
            raise UsageError("edit: give the new command after --, or --set KEY=VALUE, or "
                             "--add-flag KEY=VALUE")
        return Edit(jobs, cmd=cmd, sets=sets, add_flags=added)
    if verb == "clone":
        return Clone(job=jobs[0], new_id=options.id, cmd=cmd, sets=sets, add_flags=added,
                     priority=options.priority)
    if verb == "add":
        if cmd is None:
            raise UsageError("add: give the command after --")
        return Add(id=options.id, cmd=cmd, phase=options.phase, gpus_per_job=options.gpus,
                   mem_mib=None if options.mem is None else _mem_mib(options.mem),
                   exclusive=True if options.exclusive else None, priority=options.priority,
                   preempt=_preempt(options.preempt))
    if verb == "priority":
        return SetPriority(jobs, priority=_priority(options.value))
    if verb == "reload":
        return Reload(dry_run=options.dry_run, force=options.force)
    if verb == "release":
        return Release(job_ids=jobs, phase=options.phase)
    if verb == "hold":
        return Hold(job_ids=jobs, phase=options.phase)
    if verb == "kill":
        return Kill(job_ids=jobs, grace=None if options.grace is None else _grace(options.grace))
    if verb in HOST_VERBS:
        return _host_command(verb, options)
    kind = KINDS[verb]
    return kind(job_ids=jobs) if issubclass(kind, OnJobs) else kind()


def _stuck_filter(options: argparse.Namespace, jobs: list[str],
                  filter_query: str | None) -> str | None:
    """`retry --stuck [--phase P]`: the filter that names every stuck job (of phase P)."""
    if options.phase is not None and not options.stuck:
        raise UsageError("retry: --phase goes with --stuck (every stuck job of that phase)")
    if not options.stuck:
        return filter_query
    if jobs or filter_query:
        raise UsageError("retry: --stuck names the jobs; give no JOB and no --filter with it")
    if options.phase is not None and not _valid_id(options.phase):
        raise UsageError(f"retry: --phase {options.phase!r} is not a phase name")
    return "status:stuck" + ("" if options.phase is None else f" phase:{options.phase}")


def _host_command(verb: str, options: argparse.Namespace) -> Command:
    """drain HOST [--gpus 0,1] [--now [--grace D]], undrain HOST."""
    if not options.host.strip():
        raise UsageError(f"{verb}: name the HOST")
    if verb == "undrain":
        return Undrain(host=options.host)
    if options.grace is not None and not options.now:
        raise UsageError("drain: --grace goes with --now (the grace of the jobs it stops)")
    gpus = None
    if options.gpus is not None:
        words = [w.strip() for w in options.gpus.split(",")]
        if not words or not all(w.isdigit() for w in words):
            raise UsageError(f"drain: --gpus takes GPU indexes such as 0,1, not "
                             f"{options.gpus!r}")
        gpus = tuple(sorted({int(w) for w in words}))
    return Drain(host=options.host, only_gpus=gpus, now=options.now,
                 grace=None if options.grace is None else _grace(options.grace, verb))


def _grace(text: str, verb: str = "kill") -> float:
    """`--grace`: seconds from 60, 60s, 2m, 1.5h (the manifest's durations)."""
    try:
        seconds = parse_duration(Context("--grace", Located(None)), text, ())
    except ManifestError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_GRACE_S:
        raise UsageError(f"{verb}: --grace takes a duration such as 60s or 2m (at most 24h), "
                         f"not {text!r}")
    return seconds


def _mem_mib(value: str) -> int | str:
    checked = mem_mib_value(int(value) if value.isdigit() else value)
    if checked is None:
        raise UsageError(f"add: --mem {MEM_MIB_HINT}, not {value!r}")
    return checked


def _priority(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"priority: {value!r} is not a whole number") from None


def _valid_id(value: str) -> bool:
    # imported here: `eq-tui --help` loads this module and must stay light (no manifest, no
    # engine package)
    from eq_tui.manifest.ids import ID_PATTERN

    return ID_PATTERN.fullmatch(value) is not None


def _preempt(value: object) -> bool | str | None:
    """`--preempt` alone is true; `--preempt force` is force."""
    if value is None:
        return None
    if value is True or value == "force":
        return True if value is True else "force"
    raise UsageError(f"add: --preempt takes nothing or force, not {value!r}")
