"""After the call, end to end (issue 22): a phone complaint whose caller says yes to the text is
texted its reception number through the fake Twilio REST API (two 500s first: retried with
backoff), and a status change texts a notice; callbacks are placed with AMD, and a person called
back is handed to the desk warm (Twilio fetches the whisper, which names the ticket) with the ticket
handed over.

Held lower down: a caller who says or keys no gets no text and no status notice, a transfer hands
the ticket over in its audit trail, and the whisper sums the call up (tests/aftercall/test_after_call.py, on
SQLite and PostgreSQL); keys 1 and 2 answer the offer (tests/dialog/test_policy.py); the model choosing a
person ends the call with a transfer (tests/stages/test_dialog_llm.py); the whisper's route refuses
an unsigned request (tests/app/test_routes.py).

The product's serve path in its own process (``bot.testing.lab_server``: the fixed-delay STT, each
call's words scripted by its ``stt_script`` stream parameter), the fake vLLM, the stand-in TTS, the
`twilio` library against ``FakeTwilioAPI`` (Twilio's form-encoded requests, basic auth, JSON).
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from twilio.request_validator import RequestValidator

from bot.languages.ko.normalize import read_digits
from bot.store.db import Store
from bot.testing.call_steps import call_row, model_turn, say, wait_for
from bot.testing.fake_llm import FakeLLM
from bot.testing.phone import FAST_VOICE, PhoneLine, offline_bot_overrides, open_call, phone_bot
from bot.testing.process import ROOT, BotProcess, FakeTwilioAPI
from bot.testing.twilio_sim import TwilioCallSimulator, new_sid, parse_twiml_stream
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

AUTH_TOKEN = "test-auth-token-after-call"
ACCOUNT_SID = "AC" + "5" * 32
LINE = PhoneLine(AUTH_TOKEN, ACCOUNT_SID)
PUBLIC_HOST = LINE.public_host
CALLER = "+821044445555"
FROM = "+827055556666"
DESK = "+8221200000"
HEARD = "가로등이 고장났어요"  # what the fixed-delay STT hears in an unscripted call: the model answers
# One speech segment (en_hello.wav is two): each scripted utterance takes one text of the script.
SPOKEN = FIXTURES / "ko_majayo.wav"


@pytest.fixture(scope="module")
def fake_llm():
    with FakeLLM(first_token_delay=0.1, token_delay=0.005) as fake:
        yield fake


@pytest.fixture(scope="module")
def twilio():
    with FakeTwilioAPI(auth=(ACCOUNT_SID, AUTH_TOKEN)) as api:
        yield api


@pytest.fixture(scope="module")
def bot(tmp_path_factory, whisper_dir, standin_tts_dir, fake_llm, twilio):
    tmp = tmp_path_factory.mktemp("after-call")
    with phone_bot(LINE, [*offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
                          f"twilio.api_base_url='{twilio.base_url}'",
                          f"call.transfer_number='{DESK}'", 'line.hours=["24/7"]', "line.breaks=[]",
                          "sms.enabled=true", f"sms.from_number='{FROM}'", "sms.quiet_hours=''",
                          "sms.backoff_secs=0.2", "sms.backoff_max_secs=1.0", "sms.poll_secs=0.2",
                          "callbacks.max_attempts=2", "callbacks.retry_after_secs=3600", FAST_VOICE],
                   log_path=tmp / "bot.log",
                   entry=("-m", "bot.testing.lab_server", "--stt-text", HEARD, "--stt-delay-ms", "200")) as proc:
        proc.records_url = f"sqlite:///{tmp / 'records' / 'calls.db'}"
        yield proc


async def report(call: TwilioCallSimulator, fake_llm: FakeLLM, location: str) -> None:
    """Greeting, then two scripted utterances: the model gets the category, then the location (read-back)."""
    await call.wait_for_media(timeout=20)
    await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
    fake_llm.script(model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?"))
    await say(call, SPOKEN)
    fake_llm.script(model_turn("알겠습니다.", location=location))
    await say(call, SPOKEN)


async def replies(store: Store, call_sid: str) -> list[str]:
    """What the bot said in the call's turns (the records database, once the call has ended)."""
    row = await wait_for(lambda: (c := call_row(store, call_sid)) and c["ended_at"] and c, what="the call's record")
    return [t.get("reply") or "" for t in row["turns"]]


async def test_a_caller_who_says_yes_is_texted_retried_after_500s_and_the_status_change_too(bot, fake_llm, twilio):
    fake_llm.reset()
    twilio.reset()
    twilio.fail_next(2, 500)  # Twilio is having a bad moment: the first two sends fail
    call = await open_call(bot, LINE, caller=CALLER, said=[HEARD, "중앙로 12번길이에요", "네", "네 보내 주세요"])
    async with call:
        await report(call, fake_llm, "중앙로 12번길")
        await say(call, SPOKEN)  # "네": yes to the read-back, the ticket and the offer of a text
        await say(call, SPOKEN)  # "네 보내 주세요": yes to the text
        await call.stop()
    store = Store(bot.records_url)
    try:
        (ticket,) = store.list_tickets()
        number = ticket["reception_no"]
        said = await replies(store, call.call_sid)
        offer = next(i for i, r in enumerate(said) if "접수번호를 문자로 보내드릴까요?" in r)
        assert "보내드리겠습니다" in said[offer + 1] and not any("보냈습니다" in r for r in said)
        assert ticket["sms_opt_in"] is True
        await wait_for(lambda: twilio.messages, timeout=60, what="the SMS")
        (sms,) = twilio.messages
        assert sms["To"] == CALLER and sms["From"] == FROM and number in sms["Body"]
        sends = [r["status"] for r in twilio.requests if r["path"].endswith("/Messages.json")]
        assert sends == [500, 500, 201]
        await wait_for(lambda: store.find_ticket(number)["sms_status"] == "sent", what="sms_status sent")
        (row,) = store.list_outbox(number)
        assert row["attempts"] == 3 and row["message_sid"] == sms["sid"]
        assert "attempt 1/5 failed" in bot.log() and CALLER not in bot.log()  # logged, masked

        # The desk's CLI (its own process, the same config) marks it done; the server texts the notice.
        cli = subprocess.run([sys.executable, str(ROOT / "run_bot.py"), "ticket", number, "--status", "done",
                              "--set", f"records.url='{bot.records_url}'", "--set", "sms.enabled=true",
                              "--set", f"sms.from_number='{FROM}'"], cwd=ROOT, capture_output=True, text=True)
        assert cli.returncode == 0, cli.stderr
        await wait_for(lambda: len(twilio.messages) == 2, timeout=60, what="the status notice")
        assert "처리 완료" in twilio.messages[1]["Body"] and twilio.messages[1]["To"] == CALLER
        print("\nthe fake Twilio received:", json.dumps({"requests": twilio.requests, "messages": twilio.messages},
                                                       ensure_ascii=False, indent=1))
    finally:
        store.close()


# --- callbacks: `run_bot.py callbacks --place`, AMD, the human and the machine ----------------------


async def signed_post(bot: BotProcess, route: str, form: dict, signature: str | None = None) -> httpx.Response:
    """A webhook from Twilio: form-encoded, signed over the public URL (query included)."""
    sig = signature or RequestValidator(AUTH_TOKEN).compute_signature(f"https://{PUBLIC_HOST}{route}", form)
    async with httpx.AsyncClient() as client:
        return await client.post(f"{bot.base_url}{route}", data=form, headers={"X-Twilio-Signature": sig})


def place_callbacks(bot: BotProcess, twilio: FakeTwilioAPI) -> str:
    """The desk's command, in its own process with the line's config and Twilio's credentials."""
    import os

    env = {**os.environ, "TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT_SID}
    cli = subprocess.run([sys.executable, str(ROOT / "run_bot.py"), "callbacks", "--place",
                          "--set", f"records.url='{bot.records_url}'", "--set", f"server.public_host='{PUBLIC_HOST}'",
                          "--set", f"twilio.api_base_url='{twilio.base_url}'", "--set", f"sms.from_number='{FROM}'",
                          "--set", "callbacks.max_attempts=2"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert cli.returncode == 0, cli.stderr
    assert CALLER not in cli.stdout + cli.stderr  # numbers masked
    return cli.stdout


def book(store: Store, *, ticket: bool) -> tuple[int, str | None]:
    """A callback booked after hours in an earlier call from CALLER (with its ticket), due now."""
    import datetime as dt

    sid = new_sid("CA")
    store.start_call(sid, caller=CALLER, worker="earlier", qa=False, started_at=dt.datetime.now(dt.UTC))
    number = store.create_ticket(call_sid=sid, category="street_lights", location="중앙로 12번길", time=None,
                                 excerpt="가로등이 꺼졌어요") if ticket else None
    due = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    return store.request_callback(call_sid=sid, after=due, reason="closed_transfer", reception_no=number), number


async def test_callbacks_are_placed_with_amd_a_person_gets_the_bot_a_machine_the_message(bot, fake_llm, twilio):
    fake_llm.reset()
    twilio.reset()
    store = Store(bot.records_url)
    try:
        human, number = book(store, ticket=True)
        machine, machine_number = book(store, ticket=True)
        nobody, _ = book(store, ticket=False)
        out = place_callbacks(bot, twilio)
        assert "3 of 3 due callback(s) placed" in out, out
        by_url = {p["Url"]: p for p in twilio.placed}
        assert len(twilio.placed) == 3 and {p["To"] for p in twilio.placed} == {CALLER}
        for cid in (human, machine, nobody):
            placed = by_url[f"https://{PUBLIC_HOST}/twilio/callback/answer?id={cid}"]
            assert placed["From"] == FROM and placed["MachineDetection"] == "DetectMessageEnd"
            assert placed["AsyncAmd"] == "true"
            assert placed["AsyncAmdStatusCallback"] == f"https://{PUBLIC_HOST}/twilio/callback/amd?id={cid}"
            assert placed["StatusCallback"] == f"https://{PUBLIC_HOST}/twilio/callback/status?id={cid}"
        sid = {cid: by_url[f"https://{PUBLIC_HOST}/twilio/callback/answer?id={cid}"]["sid"]
               for cid in (human, machine, nobody)}
        assert place_callbacks(bot, twilio).startswith("| id") and len(twilio.placed) == 3  # claimed: once

        def form(cid, **kw):
            return {"AccountSid": ACCOUNT_SID, "CallSid": sid[cid], "From": FROM, "To": CALLER,
                    "Direction": "outbound-api", **kw}

        # Forged, or a CallSid that is not the call placed for this callback: refused.
        assert (await signed_post(bot, f"/twilio/callback/answer?id={human}", form(human), "forged")).status_code == 403
        other = await signed_post(bot, f"/twilio/callback/answer?id={human}", form(machine))
        assert other.status_code == 404

        # The machine: answered (async AMD has no verdict yet: the stream TwiML), then AMD says
        # machine after the beep: the call is redirected to the message with the reception number.
        answer = await signed_post(bot, f"/twilio/callback/answer?id={machine}", form(machine, CallStatus="in-progress"))
        assert answer.status_code == 200 and "<Stream" in answer.text
        amd = await signed_post(bot, f"/twilio/callback/amd?id={machine}", form(machine, AnsweredBy="machine_end_beep"))
        assert amd.status_code == 204
        (redirect,) = [h for h in twilio.hangups if sid[machine] in h["path"]]
        said = redirect["form"]["Twiml"]
        assert '<Say language="ko-KR">' in said and "<Hangup />" in said
        assert read_digits(machine_number) in said and "요청하신 상담원 연결 예약" in said
        # A machine known when Twilio asks for the TwiML (AMD done first): the message at once.
        direct = await signed_post(bot, f"/twilio/callback/answer?id={machine}", form(machine, AnsweredBy="machine_start"))
        assert "<Say" in direct.text and read_digits(machine_number) in direct.text and "<Stream" not in direct.text
        await signed_post(bot, f"/twilio/callback/status?id={machine}", form(machine, CallStatus="completed"))
        row = store.find_callback(callback_id=machine)
        assert row["status"] == "done" and row["answered_by"] == "machine_start"

        # The person: the bot takes the call, reads the ticket's status, then hands it to the desk (warm).
        answer = await signed_post(bot, f"/twilio/callback/answer?id={human}", form(human, CallStatus="in-progress"))
        assert answer.status_code == 200, answer.text
        _, params = parse_twiml_stream(answer.text)
        assert params.get("callback") == "1"
        call = TwilioCallSimulator(bot.ws_url, call_sid=sid[human], custom_parameters=params, account_sid=ACCOUNT_SID)
        async with call:
            await call.wait_for_media(timeout=20)
            await signed_post(bot, f"/twilio/callback/amd?id={human}", form(human, AnsweredBy="human"))
            await call.wait_closed(timeout=60)
        (transfer,) = [h for h in twilio.hangups if sid[human] in h["path"]]
        # Redirected to the desk, warm (not hung up): the person hears the whisper first.
        assert f'<Dial><Number method="POST" url="https://{PUBLIC_HOST}/twilio/whisper?call={sid[human]}">{DESK}' \
            '</Number></Dial>' in transfer["form"]["Twiml"]
        assert "Status" not in transfer["form"]
        whisper = await signed_post(bot, f"/twilio/whisper?call={sid[human]}", {"AccountSid": ACCOUNT_SID,
                                    "CallSid": new_sid("CA"), "ParentCallSid": sid[human]})
        assert read_digits(number) in whisper.text
        await wait_for(lambda: store.find_ticket(number)["status"] == "in_progress", what="the hand-over")
        opening = (await replies(store, sid[human]))[0]
        assert "요청하신 상담원 연결 예약으로 전화드렸습니다" in opening and "접수 상태입니다" in opening, opening
        await signed_post(bot, f"/twilio/callback/status?id={human}", form(human, CallStatus="completed"))
        row = store.find_callback(callback_id=human)
        assert row["status"] == "done" and row["answered_by"] == "human" and row["attempts"] == 1

        # Nobody answers: tried again later (callbacks.retry_after_secs), then, max_attempts = 2, unreachable.
        await signed_post(bot, f"/twilio/callback/status?id={nobody}", form(nobody, CallStatus="no-answer"))
        assert store.find_callback(callback_id=nobody)["status"] == "waiting"
        from bot.store.schema import callbacks

        with store.engine.begin() as conn:  # the hour has passed
            conn.execute(callbacks.update().where(callbacks.c.id == nobody).values(call_after=callbacks.c.requested_at))
        assert "1 of 1 due callback(s) placed" in place_callbacks(bot, twilio)
        sid[nobody] = twilio.placed[-1]["sid"]
        await signed_post(bot, f"/twilio/callback/status?id={nobody}", form(nobody, CallStatus="busy"))
        row = store.find_callback(callback_id=nobody)
        assert row["status"] == "unreachable" and row["attempts"] == 2 and row["answered_by"] == "busy"
        print("\ncalls the fake Twilio received:", json.dumps(twilio.placed, ensure_ascii=False, indent=1),
              "\ncall updates:", json.dumps(twilio.hangups, ensure_ascii=False, indent=1))
    finally:
        store.close()
