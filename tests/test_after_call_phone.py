"""After the call, end to end (issue 22): a phone complaint is texted its reception number through
the fake Twilio REST API (two 500s first: retried with backoff), a status change texts a notice,
and a transfer to the desk is warm (Twilio fetches the whisper; the person hears the summary).

`python run_bot.py` in its own process, real Whisper base, the fake vLLM, the stand-in TTS, the
`twilio` library against ``FakeTwilioAPI`` (Twilio's form-encoded requests, basic auth, JSON).
"""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest
from twilio.request_validator import RequestValidator

from bot.store.db import Store
from bot.testing.fake_llm import FakeLLM
from bot.testing.process import ROOT, BotProcess, FakeTwilioAPI
from bot.testing.twilio_sim import TwilioCallSimulator, new_sid, parse_twiml_stream, post_voice_webhook, voice_webhook_params
from tests.conftest import offline_bot_overrides
from tests.test_phone_intake import REPORT, model_turn, report, say, wait_for

pytestmark = pytest.mark.slow  # real bot processes over real sockets: not in the quick subset

AUTH_TOKEN = "test-auth-token-after-call"
ACCOUNT_SID = "AC" + "5" * 32
PUBLIC_HOST = "voice.example.org"
PUBLIC_URL = f"https://{PUBLIC_HOST}/twilio/voice"
CALLER = "+821044445555"
FROM = "+827055556666"
DESK = "+8221200000"


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
    proc = BotProcess(
        [*offline_bot_overrides(whisper_dir, standin_tts_dir, fake_llm.base_url, tmp / "records"),
         f"server.public_host='{PUBLIC_HOST}'", f"twilio.api_base_url='{twilio.base_url}'",
         f"call.transfer_number='{DESK}'", 'line.hours=["24/7"]', "line.breaks=[]",
         "sms.enabled=true", f"sms.from_number='{FROM}'", "sms.quiet_hours=''",
         "sms.backoff_secs=0.2", "sms.backoff_max_secs=1.0", "sms.poll_secs=0.2"],
        env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_ACCOUNT_SID": ACCOUNT_SID},
        log_path=tmp / "bot.log",
    )
    try:
        proc.wait_ready()
        proc.records_url = f"sqlite:///{tmp / 'records' / 'calls.db'}"
        yield proc
    finally:
        proc.stop()


async def open_call(bot: BotProcess) -> TwilioCallSimulator:
    call_sid = new_sid("CA")
    params = voice_webhook_params(call_sid, account_sid=ACCOUNT_SID)
    params["From"] = CALLER
    resp = await post_voice_webhook(bot.base_url, PUBLIC_URL, params, AUTH_TOKEN)
    assert resp.status_code == 200, resp.text
    _, stream_params = parse_twiml_stream(resp.text)
    return TwilioCallSimulator(bot.ws_url, call_sid=call_sid, custom_parameters=stream_params, account_sid=ACCOUNT_SID)


async def test_a_phone_ticket_is_texted_retried_after_500s_and_its_status_change_too(bot, fake_llm, twilio):
    fake_llm.reset()
    twilio.reset()
    twilio.fail_next(2, 500)  # Twilio is having a bad moment: the first two sends fail
    call = await open_call(bot)
    async with call:
        await report(call, fake_llm, "중앙로 12번길")
        t = time.monotonic()
        await call.send_dtmf("1")  # yes to the read-back: the ticket
        await call.wait_for_media(timeout=30, after=t)
        await call.wait_for_silence_from_bot(gap=0.8, timeout=40)
        await call.stop()
    store = Store(bot.records_url)
    try:
        (ticket,) = store.list_tickets()
        number = ticket["reception_no"]
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
    finally:
        store.close()


async def test_a_transfer_to_the_desk_is_warm(bot, fake_llm, twilio):
    fake_llm.reset()
    twilio.reset()
    fake_llm.script(model_turn("불편을 드려 죄송합니다. 위치를 말씀해 주시겠어요?", location="시청앞 사거리"))
    fake_llm.script({"reply": "상담원에게 연결해 드리겠습니다.", "intent": "transfer", "category": "none",
                     "location": None, "time": None, "flow": "continue"})
    call = await open_call(bot)
    async with call:
        await call.wait_for_media(timeout=20)
        await call.wait_for_silence_from_bot(gap=0.6, timeout=30)
        await say(call, REPORT)
        await call.send_wav(REPORT)
        await call.wait_closed(timeout=40)
    (update,) = [h for h in twilio.hangups if call.call_sid in h["path"]]
    twiml = update["form"]["Twiml"]
    whisper_url = f"https://{PUBLIC_HOST}/twilio/whisper?call={call.call_sid}"
    assert f'<Number method="POST" url="{whisper_url}">{DESK}</Number>' in twiml

    # The desk answers: Twilio posts (signed) to the whisper URL for what to play them first.
    form = {"AccountSid": ACCOUNT_SID, "CallSid": new_sid("CA"), "ParentCallSid": call.call_sid,
            "CallStatus": "in-progress", "Direction": "outbound-dial", "To": DESK}
    signature = RequestValidator(AUTH_TOKEN).compute_signature(whisper_url, form)
    local = f"{bot.base_url}/twilio/whisper?call={call.call_sid}"
    async with httpx.AsyncClient() as client:
        resp = await client.post(local, data=form, headers={"X-Twilio-Signature": signature})
        forged = await client.post(local, data=form, headers={"X-Twilio-Signature": "forged"})
    assert resp.status_code == 200 and forged.status_code == 403
    assert '<Say language="ko-KR">민원 안내 전화에서 연결된 통화입니다.' in resp.text
    assert "가로등" in resp.text and "시청앞 사거리" in resp.text
