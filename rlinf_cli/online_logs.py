"""What a child of ``rlinf online`` said went wrong, read back from its log.

Why: a child that ends early (a learner refusing a key, a server without its checkpoint) wrote
the reason into its log, one line; "see the log" alone sends the user to open a file for it.
The supervisor prints that line beside the exit code. Which line: the first of :data:`ERROR_LINES`
that matches, searched from the end of what this start wrote (a log is appended to across runs,
so an older run's error is never reported as this one's).
"""

from __future__ import annotations

import re
from pathlib import Path

# what a failing rlinf command ends with, most telling first: the command's own one-line
# refusal (``rlinf train: config error: ...``), a traceback's last line, a logged error
ERROR_LINES: tuple[re.Pattern[str], ...] = (
    re.compile(r"^rlinf [\w-]+: .+"),
    re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(: .*)?$"),
    re.compile(r"^\d\d:\d\d:\d\d [EC] \S+: .+"),
)
TAIL_BYTES = 64 * 1024  # the reason is near the end; a long log is not read whole


def log_size(path: Path) -> int:
    """Where this start's lines begin in ``path`` (0 when there is no log yet)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def child_error(path: Path, start: int = 0) -> str:
    """The line of ``path`` (from byte ``start`` on) that says why its child ended; the last
    non-empty line when none looks like an error; "" for an empty or unreadable log."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(start, size - TAIL_BYTES))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for pattern in ERROR_LINES:
        found = [ln for ln in lines if pattern.match(ln)]
        if found:
            return found[-1]
    return lines[-1] if lines else ""
