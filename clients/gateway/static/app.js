/* agentlane web chat: plain JavaScript, no build step.
 *
 * Auth: every request sends `Authorization: Bearer <token>` (the token is kept in this
 * browser's localStorage). The event stream is read with fetch() and a small SSE parser over
 * its ReadableStream, not with EventSource, because EventSource cannot send that header: the
 * gateway needs no `?access_token=` in URLs (where it would end up in logs and history).
 *
 * Events: the `agentlane` vocabulary (each SSE `data:` is the AgentEvent JSON, `id:` its
 * offset in the session's stream). After a dropped connection the page asks again with
 * `Last-Event-ID: <last id>` and resumes exactly there: nothing missed, nothing twice.
 * Text is rebuilt from each delta's `index` (as clients/api.py MessageView does), so a retried
 * model attempt never shows the same text twice, and `message_reset` drops an abandoned one.
 */
"use strict";

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const state = {
  token: localStorage.getItem("agentlane.token") || "",
  key: "",
  fresh: false, // the session did not exist when opened: its stream is read from offset 0
  stream: null, // the AbortController of the stream being followed
  lastId: null, // the offset of the last event received
  statusTimer: null,
  reader: null, // the current connection's reader
};
let view = newView();

function newView() {
  return { seen: new Set(), messages: new Map(), tools: new Map(), approvals: new Map() };
}

// -- HTTP ------------------------------------------------------------------------------------

function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${state.token}`, ...extra };
}

async function problem(resp) {
  let detail = `${resp.status} ${resp.statusText}`;
  try {
    const body = await resp.json();
    detail = body.detail || body.title || detail;
  } catch (_) {
    /* not a problem document */
  }
  const err = new Error(detail);
  err.status = resp.status;
  return err;
}

async function api(path, options = {}) {
  const headers = authHeaders(options.body ? { "Content-Type": "application/json" } : {});
  const resp = await fetch(path, { ...options, headers });
  if (!resp.ok) throw await problem(resp);
  return resp.json();
}

function showError(err) {
  $("error").textContent = err ? String(err.message || err) : "";
}

// -- rendering -------------------------------------------------------------------------------

function add(cls, text = "") {
  const log = $("log");
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  const el = document.createElement("div");
  el.className = cls;
  el.textContent = text;
  log.appendChild(el);
  if (atBottom) log.scrollTop = log.scrollHeight;
  return el;
}

function note(text, kind = "") {
  return add(`note ${kind}`.trim(), text);
}

function follow(el) {
  const log = $("log");
  if (log.scrollHeight - log.scrollTop - log.clientHeight < 120) log.scrollTop = log.scrollHeight;
  return el;
}

/* Text at `index` of a string: what a delta does (a delta inside what is there changes nothing;
 * a gap means events were missed: padded, as MessageView does). */
function splice(current, index, text) {
  if (index + text.length <= current.length) return current;
  return current.padEnd(index).slice(0, index) + text;
}

function message(mid) {
  let m = view.messages.get(mid);
  if (!m) {
    const reasoning = add("reasoning");
    m = { text: "", reasoning: "", reasoningEl: reasoning, el: add("msg assistant") };
    m.el.dataset.messageId = mid;
    view.messages.set(mid, m);
  }
  return m;
}

function toolBlock(event) {
  let t = view.tools.get(event.tool_call_id);
  if (!t) {
    const el = add("tool");
    el.dataset.toolCallId = event.tool_call_id;
    const head = document.createElement("div");
    head.className = "call";
    const result = document.createElement("div");
    result.className = "result";
    const out = document.createElement("pre");
    el.append(head, out, result);
    t = { el, head, result, out, output: "" };
    view.tools.set(event.tool_call_id, t);
  }
  return t;
}

function inputLine(event) {
  const input = (event.data && event.data.input) || {};
  const detail = String(input.command || input.path || "").split(/\s+/).join(" ").trim();
  return detail.length < 100 ? detail : detail.slice(0, 97) + "…";
}

/* A tool call waiting for a person's yes (`[tools.approval]`): its card, with Approve and Deny
 * buttons while it waits. Shown from the `approval_requested` event, or from the session's
 * status for one that was waiting before the page was opened. */
function approvalCard(a) {
  let card = view.approvals.get(a.id);
  if (card) return card;
  const el = add("approval");
  el.dataset.approvalId = a.id;
  const head = document.createElement("div");
  head.className = "ask";
  const who = a.session_key ? ` (sub-agent ${a.session_key})` : "";
  head.textContent = `⏸ ${a.tool}${who} waits for approval ${a.id}: ${a.args_preview || ""}`;
  const approve = document.createElement("button");
  approve.type = "button";
  approve.className = "approve";
  approve.textContent = "Approve";
  const deny = document.createElement("button");
  deny.type = "button";
  deny.className = "deny";
  deny.textContent = "Deny";
  const outcome = document.createElement("span");
  outcome.className = "outcome";
  el.append(head, approve, deny, outcome);
  card = { el, approve, deny, outcome };
  approve.addEventListener("click", () => decide(a.id, "approve"));
  deny.addEventListener("click", () => decide(a.id, "deny"));
  view.approvals.set(a.id, card);
  follow(el);
  return card;
}

function closeCard(id, outcome, reason) {
  const card = view.approvals.get(id);
  if (!card) return;
  card.approve.disabled = card.deny.disabled = true;
  card.outcome.textContent = `${outcome}${reason ? `: ${reason}` : ""}`;
  card.el.dataset.outcome = outcome;
}

async function decide(id, decision) {
  const card = view.approvals.get(id);
  if (card) card.approve.disabled = card.deny.disabled = true;
  try {
    const r = await api(`/v1/sessions/${enc(state.key)}/approvals/${enc(id)}`, {
      method: "POST",
      body: JSON.stringify({ decision }),
    });
    closeCard(id, r.outcome, r.note);
    showError(null);
  } catch (err) {
    closeCard(id, "refused", err.message);
    showError(err);
  }
  refreshStatus();
}

function render(event) {
  const kind = event.kind;
  const streamed = ["text_delta", "reasoning_delta", "tool_execution_update"].includes(kind);
  if (!streamed) {
    if (view.seen.has(event.event_id)) return; // re-published by a retried step
    view.seen.add(event.event_id);
  }
  switch (kind) {
    case "text_delta": {
      const m = message(event.message_id);
      m.text = splice(m.text, event.index, event.text || "");
      m.el.textContent = m.text;
      follow(m.el);
      break;
    }
    case "reasoning_delta": {
      const m = message(event.message_id);
      m.reasoning = splice(m.reasoning, event.index, event.text || "");
      m.reasoningEl.textContent = m.reasoning;
      follow(m.reasoningEl);
      break;
    }
    case "message_reset": {
      const m = message(event.message_id);
      m.text = "";
      m.el.textContent = "";
      note(`↻ model call made again; its reply restarts`);
      break;
    }
    case "agent_start":
      note(`▶ ${event.run_id} started (${(event.data && event.data.model) || ""})`);
      refreshStatus();
      break;
    case "agent_end": {
      const d = event.data || {};
      note(`■ ${event.run_id} ended: ${event.termination_reason} ` +
        `(${d.total_turns || 0} turns, ${d.duration_ms || 0} ms)`,
        event.termination_reason === "no_tool_calls" ? "" : "warn");
      refreshStatus();
      break;
    }
    case "tool_execution_start": {
      const t = toolBlock(event);
      t.head.textContent = `⚙ ${event.tool_name} ${inputLine(event)}`;
      follow(t.el);
      break;
    }
    case "tool_execution_update": {
      const t = toolBlock(event);
      t.output = splice(t.output, event.index || 0, event.text || "");
      t.out.textContent = t.output;
      break;
    }
    case "tool_execution_end": {
      const t = toolBlock(event);
      if (!t.head.textContent) t.head.textContent = `⚙ ${event.tool_name}`;
      const took = event.duration_ms != null ? ` (${event.duration_ms} ms)` : "";
      t.result.textContent = `${event.success ? "✓" : "✗"} ${event.summary || ""}${took}`;
      t.result.className = `result ${event.success ? "ok" : "failed"}`;
      follow(t.el);
      break;
    }
    case "approval_requested":
      approvalCard(event.data || {});
      break;
    case "approval_decided": {
      const d = event.data || {};
      closeCard(d.id, d.outcome, d.reason);
      break;
    }
    case "warning":
    case "tool_loop":
      note(`⚠ ${event.text || ""}`, "warn");
      break;
    case "error":
      note(`! error: ${event.text || ""}`, "error");
      break;
    case "compaction_start":
      note("⋯ compacting the context");
      break;
    case "compaction_end":
      note(`⋯ compaction: ${(event.data && event.data.outcome) || "done"}`);
      break;
    case "session_reset":
      note(`── reset ── later messages start afresh`);
      break;
    default:
      break; // turn, message start/end, block replies: nothing to show
  }
}

function renderTranscript(entries) {
  for (const e of entries) {
    if (e.role === "user") add("msg user", e.text || "");
    else if (e.role === "assistant") {
      if (e.reasoning) add("reasoning", e.reasoning);
      if (e.text) add("msg assistant", e.text);
      for (const call of e.tool_calls || []) {
        const t = toolBlock({ tool_call_id: call.id });
        t.head.textContent = `⚙ ${call.name} ${inputLine({ data: { input: call.arguments } })}`;
      }
    } else if (e.role === "tool") {
      const t = toolBlock({ tool_call_id: e.tool_call_id });
      const summary = (e.meta && e.meta.summary) || "";
      t.result.textContent = `${e.is_error ? "✗" : "✓"} ${summary}`;
      t.result.className = `result ${e.is_error ? "failed" : "ok"}`;
    } else if (e.role === "reset") note("── reset ──");
    else if (e.role === "compaction") note("── compacted ──");
  }
}

// -- the event stream ------------------------------------------------------------------------

/* Read Server-Sent Events from a fetch() response; returns true when the session's stream
 * ended (`closed`), false when the connection did. */
async function readEvents(resp, signal) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  state.reader = reader;
  signal.addEventListener("abort", () => reader.cancel().catch(() => {}));
  let buf = "";
  let ev = { name: "", data: [], id: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buf += value;
    for (;;) {
      const at = buf.search(/\r\n|\r|\n/);
      if (at < 0 || (buf[at] === "\r" && at === buf.length - 1)) break; // wait for the \n
      const line = buf.slice(0, at);
      buf = buf.slice(at + (buf.startsWith("\r\n", at) ? 2 : 1));
      if (line === "") {
        if (dispatch(ev)) return true;
        ev = { name: "", data: [], id: null };
        continue;
      }
      if (line.startsWith(":")) continue; // a keep-alive comment
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "data") ev.data.push(val);
      else if (field === "event") ev.name = val;
      else if (field === "id") ev.id = val;
    }
  }
}

function dispatch(ev) {
  if (ev.id !== null && ev.id !== "") state.lastId = ev.id;
  if (!ev.data.length) return false;
  const data = JSON.parse(ev.data.join("\n"));
  if (ev.name === "gap") {
    note(`⚠ ${data.missed ?? "some"} events were missed: ${data.advice}`, "warn");
  } else if (ev.name === "closed") {
    note("the session was closed; a new message opens it again");
    return true;
  } else {
    render(data);
  }
  return false;
}

async function followEvents(key, from) {
  const ctrl = new AbortController();
  state.stream = ctrl;
  let delay = 500;
  while (state.stream === ctrl && state.key === key) {
    const headers = authHeaders({ Accept: "text/event-stream" });
    let url = `/v1/sessions/${enc(key)}/events`;
    if (state.lastId !== null) headers["Last-Event-ID"] = state.lastId;
    else if (from !== null) url += `?from=${from}`;
    try {
      const resp = await fetch(url, { headers, signal: ctrl.signal, cache: "no-store" });
      if (!resp.ok) throw await problem(resp);
      $("conn").textContent = "● live";
      delay = 500;
      if (await readEvents(resp, ctrl.signal)) {
        $("conn").textContent = "session closed";
        if (state.stream === ctrl) state.stream = null;
        return;
      }
      $("conn").textContent = "reconnecting…";
    } catch (err) {
      if (ctrl.signal.aborted) return;
      $("conn").textContent = `reconnecting… (${err.message})`;
      if (err.status === 401 || err.status === 403) {
        showError(err);
        state.stream = null;
        return;
      }
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 10000);
  }
}

function stopEvents() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  $("conn").textContent = "";
}

// -- status ----------------------------------------------------------------------------------

async function refreshStatus() {
  if (!state.key) return;
  try {
    const s = await api(`/v1/sessions/${enc(state.key)}`);
    const busy = s.phase !== "idle";
    const parts = [`${s.key}: ${s.phase}`];
    if (s.current_run_id) parts.push(s.current_run_id);
    if (s.queue_length) parts.push(`${s.queue_length} queued`);
    parts.push(`${s.runs} runs, ${s.turns} turns`);
    if (s.model) parts.push(s.model);
    $("status").textContent = parts.join(" · ");
    $("status").dataset.phase = s.phase;
    $("abort").disabled = !busy;
    for (const a of s.approvals || []) approvalCard(a);
  } catch (err) {
    $("status").textContent = err.status === 404 ? `${state.key}: new session` : err.message;
    $("status").dataset.phase = "";
  }
}

// -- actions ---------------------------------------------------------------------------------

async function loadSessions() {
  if (!state.token) return;
  try {
    const { sessions } = await api("/v1/sessions");
    const select = $("sessions");
    select.replaceChildren(new Option("sessions…", ""));
    for (const s of sessions) select.add(new Option(s.key, s.key));
    showError(null);
  } catch (err) {
    showError(err);
  }
}

async function openSession(key) {
  key = key.trim();
  if (!key) return;
  stopEvents();
  state.key = key;
  state.lastId = null;
  state.fresh = false;
  view = newView();
  $("log").replaceChildren();
  $("session-key").value = key;
  location.hash = enc(key);
  $("send").disabled = false;
  showError(null);
  try {
    const page = await api(`/v1/sessions/${enc(key)}/transcript?limit=1000`);
    renderTranscript(page.entries);
    followEvents(key, null); // from the live end: the transcript has what came before
  } catch (err) {
    if (err.status !== 404) return showError(err);
    state.fresh = true; // its stream starts with the first message, read from offset 0
    note(`${key} is a new session: your first message creates it`);
  }
  clearInterval(state.statusTimer);
  state.statusTimer = setInterval(refreshStatus, 3000);
  refreshStatus();
}

async function sendMessage() {
  const text = $("text").value;
  if (!text.trim() || !state.key) return;
  const mode = $("mode").value;
  const bubble = add("msg user", text);
  $("text").value = "";
  try {
    const receipt = await api(`/v1/sessions/${enc(state.key)}/messages`, {
      method: "POST",
      // The message id makes a resend after a network error a duplicate, not a second message.
      body: JSON.stringify({ text, mode, message_id: crypto.randomUUID(), sender: "web" }),
    });
    bubble.title = `${receipt.disposition} (${receipt.mode})`;
    if (receipt.disposition !== "started") {
      note(`${receipt.disposition}${receipt.queue_length ? `, ${receipt.queue_length} waiting` : ""}`);
    }
    if (!state.stream) followEvents(state.key, state.fresh ? 0 : null);
    if (state.fresh) loadSessions(); // it is one of them now
    state.fresh = false;
    showError(null);
  } catch (err) {
    bubble.classList.add("failed");
    showError(err);
  }
  refreshStatus();
}

async function abortRun() {
  try {
    const r = await api(`/v1/sessions/${enc(state.key)}/abort`, {
      method: "POST",
      body: JSON.stringify({ reason: "aborted from the web chat" }),
    });
    note(r.run_id ? `abort requested for ${r.run_id}` : r.note || "nothing to abort");
  } catch (err) {
    showError(err);
  }
  refreshStatus();
}

// -- wiring ----------------------------------------------------------------------------------

$("token").value = state.token;
$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("token").value.trim();
  localStorage.setItem("agentlane.token", state.token);
  loadSessions();
  if (state.key) openSession(state.key);
});
$("session-form").addEventListener("submit", (e) => {
  e.preventDefault();
  openSession($("session-key").value);
});
$("sessions").addEventListener("change", (e) => e.target.value && openSession(e.target.value));
$("send-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sendMessage();
});
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    sendMessage();
  }
});
$("abort").addEventListener("click", abortRun);
document.addEventListener("visibilitychange", () => !document.hidden && refreshStatus());

// For tests and the console: drop the connection as a network failure would (the page
// reconnects and resumes with Last-Event-ID).
window.agentlaneChat = { dropConnection: () => state.reader && state.reader.cancel() };

loadSessions();
if (location.hash.length > 1 && state.token) openSession(decodeURIComponent(location.hash.slice(1)));
