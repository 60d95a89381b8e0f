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

from bot.aftercall.notify import Outbox, SmsTexts, backoff_secs, quiet_until
from bot.aftercall.twilio_api import TwilioAPI, TwilioAPIError
from bot.call.assets import DialogAssets
from bot.call.wiring import make_policy
from bot.config import ConfigError, load_config
from bot.dialog.domain import load_domain
from bot.dialog.state import DialogState
from bot.store.db import Store
from bot.testing.process import FakeTwilioAPI
from bot.transports.twilio import build_dial_twiml, build_whisper_twiml

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
    assert quiet_until(dt.datetime(2026, 12, 10, 14, 0, tzinfo=dt.UTC), window, "Asia/Seoul") == seoul(8, 0, 11)
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
    # No quiet hours unless a test sets them: a status notice would otherwise wait whenever the
    # suite runs at night in Seoul.
    return load_config(None, ["sms.enabled=true", f"sms.from_number='{FROM}'", "sms.backoff_secs=0.05",
                              "sms.backoff_max_secs=0.2", "sms.max_attempts=3", "sms.quiet_hours=''", *extra])


def open_store(db_url: str, config) -> Store:
    store = Store(db_url)
    store.notify_statuses = tuple(config.sms.notify_statuses)
    store.migrate()
    return store


def ticket_from_call(store: Store, caller: str | None = CALLER, opt_in: bool = True, language: str = "ko") -> str:
    """A phone call's ticket; ``opt_in``: the caller said yes to the text (its SMS is queued)."""
    sid = "CA" + str(time.monotonic_ns()).rjust(32, "0")[-32:]
    store.start_call(sid, caller=caller, worker="w", qa=False, started_at=dt.datetime.now(dt.UTC))
    number = store.create_ticket(call_sid=sid, category="street_lights", location="중앙로 12번길", time=None,
                                 excerpt="가로등이 꺼졌어요", language=language)
    if opt_in:
        assert store.text_ticket(number) is (caller is not None)
    return number


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


async def test_no_yes_to_the_text_means_no_sms_and_no_status_notices(db_url, tmp_path, fake):
    config = sms_config(tmp_path)
    store = open_store(db_url, config)
    outbox = Outbox(store=store, api=api_for(fake), config=config, worker="w")
    declined = ticket_from_call(store, opt_in=False)  # "아니요" (or no answer) to the offer
    ticket = store.find_ticket(declined)
    assert ticket["sms_status"] is None and ticket["sms_opt_in"] is False and store.list_outbox(declined) == []
    store.change_ticket_status(declined, "done", actor="cli")  # no consent: no notice either
    assert store.list_outbox(declined) == [] and await outbox.send_due() == 0 and fake.messages == []

    agreed = ticket_from_call(store)
    assert store.text_ticket(agreed) is True  # a second yes (the caller repeats it): still one text
    assert len(store.list_outbox(agreed)) == 1 and store.find_ticket(agreed)["sms_opt_in"] is True
    await drain(outbox, store, agreed)
    assert [m["To"] for m in fake.messages] == [CALLER]


async def test_a_transfer_hands_the_ticket_over_in_its_audit_trail(db_url, tmp_path, fake):
    import sqlalchemy as sa

    from bot.store.schema import ticket_audit

    config = sms_config(tmp_path)
    store = open_store(db_url, config)
    number = ticket_from_call(store)
    store.hand_over(number, "CA" + "7" * 32)
    assert store.find_ticket(number)["status"] == "in_progress"
    store.change_ticket_status(number, "done", actor="kim")
    store.hand_over(number, "CA" + "8" * 32)  # a later call about it: noted, status kept
    with store.engine.connect() as conn:
        audit = conn.execute(sa.select(ticket_audit).where(ticket_audit.c.reception_no == number)
                             .order_by(ticket_audit.c.id)).mappings().all()
    assert [(a["actor"], a["from_status"], a["to_status"]) for a in audit] == [
        ("bot", "open", "in_progress"), ("kim", "in_progress", "done"), ("bot", "done", "done")]
    assert "상담원" in audit[0]["note"] and "CA" + "7" * 32 in audit[0]["note"]
    # The caller was on the line with that person: the hand-over texts nothing; "done" does.
    assert [r["ticket_status"] for r in store.list_outbox(number)] == [None, "done"]


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
                     .values(next_attempt_at=dt.datetime.now(dt.UTC)))
    morning = Outbox(store=store, api=api_for(fake), config=config, worker="w", clock=lambda: seoul(8, 5, day=11))
    rows = await drain(morning, store, number)
    assert [r["status"] for r in rows] == ["sent", "sent"]
    (sms,) = fake.messages
    assert "처리 중" in sms["Body"] and number in sms["Body"]
    store.change_ticket_status(number, "open", actor="cli")  # not in sms.notify_statuses: no notice
    assert len(store.list_outbox(number)) == 2


async def test_texts_are_in_the_language_the_ticket_was_taken_in(db_url, tmp_path, fake):
    config = sms_config(tmp_path, "line.languages=['ko','en']")
    store = open_store(db_url, config)
    outbox = Outbox(store=store, api=api_for(fake), config=config, worker="w")
    english, korean = ticket_from_call(store, language="en"), ticket_from_call(store)
    assert store.find_ticket(english)["language"] == "en" and store.find_ticket(korean)["language"] == "ko"
    await drain(outbox, store, english)
    await drain(outbox, store, korean)
    first, second = (m["Body"] for m in fake.messages)
    assert first.startswith("[Hanbit City] Complaint filed. Reception number " + english) and "street light" in first
    assert "접수번호 " + korean in second and "가로등" in second
    fake.reset()
    store.change_ticket_status(english, "done", actor="kim")
    await drain(outbox, store, english)
    (notice,) = fake.messages
    assert notice["Body"] == f"[Hanbit City] Reception number {english}, street light complaint: now 'done'."


def test_a_line_language_without_sms_texts_is_named(tmp_path):
    from bot import languages
    from bot.dialog.language_packs import LanguageError

    folder = languages.get("en").folder
    source = (folder / "language.toml").read_text(encoding="utf-8")
    (tmp_path / "language.toml").write_text(source.split("[sms]")[0], encoding="utf-8")
    (tmp_path / "shortcuts.toml").write_text((folder / "shortcuts.toml").read_text(encoding="utf-8"), encoding="utf-8")
    config = load_config(None, ["line.languages=['ko','en']"])
    domain = load_domain(config.path(config.llm.domain_file))
    with pytest.raises(LanguageError, match=r"language.toml: sms.ticket: missing"):
        SmsTexts.of_language("en", domain, tmp_path)


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


# --- callbacks placed with answering-machine detection --------------------------------------------


def booked_callback(store: Store, caller: str | None = CALLER, *, ticket: bool = True) -> tuple[int, str | None]:
    """A callback booked in a call (its ticket's number as context), due now."""
    number = ticket_from_call(store, caller, opt_in=False) if ticket else None
    sid = store.find_ticket(number)["call_sid"] if number else "CA" + str(time.monotonic_ns()).rjust(32, "0")[-32:]
    if not number:
        store.start_call(sid, caller=caller, worker="w", qa=False, started_at=dt.datetime.now(dt.UTC))
    after = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    return store.request_callback(call_sid=sid, after=after, reason="closed_transfer", reception_no=number), number


async def test_due_callbacks_are_placed_once_with_async_amd_and_retried_a_bounded_number_of_times(db_url, tmp_path, fake):
    from bot.aftercall.callbacks import CallbackPlacer

    config = load_config(None, ["server.public_host='voice.example.org'", f"callbacks.from_number='{FROM}'",
                                "callbacks.max_attempts=2", "callbacks.retry_after_secs=600"])
    store = open_store(db_url, config)
    placer = CallbackPlacer(store=store, api=api_for(fake), config=config)
    cid, number = booked_callback(store)
    later = store.request_callback(call_sid=None, after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1),
                                   reason="closed_transfer")

    (placed,) = await placer.place_due()
    assert placed.callback_id == cid and placed.status == "calling" and placed.call_sid.startswith("CA")
    (call,) = fake.placed
    base = "https://voice.example.org/twilio/callback"
    assert call["To"] == CALLER and call["From"] == FROM and call["Url"] == f"{base}/answer?id={cid}"
    assert call["MachineDetection"] == "DetectMessageEnd" and call["AsyncAmd"] == "true"
    assert call["AsyncAmdStatusCallback"] == f"{base}/amd?id={cid}" and call["StatusCallback"] == f"{base}/status?id={cid}"
    assert await placer.place_due() == []  # claimed: never placed twice (and `later` is not due)
    row = store.find_callback(call_sid=placed.call_sid)
    assert row["id"] == cid and row["status"] == "calling" and row["attempts"] == 1 and row["reception_no"] == number

    # Nobody answers: waits retry_after_secs, then one more call; then unreachable.
    assert store.callback_outcome(cid, reached=False, why="no-answer", max_attempts=2, retry_after_secs=600) == "waiting"
    # Twilio repeats a status callback: counted once.
    assert store.callback_outcome(cid, reached=False, why="no-answer", max_attempts=2, retry_after_secs=600) == "waiting"
    waiting = store.find_callback(callback_id=cid)
    assert waiting["call_after"] > dt.datetime.now(dt.UTC) + dt.timedelta(seconds=590)
    assert await placer.place_due() == []  # not due yet
    _due_now(store, cid)
    fake.fail_next(1, 500)  # Twilio fails the second call: that was the last attempt
    (failed,) = await placer.place_due()
    assert failed.call_sid is None and failed.status == "unreachable" and "500" in failed.error
    assert store.find_callback(callback_id=cid)["attempts"] == 2
    assert store.find_callback(callback_id=later)["status"] == "waiting"

    answered, _ = booked_callback(store, ticket=False)
    (placed,) = await placer.place_due()
    assert store.callback_outcome(answered, reached=True, why="completed", max_attempts=2, retry_after_secs=600) == "done"
    nobody, _ = booked_callback(store, caller=None)  # the QA page: no number to call
    (skipped,) = await placer.place_due()
    assert skipped.callback_id == nobody and skipped.status == "unreachable" and len(fake.placed) == 2


def _due_now(store: Store, cid: int) -> None:
    from bot.store.schema import callbacks

    with store.engine.begin() as conn:
        conn.execute(callbacks.update().where(callbacks.c.id == cid)
                     .values(call_after=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)))


def test_a_machine_hears_who_called_and_the_number_and_no_masked_data():
    config = load_config(None)
    policy = make_policy(config, DialogAssets.load(config))
    message = policy.callback_machine_message("20260007")
    assert "이, 공, 이, 육, 공, 공, 공, 칠" in message and "  " not in message
    assert "접수번호" not in policy.callback_machine_message(None)
    from bot.transports.twilio import build_say_twiml

    assert build_say_twiml(message).endswith(f'<Say language="ko-KR">{message}</Say><Hangup /></Response>')


async def test_a_callback_about_an_english_ticket_is_made_in_english(db_url, tmp_path):
    from bot.transports.twilio import build_say_twiml

    config = load_config(None, ["line.languages=['ko','en']"])
    policy = make_policy(config, DialogAssets.load(config))
    store = open_store(db_url, config)
    sid = "CA" + str(time.monotonic_ns()).rjust(32, "0")[-32:]
    store.start_call(sid, caller=CALLER, worker="w", qa=False, started_at=dt.datetime.now(dt.UTC))
    number = store.create_ticket(call_sid=sid, category="street_lights", location="Main Street", time=None,
                                 excerpt="the light is out", language="en")
    after = dt.datetime.now(dt.UTC)
    english = store.request_callback(call_sid=sid, after=after, reason="closed_transfer", reception_no=number)
    plain = store.request_callback(call_sid=sid, after=after, reason="closed_transfer")
    assert store.find_callback(callback_id=english)["language"] == "en"
    assert store.find_callback(callback_id=plain)["language"] == "ko"  # no ticket: the line's own language

    en = policy.for_language("en")
    message = en.callback_machine_message(number)
    assert message.startswith("Hello, this is the city's information line") and "two, zero, two, six" in message
    assert build_say_twiml(message, "en").endswith(f'<Say language="en-US">{message}</Say><Hangup /></Response>')
    # The person who answers hears the intro and the ticket's status in English.
    answer = en.callback_answered(number, store.find_ticket(number))
    assert answer.sentences[0] == en.canned.callback_intro and "street light" in answer.sentences[1]


# --- privacy: no masked data in texts, retention covers what follows calls ----------------------------


async def test_texts_carry_no_masked_data_and_retention_clears_sms_callbacks_and_notes(db_url, tmp_path, fake):
    import sqlalchemy as sa

    from bot.store.calls import CallLog
    from bot.store.schema import callbacks, calls, outbox

    config = sms_config(tmp_path)
    store = open_store(db_url, config)
    sid = "CA" + "9" * 32
    t0 = dt.datetime.now(dt.UTC)
    store.start_call(sid, caller=CALLER, worker="w", qa=False, started_at=t0)
    said = "중앙로 12 앞이요 제 주민번호는 900101-2345678이고 카드는 1234 5678 9012 3456"
    number = store.create_ticket(call_sid=sid, category="street_lights", location=said, time=None, excerpt=said)
    assert store.text_ticket(number)
    await drain(Outbox(store=store, api=api_for(fake), config=config, worker="w"), store, number)
    store.change_ticket_status(number, "done", actor="cli")
    await drain(Outbox(store=store, api=api_for(fake), config=config, worker="w"), store, number)
    bodies = [m["Body"] for m in fake.messages] + [r["body"] for r in store.list_outbox(number)]
    assert len(fake.messages) == 2 and number in bodies[0] and "중앙로 12" in bodies[0]
    for body in bodies:
        assert "2345678" not in body and "9012" not in body and "3456" not in body, body
    store.set_transfer_note(sid, f"민원 안내 전화에서 연결된 통화입니다. 가로등·보안등 민원, 위치는 {said}.")
    assert "2345678" not in store.transfer_note(sid) and "900101-2******" in store.transfer_note(sid)

    finished, _ = booked_callback(store)
    owed, _ = booked_callback(store)  # still waiting: the desk owes this call, retention keeps it
    store.claim_due_callbacks()
    store.callback_outcome(finished, reached=True, max_attempts=3, retry_after_secs=60)
    store.callback_outcome(owed, reached=False, max_attempts=3, retry_after_secs=60)
    old = t0 - dt.timedelta(days=100)
    with store.engine.begin() as conn:  # age it all past records.retention_days
        conn.execute(outbox.update().values(created_at=old))
        conn.execute(callbacks.update().values(updated_at=old, requested_at=old))
        conn.execute(calls.update().where(calls.c.call_sid == sid).values(started_at=old))
    log = CallLog(store, worker="w", retention_days=90)
    try:
        log.apply_retention()
    finally:
        log.writer.close()
    assert store.list_outbox() == [] and store.transfer_note(sid) is None
    assert [c["id"] for c in store.list_callbacks(None)] == [owed]
    assert store.find_ticket(number)["reception_no"] == number  # tickets stay (as turns' retention keeps them)
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(outbox)).scalar() == 0
    assert store.purge_after_call(90) == {"sms": 0, "callbacks": 0, "transfer_notes": 0}
