"""Issue 46: when no worker answers at all, the number's fallback URL is served by the proxy itself.

deploy/nginx.conf's ``location = /twilio/fallback`` in a real nginx (the lab's configuration renders
the same TwiML), with no worker behind it: the voice webhook fails (502, what makes Twilio ask the
fallback URL), and the fallback answers a signed-or-not POST with TwiML that apologises and dials the
duty line, never silence.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx
import pytest

from bot.testing.nginx import NginxProxy, deploy_fallback_twiml, nginx_binary
from bot.testing.process import free_port
from bot.testing.twilio_sim import voice_webhook_params


@pytest.fixture(scope="module")
def proxy():
    if nginx_binary() is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    with NginxProxy([free_port()]) as proxy:  # nothing listens there: every worker is gone
        yield proxy


def test_the_deployed_fallback_apologises_in_korean_and_dials_the_duty_line():
    root = ET.fromstring(deploy_fallback_twiml())
    assert [verb.tag for verb in root] == ["Say", "Dial"]
    say, dial = root
    assert say.get("language") == "ko-KR" and "죄송합니다" in say.text
    assert dial.text.startswith("+82")


def test_with_no_worker_the_webhook_fails_and_the_fallback_url_answers_from_the_proxy(proxy):
    params = voice_webhook_params()
    failed = httpx.post(f"{proxy.base_url}/twilio/voice", data=params, timeout=10)
    assert failed.status_code == 502  # Twilio's cue (error 11205) to request the number's fallback URL
    fallback = httpx.post(f"{proxy.base_url}/twilio/fallback", data=params, timeout=10)
    assert fallback.status_code == 200 and fallback.headers["content-type"].startswith("application/xml")
    assert fallback.text == deploy_fallback_twiml()
