"""Launch-time variables: `${GPU}`, `${RUN_DIR}`, `${ATTEMPT}`, `${JOB_ID}`."""

from __future__ import annotations

import re

_VAR = re.compile(r"\$\{(GPU|RUN_DIR|ATTEMPT|JOB_ID)\}")


def substitute(text: str, *, gpus: tuple[int, ...] | list[int] = (), run_dir: str = "",
               attempt: int = 0, job_id: str = "") -> str:
    values = {
        "GPU": ",".join(str(g) for g in gpus),
        "RUN_DIR": run_dir,
        "ATTEMPT": str(attempt),
        "JOB_ID": job_id,
    }
    return _VAR.sub(lambda m: values[m.group(1)], text)
