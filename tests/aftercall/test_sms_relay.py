"""Texts from the city's own number through a domestic relay (issue 47): NAVER Cloud SENS's SMS API
against an in-process fake that checks its signature, the outbox's retries and the carrier's delivery
reports through it, and the sms.provider keys. SQLite and a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from bot.aftercall.notify import Outbox, SmsTexts
from bot.aftercall.sens_api import SensAPI, SensAPIError, domestic_number, signature, sms_content
from bot.aftercall.sms_sender import SensSender, TwilioSender, sms_sender
from bot.config import ConfigError, Secrets, load_config
from bot.store.db import Store
from bot.testing.fake_sens import FakeSens
from tests.aftercall.test_after_call import CALLER, drain, open_store, ticket_from_call

ACCESS = "ncp_iam_BPAMKR1a2b3c4d5e6f7g"
SECRET = "ncp_iam_BPKMKRsecret0123456789abcdef"
SERVICE = "ncp:sms:kr:123456789012:hanbit"
SENDER = "0212345678"  # the city's number, registered with the relay


@pytest.fixture()
def fake():
    return FakeSens(access_key=ACCESS, secret_key=SECRET, service_id=SERVICE, registered=(SENDER,))


def api_for(fake: FakeSens, secret: str = SECRET, **kw) -> SensAPI:
    return SensAPI(access_key=ACCESS, secret_key=secret, service_id=SERVICE, base_url=fake.base_url,
                   transport=fake.transport(), **kw)


# --- the client and the fake's gateway ----------------------------------------------------------


async def test_a_text_leaves_from_the_registered_number_with_a_signature_the_relay_accepts(fake):
    api = api_for(fake)
    request_id = await api.send_sms(to=CALLER, from_=SENDER, body="[한빛시청] 접수번호 20260001")
    (sent,) = fake.messages
    assert sent["requestId"] == request_id and request_id.startswith("RSSA-")
    assert (sent["from"], sent["to"], sent["type"]) == (SENDER, "01055556666", "SMS")
    assert sent["content"] == "[한빛시청] 접수번호 20260001"
    assert fake.requests[-1] == {"method": "POST", "path": f"/sms/v2/services/{SERVICE}/messages", "status": 202}

    (message_id,) = await api.message_ids(request_id)
    result = await api.result(message_id)
    assert result.delivered is True and result.status == "COMPLETED" and result.status_code == "0"
    assert result.request_time is not None and result.request_time.tzinfo is not None
    assert [r["path"] for r in fake.requests[1:]] == [f"/sms/v2/services/{SERVICE}/messages?requestId={request_id}",
                                                      f"/sms/v2/services/{SERVICE}/messages/{message_id}"]


async def test_the_fake_refuses_a_bad_signature_with_the_gateways_error(fake):
    path = f"/sms/v2/services/{SERVICE}/messages"
    body = {"type": "SMS", "from": SENDER, "content": "x", "messages": [{"to": "01055556666"}]}

    async def post(stamp: str, sig: str, key: str = ACCESS) -> httpx.Response:
        async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.base_url) as client:
            return await client.post(path, json=body, headers={"x-ncp-apigw-timestamp": stamp,
                                                               "x-ncp-iam-access-key": key,
                                                               "x-ncp-apigw-signature-v2": sig})

    now = str(int(time.time() * 1000))
    assert (await post(now, signature("POST", path, now, ACCESS, SECRET))).status_code == 202
    refusals = [
        (now, signature("POST", path, now, ACCESS, "another-secret")),  # the wrong secret key
        (now, signature("POST", path + "?x=1", now, ACCESS, SECRET)),  # signed for another URL
        (now, signature("GET", path, now, ACCESS, SECRET)),  # signed for another method
        (str(int(now) + 1), signature("POST", path, now, ACCESS, SECRET)),  # the timestamp changed
        (str(int(now) - 6 * 60 * 1000), signature("POST", path, str(int(now) - 6 * 60 * 1000), ACCESS, SECRET)),  # stale
        (now, ""),
    ]
    for stamp, sig in refusals:
        response = await post(stamp, sig)
        assert response.status_code == 401, (stamp, sig)
        assert response.json()["error"]["errorCode"] == "200"
        assert response.json()["error"]["message"] == "Authentication Failed"
    assert (await post(now, signature("POST", path, now, "someone-else", SECRET), key="someone-else")).status_code == 401
    assert len(fake.messages) == 1  # only the signed request was taken

    # The client with the wrong secret key: refused, and a retry would not help.
    with pytest.raises(SensAPIError) as err:
        await api_for(fake, "wrong-secret").send_sms(to=CALLER, from_=SENDER, body="x")
    assert err.value.status == 401 and err.value.code == "200" and not err.value.retryable
    assert "Authentication Failed" in str(err.value)
    # A clock 6 minutes off is refused the same way.
    with pytest.raises(SensAPIError) as err:
        await api_for(fake, clock=lambda: time.time() - 360).send_sms(to=CALLER, from_=SENDER, body="x")
    assert err.value.status == 401 and "timestamp" in str(err.value)


async def test_relay_errors_say_what_may_be_retried(fake):
    api = api_for(fake)
    for status, code in [(500, "900"), (503, "500"), (504, "510"), (429, "410")]:
        fake.fail_next(1, status)
        with pytest.raises(SensAPIError) as err:
            await api.send_sms(to=CALLER, from_=SENDER, body="x")
        assert err.value.retryable and err.value.status == status and err.value.code == code, status
        assert f"HTTP {status} (code {code})" in str(err.value)
    with pytest.raises(SensAPIError) as err:  # a number the project never registered: SENS's 400
        await api.send_sms(to=CALLER, from_=SENDER.replace("02", "03"), body="x")
    assert err.value.status == 400 and not err.value.retryable and "registered" in str(err.value)
    with pytest.raises(SensAPIError) as err:  # the service id of another project: 404, not retried
        await SensAPI(access_key=ACCESS, secret_key=SECRET, service_id=SERVICE + "x", base_url=fake.base_url,
                      transport=fake.transport()).send_sms(to=CALLER, from_=SENDER, body="x")
    assert err.value.status == 404 and not err.value.retryable
    with pytest.raises(SensAPIError) as err:  # nothing listens: may go later
        await SensAPI(access_key=ACCESS, secret_key=SECRET, service_id=SERVICE,
                      base_url="http://127.0.0.1:9").send_sms(to=CALLER, from_=SENDER, body="x")
    assert err.value.retryable and err.value.status is None
    with pytest.raises(SensAPIError) as err:  # a caller abroad: the domestic relay cannot text them
        await api.send_sms(to="+14155550100", from_=SENDER, body="x")
    assert not err.value.retryable and "+1415" not in str(err.value)
    assert fake.messages == []


def test_texts_fit_the_relays_encoding_and_length():
    assert sms_content("[한빛시청] 접수번호 20260001") == ("SMS", "[한빛시청] 접수번호 20260001")
    kind, _ = sms_content("가" * 46)  # 92 bytes of EUC-KR: past one SMS
    assert kind == "LMS"
    assert sms_content("Đã tiếp nhận phản ánh")[1] == "Da tiep nhan phan anh"  # EUC-KR has no Vietnamese marks
    with pytest.raises(ValueError, match="EUC-KR"):
        sms_content("접수되었습니다 🙂")
    with pytest.raises(ValueError, match="2000"):
        sms_content("가" * 1001)
    assert domestic_number("+821055556666") == "01055556666" and domestic_number("+8221234567") == "021234567"
    # Every language's texts, with a long location, go through the relay.
    texts = SmsTexts.load(load_config(None, ["line.languages=['ko','en','ru','vi']"]))
    for code in ("ko", "en", "ru", "vi"):
        for kind in ("ticket", "status"):
            body = texts.render(kind, number="20260001", category="street_lights", status="done",
                                location="중앙로 12번길 34 한빛아파트 앞 사거리", language=code)
            sms_content(body)  # a ValueError if the relay could not carry it


# --- the outbox through the relay -----------------------------------------------------------------


def sens_config(*extra: str):
    return load_config(None, ["sms.enabled=true", "sms.provider='sens'", f"sms.sender_number='{SENDER}'",
                              f"sms.sens_service_id='{SERVICE}'", "sms.backoff_secs=0.05", "sms.backoff_max_secs=0.2",
                              "sms.max_attempts=3", "sms.quiet_hours=''", "sms.report_poll_secs=0.05", *extra])


def outbox_for(fake: FakeSens, store: Store, config, api: SensAPI | None = None) -> Outbox:
    return Outbox(store=store, sender=SensSender(api or api_for(fake), sender_number=config.sms.sender_number),
                  config=config, worker="w")


async def test_a_follow_up_text_goes_through_the_relay_after_its_errors_and_is_delivered(db_url, fake):
    config = sens_config()
    store = open_store(db_url, config)
    outbox = outbox_for(fake, store, config)
    number = ticket_from_call(store)
    fake.fail_next(2, 500)

    await outbox.send_due()  # a 500: retried later, shown as Twilio's are
    (row,) = store.list_outbox(number)
    assert row["status"] == "pending" and row["attempts"] == 1 and row["message_sid"] is None
    assert row["last_error"].startswith("SMS to +82********66: HTTP 500 (code 900): Unexpected Error")  # masked

    (row,) = await drain(outbox, store, number)
    assert row["status"] == "sent" and row["attempts"] == 3 and row["message_sid"].startswith("RSSA-")
    (sms,) = fake.messages
    assert sms["from"] == SENDER and sms["to"] == "01055556666" and number in sms["content"]
    assert sms["type"] == "LMS" and sms["content"] == row["body"]  # the ticket text is past 90 bytes
    assert [(r["method"], r["status"]) for r in fake.requests] == [
        ("POST", 500), ("POST", 500), ("POST", 202), ("GET", 200), ("GET", 200)]  # then the carrier's report
    assert store.find_ticket(number)["sms_status"] == "sent"
    assert await outbox.send_due() == 0 and len(fake.messages) == 1  # sent once, never again


async def test_an_undelivered_text_fails_with_the_carriers_words(db_url, fake):
    config = sens_config()
    store = open_store(db_url, config)
    outbox = outbox_for(fake, store, config)
    number = ticket_from_call(store)
    fake.report_next("fail", code="E0031", message="수신 거부")
    (row,) = await drain(outbox, store, number)
    assert row["status"] == "failed" and row["attempts"] == 1  # taken once; the carrier's no is final
    assert row["last_error"] == "SENS: not delivered (statusCode E0031: 수신 거부)"
    assert store.find_ticket(number)["sms_status"] == "failed" and outbox.failed == 1


async def test_a_text_under_way_waits_for_its_report_and_is_never_sent_twice(db_url, fake):
    config = sens_config()
    store = open_store(db_url, config)
    outbox = outbox_for(fake, store, config)
    number = ticket_from_call(store)
    fake.report_next("waiting")
    deadline = time.monotonic() + 10
    while len([r for r in fake.requests if r["method"] == "GET"]) < 4 and time.monotonic() < deadline:
        await outbox.send_due()
        await asyncio.sleep(0.05)
    (row,) = store.list_outbox(number)
    assert row["status"] == "pending" and row["attempts"] == 1 and row["message_sid"]
    assert store.find_ticket(number)["sms_status"] == "pending" and len(fake.messages) == 1

    fake.complete(fake.messages[0]["messageId"])  # the carrier answers
    (row,) = await drain(outbox, store, number)
    assert row["status"] == "sent" and row["attempts"] == 1 and row["last_error"] is None
    assert len(fake.messages) == 1 and store.find_ticket(number)["sms_status"] == "sent"

    # No report within sms.report_wait_secs: sent (the relay took it), with that noted.
    config = sens_config("sms.report_wait_secs=0.3")
    later = ticket_from_call(store)
    fake.report_next("waiting")
    (row,) = await drain(outbox_for(fake, store, config), store, later)
    assert row["status"] == "sent" and row["last_error"] == "no delivery report within 0.3 s"
    assert len(fake.messages) == 2


async def test_a_relay_that_refuses_the_key_fails_the_text_at_once(db_url, fake):
    config = sens_config()
    store = open_store(db_url, config)
    number = ticket_from_call(store)
    (row,) = await drain(outbox_for(fake, store, config, api_for(fake, "revoked-secret")), store, number)
    assert row["status"] == "failed" and row["attempts"] == 1 and "HTTP 401 (code 200)" in row["last_error"]
    assert fake.messages == []


# --- choosing the carrier ------------------------------------------------------------------------


def test_the_relays_keys_are_checked_and_named():
    for override, key in [
        ("sms.sender_number=''", "sms.sender_number"),
        ("sms.sender_number='+8221234567'", "sms.sender_number"),  # a registered number is domestic digits
        ("sms.sender_number='02-1234-5678'", "sms.sender_number"),
        ("sms.sens_service_id='hanbit'", "sms.sens_service_id"),
        ("sms.sens_api_url='sens.apigw.ntruss.com'", "sms.sens_api_url"),
        ("sms.report_poll_secs=0", "sms.report_poll_secs"),
        ("sms.provider='kt'", "sms.provider"),
        ("sms.ncloud_secret_key='x'", "sms.ncloud_secret_key"),  # secrets never live in the config
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            sens_config(override)
    config = sens_config()  # the relay needs no Twilio number
    assert config.sms.provider == "sens" and config.sms.from_number == ""
    with pytest.raises(ConfigError, match=r"sms\.from_number"):  # Twilio still needs its own
        load_config(None, ["sms.enabled=true", "sms.provider='twilio'", f"sms.sender_number='{SENDER}'"])


def test_the_sender_is_the_one_the_config_names_with_keys_from_the_environment(monkeypatch):
    config = sens_config()
    monkeypatch.delenv("NCLOUD_ACCESS_KEY", raising=False)
    monkeypatch.delenv("NCLOUD_SECRET_KEY", raising=False)
    assert sms_sender(config, Secrets.from_env(config), None) is None  # logged: the texts wait
    monkeypatch.setenv("NCLOUD_ACCESS_KEY", ACCESS)
    monkeypatch.setenv("NCLOUD_SECRET_KEY", SECRET)
    sender = sms_sender(config, Secrets.from_env(config), None)
    assert isinstance(sender, SensSender) and sender.reports

    from bot.aftercall.twilio_api import TwilioAPI

    twilio = load_config(None, ["sms.enabled=true", "sms.from_number='+827011112222'"])
    api = TwilioAPI(account_sid="AC" + "3" * 32, auth_token="t")
    sender = sms_sender(twilio, Secrets.from_env(twilio), api)
    assert isinstance(sender, TwilioSender) and not sender.reports
    assert sms_sender(twilio, Secrets.from_env(twilio), None) is None


async def test_the_server_sends_through_the_relay_the_config_names_over_http(tmp_path, monkeypatch):
    from bot.app.context import _after_call_senders
    from bot.store.calls import CallLog

    with FakeSens(access_key=ACCESS, secret_key=SECRET, service_id=SERVICE, registered=(SENDER,)) as fake:
        config = sens_config(f"sms.sens_api_url='{fake.base_url}'")
        monkeypatch.setenv("NCLOUD_ACCESS_KEY", ACCESS)
        monkeypatch.setenv("NCLOUD_SECRET_KEY", SECRET)
        store = open_store(f"sqlite:///{tmp_path / 'calls.db'}", config)
        log = CallLog(store, worker="w")
        try:
            outbox, _ = _after_call_senders(config, Secrets.from_env(config), log, twilio_api=None)  # no Twilio at all
            assert outbox is not None
            number = ticket_from_call(store)
            (row,) = await drain(outbox, store, number)
        finally:
            log.writer.close()
    assert row["status"] == "sent" and fake.messages[0]["from"] == SENDER and fake.messages[0]["to"] == "01055556666"
