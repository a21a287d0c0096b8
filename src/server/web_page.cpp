// The chat page served at / : plain HTML + JS, no build step, nothing fetched from elsewhere.
// It keeps the conversation in the page, streams answers from /v1/chat/completions, shows the
// thinking collapsed and tool calls as blocks, and has a stop button (aborting the fetch
// closes the connection, which cancels the request on the server).
#include "server/http_server.h"

namespace k3::server {

const char* const kChatPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>k3 chat</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; display: flex; flex-direction: column;
       height: 100vh; background: #f6f6f4; color: #222; }
header { padding: 8px 14px; background: #263238; color: #eee; display: flex; gap: 14px;
         align-items: center; flex-wrap: wrap; font-size: 13px; }
header b { font-size: 15px; }
header input[type=number] { width: 64px; }
#log { flex: 1; overflow-y: auto; padding: 14px; }
.msg { max-width: 820px; margin: 0 auto 12px; padding: 10px 14px; border-radius: 8px;
       white-space: pre-wrap; word-wrap: break-word; background: #fff;
       box-shadow: 0 1px 2px #0002; }
.user { background: #e3f2fd; }
.role { font-size: 12px; color: #666; margin-bottom: 4px; }
details.think { color: #666; font-size: 13px; margin-bottom: 6px; }
details.think summary { cursor: pointer; }
.tool { font: 12px monospace; background: #fff8e1; border-left: 3px solid #ffb300;
        padding: 6px 8px; margin-top: 6px; }
.error { color: #b71c1c; }
.meta { font-size: 11px; color: #999; margin-top: 4px; }
form { display: flex; gap: 8px; padding: 10px 14px; background: #fff; border-top: 1px solid #ddd; }
textarea { flex: 1; font: inherit; padding: 8px; resize: vertical; min-height: 44px; }
button { font: inherit; padding: 0 16px; }
</style></head>
<body>
<header><b>k3</b>
<label>system <input id="system" size="28" placeholder="optional system prompt"></label>
<label><input type="checkbox" id="thinking" checked> thinking</label>
<label>temperature <input type="number" id="temperature" value="0.7" min="0" max="2" step="0.1"></label>
<label>max tokens <input type="number" id="max_tokens" value="256" min="1"></label>
<label>API key <input id="key" type="password" size="10"></label>
<label>more fields <input id="extra" size="18" placeholder='{"top_p": 0.9, "seed": 1}'></label>
<button type="button" id="clear">new chat</button>
</header>
<div id="log"></div>
<form id="form">
<textarea id="input" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
<button id="send" type="submit">Send</button>
<button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log");
let messages = [];          // the conversation, as the API takes it
let controller = null;      // aborts the running request
$("key").value = localStorage.getItem("k3_key") || "";

function bubble(role) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const head = document.createElement("div");
  head.className = "role";
  head.textContent = role;
  div.appendChild(head);
  log.appendChild(div);
  return div;
}

function addText(div, text) {
  const span = document.createElement("span");
  span.textContent = text;
  div.appendChild(span);
  return span;
}

// One assistant answer being streamed: thinking (collapsed), content, tool calls.
function answerView() {
  const div = bubble("assistant");
  const think = document.createElement("details");
  think.className = "think";
  think.hidden = true;
  think.innerHTML = "<summary>thinking</summary>";
  const thinkText = addText(think, "");
  div.appendChild(think);
  const content = addText(div, "");
  const meta = document.createElement("div");
  meta.className = "meta";
  div.appendChild(meta);
  return { div, think, thinkText, content, meta, reasoning: "", text: "", calls: [] };
}

function showDelta(v, d) {
  if (d.reasoning_content) {
    v.reasoning += d.reasoning_content;
    v.think.hidden = false;
    v.thinkText.textContent = v.reasoning;
  }
  if (d.content) {
    v.text += d.content;
    v.content.textContent = v.text;
  }
  for (const c of d.tool_calls || []) {
    v.calls.push(c);
    const t = document.createElement("div");
    t.className = "tool";
    t.textContent = "tool call " + c.function.name + "(" + c.function.arguments + ")";
    v.div.insertBefore(t, v.meta);
  }
  log.scrollTop = log.scrollHeight;
}

// Reads an SSE body: calls onData with each "data: " payload.
async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (event.startsWith("data: ")) onData(event.slice(6));
    }
  }
}

// The request body: the conversation, the header's settings, then any fields typed as a JSON
// object into "more fields" (seed, top_p, stop, logit_bias, ...).
function request() {
  const msgs = [];
  const extra = $("extra").value.trim();
  const system = $("system").value.trim();
  if (system) msgs.push({ role: "system", content: system });
  return {
    model: "k3", stream: true, messages: msgs.concat(messages),
    temperature: Number($("temperature").value), max_tokens: Number($("max_tokens").value),
    stream_options: { include_usage: true },
    chat_template_kwargs: { thinking: $("thinking").checked },
    ...(extra ? JSON.parse(extra) : {}),
  };
}

async function send(text) {
  messages.push({ role: "user", content: text });
  addText(bubble("user"), text);
  const v = answerView();
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  const key = $("key").value;
  localStorage.setItem("k3_key", key);
  const headers = { "Content-Type": "application/json" };
  if (key) headers["Authorization"] = "Bearer " + key;
  let finish = "";
  try {
    const body = JSON.stringify(request());  // throws on bad "more fields" JSON
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers, body, signal: controller.signal });
    if (!r.ok) {
      const e = await r.json().catch(() => ({}));
      throw new Error((e.error && e.error.message) || ("HTTP " + r.status));
    }
    await readEvents(r, (data) => {
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      for (const c of chunk.choices || []) {
        showDelta(v, c.delta || {});
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (chunk.usage)
        v.meta.textContent = chunk.usage.completion_tokens + " tokens, " +
          chunk.usage.prompt_tokens_details.cached_tokens + " of " + chunk.usage.prompt_tokens +
          " prompt tokens cached";
    });
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else { const s = addText(v.div, "\n" + e.message); s.className = "error"; }
  }
  v.meta.textContent = (finish ? finish + " · " : "") + v.meta.textContent;
  const answer = { role: "assistant", content: v.text };
  if (v.reasoning) answer.reasoning_content = v.reasoning;
  if (v.calls.length) answer.tool_calls = v.calls.map(({ id, type, function: f }) =>
    ({ id, type, function: f }));
  messages.push(answer);
  controller = null;
  $("send").disabled = false;
  $("stop").disabled = true;
  v.div.dataset.done = finish || "error";
}

$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("clear").addEventListener("click", () => { messages = []; log.innerHTML = ""; });
</script>
</body></html>
)HTML";

}  // namespace k3::server
