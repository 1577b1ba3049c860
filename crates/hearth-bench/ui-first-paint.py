#!/usr/bin/env python3
"""The dashboard's first contentful paint in headless Chromium.

Drives Debian's chromedriver over WebDriver (standard library only), opens
each page N times in a fresh tab state and reads the browser's own
`first-contentful-paint` entry. Usage, with hearth serving a home open on
loopback (no token), e.g. a seeded one (see ui-pages.sh):

    crates/hearth-bench/ui-first-paint.py http://127.0.0.1:7777 [N=10] [page ...]
"""
import json
import socket
import subprocess
import sys
import time
import urllib.request


def call(base, method, path, body=None):
    req = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["value"]


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7777"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    pages = sys.argv[3:] or ["/ui", "/ui/runs", "/ui/confirmations"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    driver = subprocess.Popen(
        ["chromedriver", f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                call(base, "GET", "/status")
                break
            except OSError:
                time.sleep(0.05)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                 "--window-size=1280,900"],
                    },
                }
            }
        }
        session = call(base, "POST", "/session", caps)["sessionId"]
        script = {
            "script": "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                      " return p ? p.startTime : null",
            "args": [],
        }
        print(f"{'page':<24} {'fcp p50 ms':>10} {'max ms':>8}")
        for page in pages:
            times = []
            for _ in range(n):
                call(base, "POST", f"/session/{session}/url", {"url": "about:blank"})
                call(base, "POST", f"/session/{session}/url", {"url": target + page})
                fcp = None
                for _ in range(100):
                    fcp = call(base, "POST", f"/session/{session}/execute/sync", script)
                    if fcp is not None:
                        break
                    time.sleep(0.02)
                times.append(fcp)
            times.sort()
            print(f"{page:<24} {times[len(times) // 2]:>10.1f} {times[-1]:>8.1f}")
        call(base, "DELETE", f"/session/{session}")
    finally:
        driver.terminate()


if __name__ == "__main__":
    main()
