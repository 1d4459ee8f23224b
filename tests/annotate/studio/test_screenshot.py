"""Headless Chromium shows a qa task with its pre-annotations rendered."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from witness.annotate.studio.push import push_items

pytestmark = pytest.mark.studio


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed (make studio installs it)")
def test_qa_task_screenshot(studio, demo_items, tmp_path):
    from PIL import Image

    from witness.annotate.studio.screenshot import screenshot_task

    client = studio["client"]
    rep = push_items(client, demo_items["items"].slice(0, 1), project=f"shot-{demo_items['tag']}", kind="qa",
                     scenes=demo_items["scenes"], document_root=studio["root"])
    (task,) = client.task_index(rep.project_id)
    out = screenshot_task(studio["url"], rep.project_id, int(task["id"]), tmp_path / "qa.png",
                          email=studio["admin"], password=studio["password"])
    img = np.asarray(Image.open(out).convert("RGB"))
    assert img.shape[0] >= 800 and img.shape[1] >= 1200
    colours = np.unique(img.reshape(-1, 3), axis=0)
    assert len(colours) > 500  # a rendered page with the gradient image, not a blank or error page
    # the pre-annotated boxes are stroked in the label colours of the config (car #e6194b, person #3cb44b)
    red = (np.abs(img.astype(int) - [0xE6, 0x19, 0x4B]).sum(axis=-1) < 40).sum()
    assert red > 200


def test_login_with_wrong_password_fails(studio):
    from witness.annotate.studio.screenshot import login_cookies
    from witness.errors import ServiceError

    with pytest.raises(ServiceError, match="Expected the login of .* to succeed"):
        login_cookies(studio["url"], studio["admin"], "wrong-password")
