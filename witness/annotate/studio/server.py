"""Start, check and stop a real Label Studio server, offline and bound to loopback.

Label Studio lives in its own virtualenv (its pins on pyarrow, openai, pytz and Django must not
constrain ours): :func:`install_studio` builds it, :func:`find_studio_venv` finds it. The server is
started with a *clean* environment (Label Studio reads ``LABEL_STUDIO_X``, then ``HEARTEX_X``, then
plain ``X``, so a stray ``PORT`` or ``PASSWORD`` would leak in), bound to ``127.0.0.1`` with
``--internal-host``, with telemetry, the version check and Sentry off, legacy API tokens on and
sign-up closed (see ``shared/notes/label-studio.md`` for the measurements behind each variable).

The server runs detached; its process id, port and URL go to ``<data_dir>/witness-studio.json`` so
:func:`stop_server` can stop it later. A migrated data directory can be copied
(:func:`copy_data_dir`): a copy starts in seconds, a fresh database takes ~100 s to migrate.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError, MissingDependencyError, ServiceError

__all__ = [
    "STUDIO_VERSION",
    "DEFAULT_URL",
    "STATE_FILE",
    "StudioServer",
    "find_studio_venv",
    "install_studio",
    "server_env",
    "free_port",
    "port_is_free",
    "wait_healthy",
    "start_server",
    "stop_server",
    "read_state",
    "copy_data_dir",
    "studio_command",
    "set_password",
    "ensure_admin_token",
]

#: The Label Studio release witness is tested against.
STUDIO_VERSION = "1.23.2"
#: Where every studio verb looks for the server unless ``LABEL_STUDIO_URL`` says otherwise.
DEFAULT_URL = "http://127.0.0.1:8080"
#: The file in the data directory that records the running server.
STATE_FILE = "witness-studio.json"


@dataclass(frozen=True)
class StudioServer:
    """A running Label Studio server started by :func:`start_server`."""

    url: str
    port: int
    pid: int
    data_dir: Path
    username: str
    token: str
    log_path: Path
    startup_s: float


def find_studio_venv(venv: str | os.PathLike) -> Path:
    """Return ``venv`` if it holds a ``label-studio`` executable, else raise.

    >>> find_studio_venv("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    witness.errors.MissingDependencyError: Expected a Label Studio virtualenv with bin/label-studio, got /nonexistent...
    """
    path = Path(venv).expanduser().absolute()
    if not (path / "bin" / "label-studio").exists():
        raise MissingDependencyError(
            f"Expected a Label Studio virtualenv with bin/label-studio, got {path} (not built). "
            "Build it with `witness studio install` or `make studio`, or set WITNESS_STUDIO_VENV."
        )
    return path


def install_studio(venv: str | os.PathLike, *, version: str = STUDIO_VERSION, python: str | None = None) -> Path:
    """Build a virtualenv at ``venv`` with ``label-studio==version`` (a no-op when already built).

    Takes ~4 minutes and ~1 GB on a fresh machine (package registries only).
    """
    path = Path(venv).expanduser().absolute()
    marker = path / ".installed"
    if marker.exists() and (path / "bin" / "label-studio").exists():
        return path
    py = python or sys.executable
    for cmd in (
        [py, "-m", "venv", str(path)],
        [str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"],
        [str(path / "bin" / "python"), "-m", "pip", "install", "-q", f"label-studio=={version}"],
    ):
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise ServiceError(
                f"Expected `{' '.join(cmd)}` to succeed, got exit {res.returncode} ({path}): "
                f"{res.stderr.strip()[-400:]}. Check network access to the package registry."
            )
    marker.touch()
    return path


def server_env(
    data_dir: str | os.PathLike,
    *,
    document_root: str | os.PathLike,
    username: str,
    password: str,
    token: str,
) -> dict[str, str]:
    """The complete, clean environment Label Studio is started with (nothing inherited but PATH).

    >>> env = server_env("/d", document_root="/img", username="a@b.c", password="pw", token="t" * 10)
    >>> env["LABEL_STUDIO_COLLECT_ANALYTICS"], env["LABEL_STUDIO_SENTRY_DSN"], "PORT" in env
    ('false', '', False)
    """
    if len(token) <= 5:
        raise InputError(f"Expected an API token longer than 5 characters, got {len(token)} characters. Use a longer token.")
    data_dir = Path(data_dir).absolute()
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(data_dir),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(Path(document_root).absolute()),
        "LABEL_STUDIO_USERNAME": username,
        "LABEL_STUDIO_PASSWORD": password,
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",
        "LABEL_STUDIO_COLLECT_ANALYTICS": "false",
        "LABEL_STUDIO_SENTRY_DSN": "",
        "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
    }


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that is free now (the kernel picks it).

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5.0, headers: dict | None = None) -> int:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def wait_healthy(url: str, *, timeout: float = 300.0, proc: subprocess.Popen | None = None, log_path: Path | None = None) -> float:
    """Poll ``url/health/`` until it answers 200; return the seconds waited.

    Raises :class:`ServiceError` when ``proc`` exits first (with the end of its log) or on timeout.
    """
    t0 = time.monotonic()
    while True:
        try:
            if _get(url.rstrip("/") + "/health/", timeout=5.0) == 200:
                return time.monotonic() - t0
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            tail = _tail(log_path)
            raise ServiceError(
                f"Expected Label Studio to start, got exit code {proc.returncode} ({log_path}): {tail}. "
                "Read the log; a damaged data directory can be moved away."
            )
        if time.monotonic() - t0 > timeout:
            raise ServiceError(
                f"Expected Label Studio to answer {url}/health/ within {timeout:.0f} s, got no answer ({log_path}). "
                "A fresh database takes ~100 s to migrate; wait longer or read the log."
            )
        time.sleep(0.5)


def _tail(path: Path | None, n: int = 600) -> str:
    if path is None or not Path(path).exists():
        return ""
    return Path(path).read_text(errors="replace")[-n:].replace("\n", " | ")


def read_state(data_dir: str | os.PathLike) -> dict | None:
    """The state :func:`start_server` recorded in ``data_dir`` (None when there is none)."""
    p = Path(data_dir) / STATE_FILE
    if not p.exists():
        return None
    return json.loads(p.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_server(
    venv: str | os.PathLike,
    data_dir: str | os.PathLike,
    *,
    port: int = 8080,
    document_root: str | os.PathLike = ".",
    username: str,
    password: str,
    token: str,
    timeout: float = 300.0,
) -> StudioServer:
    """Start Label Studio detached on ``127.0.0.1:port`` and wait until it is healthy.

    The admin ``username`` gets ``password`` and the API ``token`` (also when the data directory
    already holds that admin with other credentials: see :func:`ensure_admin_token`). A busy port is
    refused (Label Studio would silently move to the next one).
    """
    venv = find_studio_venv(venv)
    data_dir = Path(data_dir).expanduser().absolute()
    data_dir.mkdir(parents=True, exist_ok=True)
    state = read_state(data_dir)
    if state and _alive(int(state["pid"])):
        raise ServiceError(
            f"Expected no server running on this data directory, got pid {state['pid']} at {state['url']} ({data_dir}). "
            "Stop it with `witness studio stop`."
        )
    if not port_is_free(port):
        raise ServiceError(
            f"Expected port {port} on 127.0.0.1 to be free, got a port in use. "
            "Choose another with --port or stop what listens there."
        )
    env = server_env(data_dir, document_root=document_root, username=username, password=password, token=token)
    log_path = data_dir / "witness-studio.log"
    cmd = [
        str(venv / "bin" / "label-studio"), "start", "--no-browser",
        "--internal-host", "127.0.0.1", "--port", str(port),
        "--username", username, "--password", password, "--user-token", token,
        "--enable-legacy-api-token",
    ]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=data_dir, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    (data_dir / STATE_FILE).write_text(json.dumps({"pid": proc.pid, "port": port, "url": url, "username": username,
                                                    "document_root": env["LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT"]}))
    try:
        waited = wait_healthy(url, timeout=timeout, proc=proc, log_path=log_path)
        ensure_admin_token(venv, data_dir, url, username=username, password=password, token=token,
                           document_root=document_root)
    except BaseException:
        _kill_group(proc.pid)
        (data_dir / STATE_FILE).unlink(missing_ok=True)
        raise
    return StudioServer(url, port, proc.pid, data_dir, username, token, log_path, waited)


def _kill_group(pid: int, timeout: float = 15.0) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = 0 if _alive(pid) else pid
        if done or not _alive(pid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_server(data_dir: str | os.PathLike) -> bool:
    """Stop the server recorded in ``data_dir``; True if one was running."""
    data_dir = Path(data_dir).expanduser().absolute()
    state = read_state(data_dir)
    if state is None:
        return False
    pid = int(state["pid"])
    running = _alive(pid)
    if running:
        _kill_group(pid)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    return running


def copy_data_dir(template: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Copy a stopped, migrated data directory (database, ``.env`` with SECRET_KEY, media)."""
    template, dest = Path(template), Path(dest)
    shutil.copytree(template, dest, ignore=shutil.ignore_patterns(STATE_FILE, "witness-studio.log", "export"),
                    dirs_exist_ok=True)
    return dest


def studio_command(
    venv: str | os.PathLike, data_dir: str | os.PathLike, args: list[str], *, document_root: str | os.PathLike = "/",
    timeout: float = 300.0,
) -> str:
    """Run ``label-studio ARGS`` on ``data_dir`` with the clean environment; return its output."""
    venv = find_studio_venv(venv)
    env = server_env(data_dir, document_root=document_root, username="", password="", token="unused-token")
    for k in ("LABEL_STUDIO_USERNAME", "LABEL_STUDIO_PASSWORD", "LABEL_STUDIO_USER_TOKEN"):
        env.pop(k)
    res = subprocess.run([str(venv / "bin" / "label-studio"), *args], env=env, cwd=str(Path(data_dir).absolute()),
                         capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise ServiceError(
            f"Expected `label-studio {args[0]}` to succeed, got exit {res.returncode} ({data_dir}): "
            f"{(res.stderr or res.stdout).strip()[-400:]}. Check the data directory."
        )
    return res.stdout


def set_password(venv: str | os.PathLike, data_dir: str | os.PathLike, email: str, password: str) -> None:
    """Set a user's password with ``label-studio reset_password`` (the API ignores passwords)."""
    if len(password) < 8:
        raise InputError(f"Expected a password of at least 8 characters, got {len(password)} ({email}). Use a longer one.")
    studio_command(venv, data_dir, ["reset_password", "--username", email, "--password", password])


_ADMIN_SNIPPET = """
import sys
from users.models import User
from rest_framework.authtoken.models import Token
email, password, token = sys.argv[-3:]
u = User.objects.get(email=email)
u.set_password(password); u.save()
Token.objects.filter(user=u).delete()
Token.objects.create(user=u, key=token)
"""


def ensure_admin_token(
    venv: str | os.PathLike, data_dir: str | os.PathLike, url: str, *, username: str, password: str, token: str,
    document_root: str | os.PathLike = "/",
) -> bool:
    """Make ``token`` and ``password`` the admin's; True if they had to be changed.

    Label Studio applies ``LABEL_STUDIO_USER_TOKEN`` and the password only when it creates the
    admin, so on a data directory created with other credentials both are checked (an API call
    with the token, a login with the password) and, when either fails, set through Django directly.
    """
    if _get(url.rstrip("/") + "/api/current-user/whoami", headers={"Authorization": f"Token {token}"}) == 200:
        from .screenshot import login_cookies

        try:
            login_cookies(url, username, password)
            return False
        except ServiceError:
            pass  # the token works but the password does not: set both
    venv = find_studio_venv(venv)
    site = next((venv / "lib").glob("python3*/site-packages/label_studio"))
    env = server_env(data_dir, document_root=document_root, username=username, password=password, token=token)
    env["DJANGO_SETTINGS_MODULE"] = "core.settings.label_studio"
    res = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import sys, django; sys.path.insert(0, sys.argv[1]); django.setup(); exec(sys.argv[2])",
         str(site), _ADMIN_SNIPPET, username, password, token],
        env=env, cwd=str(Path(data_dir).absolute()), capture_output=True, text=True, timeout=300,
    )
    if res.returncode != 0:
        raise ServiceError(
            f"Expected to set the admin token of {username}, got exit {res.returncode}: "
            f"{res.stderr.strip()[-400:]}. Check the data directory."
        )
    return True
