"""`witness studio` verbs: serve / stop Label Studio, add users, push items, pull annotations.

Every verb that talks to the server reads its URL from ``LABEL_STUDIO_URL`` (default
http://127.0.0.1:8080) and the API token from ``LABEL_STUDIO_API_KEY``; ``serve`` makes that token
the admin's.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import console, handle_errors, print_json, progress, table

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
users_app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                        help="Label Studio user accounts (annotators, reviewers).")
app.add_typer(users_app, name="users")

_ROLES = ("annotator", "reviewer", "adjudicator")


def _default_venv() -> str:
    env = os.environ.get("WITNESS_STUDIO_VENV")
    if env:
        return env
    repo = Path(__file__).resolve().parents[2] / ".studio-venv"
    return str(repo if repo.exists() else Path.cwd() / ".studio-venv")


def _default_data_dir() -> str:
    return os.environ.get("WITNESS_STUDIO_DATA", str(Path.home() / ".local" / "share" / "witness" / "studio"))


Url = Annotated[str, typer.Option("--url", envvar="LABEL_STUDIO_URL", help="Label Studio URL.")]
Token = Annotated[Optional[str], typer.Option("--token", envvar="LABEL_STUDIO_API_KEY", help="API token.")]
DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="Label Studio data directory (default: $WITNESS_STUDIO_DATA or ~/.local/share/witness/studio).")]
Venv = Annotated[Optional[Path], typer.Option("--venv", help="Label Studio virtualenv (default: $WITNESS_STUDIO_VENV or .studio-venv).")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _check_kind(kind: str) -> None:
    from ..annotate.studio.configs import KINDS
    from ..errors import InputError

    if kind not in KINDS:
        raise InputError(f"Expected --kind in {list(KINDS)}, got {kind!r}. Use qa, review or pairs.")


def _connect(url: str, token: str | None):
    from ..annotate.studio.client import connect

    return connect(url, token)


@app.command("install")
@handle_errors
def install(venv: Venv = None, as_json: Json = False) -> None:
    """Build the Label Studio virtualenv (label-studio 1.23.2; ~4 min, ~1 GB)."""
    from ..annotate.studio.server import STUDIO_VERSION, install_studio

    path = install_studio(venv or _default_venv())
    if as_json:
        print_json({"venv": str(path), "version": STUDIO_VERSION})
    else:
        console.print(f"Label Studio {STUDIO_VERSION} installed in {path}")


@app.command("serve")
@handle_errors
def serve(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 8080,
    data_dir: DataDir = None,
    document_root: Annotated[Optional[Path], typer.Option("--document-root", help="Folder whose sub-folders Label Studio may serve images from (default: current folder).")] = None,
    username: Annotated[str, typer.Option("--username", envvar="LABEL_STUDIO_USERNAME", help="Admin e-mail.")] = "admin@witness.local",
    password: Annotated[Optional[str], typer.Option("--password", envvar="LABEL_STUDIO_PASSWORD", help="Admin password (default: generated once, kept in the data directory).")] = None,
    token: Token = None,
    venv: Venv = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the server (a fresh database migrates for ~100 s).")] = 400.0,
    as_json: Json = False,
) -> None:
    """Start Label Studio on 127.0.0.1 (offline: no telemetry, version check or Sentry) and print how to log in."""
    from ..annotate.studio.server import start_server

    ddir = Path(data_dir or _default_data_dir()).expanduser().absolute()
    ddir.mkdir(parents=True, exist_ok=True)
    cred_path = ddir / "witness-credentials.json"
    saved = json.loads(cred_path.read_text()) if cred_path.exists() else {}
    if saved.get("username") != username:
        saved = {}
    password = password or saved.get("password") or secrets.token_urlsafe(12)
    token = token or saved.get("token") or secrets.token_hex(20)
    root = Path(document_root or Path.cwd()).expanduser().absolute()
    with console.status("Starting Label Studio (a fresh database migrates for ~100 s)...") if not as_json else _null():
        srv = start_server(venv or _default_venv(), ddir, port=port, document_root=root, username=username,
                           password=password, token=token, timeout=timeout)
    cred_path.write_text(json.dumps({"username": username, "password": password, "token": token}))
    cred_path.chmod(0o600)
    info = {"url": srv.url, "username": username, "password": password, "token": token, "pid": srv.pid,
            "data_dir": str(ddir), "document_root": str(root), "log": str(srv.log_path), "startup_s": round(srv.startup_s, 1)}
    if as_json:
        print_json(info)
        return
    console.print(f"Label Studio is running at [bold]{srv.url}[/bold] (pid {srv.pid}, started in {srv.startup_s:.0f} s).")
    console.print(f"Log in as [bold]{username}[/bold] with password [bold]{password}[/bold].")
    console.print("For the other studio verbs, in your shell:")
    console.print(f"  export LABEL_STUDIO_URL={srv.url}\n  export LABEL_STUDIO_API_KEY={token}\n"
                  f"  export LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={root}", highlight=False)
    console.print(f"Stop it with: witness studio stop --data-dir {ddir}", highlight=False)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@app.command("stop")
@handle_errors
def stop(data_dir: DataDir = None, as_json: Json = False) -> None:
    """Stop the server `witness studio serve` started on this data directory."""
    from ..annotate.studio.server import stop_server

    ddir = Path(data_dir or _default_data_dir()).expanduser().absolute()
    stopped = stop_server(ddir)
    if as_json:
        print_json({"stopped": stopped, "data_dir": str(ddir)})
    else:
        console.print("Label Studio stopped." if stopped else f"No server was running on {ddir}.")


@users_app.command("add")
@handle_errors
def users_add(
    email: Annotated[str, typer.Argument(help="The person's e-mail (their login).")],
    role: Annotated[str, typer.Option("--role", help="annotator | reviewer | adjudicator.")] = "annotator",
    password: Annotated[Optional[str], typer.Option("--password", help="Password (default: generated, printed).")] = None,
    url: Url = "http://127.0.0.1:8080",
    token: Token = None,
    data_dir: DataDir = None,
    venv: Venv = None,
    as_json: Json = False,
) -> None:
    """Create (or reset the password of) a Label Studio account for an annotator or reviewer."""
    from ..annotate.studio.server import set_password
    from ..errors import InputError

    if role not in _ROLES:
        raise InputError(f"Expected --role in {list(_ROLES)}, got {role!r}. Use annotator or reviewer.")
    if "@" not in email:
        raise InputError(f"Expected an e-mail address, got {email!r}. Annotators log in with their e-mail.")
    password = password or secrets.token_urlsafe(12)
    with _connect(url, token) as client:
        existing = next((u for u in client.users() if u.get("email") == email), None)
        user = existing or client.create_user(email, first_name=role, last_name="witness")
    set_password(venv or _default_venv(), Path(data_dir or _default_data_dir()).expanduser(), email, password)
    info = {"email": email, "role": role, "id": user.get("id"), "password": password, "created": existing is None, "url": url}
    if as_json:
        print_json(info)
    else:
        console.print(f"{'Created' if existing is None else 'Updated'} {role} {email} (id {user.get('id')}); "
                      f"password: [bold]{password}[/bold]; log in at {url}")


@app.command("push")
@handle_errors
def push(
    items: Annotated[Path, typer.Argument(help="Items (Parquet or JSONL).", exists=True, dir_okay=False)],
    project: Annotated[str, typer.Option("--project", help="Project name (created if missing).")],
    kind: Annotated[str, typer.Option("--kind", help="qa | review | pairs.")] = "qa",
    overlap: Annotated[int, typer.Option("--overlap", help="Annotations wanted per task.")] = 2,
    scenes: Annotated[Optional[Path], typer.Option("--scenes", help="Scenes: every object becomes a candidate box (qa).", exists=True, dir_okay=False)] = None,
    document_root: Annotated[Optional[Path], typer.Option("--document-root", envvar="LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT", help="The server's Local Files document root (default: current folder).")] = None,
    image_root: Annotated[Optional[Path], typer.Option("--image-root", help="Resolve relative image paths here (default: the items file's folder).")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="A custom labelling config (XML).")] = None,
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Tasks per import request.")] = 1000,
    url: Url = "http://127.0.0.1:8080",
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Create or update a project and import items as tasks with pre-annotations (idempotent)."""
    from ..annotate.studio.configs import load_config_file
    from ..annotate.studio.push import push_items
    from ..io import read_items, read_scenes

    _check_kind(kind)
    table, _ = read_items(items)
    scene_table = read_scenes(scenes)[0] if scenes else None
    xml = load_config_file(config) if config else None
    with _connect(url, token) as client, progress() as bar:
        task = bar.add_task("push", total=table.num_rows)
        rep = push_items(client, table, project=project, kind=kind, overlap=overlap, scenes=scene_table,
                         document_root=document_root or Path.cwd(), image_root=image_root or items.parent,
                         config=xml, chunk_size=chunk_size, on_progress=lambda n: bar.update(task, completed=n))
    if as_json:
        print_json(rep.as_dict())
        return
    console.print(table_of(rep))
    if rep.changed_ids:
        console.print("changed: " + ", ".join(rep.changed_ids[:20]) + (" ..." if len(rep.changed_ids) > 20 else ""))


def table_of(rep) -> object:
    return table(f"{rep.project} ({rep.kind}) {'created' if rep.created else 'updated'}: {rep.url}",
                 ["added", "unchanged", "changed", "config updated"],
                 [[rep.added, rep.unchanged, rep.changed, rep.config_updated]])


@app.command("pull")
@handle_errors
def pull(
    project: Annotated[str, typer.Option("--project", help="Project name.")],
    out: Annotated[Path, typer.Option("--out", help="Annotations Parquet to write.")],
    kind: Annotated[Optional[str], typer.Option("--kind", help="qa | review | pairs (default: the project's).")] = None,
    url: Url = "http://127.0.0.1:8080",
    token: Token = None,
    as_json: Json = False,
) -> None:
    """Export a project (snapshot) and write its annotations as Annotation records."""
    from ..annotate.studio.pull import pull_annotations
    from ..io import write_table

    if kind is not None:
        _check_kind(kind)
    with _connect(url, token) as client:
        tab, rep = pull_annotations(client, project, kind=kind)
    write_table(tab, out)
    rep = dict(rep, out=str(out))
    if as_json:
        print_json(rep)
        return
    console.print(table(f"{project}: annotations -> {out}",
                        ["tasks", "annotations", "records", "skipped", "drafts", "unannotated"],
                        [[rep["tasks"], rep["annotations"], rep["records"], rep["cancelled"], rep["drafts"], rep["unannotated"]]]))


@app.command("items")
@handle_errors
def items_cmd(
    annotations: Annotated[Path, typer.Option("--annotations", help="Annotations pulled from a qa project.", exists=True, dir_okay=False)],
    items: Annotated[Path, typer.Option("--items", help="The items that were pushed.", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Items Parquet to write.")],
    as_json: Json = False,
) -> None:
    """Turn qa annotations into items (annotated question, answer, evidence; count = the number stated)."""
    from ..annotate.studio.pull import items_from_annotations
    from ..io import read_annotations, read_items, write_table

    ann = read_annotations(annotations)
    table_in, _ = read_items(items, validate=False)
    tab, rep = items_from_annotations(ann, table_in)
    write_table(tab, out)
    rep = dict(rep, out=str(out))
    if as_json:
        print_json(rep)
        return
    console.print(table(f"items -> {out}", ["items", "without annotation", "discarded"],
                        [[rep["items"], rep["without_annotation"], rep["discarded"]]]))


@app.command("screenshot")
@handle_errors
def screenshot(
    project: Annotated[str, typer.Option("--project", help="Project name.")],
    out: Annotated[Path, typer.Option("--out", help="PNG to write.")],
    item: Annotated[Optional[str], typer.Option("--item", help="Item (or pair) id of the task (default: the first task).")] = None,
    username: Annotated[str, typer.Option("--username", envvar="LABEL_STUDIO_USERNAME", help="Who logs in.")] = "admin@witness.local",
    password: Annotated[Optional[str], typer.Option("--password", envvar="LABEL_STUDIO_PASSWORD", help="Their password.")] = None,
    height: Annotated[int, typer.Option("--height", help="Window height in pixels (width 1400).")] = 1000,
    select: Annotated[Optional[str], typer.Option("--select", help="Click FX,FY (fractions of the image) first, e.g. 0.2,0.7 to select a box.")] = None,
    url: Url = "http://127.0.0.1:8080",
    token: Token = None,
) -> None:
    """Screenshot a task in the labelling interface with headless Chromium (for docs and checks)."""
    from ..annotate.studio.screenshot import screenshot_task
    from ..errors import InputError

    if not password:
        raise InputError("Expected a password to log in with, got none. Pass --password or set LABEL_STUDIO_PASSWORD.")
    at = None
    if select:
        try:
            fx, fy = (float(v) for v in select.split(","))
        except ValueError:
            raise InputError(f"Expected --select FX,FY (two fractions), got {select!r}. Write e.g. 0.2,0.7.") from None
        at = (fx, fy)
    with _connect(url, token) as client:
        proj = client.find_project(project)
        if proj is None:
            raise InputError(f"Expected a Label Studio project named {project!r}, got none. Check the name.")
        tasks = client.task_index(int(proj["id"]))
        pick = [t for t in tasks if item is None or t["witness_id"] == item]
        if not pick:
            raise InputError(f"Expected a task for item {item!r} in {project!r}, got none. Check the id.")
    path = screenshot_task(url, int(proj["id"]), int(pick[0]["id"]), out, email=username, password=password,
                           height=height, select=at)
    console.print(f"wrote {path}")
