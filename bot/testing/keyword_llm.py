"""A keyword stand-in for the model, for the fake LLM server: eval turns get sensible answers.

``FakeLLM(responder=keyword_responder)`` (or ``python -m bot.testing.fake_llm --responder keyword``)
answers a dialog turn with an intent, category and slots guessed from Korean keywords in the
caller's last line, and a judge request (a schema with a ``score``) with a fixed score. It exists
so that ``run_bot.py eval --fake-llm`` exercises every path of the evaluation (accuracy, slots,
judge) without a model. Its accuracy says nothing about any model.
"""

from __future__ import annotations

import re
from typing import Any

from bot.testing.responders import default_responder, schema_of

# (pattern, category); first match wins.
_CATEGORIES: tuple[tuple[str, str], ...] = (
    (r"주차|견인|차를 (?:세워|대)|차가 (?:서|막)", "illegal_parking"),
    (r"가로등|보안등", "street_lights"),
    (r"포트홀|도로|보도블록|인도|파였|파인|움푹|신호등", "roads"),
    (r"소음|시끄|층간|공사 소리|쿵쿵", "noise"),
    (r"쓰레기|폐기물|수거|재활용|분리배출|무단 ?투기|음식물", "waste"),
    (r"하수|맨홀|악취|역류|냄새", "sewage"),
    (r"수도|누수|단수|물이 안|수돗물|물이 새", "water"),
    (r"등본|초본|증명서|인감|발급|서류|여권", "certificates"),
    (r"복지|지원금|수당|기초생활|장애인|노인|어르신|바우처|급여", "welfare"),
    (r"버스|노선|배차|정류장|교통카드|지하철|마을버스", "transport"),
    (r"시청|운영 ?시간|몇 시까지|전화번호|주소|위치가 어디|부서|민원실", "general_info"),
)
_INTENTS: tuple[tuple[str, str], ...] = (
    (r"상담원|직원|담당자|사람(?:이랑|하고|과)", "transfer"),
    (r"처리|진행 ?상황|어떻게 됐|접수(?:한|했던|된) ?(?:거|건)|결과", "check_status"),
    (r"다시 (?:말|한 번)|못 들었|뭐라고", "repeat"),
    (r"감사합니다|고맙습니다|수고하세요|안녕히|끊을게요|됐어요|됐습니다", "thanks_goodbye"),
)
_REPORT = r"신고|고장|위험|안 되고|못 자|너무 길|깨져|꺼져|꺼졌|파였|파인|안 나와|새요|새고|막혔|넘쳐|시끄|방치|버리고 갔|불법|깜빡|부서졌|망가|안 와요|안 가져|냄새|역류"
_DOCUMENT = r"등본|초본|증명서|인감|발급|떼"
_GREETING = r"^(?:여보세요|안녕하세요)[ ?.!]*$"
_LOCATION = re.compile(
    r"((?:[가-힣0-9]+ ?)?[가-힣0-9]+(?:역|동|로|길|아파트|공원|사거리|삼거리|시장|학교|초등학교|센터|주민센터|마트|빌라|정류장|"
    r"골목|다리|교|병원|도서관|터미널|주차장|놀이터|단지)(?: ?\d+번 ?(?:출구|길|게이트|동))?(?: ?(?:앞|근처|옆|뒤|건너편|입구))?)"
)
_TIME = re.compile(
    r"((?:오늘|어제|어젯밤|그제|그저께|내일|모레|지난주|이번 주|주말|매일|아침|저녁|밤|새벽|오전|오후|낮)"
    r"(?: ?(?:아침|저녁|밤|새벽|오전|오후))?(?: ?\d+시(?: ?\d+분| ?반)?)?(?: ?(?:쯤|경|부터|께))?"
    r"|\d+시(?: ?\d+분| ?반)?(?: ?(?:쯤|경|부터|께))?|\d+일(?: ?(?:쯤|경|부터))?)"
)
_LABELS = {"illegal_parking": "불법 주차", "street_lights": "가로등", "roads": "도로", "noise": "소음",
           "waste": "쓰레기 수거", "sewage": "하수도", "water": "상수도", "certificates": "서류 발급",
           "welfare": "복지", "transport": "대중교통", "general_info": "안내", "none": "문의"}  # fmt: skip


def _user_lines(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body.get("messages") or []
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)]


def classify(text: str) -> dict[str, Any]:
    """intent, category, location, time and flow guessed from keywords."""
    category = next((c for p, c in _CATEGORIES if re.search(p, text)), "none")
    intent = next((i for p, i in _INTENTS if re.search(p, text)), None)
    if intent is None:
        if re.search(_GREETING, text.strip()):
            intent = "greeting"
        elif re.search(_DOCUMENT, text):
            intent = "request_document"
        elif re.search(_REPORT, text):
            intent = "report_problem"
        elif category != "none" or re.search(r"어떻게|언제|어디|얼마|몇|알려|문의|궁금|되나요|있나요|\?", text):
            intent = "ask_info"
        else:
            intent = "other"
    if intent in ("greeting", "thanks_goodbye", "repeat", "transfer"):
        category = "none" if intent != "transfer" else category
    loc = _LOCATION.search(text)
    tm = _TIME.search(text)
    flow = "end" if intent == "thanks_goodbye" else "continue"
    if re.search(r"^(?:아 )?(?:그리고|그런데|참|아 참|다른 건데|또)", text.strip()):
        flow = "new_topic"
    return {"intent": intent, "category": category, "location": loc.group(1).strip() if loc else None,
            "time": tm.group(1).strip() if tm else None, "flow": flow}  # fmt: skip


def keyword_responder(body: dict[str, Any]) -> dict[str, Any]:
    """The fake's answer: a judgement for a judge request, else a turn guessed from keywords."""
    schema = schema_of(body) or {}
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if "score" in props:
        return {"score": 4, "reason": "키워드 응답기: 점수는 의미 없음"}
    if "reply" not in props:
        return default_responder(body)
    lines = _user_lines(body)
    guess = classify(lines[-1] if lines else "")
    # A follow-up ("시청역 앞이에요") keeps the topic of the caller's earlier words.
    for earlier in reversed(lines[:-1]):
        prev = classify(earlier)
        if prev["intent"] in ("greeting", "thanks_goodbye", "repeat", "other"):
            continue
        if guess["intent"] == "other" or (guess["intent"] == "ask_info" and guess["category"] == "none"
                                          and prev["intent"] != "ask_info"):
            guess["intent"] = prev["intent"]
        if guess["category"] == "none" and guess["intent"] not in ("thanks_goodbye", "greeting", "repeat"):
            guess["category"] = prev["category"]
        break
    if guess["intent"] == "thanks_goodbye":
        reply = "이용해 주셔서 감사합니다. 좋은 하루 보내세요."
    elif guess["intent"] == "report_problem" and not guess["location"]:
        reply = f"{_LABELS[guess['category']]} 신고 접수해 드릴게요. 위치를 말씀해 주시겠어요?"
    else:
        reply = f"네, {_LABELS[guess['category']]} 관련해서 안내해 드리겠습니다."
    turn = {"emergency": "none", "reply": reply, **guess}  # a keyword guesser never flags an emergency
    for name, spec in props.items():  # anything else the schema asks for (e.g. answer_source): "none" or the first
        enum = spec.get("enum") if isinstance(spec, dict) else None
        if name not in turn and isinstance(enum, list) and enum:
            turn[name] = "none" if "none" in enum else enum[0]
    max_len = (props.get("reply") or {}).get("maxLength")
    if isinstance(max_len, int):
        turn["reply"] = turn["reply"][:max_len]
    return {k: turn[k] for k in props if k in turn}
