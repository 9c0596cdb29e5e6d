// The scripted completion (see script.py for what and when) served by Node.js's http module.
//
// Node frames the answer itself: a streamed answer is chunked, a whole one carries the
// Content-Length the handler sets. The idle timeout is server.keepAliveTimeout and the
// per-connection limit server.maxRequestsPerSocket (the Nth answer says Connection: close).
// Node writes "HTTP/1.1" on every status line and compresses nothing by itself.
//
//   node server.js --port 8000 [--idle-timeout 0.3] [--max-requests 3]
"use strict";

const http = require("http");
const { performance } = require("perf_hooks");

function options(argv) {
  const opts = { port: 0, ttft: 0.05, itl: 0.01, tokens: 8, "idle-timeout": 0, "max-requests": 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, "");
    if (!(name in opts)) throw new Error(`unknown option ${argv[i]}`);
    opts[name] = Number(argv[i + 1]);
  }
  return opts;
}

const opts = options(process.argv.slice(2));
const usage = { prompt_tokens: 0, completion_tokens: opts.tokens, total_tokens: opts.tokens };
const event = (fields) =>
  "data: " + JSON.stringify({ id: "interop", object: "chat.completion.chunk", created: 0, model: "interop", ...fields }) + "\n\n";
const chunk = (k) =>
  event({ choices: [{ index: 0, delta: { content: ` t${k}` }, finish_reason: k === opts.tokens - 1 ? "length" : null }] });

// Token k in the named events of the Responses (/v1/responses) or Messages (/v1/messages) API, the
// opening event before the first; namedTail: the closing events with the usage.
const named = (name, fields) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...fields })}\n\n`;
function namedChunk(path, k) {
  if (path === "/v1/responses")
    return (k === 0 ? named("response.created", { response: { id: "interop", status: "in_progress" } }) : "") +
      named("response.output_text.delta", { delta: ` t${k}` });
  return (k === 0 ? named("message_start", { message: { id: "interop", usage: { input_tokens: 0, output_tokens: 1 } } }) : "") +
    named("content_block_delta", { index: 0, delta: { type: "text_delta", text: ` t${k}` } });
}
function namedTail(path) {
  if (path === "/v1/responses")
    return named("response.completed", {
      response: { id: "interop", status: "completed", usage: { input_tokens: 0, output_tokens: opts.tokens } },
    });
  return named("message_delta", { delta: { stop_reason: "max_tokens" }, usage: { output_tokens: opts.tokens } }) +
    named("message_stop", {});
}
const PATHS = ["/v1/chat/completions", "/v1/responses", "/v1/messages"];

function whole() {
  const text = Array.from({ length: opts.tokens }, (_, k) => ` t${k}`).join("");
  const choice = { index: 0, message: { role: "assistant", content: text }, finish_reason: "length" };
  return JSON.stringify({ id: "interop", object: "chat.completion", created: 0, model: "interop", choices: [choice], usage });
}

// setTimeout counts whole milliseconds and may fire early or late by one: stop short on the
// timer and pass the last stretch in setImmediate turns, so a token leaves at its deadline.
const SPIN_MS = 1.5;
function until(deadline) {
  return new Promise((resolve) => {
    const check = () => {
      const left = deadline - performance.now();
      if (left <= 0) resolve();
      else if (left > SPIN_MS) setTimeout(check, left - SPIN_MS);
      else setImmediate(check);
    };
    check();
  });
}

// Completion requests per connection: the socket itself is the key.
const perSocket = new Map();

function stats() {
  const counts = [...perSocket.values()];
  return JSON.stringify({
    requests: counts.reduce((a, b) => a + b, 0),
    connections: counts.length,
    most: Math.max(0, ...counts),
  });
}

async function complete(req, res, body) {
  const arrived = performance.now();
  perSocket.set(req.socket, (perSocket.get(req.socket) || 0) + 1);
  const request = JSON.parse(body || "{}");
  const due = (k) => arrived + (opts.ttft + k * opts.itl) * 1000;
  if (!request.stream) {
    await until(due(opts.tokens - 1));
    const data = Buffer.from(whole());
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": data.length });
    res.end(data);
    return;
  }
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const chat = req.url === "/v1/chat/completions";
  for (let k = 0; k < opts.tokens; k++) {
    await until(due(k));
    res.write(chat ? chunk(k) : namedChunk(req.url, k));
  }
  if (!chat) {
    res.end(namedTail(req.url));
    return;
  }
  if ((request.stream_options || {}).include_usage) res.write(event({ choices: [], usage }));
  res.end("data: [DONE]\n\n");
}

const server = http.createServer((req, res) => {
  const parts = [];
  req.on("data", (part) => parts.push(part));
  req.on("end", () => {
    if (req.url === "/health") res.end("ok");
    else if (req.url === "/stats") res.writeHead(200, { "Content-Type": "application/json" }).end(stats());
    else if (PATHS.includes(req.url) && req.method === "POST") complete(req, res, Buffer.concat(parts).toString());
    else res.writeHead(404).end("not found");
  });
});
if (opts["idle-timeout"] > 0) server.keepAliveTimeout = opts["idle-timeout"] * 1000;
if (opts["max-requests"] > 0) server.maxRequestsPerSocket = opts["max-requests"];
server.listen(opts.port, "127.0.0.1", () => console.log(`node ${process.version} listening on http://127.0.0.1:${opts.port}`));
