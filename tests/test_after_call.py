"""After the call (issue 22): the one Twilio REST client against a fake that speaks Twilio's wire
format, SMS after a ticket and on status changes (outbox, retries with backoff, quiet hours,
tickets.sms_status), and the warm transfer's whisper. SQLite and a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import time
from zoneinfo import ZoneInfo

import pytest

from bot.config import ConfigError, load_config
from bot.dialog.state import DialogState
from bot.notify import Outbox, SmsTexts, backoff_secs, quiet_until
from bot.pipeline import DialogAssets, make_policy
from bot.store.db import Store
from bot.testing.process import FakeTwilioAPI
from bot.twilio_api import TwilioAPI, TwilioAPIError
from transports.twilio import build_dial_twiml, build_whisper_twiml

AC = "AC" + "3" * 32
TOKEN = "after-call-token"
CALLER = "+821055556666"
FROM = "+827011112222"
SEOUL = ZoneInfo("Asia/Seoul")


@pytest.fixture()
def fake():
    with FakeTwilioAPI(auth=(AC, TOKEN)) as api:
        yield api


def api_for(fake: FakeTwilioAPI, token: str = TOKEN) -> TwilioAPI:
    return TwilioAPI(account_sid=AC, auth_token=token, api_base_url=fake.base_url)


# --- the client ---------------------------------------------------------------------------------


async def test_the_client_speaks_twilios_format_and_says_what_may_be_retried(fake):
    api = api_for(fake)
    sid = await api.send_sms(to=CALLER, from_=FROM, body="접수번호 20260001")
    assert sid.startswith("SM") and fake.messages == [{"To": CALLER, "From": FROM, "Body": "접수번호 20260001", "sid": sid}]
    assert fake.requests[-1] == {"path": f"/2010-04-01/Accounts/{AC}/Messages.json", "status": 201}

    placed = await api.place_call(to=CALLER, from_=FROM, url="https://voice.example.org/twilio/callback?id=1",
                                  machine_detection="DetectMessageEnd")
    assert placed.sid.startswith("CA") and placed.status == "queued"
    assert fake.placed[0]["MachineDetection"] == "DetectMessageEnd" and fake.placed[0]["To"] == CALLER

    assert await api.hang_up("CA" + "4" * 32) is True
    assert await api.redirect("CA" + "4" * 32, "<Response/>") is True
    assert [h["form"] for h in fake.hangups] == [{"Status": "completed"}, {"Twiml": "<Response/>"}]
    user, _, password = base64.b64decode(fake.hangups[0]["auth"][6:]).decode().partition(":")
    assert (user, password) == (AC, TOKEN)  # HTTP basic auth, as Twilio wants it

    fake.fail_next(1, 500)
    with pytest.raises(TwilioAPIError) as err:
        await api.send_sms(to=CALLER, from_=FROM, body="x")
    assert err.value.retryable and err.value.status == 500 and err.value.code == 20500
    fake.fail_next(1, 429)
    with pytest.raises(TwilioAPIError) as err:
        await api.send_sms(to=CALLER, from_=FROM, body="x")
    assert err.value.retryable
    fake.fail_next(1, 400)
    with pytest.raises(TwilioAPIError) as err:
        await api.send_sms(to=CALLER, from_=FROM, body="x")
    assert not err.value.retryable and err.value.code == 21211
    with pytest.raises(TwilioAPIError) as err:
        await api_for(fake, "wrong-token").send_sms(to=CALLER, from_=FROM, body="x")
    assert err.value.status == 401 and not err.value.retryable
    assert "+8210" not in str(err.value) or "****" in str(err.value)  # numbers in errors are masked


async def test_no_answer_from_twilio_is_retryable_and_the_loop_keeps_running():
    api = TwilioAPI(account_sid=AC, auth_token=TOKEN, api_base_url="http://127.0.0.1:9")  # nothing listens
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(TwilioAPIError) as err:
            await api.send_sms(to=CALLER, from_=FROM, body="x")
    finally:
        task.cancel()
    assert err.value.retryable and err.value.status is None
    assert ticks > 0  # the request ran in a thread: the loop went on meanwhile


# --- quiet hours and backoff ---------------------------------------------------------------------


def seoul(h: int, m: int = 0, day: int = 10) -> dt.datetime:
    return dt.datetime(2026, 12, day, h, m, tzinfo=SEOUL)


def test_quiet_hours_past_midnight_end_the_next_morning():
    window = (21 * 60, 8 * 60)
    assert quiet_until(seoul(20, 59), window, "Asia/Seoul") is None
    assert quiet_until(seoul(21, 0), window, "Asia/Seoul") == seoul(8, 0, day=11)
    assert quiet_until(seoul(23, 30), window, "Asia/Seoul") == seoul(8, 0, day=11)
    assert quiet_until(seoul(3, 0), window, "Asia/Seoul") == seoul(8, 0)
    assert quiet_until(seoul(8, 0), window, "Asia/Seoul") is None
    # The server's zone does not matter: 14:00 UTC is 23:00 in Seoul.
    assert quiet_until(dt.datetime(2026, 12, 10, 14, 0, tzinfo=dt.timezone.utc), window, "Asia/Seoul") == seoul(8, 0, 11)
    assert quiet_until(seoul(13, 0), (12 * 60, 14 * 60), "Asia/Seoul") == seoul(14, 0)
    assert quiet_until(seoul(13, 0), None, "Asia/Seoul") is None


def test_backoff_doubles_up_to_its_cap():
    sms = load_config(None, ["sms.backoff_secs=30.0", "sms.backoff_max_secs=100.0"]).sms
    assert [backoff_secs(n, sms) for n in (1, 2, 3, 4)] == [30.0, 60.0, 100.0, 100.0]


def test_bad_sms_keys_are_named():
    for override, key in [("sms.enabled=true", "sms.from_number"), ("sms.quiet_hours='late'", "sms.quiet_hours"),
                          ("sms.quiet_hours='21:00-25:99'", "sms.quiet_hours"),
                          ('sms.notify_statuses=["closed"]', "sms.notify_statuses"),
                          ("sms.max_attempts=0", "sms.max_attempts"), ("sms.retries=3", "sms.retries")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(None, [override])


# --- the outbox -----------------------------------------------------------------------------------


def sms_config(tmp_path, *extra: str):
    return load_config(None, ["sms.enabled=true", f"sms.from_number='{FROM}'", "sms.backoff_secs=0.05",
                              "sms.backoff_max_secs=0.2", "sms.max_attempts=3", *extra])


def open_store(db_url: str, config) -> Store:
    store = Store(db_url)
    store.sms_after_ticket = config.sms.after_ticket
    store.notify_statuses = tuple(config.sms.notify_statuses)
    store.migrate()
    return store


def ticket_from_call(store: Store, caller: str | None = CALLER) -> str:
    sid = "CA" + str(time.monotonic_ns()).rjust(32, "0")[-32:]
    store.start_call(sid, caller=caller, worker="w", qa=False, started_at=dt.datetime.now(dt.timezone.utc))
    return store.create_ticket(call_sid=sid, category="street_lights", location="중앙로 12번길", time=None,
                               excerpt="가로등이 꺼졌어요")


async def drain(outbox: Outbox, store: Store, number: str, timeout: float = 30.0) -> list[dict]:
    """Send until the ticket's messages are all final (retries come due after their backoff)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await outbox.send_due()
        rows = store.list_outbox(number)
        if rows and all(r["status"] in ("sent", "failed") for r in rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"messages not final: {store.list_outbox(number)}")


async def test_a_ticket_is_texted_once_and_500s_are_retried_with_backoff(db_url, tmp_path, fake):
    config = sms_config(tmp_path)
    store = open_store(db_url, config)
    outbox = Outbox(store=store, api=api_for(fake), config=config, worker="w")
    number = ticket_from_call(store)
    assert store.find_ticket(number)["sms_status"] == "pending"

    fake.fail_next(2, 500)
    (row,) = await drain(outbox, store, number)
    assert row["status"] == "sent" and row["attempts"] == 3 and row["message_sid"].startswith("SM")
    assert "500" in row["last_error"]
    assert [r["status"] for r in fake.requests] == [500, 500, 201]
    (sms,) = fake.messages
    assert sms["To"] == CALLER and sms["From"] == FROM and number in sms["Body"] and "가로등" in sms["Body"]
    assert store.find_ticket(number)["sms_status"] == "sent"
    assert await outbox.send_due() == 0  # sent once, never again


async def test_a_message_that_cannot_go_fails_and_says_why(db_url, tmp_path, fake):
    config = sms_config(tmp_path)
    store = open_store(db_url, config)
    outbox = Outbox(store=store, api=api_for(fake), config=config, worker="w")
    always_down = ticket_from_call(store)
    fake.fail_next(3, 503)  # sms.max_attempts = 3
    (row,) = await drain(outbox, store, always_down)
    assert row["status"] == "failed" and row["attempts"] == 3
    assert store.find_ticket(always_down)["sms_status"] == "failed"

    bad_number = ticket_from_call(store)
    fake.fail_next(1, 400)  # Twilio refuses the number: no retry
    (row,) = await drain(outbox, store, bad_number)
    assert row["status"] == "failed" and row["attempts"] == 1
    assert fake.messages == []

    no_caller = ticket_from_call(store, caller=None)  # a QA-page call: nobody to text
    assert store.find_ticket(no_caller)["sms_status"] == "no_number" and store.list_outbox(no_caller) == []


async def test_status_notices_wait_out_the_quiet_hours(db_url, tmp_path, fake):
    config = sms_config(tmp_path, "sms.quiet_hours='21:00-08:00'")
    store = open_store(db_url, config)
    number = ticket_from_call(store)
    await drain(Outbox(store=store, api=api_for(fake), config=config, worker="w"), store, number)
    fake.reset()

    late = Outbox(store=store, api=api_for(fake), config=config, worker="w", clock=lambda: seoul(23, 10))
    store.change_ticket_status(number, "in_progress", actor="cli")
    store.change_ticket_status(number, "in_progress", actor="cli", note="same status: no second notice")
    assert await late.send_due() == 1
    (_, notice) = store.list_outbox(number)
    assert notice["kind"] == "status" and notice["status"] == "pending" and notice["attempts"] == 0
    assert notice["next_attempt_at"] == seoul(8, 0, day=11)
    assert fake.messages == [] and store.find_ticket(number)["sms_status"] == "pending"

    # Morning: the notice goes (moved due now, as the clock would have).
    with store.engine.begin() as conn:
        from bot.store.schema import outbox as table
        conn.execute(table.update().where(table.c.id == notice["id"])
                     .values(next_attempt_at=dt.datetime.now(dt.timezone.utc)))
    morning = Outbox(store=store, api=api_for(fake), config=config, worker="w", clock=lambda: seoul(8, 5, day=11))
    rows = await drain(morning, store, number)
    assert [r["status"] for r in rows] == ["sent", "sent"]
    (sms,) = fake.messages
    assert "처리 중" in sms["Body"] and number in sms["Body"]
    store.change_ticket_status(number, "open", actor="cli")  # not in sms.notify_statuses: no notice
    assert len(store.list_outbox(number)) == 2


async def test_two_senders_never_send_one_message_twice(db_url, tmp_path, fake):
    config = sms_config(tmp_path)
    store = open_store(db_url, config)
    numbers = [ticket_from_call(store) for _ in range(6)]
    a = Outbox(store=store, api=api_for(fake), config=config, worker="a")
    b = Outbox(store=store, api=api_for(fake), config=config, worker="b")
    await asyncio.gather(a.send_due(), b.send_due())
    assert sorted(m["Body"] for m in fake.messages) == sorted(
        next(r["body"] for r in store.list_outbox(n)) for n in numbers)
    assert len(fake.messages) == 6


def test_sms_texts_fill_labels():
    config = load_config(None)
    texts = SmsTexts.load(config)
    body = texts.render("status", number="20260001", category="street_lights", status="done")
    assert "20260001" in body and "가로등" in body and "처리 완료" in body


# --- the warm transfer ---------------------------------------------------------------------------


def test_the_whisper_summarises_the_call_for_the_person_who_answers():
    config = load_config(None)
    policy = make_policy(config, DialogAssets.load(config))
    state = DialogState()
    state.slots.update(category="street_lights", location="중앙로 12번길")
    state.tickets.append("20260007")
    state.transfer_reason = "asked"
    summary = policy.transfer_summary(state)
    assert summary.startswith("민원 안내 전화에서 연결된 통화입니다.")
    assert "가로등" in summary and "중앙로 12번길" in summary and "이, 공, 이, 육, 공, 공, 공, 칠" in summary
    assert "오류" in policy.transfer_summary(DialogState(transfer_reason="errors"))
    assert policy.transfer_summary(DialogState()) == "민원 안내 전화에서 연결된 통화입니다."

    twiml = build_dial_twiml("+8221200000", "https://voice.example.org/twilio/whisper?call=CA1")
    assert '<Dial><Number method="POST" url="https://voice.example.org/twilio/whisper?call=CA1">+8221200000</Number></Dial>' in twiml
    assert "<Dial>+8221200000</Dial>" in build_dial_twiml("+8221200000")
    assert '<Say language="ko-KR">' + summary + "</Say>" in build_whisper_twiml(summary)
