// Drives the gateway's AG-UI endpoint with the real HttpAgent of @ag-ui/client, for
// tests/e2e/test_agui_transport.py. One agent (one thread) per process; commands come as JSON
// lines on stdin, answers go as JSON lines on stdout:
//   {"op": "run", "text": "...", "forwardedProps": {...}}
//     -> {"event": <each AG-UI event as the client received it>} ...
//     -> {"done": {"newMessages": [...], "messages": [...], "state": {...}}}
//        or {"failed": "<error message>"} when runAgent rejects
// Every event also goes through the client's own verifier (verifyEvents), which throws on an
// event sequence AG-UI does not allow.
import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { Subject } from "rxjs";

const [url, token, threadId] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${token}` } });
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  if (cmd.op !== "run") continue;
  agent.addMessage({ id: randomUUID(), role: "user", content: cmd.text });
  const seen = new Subject();
  const verified = [];
  let verifyError = null;
  seen.pipe(verifyEvents(false)).subscribe({
    next: (e) => verified.push(e.type),
    error: (e) => { verifyError = String(e && e.message ? e.message : e); },
  });
  try {
    const result = await agent.runAgent(
      { forwardedProps: cmd.forwardedProps ?? {} },
      {
        onEvent: ({ event }) => {
          seen.next(event);
          out({ event });
        },
      },
    );
    seen.complete();
    out({
      done: {
        newMessages: result.newMessages,
        messages: agent.messages,
        state: agent.state,
        verified: verified.length,
        verifyError,
      },
    });
  } catch (err) {
    out({ failed: String(err && err.message ? err.message : err), verifyError });
  }
}
