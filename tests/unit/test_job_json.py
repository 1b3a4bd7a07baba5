"""A job's JSON (the bus's and the state file's) is what `dataclasses.asdict` would give, with
its derived flat fields, and shares nothing with the job: a property over random jobs."""

from __future__ import annotations

from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from eq_tui.api.model import Attempt, Failure, JobState, JobStatus

texts = st.text(max_size=8)
maybe_float = st.none() | st.floats(allow_nan=False, allow_infinity=False)
attempts = st.builds(Attempt, n=st.integers(1, 9), host=texts,
                     gpus=st.lists(st.integers(0, 7), max_size=3), session=texts,
                     attempt_dir=texts, log=texts, start=maybe_float, end=maybe_float,
                     exit_code=st.none() | st.integers(-9, 255))
jobs = st.builds(
    JobState, id=texts, phase=texts, cmd=texts, status=st.sampled_from(list(JobStatus)),
    attempts=st.integers(0, 9), failure=st.none() | st.builds(Failure, cls=texts, detail=texts),
    history=st.lists(attempts, max_size=3), retry_at=maybe_float, reason=st.none() | texts,
    retries_by_class=st.dictionaries(texts, st.integers(0, 5), max_size=3),
    params=st.dictionaries(texts, texts, max_size=3),
    metrics=st.dictionaries(texts, maybe_float, max_size=3),
    edits=st.lists(st.dictionaries(texts, texts | st.lists(texts, max_size=2), max_size=2),
                   max_size=2),
    spec=st.none() | st.dictionaries(texts, st.lists(texts, max_size=2), max_size=2),
    reports=st.lists(st.floats(allow_nan=False), max_size=3))


@given(jobs)
def test_a_jobs_json_is_asdicts_with_its_flat_fields_and_shares_nothing(job: JobState) -> None:
    expected = asdict(job)
    expected["status"] = str(job.status)
    expected["failure"] = job.failure.to_json() if job.failure else None
    expected.update(host=job.host, gpus=job.gpus, log=job.log, started=job.started,
                    ended=job.ended)
    data = job.to_json()
    assert data == expected and list(data) == list(expected)
    for name in ("history", "edits", "params", "metrics", "reports", "retries_by_class"):
        assert data[name] is not getattr(job, name)
    for attempt, written in zip(job.history, data["history"], strict=True):
        assert written["gpus"] is not attempt.gpus
    if job.spec is not None:
        assert all(data["spec"][k] is not v for k, v in job.spec.items())
