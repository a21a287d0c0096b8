"""The chat page at / in headless Chromium (Selenium): it loads with nothing from elsewhere,
sends a message and shows the streamed answer, keeps the conversation, shows thinking collapsed
and tool calls, and Stop cancels the request on the server.

Run by scripts/test-webpage.sh: python test_chat_page.py URL
"""
import json
import sys
import time
import unittest
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

URL = sys.argv[1]


def metric(name):
    text = urllib.request.urlopen(URL + "metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class ChatPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        opts = Options()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
            opts.add_argument(a)
        cls.d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        cls.wait = WebDriverWait(cls.d, 60, poll_frequency=0.05)

    @classmethod
    def tearDownClass(cls):
        cls.d.quit()

    def setUp(self):
        self.d.get(URL)
        self.d.find_element(By.ID, "clear").click()

    def set_field(self, id_, value):
        e = self.d.find_element(By.ID, id_)
        e.clear()
        e.send_keys(str(value))

    def set_thinking(self, on):
        box = self.d.find_element(By.ID, "thinking")
        if box.is_selected() != on:
            box.click()

    def send(self, text):
        box = self.d.find_element(By.ID, "input")
        box.send_keys(text)
        box.send_keys(Keys.ENTER)

    def answers(self):
        return self.d.find_elements(By.CSS_SELECTOR, ".msg.assistant")

    def wait_done(self, n):
        self.wait.until(lambda d: len(self.answers()) >= n and
                        self.answers()[n - 1].get_attribute("data-done"))
        return self.answers()[n - 1].get_attribute("data-done")

    def test_loads_self_contained(self):
        self.assertEqual(self.d.title, "k3 chat")
        resources = self.d.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        self.assertEqual([r for r in resources if not r.startswith(URL)], [])

    def test_send_streams_and_keeps_the_conversation(self):
        self.set_thinking(False)
        self.set_field("max_tokens", 12)
        self.set_field("temperature", 0)
        self.send("Hello there")
        self.assertIn(self.wait_done(1), ("length", "stop"))
        first = self.answers()[0].text
        self.assertIn("assistant", first)
        self.assertIn("tokens", self.answers()[0].find_element(By.CLASS_NAME, "meta").text)
        self.send("And again")
        self.assertIn(self.wait_done(2), ("length", "stop"))
        self.assertEqual(self.d.execute_script("return messages.length"), 4)
        roles = self.d.execute_script("return messages.map(m => m.role)")
        self.assertEqual(roles, ["user", "assistant", "user", "assistant"])

    def test_thinking_is_collapsed(self):
        self.set_thinking(True)
        self.set_field("max_tokens", 8)
        self.set_field("temperature", 0)
        self.send("Think first")
        self.wait_done(1)
        think = self.answers()[0].find_element(By.CSS_SELECTOR, "details.think")
        # Greedy, the tiny model stays in the think channel for these 8 tokens.
        self.assertTrue(self.d.execute_script("return messages[1].reasoning_content || ''"))
        self.assertTrue(think.is_displayed())
        self.assertIsNone(think.get_attribute("open"))  # collapsed until clicked
        think.find_element(By.TAG_NAME, "summary").click()
        self.assertIsNotNone(think.get_attribute("open"))

    def test_more_fields_are_sent(self):
        self.set_thinking(False)
        self.set_field("max_tokens", 4)
        self.set_field("extra", '{"n": 2}')  # refused by the server: shows its error
        self.send("Hi")
        self.assertEqual(self.wait_done(1), "error")
        self.assertIn("'n' must be 1", self.answers()[0].find_element(By.CLASS_NAME, "error").text)
        self.set_field("extra", "{not json")
        self.send("Hi")
        self.assertEqual(self.wait_done(2), "error")

    def test_tool_calls_are_shown(self):
        self.d.execute_script("""
            const v = answerView();
            showDelta(v, {content: 'Checking.', tool_calls: [{index: 0, id: 'call_0',
              type: 'function', function: {name: 'get_weather', arguments: '{"city": "Paris"}'}}]});
        """)
        tool = self.d.find_element(By.CSS_SELECTOR, ".msg.assistant .tool")
        self.assertIn('get_weather({"city": "Paris"})', tool.text)

    def test_stop_cancels_on_the_server(self):
        before = metric("k3_requests_cancelled_total")
        self.set_thinking(False)
        self.set_field("max_tokens", 100000)
        # The random model would end its message after about a thousand tokens: ban every
        # special token (ids 6260-6515 of the test tokenizer: the stop ids, and the chat
        # format's markers, which a random model can also emit) and seed the sampler (typed
        # into "more fields"), so that only Stop can end this answer, the same way every run.
        bias = {str(i): -100 for i in range(6260, 6516)}
        self.d.execute_script("document.getElementById('extra').value = arguments[0]",
                              json.dumps({"logit_bias": bias, "seed": 1}))
        self.send("Write a very long story")
        content = lambda: self.d.execute_script(
            "const m = document.querySelectorAll('.msg.assistant'); "
            "return m.length ? m[m.length - 1].textContent.length : 0")
        self.wait.until(lambda d: content() > len("assistant"))
        seen = content()
        self.wait.until(lambda d: content() > seen)  # it grows: streamed, not all at once
        # Still generating on the server (test-webpage.sh slows each step with
        # K3_SERVE_STEP_DELAY_MS, so the whole answer would take over a minute): the cancel
        # counted below is this running request's.
        self.assertEqual(metric("k3_running_sequences"), 1)
        self.d.find_element(By.ID, "stop").click()
        self.assertEqual(self.wait_done(1), "stopped")
        for _ in range(100):
            if metric("k3_running_sequences") == 0 and \
                    metric("k3_requests_cancelled_total") > before:
                break
            time.sleep(0.1)
        self.assertEqual(metric("k3_running_sequences"), 0)
        self.assertGreater(metric("k3_requests_cancelled_total"), before)
        self.assertTrue(self.d.find_element(By.ID, "stop").get_attribute("disabled"))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
