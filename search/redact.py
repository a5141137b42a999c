"""Passwords in storage and tracking URLs never reach logs, params or files."""
from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]*)@")


def redact(text: str) -> str:
    """`postgresql://u:secret@h/db` -> `postgresql://u:***@h/db`, anywhere in `text`."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
