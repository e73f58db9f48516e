"""The chrome example with the official OpenSandbox Python SDK.

Starts the browser of an opensandbox/chrome sandbox and drives it from this
machine with Playwright for Python over the DevTools protocol, through the
sandbox's endpoint for port 9222. Not run by this repository's tests (the
SDK and Playwright are not installable on its build machine).

    pip install opensandbox playwright
    OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... python main.py
"""

import asyncio
import os
from datetime import timedelta
from urllib.parse import urlparse

import httpx
from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.filesystem import WriteEntry
from playwright.async_api import async_playwright

PAGE = "<!doctype html><title>Served inside the sandbox</title><h1 id=msg>Hello from the sandbox's own web server</h1>"


async def wait_devtools(base: str, headers: dict) -> dict:
    async with httpx.AsyncClient(headers=headers) as http:
        for _ in range(300):
            try:
                r = await http.get(f"{base}/json/version")
                if r.status_code == 200:
                    return r.json()
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError("DevTools did not answer")


async def main() -> None:
    config = ConnectionConfig(
        domain=os.getenv("OPEN_SANDBOX_DOMAIN", "localhost:8080"),
        api_key=os.getenv("OPEN_SANDBOX_API_KEY"),
    )
    sandbox = await Sandbox.create(
        os.getenv("EXAMPLE_IMAGE", "opensandbox/chrome:latest"),
        entrypoint=["tail", "-f", "/dev/null"],
        timeout=timedelta(minutes=10),
        connection_config=config,
    )
    try:
        await sandbox.files.write_files([WriteEntry(path="/tmp/site/index.html", data=PAGE, mode=644)])
        for cmd in ("python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site",
                    "/opt/opensandbox/chrome.sh"):
            await sandbox.commands.run(cmd, opts=RunCommandOpts(background=True))

        endpoint = await sandbox.get_endpoint(9222)
        base = endpoint.endpoint if "://" in endpoint.endpoint else f"http://{endpoint.endpoint}"
        version = await wait_devtools(base, endpoint.headers or {})
        print("DevTools answers:", version["Browser"])

        ws_url = "ws" + base[len("http"):] + urlparse(version["webSocketDebuggerUrl"]).path
        async with async_playwright() as p:
            browser = await p.chromium.connect_over_cdp(ws_url, headers=endpoint.headers or {})
            page = await browser.new_page()
            await page.goto("http://127.0.0.1:8000/")
            print("title:", await page.title())
            print("text:", await page.text_content("#msg"))
            await page.screenshot(path="chrome.png")
            await browser.close()
    finally:
        await sandbox.kill()


if __name__ == "__main__":
    asyncio.run(main())
