"""Optional bearer-token auth: one shared token from an environment variable or a file.

``LORESCAN_SERVE_TOKEN`` (the token itself) or ``--token-file PATH`` (first line of the
file). When a token is set, every route but ``/healthz`` needs ``Authorization: Bearer
<token>``; tokens are compared in constant time.
"""
from __future__ import annotations

import hmac
import os

from ..errors import SettingsError

__all__ = ["read_token", "TOKEN_ENV", "check_header"]

TOKEN_ENV = "LORESCAN_SERVE_TOKEN"


def read_token(token_file: str | None = None) -> str | None:
    """The configured token: from ``token_file`` if given, else from the environment; None = no auth.

    Raises SettingsError for an unreadable or empty token file.
    """
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.readline().strip()
        except OSError as exc:
            raise SettingsError(f"cannot read the token file: {exc.strerror or exc}", source=token_file) from exc
        if not token:
            raise SettingsError("the token file is empty", source=token_file)
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def check_header(value: bytes | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header value carries ``token``."""
    if value is None or not value[:7].lower() == b"bearer ":
        return False
    return hmac.compare_digest(value[7:].strip(), token)
