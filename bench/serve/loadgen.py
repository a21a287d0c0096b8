#!/usr/bin/env python3
"""A bounded load generator for `k3 serve`, or any OpenAI-compatible server, on loopback
(Python standard library only).

Runs N streaming chat (or, with --endpoint completions, plain completion) requests with C
clients at a time and reports aggregate completion throughput, time to first token (TTFT) and
inter-token latency (ITL), or (--shared-prefix) the TTFT of a request after another one with
the same long system prompt. --ignore-eos asks a llama-server to run every answer to
max_tokens (k3 serve ignores the field: ban the stop ids with --ban instead; sending both
works with either server).

  loadgen.py --url http://127.0.0.1:8080/ --concurrency 16 --requests 32 --max-tokens 64
  loadgen.py --url http://127.0.0.1:8080/ --shared-prefix 1000
  loadgen.py --url http://127.0.0.1:8081/ --endpoint completions --ignore-eos --label llama
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def stream_chat(url, messages, max_tokens, ban, cache, opts, timeout=600, clock=None):
    """One streaming request (messages: a chat list, or a prompt string for the completions
    endpoint). Returns (ttft_s, [inter-token gaps], completion_tokens, usage, the perf_counter
    time of each token, the clock's readings at the first token and at the end)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = {"model": opts.model, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}, "cache_prompt": cache,
            "logit_bias": {str(i): -100 for i in ban}}
    if isinstance(messages, str):
        path, body["prompt"] = "/v1/completions", messages
    else:
        path, body["messages"] = "/v1/chat/completions", messages
        body["chat_template_kwargs"] = {"thinking": False}
    if opts.ignore_eos:
        body["ignore_eos"] = True
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError("HTTP %d: %s" % (resp.status, resp.read()[:200]))
    first, last, gaps, usage, stamps, at_first = None, None, [], None, [], None
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for ch in chunk.get("choices", []):
            d = ch.get("delta", {})
            if (d.get("content") or d.get("reasoning_content") or d.get("tool_calls")
                    or ch.get("text")):
                now = time.perf_counter()
                stamps.append(now)
                if first is None:
                    first = now - t0
                    at_first = clock.read() if clock else None
                else:
                    gaps.append(now - last)
                last = now
    at_end = clock.read() if clock else None
    conn.close()
    # A server that sends no usage: count the chunks that carried text (one token each).
    n = (usage or {}).get("completion_tokens", len(stamps))
    return first, gaps, n, usage, stamps, (at_first, at_end)


class CpuClock:
    """The on-CPU time of every thread of a local process (/proc/PID/task/*/schedstat,
    nanoseconds), read when a request sees its first token and when it ends: on a shared
    machine, what the server's threads ran is steadier than the wall clock. Two reads per
    request, so the measurement costs the server's machine next to nothing."""

    def __init__(self, pid):
        self.pid = pid

    def read(self):
        out = {}
        base = "/proc/%d/task" % self.pid
        for tid in os.listdir(base):
            try:
                with open("%s/%s/schedstat" % (base, tid)) as f:
                    out[tid] = int(f.read().split()[0]) * 1e-9
            except OSError:  # a thread that just ended
                pass
        return out


def busiest(a, b):
    """(CPU s of the busiest thread, of all threads) from reading a to reading b."""
    deltas = [b[t] - a[t] for t in b if t in a]
    return (max(deltas), sum(deltas)) if deltas else (float("nan"), float("nan"))


def words(n, rng):
    vocab = ["alpha", "river", "stone", "cloud", "seven", "market", "green", "window", "paper",
             "engine", "silver", "forest", "number", "quiet", "orange", "bridge"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def load(args):
    rng = random.Random(args.seed)
    prompts = [words(args.prompt_words, rng) for _ in range(args.requests)]
    lock, next_i = threading.Lock(), [0]
    ttfts, itls, tokens, errors, spans, prompt_tokens = [], [], [0], [], [], []
    readings = []  # (token times, (clock at the first token, at the end)) per request
    clock = CpuClock(args.server_pid) if args.server_pid else None

    def worker():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= args.requests:
                return
            try:
                msgs = (prompts[i] if args.endpoint == "completions"
                        else [{"role": "user", "content": prompts[i]}])
                ttft, gaps, n, usage, span, reads = stream_chat(
                    args.url, msgs, args.max_tokens, args.ban, not args.no_cache, args,
                    clock=clock)
                with lock:
                    spans.append(span)
                    readings.append((span, reads))
                    prompt_tokens.append((usage or {}).get("prompt_tokens", 0))
                    if ttft is not None:
                        ttfts.append(ttft)
                    itls.extend(gaps)
                    tokens[0] += n
            except Exception as e:  # counted and reported, never hidden
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    # Aggregate decode throughput: tokens per second while every request of the wave is decoding
    # (from the last first token to the first last token; --requests = --concurrency).
    spans = [s for s in spans if len(s) >= 2]
    lo = max(s[0] for s in spans) if spans else 0
    hi = min(s[-1] for s in spans) if spans else 0
    inside = sum(1 for s in spans for t in s if lo < t <= hi)
    decode = inside / (hi - lo) if hi > lo else float("nan")
    out = {"label": args.label} if args.label else {}
    readings = [r for r in readings if len(r[0]) >= 2]
    if clock and hi > lo and readings:
        # From the first token of the last request to start to the end of the first to
        # finish. The busiest thread is the scheduler (the engine with -t 1): its CPU time
        # over the window gives the decode rate on a core of its own.
        start = max(readings, key=lambda r: r[0][0])[1][0]
        end = min(readings, key=lambda r: r[0][-1])[1][1]
        top, total = busiest(start, end)
        out.update({"window_s": round(hi - lo, 4), "engine_cpu_s": round(top, 4),
                    "server_cpu_s": round(total, 4),
                    "decode_tok_per_engine_cpu_s": round(inside / top, 1)})
    return {**out, "concurrency": args.concurrency, "requests": args.requests,
            "prompt_tokens_p50": percentile(prompt_tokens, 50) if prompt_tokens else 0,
            "completion_tokens": tokens[0], "wall_s": round(wall, 3),
            "throughput_tok_s": round(tokens[0] / wall, 1),
            "decode_tok_s": round(decode, 1),
            "ttft_p50_ms": round(1000 * percentile(ttfts, 50), 1),
            "ttft_p95_ms": round(1000 * percentile(ttfts, 95), 1),
            "itl_p50_ms": round(1000 * percentile(itls, 50), 2),
            "itl_p95_ms": round(1000 * percentile(itls, 95), 2),
            "errors": len(errors), "first_error": errors[0] if errors else None}


def shared_prefix(args):
    """TTFT of a first request with a long system prompt, then of others sharing it."""
    rng = random.Random(args.seed)
    system = words(args.shared_prefix, rng)
    out = []
    for q in range(args.requests):
        msgs = [{"role": "system", "content": system},
                {"role": "user", "content": "Question %d: %s" % (q, words(8, rng))}]
        ttft, _, _, usage, _, _ = stream_chat(args.url, msgs, 1, args.ban, not args.no_cache,
                                              args)
        out.append({"ttft_ms": round(1000 * ttft, 1), "prompt_tokens": usage["prompt_tokens"],
                    "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]})
    later = [r["ttft_ms"] for r in out[1:]]
    return {"system_words": args.shared_prefix, "cache": not args.no_cache, "requests": out,
            "first_ttft_ms": out[0]["ttft_ms"], "later_ttft_ms_median": statistics.median(later),
            "speedup": round(out[0]["ttft_ms"] / statistics.median(later), 2)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--requests", type=int, default=0, help="default: --concurrency (one wave)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt-words", type=int, default=32)
    p.add_argument("--shared-prefix", type=int, default=0,
                   help="words of a shared system prompt (the project tokenizer: ~4 tokens a "
                        "word): measure TTFT of requests sharing it")
    p.add_argument("--no-cache", action="store_true", help="send cache_prompt: false")
    p.add_argument("--ban", type=lambda s: [int(x) for x in s.split(",") if x], default=[],
                   help="token ids to ban (e.g. the stop ids, so every answer runs max-tokens)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--endpoint", choices=["chat", "completions"], default="chat",
                   help="/v1/chat/completions (messages) or /v1/completions (the same words "
                        "as a plain prompt: no chat template, the same tokens on any server)")
    p.add_argument("--ignore-eos", action="store_true",
                   help="send ignore_eos: true (llama-server: answers run to --max-tokens)")
    p.add_argument("--model", default="k3", help="the request's model field")
    p.add_argument("--label", default="", help="a name copied into the JSON result")
    p.add_argument("--server-pid", type=int, default=0,
                   help="the server's process id (same machine): also report the CPU time of "
                        "its busiest thread over the all-decoding window, and tokens per "
                        "CPU second of it")
    args = p.parse_args()
    args.requests = args.requests or args.concurrency
    if not (1 <= args.concurrency <= 256 and 1 <= args.requests <= 4096):
        sys.exit("loadgen: --concurrency must be in [1, 256] and --requests in [1, 4096]")
    result = shared_prefix(args) if args.shared_prefix else load(args)
    print(json.dumps(result))
    if result.get("errors"):
        sys.exit(1)


if __name__ == "__main__":
    main()
