"""k3 serve against the official openai Python client: chat (whole and streamed), tools with a
tool-result round trip, logprobs, completions, models, errors and the API key.

Run by scripts/test-openai.sh, which builds a tiny model, starts `k3 serve` and passes its URL
and key: python test_openai_client.py URL KEY
"""
import json
import sys
import unittest

import openai

URL, KEY = sys.argv[1], sys.argv[2]
NO_THINK = {"chat_template_kwargs": {"thinking": False}}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def client(key=KEY):
    return openai.OpenAI(base_url=URL + "v1", api_key=key, max_retries=0, timeout=120)


class ServerWithOpenAIClient(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def chat(self, **kw):
        args = dict(model="k3", messages=[{"role": "user", "content": "Hello"}], max_tokens=8,
                    temperature=0)
        args.update(kw)
        return self.c.chat.completions.create(**args)

    def test_models(self):
        ids = [m.id for m in self.c.models.list()]
        self.assertEqual(ids, ["k3"])

    def test_chat_whole(self):
        r = self.chat()
        self.assertEqual(r.object, "chat.completion")
        m = r.choices[0].message
        self.assertEqual(m.role, "assistant")
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertLessEqual(r.usage.completion_tokens, 8)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)

    def test_stream_equals_whole(self):
        whole = self.chat(max_tokens=12, extra_body=NO_THINK)
        text, usage, finish = "", None, None
        stream = self.chat(max_tokens=12, extra_body=NO_THINK, stream=True,
                           stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for ch in chunk.choices:
                text += ch.delta.content or ""
                finish = ch.finish_reason or finish
        self.assertEqual(text, whole.choices[0].message.content or "")
        self.assertEqual(finish, whole.choices[0].finish_reason)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)

    def test_reasoning_is_separate(self):
        # Thinking on: the answer starts in the think channel, reported as reasoning_content,
        # streamed as reasoning_content deltas; thinking off: no reasoning at all.
        whole = self.chat(max_tokens=10)
        reasoning = (whole.choices[0].message.model_extra or {}).get("reasoning_content") or ""
        streamed = ""
        for chunk in self.chat(max_tokens=10, stream=True):
            for ch in chunk.choices:
                streamed += (ch.delta.model_extra or {}).get("reasoning_content") or ""
        self.assertEqual(streamed, reasoning)
        off = self.chat(max_tokens=10, extra_body=NO_THINK)
        self.assertNotIn("reasoning_content", off.choices[0].message.model_extra or {})

    def test_tools_round_trip(self):
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        first = self.chat(messages=msgs, tools=[WEATHER_TOOL], tool_choice="auto")
        self.assertEqual(first.object, "chat.completion")
        # Whatever the (random) model said, send a tool call and its result back.
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_0", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": '{"temp_c": 21}'},
        ]
        second = self.chat(messages=msgs, tools=[WEATHER_TOOL])
        self.assertGreater(second.usage.prompt_tokens, first.usage.prompt_tokens)
        required = self.chat(messages=msgs, tools=[WEATHER_TOOL], tool_choice="required")
        self.assertEqual(required.object, "chat.completion")
        named = self.chat(messages=msgs, tools=[WEATHER_TOOL],
                          tool_choice={"type": "function", "function": {"name": "get_weather"}})
        self.assertEqual(named.object, "chat.completion")

    def test_logprobs(self):
        r = self.chat(logprobs=True, top_logprobs=3, max_tokens=5)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        for e in content:
            self.assertLessEqual(e.logprob, 0.0)
            self.assertEqual(len(e.top_logprobs), 3)
            self.assertEqual(e.token, e.top_logprobs[0].token)  # greedy: the most likely

    def test_seed_and_json_mode(self):
        a = self.chat(temperature=0.8, seed=7, response_format={"type": "json_object"})
        b = self.chat(temperature=0.8, seed=7, response_format={"type": "json_object"})
        self.assertEqual(a.choices[0].message, b.choices[0].message)

    def test_json_object_answers_parse(self):
        # The output is constrained: whatever the (random) tiny model prefers, the content is
        # one JSON object, for every seed, prompt and thinking setting.
        prompts = ["List three colours as JSON", "Describe a cat", "{\"q\": 1}"]
        for seed in range(6):
            for i, prompt in enumerate(prompts):
                extra = NO_THINK if (seed + i) % 2 == 0 else {}
                r = self.chat(messages=[{"role": "user", "content": prompt}], max_tokens=64,
                              temperature=1.0, seed=seed, extra_body=extra,
                              response_format={"type": "json_object"})
                content = r.choices[0].message.content
                self.assertIsInstance(json.loads(content), dict, (seed, prompt, content))
                if not extra:
                    self.assertTrue(r.choices[0].message.model_extra.get("reasoning_content"))

    def test_completions(self):
        r = self.c.completions.create(model="k3", prompt="Once upon a time", max_tokens=5,
                                      temperature=0)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.usage.completion_tokens, 5)
        s = self.c.completions.create(model="k3", prompt="Once upon a time", max_tokens=5,
                                      temperature=0, stream=True)
        self.assertEqual("".join(c.choices[0].text for c in s if c.choices), r.choices[0].text)

    def test_errors(self):
        cases = [
            dict(messages=[{"role": "wizard", "content": "x"}]),
            dict(temperature=5),
            dict(n=2),
            dict(messages=[]),
            dict(top_logprobs=2),
            dict(messages=[{"role": "user", "content": "x " * 5000}]),
        ]
        for kw in cases:
            with self.assertRaises(openai.BadRequestError) as e:
                self.chat(**kw)
            self.assertEqual(e.exception.status_code, 400)
            self.assertTrue(e.exception.message)
        with self.assertRaises(openai.AuthenticationError):
            client("wrong key").models.list()
        with self.assertRaises(openai.NotFoundError):
            self.c.get("/nothing", cast_to=object)
        self.assertEqual(self.chat(max_tokens=2).object, "chat.completion")  # still serving


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
