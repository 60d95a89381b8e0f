// QA page: a WebRTC call to the same bot that answers the phone (bot/transports/webrtc.py).
// Plain browser APIs only (RTCPeerConnection, WebAudio); no CDN, works offline.
// State for tests and debugging is on window.qa.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  const STATUS_LABELS = {
    idle: "대기 중",
    connecting: "연결 중…",
    connected: "통화 중",
    ended: "통화 종료",
    failed: "연결 실패",
  };
  const ROUTE_LABELS = {
    greeting: "인사말",
    shortcut: "즉답 규칙",
    llm: "LLM",
    error: "오류",
    pending: "처리 중",
    no_reply: "응답 없음",
    rejected: "거부",
  };
  const STAGE_LABELS = {
    endpointing: "끝점 검출",
    stt: "STT",
    llm_first_token: "첫 토큰",
    llm: "LLM",
    tts: "TTS",
    transport: "전송",
  };
  // What the speaking line says after each of RTVI's speaking events.
  const SPEAKING_LABELS = {
    "bot-started-speaking": "● 봇 말하는 중",
    "bot-stopped-speaking": "",
    "user-started-speaking": "● 민원인 말하는 중",
    "user-stopped-speaking": "… 답변 준비 중",
  };

  const qa = (window.qa = {
    state: "idle",
    callId: null,
    pcId: null,
    botRms: 0,
    botPeakRms: 0,
    micRms: 0,
    micPeakRms: 0,
    transcripts: [],
    replies: [],
    turns: {},
    messages: [],
    error: null,
  });

  let pc = null;
  let dc = null;
  let micStream = null;
  let audioCtx = null;
  let meterTimer = null;
  let pendingCandidates = [];
  let botAnalyser = null;
  let micAnalyser = null;

  function setState(state, detail) {
    qa.state = state;
    const el = $("status");
    el.dataset.state = state;
    el.textContent = STATUS_LABELS[state] + (detail ? ` (${detail})` : "");
    const live = state === "connecting" || state === "connected";
    $("connect").disabled = live;
    $("hangup").disabled = !live;
    if (!live) $("speaking").textContent = "";
  }

  function resetView() {
    $("log").replaceChildren();
    $("turns").tBodies[0].replaceChildren();
    $("call-id").textContent = "-";
    Object.assign(qa, {
      callId: null, pcId: null, botRms: 0, botPeakRms: 0, micRms: 0, micPeakRms: 0,
      transcripts: [], replies: [], turns: {}, messages: [], error: null,
    });
  }

  // --- connection -------------------------------------------------------------------------

  async function connect() {
    resetView();
    setState("connecting");
    try {
      micStream = await navigator.mediaDevices.getUserMedia({
        // Echo cancellation matters: without it the bot hears itself and interrupts itself.
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
        video: false,
      });
      audioCtx = new AudioContext();
      micAnalyser = analyserFor(micStream);

      pc = new RTCPeerConnection(); // host candidates only, like the server
      // Transceiver 0 must be audio: Pipecat reads the caller's audio from the first one.
      pc.addTransceiver(micStream.getAudioTracks()[0], { direction: "sendrecv", streams: [micStream] });
      dc = pc.createDataChannel("chat", { ordered: true });
      dc.onmessage = (event) => onMessage(event.data);
      pc.ontrack = onRemoteTrack;
      pc.onicecandidate = (event) => {
        if (event.candidate && event.candidate.candidate) {
          pendingCandidates.push(event.candidate);
          flushCandidates();
        }
      };
      pc.onconnectionstatechange = () => {
        if (!pc) return;
        const s = pc.connectionState;
        if (s === "connected") setState("connected");
        else if (s === "failed") teardown("failed", "ICE/DTLS 실패");
        else if (s === "closed") teardown("ended");
      };

      await pc.setLocalDescription(await pc.createOffer());
      const resp = await fetch("/api/offer", {
        method: "POST",
        headers: apiHeaders(),
        body: JSON.stringify({ sdp: pc.localDescription.sdp, type: pc.localDescription.type }),
      });
      if (!resp.ok) {
        const reason = resp.status === 503 ? "통화 수 한도 초과"
          : resp.status === 401 ? "QA 토큰이 필요합니다 (QA 토큰 칸에 입력)" : `HTTP ${resp.status}`;
        throw new Error(reason);
      }
      const answer = await resp.json();
      qa.pcId = answer.pc_id;
      await pc.setRemoteDescription({ type: answer.type, sdp: answer.sdp });
      flushCandidates();
      startMeters();
    } catch (err) {
      qa.error = String(err && err.message ? err.message : err);
      console.error("QA connect failed", err);
      teardown("failed", qa.error);
    }
  }

  // The server may require a QA token (env QA_ACCESS_TOKEN): typed into the page, sent as a
  // header, never put in the URL (browser history, proxy logs) nor stored by the page.
  function apiHeaders() {
    const headers = { "Content-Type": "application/json" };
    const token = $("token").value.trim();
    if (token) headers["Authorization"] = `Bearer ${token}`;
    return headers;
  }

  // Trickle ICE: our candidates go to PATCH /api/offer once the server told us its pc_id.
  async function flushCandidates() {
    if (!qa.pcId || pendingCandidates.length === 0) return;
    const batch = pendingCandidates.splice(0);
    try {
      await fetch("/api/offer", {
        method: "PATCH",
        headers: apiHeaders(),
        body: JSON.stringify({
          pc_id: qa.pcId,
          candidates: batch.map((c) => ({
            candidate: c.candidate,
            sdp_mid: c.sdpMid,
            sdp_mline_index: c.sdpMLineIndex,
          })),
        }),
      });
    } catch (err) {
      console.warn("ICE candidate patch failed", err);
    }
  }

  function hangup() {
    teardown("ended");
  }

  function teardown(state, detail) {
    if (meterTimer) clearInterval(meterTimer);
    meterTimer = null;
    if (pc) {
      const closing = pc;
      pc = null;
      closing.onconnectionstatechange = null;
      try { closing.close(); } catch (_) { /* already closed */ }
    }
    dc = null;
    if (micStream) micStream.getTracks().forEach((t) => t.stop());
    micStream = null;
    if (audioCtx) audioCtx.close().catch(() => {});
    audioCtx = null;
    botAnalyser = micAnalyser = null;
    pendingCandidates = [];
    $("bot-audio").srcObject = null;
    $("mic-level").value = 0;
    $("bot-level").value = 0;
    setState(state, detail);
  }

  // --- audio --------------------------------------------------------------------------------

  function analyserFor(stream) {
    const analyser = audioCtx.createAnalyser();
    analyser.fftSize = 2048;
    audioCtx.createMediaStreamSource(stream).connect(analyser);
    return analyser;
  }

  function rms(analyser) {
    if (!analyser) return 0;
    const buf = new Float32Array(analyser.fftSize);
    analyser.getFloatTimeDomainData(buf);
    let sum = 0;
    for (const v of buf) sum += v * v;
    return Math.sqrt(sum / buf.length);
  }

  function onRemoteTrack(event) {
    if (event.track.kind !== "audio") return;
    const stream = event.streams[0] || new MediaStream([event.track]);
    const audio = $("bot-audio");
    audio.srcObject = stream; // Chrome only feeds remote WebRTC audio to WebAudio while it plays
    audio.play().catch(() => {});
    if (audioCtx) botAnalyser = analyserFor(stream);
  }

  function startMeters() {
    if (meterTimer) clearInterval(meterTimer);
    meterTimer = setInterval(() => {
      qa.botRms = rms(botAnalyser);
      qa.micRms = rms(micAnalyser);
      qa.botPeakRms = Math.max(qa.botPeakRms, qa.botRms);
      qa.micPeakRms = Math.max(qa.micPeakRms, qa.micRms);
      $("bot-level").value = qa.botRms;
      $("mic-level").value = qa.micRms;
    }, 50);
  }

  // Bytes and audio energy received, from WebRTC stats (for tests and troubleshooting).
  qa.inboundAudio = async () => {
    if (!pc) return null;
    const stats = await pc.getStats();
    for (const s of stats.values()) {
      if (s.type === "inbound-rtp" && s.kind === "audio") {
        return { bytesReceived: s.bytesReceived, totalAudioEnergy: s.totalAudioEnergy, packetsReceived: s.packetsReceived };
      }
    }
    return null;
  };

  // --- messages from the bot -----------------------------------------------------------------

  function onMessage(raw) {
    let msg;
    try {
      msg = JSON.parse(raw);
    } catch (_) {
      return;
    }
    if (qa.messages.length < 2000) qa.messages.push(msg);
    if (msg.type === "signalling") {
      if (msg.message && msg.message.type === "peerLeft") teardown("ended", "봇이 통화를 종료함");
      return;
    }
    if (msg.label !== "rtvi-ai") return;
    if (msg.type === "server-message") {
      if (msg.data && msg.data.qa) onQA(msg.data);
    } else if (Object.hasOwn(SPEAKING_LABELS, msg.type)) {
      $("speaking").textContent = SPEAKING_LABELS[msg.type];
    }
  }

  function onQA(d) {
    switch (d.qa) {
      case "call":
        qa.callId = d.call_id;
        $("call-id").textContent = d.call_id;
        break;
      case "transcript":
        qa.transcripts.push(d.text);
        addLog("caller", d.text, d.turn);
        break;
      case "reply":
        qa.replies.push(d.text);
        addLog("bot", d.text, d.turn);
        break;
      case "turn":
        qa.turns[d.turn] = d;
        upsertTurn(d);
        break;
    }
  }

  function addLog(who, text, turn) {
    const li = document.createElement("li");
    li.className = `msg ${who}`;
    li.dataset.turn = turn;
    const label = document.createElement("span");
    label.className = "who";
    label.textContent = who === "caller" ? "민원인" : "봇";
    const body = document.createElement("span");
    body.className = "text";
    body.textContent = text;
    li.append(label, body);
    const log = $("log");
    log.append(li);
    log.scrollTop = log.scrollHeight;
  }

  function fmtMs(ms) {
    return ms === null || ms === undefined ? "-" : `${Math.round(ms).toLocaleString("ko-KR")} ms`;
  }

  function upsertTurn(d) {
    const tbody = $("turns").tBodies[0];
    let row = document.getElementById(`turn-${d.turn}`);
    if (!row) {
      row = document.createElement("tr");
      row.id = `turn-${d.turn}`;
      for (let i = 0; i < 7; i++) row.append(document.createElement("td"));
      tbody.append(row);
    }
    row.dataset.route = d.route;
    row.classList.toggle("interrupted", !!d.interrupted);
    const slots = Object.entries(d.slots || {})
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
      .join(", ");
    let stages = Object.entries(d.stages_ms || {})
      .filter(([k]) => k !== "voice_to_voice")
      .map(([k, v]) => `${STAGE_LABELS[k] || k} ${Math.round(v)}`)
      .join(" · ");
    const endpoint = d.record && d.record.endpoint_kind;
    if (endpoint) stages += ` · 끝점 판정 ${endpoint}`;
    const cells = row.cells;
    cells[0].textContent = d.turn;
    cells[1].textContent = (ROUTE_LABELS[d.route] || d.route) + (d.interrupted ? " (끊김)" : "");
    cells[1].title = d.error ? `${d.route}: ${d.error}` : d.route;
    cells[1].className = "route";
    cells[2].textContent = d.intent || "-";
    cells[3].textContent = d.flow || "-";
    cells[4].textContent = slots || "-";
    cells[5].textContent = fmtMs(d.voice_to_voice_ms);
    cells[5].className = "v2v";
    cells[6].textContent = stages || "-";
    cells[6].className = "stages";
  }

  $("connect").addEventListener("click", connect);
  $("token").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !$("connect").disabled) connect();
  });
  $("hangup").addEventListener("click", hangup);
  window.addEventListener("pagehide", () => teardown("ended"));
  setState("idle");
})();
