"""Issue 46 on the desk: a resumed call's later streams (one recording file each) are played on the call's page.

The desk alone under Starlette's TestClient (bot/testing/desk_fixtures.py); every playback is audited on
the call like its first file's; a stream without a file is a refusal in the audit.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
import soundfile as sf

from bot.desk.app import desk_app
from bot.recording import files
from bot.recording.recorder import recording_path
from bot.store import recordings, segments
from bot.testing.desk_fixtures import desk_config, logged_in, open_db, secrets_with_key, seed

pytestmark = pytest.mark.usefixtures("cheap_argon2")

CALL = "CA" + "a" * 32  # seed()'s call: a roads (street_lights) ticket


def _opus(path, secs: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tone = (np.sin(np.arange(int(8000 * secs)) / 3) * 8000).astype(np.int16)
    sf.write(path, np.stack([tone, tone // 2], 1), 8000, format="OGG", subtype="OPUS")


def test_an_agent_plays_each_stream_of_a_resumed_call_and_each_is_audited(tmp_path):
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    store = open_db(url)
    seed(store)
    rec_dir = tmp_path / "recordings"
    first, later = recording_path(rec_dir, CALL, "opus"), recording_path(rec_dir, f"{CALL}-1", "opus")
    _opus(first, 2.0)
    _opus(later, 1.0)
    recordings.set_recording(store, CALL, files.relative(rec_dir, first), 2.0)
    segments.open_segment(store, CALL, 1, worker="w1", started_at=dt.datetime.now(dt.UTC))
    segments.set_segment_recording(store, CALL, 1, files.relative(rec_dir, later))
    app = desk_app(desk_config(url, f"recording.dir='{rec_dir}'"), secrets_with_key(), store)
    agent = logged_in(app, "agent1")
    page = agent.get(f"/desk/calls/{CALL}")
    assert page.status_code == 200
    assert f'src="/desk/calls/{CALL}/recording"' in page.text and f'src="/desk/calls/{CALL}/recording?seg=1"' in page.text
    played = agent.get(f"/desk/calls/{CALL}/recording", params={"seg": 1})
    assert played.status_code == 200 and played.content == later.read_bytes() != first.read_bytes()
    assert agent.get(f"/desk/calls/{CALL}/recording", params={"seg": 2}).status_code == 404
    log = [(a["action"], a["refused"]) for a in recordings.access_log(store, CALL)]
    assert ("copy", None) in log and ("copy", "deleted") in log
    store.close()
