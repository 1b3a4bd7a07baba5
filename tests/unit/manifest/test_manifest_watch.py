"""The manifest keys of hang detection (stall_after, on_stall) and notifications (notify)."""

from __future__ import annotations

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text


def load(text: str):  # type: ignore[no-untyped-def]
    return load_manifest_text(text, "m.yaml")


def test_stall_keys_at_the_top_in_a_phase_and_on_a_job_the_nearest_wins() -> None:
    m = load("""
project: p
stall_after: 20m
on_stall: restart
phases:
  - name: a
    stall_after: 90s
    jobs:
      - {id: a1, cmd: x1}
      - {id: a2, cmd: x2, stall_after: 0, on_stall: kill}
  - name: b
    jobs: [{id: b1, cmd: x}]
""")
    specs = m.job_specs
    assert (specs["a1"].stall_after, specs["a1"].on_stall) == (90.0, "restart")
    assert (specs["a2"].stall_after, specs["a2"].on_stall) == (0.0, "kill")
    assert (specs["b1"].stall_after, specs["b1"].on_stall) == (1200.0, "restart")
    default = load("project: p\njobs: [{id: j, cmd: x}]\n").job_specs["j"]
    assert (default.stall_after, default.on_stall) == (None, "alert")


@pytest.mark.parametrize(("text", "message"), [
    ("stall_after: soon", "stall_after: must be a duration such as '20m'"),
    ("stall_after: -5", "stall_after: must be at least 0"),
    ("on_stall: reboot", "on_stall: must be one of alert, restart, kill"),
])
def test_bad_stall_keys_are_named_with_their_line(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as info:
        load(f"project: p\n{text}\njobs: [{{id: j, cmd: x}}]\n")
    assert message in str(info.value) and "m.yaml:2:" in str(info.value)


def test_notify_targets() -> None:
    m = load("""
project: p
jobs: [{id: j, cmd: x}]
notify:
  - {on: [stuck, stalled], url_env: SLACK_HOOK}
  - {on: finished, command: "mail -s done me"}
  - {on: [phase_done], url: "http://127.0.0.1:8080/ntfy"}
""")
    assert [(n.on, n.command, n.url, n.url_env) for n in m.notify] == [
        (("stuck", "stalled"), None, None, "SLACK_HOOK"),
        (("finished",), "mail -s done me", None, None),
        (("phase_done",), None, "http://127.0.0.1:8080/ntfy", None)]
    assert "SLACK_HOOK" in str(m.to_json()["notify"])


@pytest.mark.parametrize(("entry", "message"), [
    ("{on: [stuck], url: 'https://hooks.example.com/x?token=abc'}",
     "must not be written in the manifest"),
    ("{on: [stuck], url: 'https://me:secret@example.com/x'}", "url_env: NAME"),
    ("{on: [stuck], url: 'ftp://example.com'}", "http:// or https://"),
    ("{on: [stuck]}", "exactly one target"),
    ("{on: [stuck], command: x, url_env: Y}", "exactly one target"),
    ("{command: x}", "needs 'on'"),
    ("{on: [stuk], command: x}", "did you mean 'stuck'"),
    ("{on: [stuck], url_env: 'not a name'}", "must name an environment variable"),
])
def test_bad_notify_entries_are_refused_with_their_path(entry: str, message: str) -> None:
    with pytest.raises(ManifestError) as info:
        load(f"project: p\njobs: [{{id: j, cmd: x}}]\nnotify:\n  - {entry}\n")
    assert message in str(info.value) and "notify[0]" in str(info.value)
