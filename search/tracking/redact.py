"""Passwords in storage and tracking URLs never reach logs, params or files.

A URL's password is found the way the programs that read the URL find it,
not by one pattern: SQLAlchemy (the study storage) ends the user info at the
first `@` and lets the password hold `/`, `#`, `?` and spaces; urllib and
requests (MLflow's HTTP client) end the authority at the first `/`, `?` or
`#` and the user info at the last `@` before it. Whatever either would read
as the password is hidden, so a password one of them splits differently
(`p@ss`) is still hidden whole. The storage and tracking URLs in use are also
remembered, so their passwords are hidden wherever they turn up alone.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote, unquote

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

HIDDEN = "***"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_AUTHORITY_END = re.compile(r"[/?#\s'\"<>]")
_MIN_SECRET_CHARS = 6  # a shorter password hidden everywhere it occurs would blank ordinary words
_remembered: set[str] = set()


def password_span(text: str, start: int) -> tuple[int, int] | None:
    """Where the password of the URL whose user info begins at `text[start]`
    lies (begin, end), as the union of SQLAlchemy's and urllib's reading; None
    when neither reads a password there. Only the current line is read."""
    line_end = text.find("\n", start)
    rest = text[start:line_end if line_end >= 0 else len(text)]
    colon = rest.find(":")
    slash = rest.find("/")
    if colon < 0 or (0 <= slash < colon) or any(c.isspace() for c in rest[:colon]):
        return None
    ends = []
    at = rest.find("@", colon)  # SQLAlchemy: username [^:/]*, password [^@]*
    if at >= 0:
        ends.append(at)
    authority = _AUTHORITY_END.search(rest)
    last_at = rest.rfind("@", 0, authority.start() if authority else len(rest))  # urllib: rpartition('@')
    if last_at > colon:
        ends.append(last_at)
    return (start + colon + 1, start + max(ends)) if ends else None


def raw_password(url: str) -> str | None:
    """The password as written in `url` (the union of both readings), or None."""
    match = _SCHEME.match(url)
    span = password_span(url, match.end()) if match else None
    return url[span[0]:span[1]] if span else None


def redact(text: str) -> str:
    """Every URL password in `text` replaced by *** (`postgresql://u:a/b@h/db` -> `postgresql://u:***@h/db`),
    and the remembered ones wherever they occur."""
    text = str(text)
    spans = []
    for match in _SCHEME.finditer(text):
        span = password_span(text, match.end())
        if span is not None and span[1] > span[0]:
            spans.append(span)
    for begin, end in reversed(_merge(spans)):
        text = text[:begin] + HIDDEN + text[end:]
    for secret in sorted(_secrets(), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return text


def remember(url: str | None) -> None:
    """Hide this URL's password wherever it occurs from now on, in any spelling."""
    if url:
        _remembered.add(url)


def _secrets() -> set[str]:
    found = set()
    for url in _remembered | {os.environ.get("MLFLOW_TRACKING_URI", ""), os.environ.get(STORAGE_ENV, "")}:
        raw = raw_password(url)
        if raw is not None:
            found |= {raw, unquote(raw), quote(unquote(raw), safe="")}
    return {s for s in found if len(s) >= _MIN_SECRET_CHARS}


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged


STORAGE_ENV = "SEARCH_STUDY_STORAGE"  # the study storage URL, password included, for the sweep's jobs
_STORAGE_KEY = "hydra.sweeper.storage"


def keep_out_of_job_configs(config: DictConfig, storage: str | None) -> None:
    """Hydra writes every job's config, its `hydra` node and overrides included,
    to `.hydra/*.yaml` before the job starts, so a storage URL with a password
    would be on disk however soon it is scrubbed. The sweep's jobs are composed
    from this (master) config's overrides: its storage override becomes the
    redacted URL, and the real one travels in the environment (STORAGE_ENV), which
    Hydra's launchers (basic, joblib, submitit) hand to every job."""
    if not storage or redact(storage) == storage:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import open_dict, read_write

    os.environ[STORAGE_ENV] = storage
    parser = OverridesParser.create()
    kept = [line for line in config.hydra.overrides.hydra
            if parser.parse_override(line).key_or_group.lstrip("+~") != _STORAGE_KEY]
    shown = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, redact(storage)).replace("'", "\\'")
    with read_write(config), open_dict(config):
        config.hydra.overrides.hydra = [*kept, f"{_STORAGE_KEY}='{shown}'"]
        config.hydra.sweeper.storage = redact(storage)


def reveal(storage: str | None) -> str | None:
    """The storage URL a job was given (redacted by keep_out_of_job_configs), password restored."""
    real = os.environ.get(STORAGE_ENV)
    return real if storage and real and redact(real) == storage else storage


def redact_file(path: Path) -> None:
    text = path.read_text()
    clean = redact(text)
    if clean != text:
        path.write_text(clean)


class RedactSavedConfigs(Callback):
    """Hydra saves each job's config and overrides (and the sweep's
    multirun.yaml) verbatim. The sweeper keeps its storage password out of
    them (keep_out_of_job_configs, above); this rewrites what any
    other URL with a password left in those files as each job ends."""

    def on_job_start(self, config: DictConfig, **kwargs: object) -> None:
        self._scrub(config)

    def on_job_end(self, config: DictConfig, job_return: object, **kwargs: object) -> None:
        self._scrub(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: object) -> None:
        self._scrub(config)

    @staticmethod
    def _scrub(config: DictConfig) -> None:
        dirs = []
        if config.hydra.get("runtime") and config.hydra.runtime.get("output_dir"):
            dirs.append(Path(config.hydra.runtime.output_dir) / config.hydra.output_subdir)
        dirs.append(Path(config.hydra.sweep.dir))
        for directory in dirs:
            if directory.is_dir():
                for path in directory.glob("*.yaml"):
                    redact_file(path)
