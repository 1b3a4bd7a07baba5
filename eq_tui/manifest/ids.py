"""The one pattern for ids a manifest gives (project, host, job): the engine builds session
names and attempt directories from them, so they hold nothing a shell or a path would read."""

from __future__ import annotations

import re

ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")
