"""The HTML report in a real browser: headless Chromium (Debian's chromium) loads the pages that
report_test.py wrote, driven over the DevTools protocol on a pipe (--remote-debugging-pipe: no
port, no extra package). Checks: no console errors, no exceptions, no network request but the page
itself, every chart drawn with its marks (each mark has a size on screen), no sideways scrolling
at 1150 px, the summary table sorts on a click. Screenshots are kept next to the pages.

usage: chromium_test.py ARTIFACT_DIR   (exit 77: no chromium here)
"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

ART = sys.argv[1]
CHROME = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if not CHROME:
    print("SKIP: no headless Chromium (Debian's chromium package: apt-get install chromium)")
    sys.exit(77)
PAGES = ["synthetic.html", "compare.html", "bench.html"]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


for p in PAGES:
    if not os.path.exists(os.path.join(ART, p)):
        print(f"FAIL: {p} missing in {ART}: report.html writes it (ctest runs it first)")
        sys.exit(1)


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="alma-chromium-")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():
            # through fds above 4 first: dup2 onto itself would keep close-on-exec
            a, c = os.dup(to_r), os.dup(from_w)
            a2, c2 = os.dup2(a, 100), os.dup2(c, 101)
            os.dup2(a2, 3)
            os.dup2(c2, 4)

        self.p = subprocess.Popen(
            [CHROME, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--disable-default-apps", "--user-data-dir=" + self.profile, "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        return self.wait(lambda m: m.get("id") == self.next_id, f"reply to {method}")

    def read(self, timeout):
        while b"\0" not in self.buf:
            r, _, _ = select.select([self.from_r], [], [], timeout)
            if not r:
                return None
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def wait(self, pred, what, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            m = self.read(max(0.1, end - time.time()))
            if m is None:
                break
            if "method" in m:
                self.events.append(m)
            if pred(m):
                if "error" in m:
                    raise RuntimeError(f"{what}: {m['error']}")
                return m.get("result", m.get("params"))
        raise RuntimeError(f"timed out waiting for {what}")

    def close(self):
        try:
            os.write(self.to_w, json.dumps({"id": 10 ** 6, "method": "Browser.close"}).encode() + b"\0")
            self.p.wait(timeout=20)
        except Exception:
            self.p.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


PROBE = r"""
(function() {
  var out = {charts: [], scroll: [document.documentElement.scrollWidth, document.documentElement.clientWidth]};
  document.querySelectorAll('svg.chart').forEach(function(s) {
    var ms = s.querySelectorAll('.mark'), drawn = 0;
    ms.forEach(function(m) { var b = m.getBBox(); if (b.width > 0 || b.height > 0) drawn++; });
    var r = s.getBoundingClientRect();
    out.charts.push({kind: s.getAttribute('data-chart'), marks: ms.length, drawn: drawn, w: r.width, h: r.height});
  });
  var t = document.getElementById('summary');
  if (t) {
    var ths = t.tHead.rows[0].cells, col = -1;
    for (var i = 0; i < ths.length; i++) if (ths[i].textContent === 'median ms') col = i;
    function values() { return Array.prototype.map.call(t.tBodies[0].rows, function(r) { return r.cells[col].getAttribute('data-v'); }); }
    ths[col].click(); out.asc = values();
    ths[col].click(); out.desc = values();
  }
  out.height = document.documentElement.scrollHeight;
  return out;
})()
"""

b = Browser()
try:
    target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    sess = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for dom in ("Page", "Runtime", "Log", "Network"):
        b.send(dom + ".enable", {}, sess)
    b.send("Emulation.setDeviceMetricsOverride", {"width": 1150, "height": 900, "deviceScaleFactor": 1, "mobile": False}, sess)
    for page in PAGES:
        path = os.path.abspath(os.path.join(ART, page))
        url = "file://" + path
        b.events = []
        b.send("Page.navigate", {"url": url}, sess)
        b.wait(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == sess, f"{page} to load")
        time.sleep(0.3)  # late console messages
        while b.read(0.05):
            pass
        res = b.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, sess)["result"]["value"]
        ev = [e for e in b.events if e.get("sessionId") == sess]
        errors = [e["params"] for e in ev if e["method"] == "Runtime.exceptionThrown"]
        errors += [e["params"] for e in ev if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")]
        errors += [e["params"]["entry"] for e in ev if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
        check(not errors, f"{page}: console errors: {json.dumps(errors)[:800]}")
        reqs = [e["params"]["request"]["url"] for e in ev if e["method"] == "Network.requestWillBeSent"]
        others = [u for u in reqs if u != url and not u.startswith("data:")]
        check(not others, f"{page}: network requests beyond the page: {others[:5]}")
        check(res["charts"], f"{page}: no charts rendered")
        for c in res["charts"]:
            check(c["marks"] > 0 and c["drawn"] == c["marks"], f"{page}: chart {c['kind']}: {c['drawn']} of {c['marks']} marks drawn")
            check(c["w"] > 50 and c["h"] > 20, f"{page}: chart {c['kind']} is {c['w']}x{c['h']} px")
        check(res["scroll"][0] <= res["scroll"][1], f"{page}: scrolls sideways at 1150 px ({res['scroll']})")
        if "asc" in res:
            num = lambda v: [float(x) for x in v if x not in ("", None)]
            a, d = num(res["asc"]), num(res["desc"])
            check(a == sorted(a) and d == sorted(d, reverse=True) and len(a) > 1,
                  f"{page}: sorting by median: {res['asc']} / {res['desc']}")
            check(res["asc"][-1] == "" if "" in res["asc"] else True, f"{page}: rows without a median do not sort last")
        print(f"{page}: {len(res['charts'])} charts, {sum(c['marks'] for c in res['charts'])} marks, {len(reqs)} request(s)")
        shot = b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                  "clip": {"x": 0, "y": 0, "width": 1150, "height": res["height"], "scale": 1}}, sess)
        with open(os.path.join(ART, page.replace(".html", ".png")), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
finally:
    b.close()

if FAILS:
    print(f"{len(FAILS)} failure(s)")
    sys.exit(1)
print("ok")
