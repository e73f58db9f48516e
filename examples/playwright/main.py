"""Headless Chromium in a sandbox, with the official OpenSandbox Python SDK.

The same flow as main.go beside this file: create a sandbox from the
opensandbox/playwright image, write page.html and scrape.js into it (files
API), serve the page with python3 -m http.server in a background command,
run the Playwright script with Node.js (commands API), download the
full-page screenshot (files API), print what was scraped and the PNG's size,
and kill the sandbox.

    pip install opensandbox
    OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... python3 main.py [--out screenshot.png]

EXAMPLE_IMAGE overrides the image (default opensandbox/playwright:latest).
"""

import argparse
import asyncio
import json
import os
import struct
import time
from datetime import timedelta
from pathlib import Path

from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import RunCommandOpts

HERE = Path(__file__).resolve().parent
SITE_DIR = "/workspace/site"
SCRIPT_PATH = "/workspace/scrape.js"
SHOT_PATH = "/workspace/screenshot.png"
PORT = 8000


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def text(messages) -> str:
    return "\n".join(m.text for m in messages)


async def main(out: str) -> None:
    config = ConnectionConfig(
        domain=os.environ.get("OPEN_SANDBOX_DOMAIN", "localhost:8080"),
        api_key=os.environ.get("OPEN_SANDBOX_API_KEY"),
    )
    image = os.environ.get("EXAMPLE_IMAGE") or "opensandbox/playwright:latest"
    start = time.monotonic()
    sandbox = await Sandbox.create(
        image,
        entrypoint=["tail", "-f", "/dev/null"],
        timeout=timedelta(minutes=10),
        resource={"cpu": "1", "memory": "2Gi"},
        connection_config=config,
    )
    print(f"sandbox {sandbox.id} ready in {time.monotonic() - start:.3f}s")
    try:
        # The page and the script go in through the files API.
        await sandbox.files.write_file(
            f"{SITE_DIR}/index.html", (HERE / "page.html").read_text(), mode=644
        )
        await sandbox.files.write_file(
            SCRIPT_PATH, (HERE / "scrape.js").read_text(), mode=644
        )

        # A web server inside the sandbox, in the background.
        server = await sandbox.commands.run(
            f"python3 -m http.server {PORT} --bind 127.0.0.1 --directory {SITE_DIR}",
            opts=RunCommandOpts(background=True),
        )
        url = f"http://127.0.0.1:{PORT}/"
        wait = await sandbox.commands.run(
            f"for i in $(seq 100); do curl -fsS -o /dev/null {url} 2>/dev/null && exit 0; "
            f'sleep 0.1; done; echo "nothing answers at {url} after 10 s" >&2; exit 1'
        )
        if wait.error:
            raise RuntimeError(text(wait.logs.stderr))
        print(f"web server (command {server.id}) serving {url} inside the sandbox")

        # The Playwright script, through the commands API; playwright-core
        # is found through the image's NODE_PATH.
        run = await sandbox.commands.run(
            f"node {SCRIPT_PATH} {url} {SHOT_PATH}",
            opts=RunCommandOpts(working_directory="/workspace"),
        )
        if run.error:
            raise RuntimeError(f"node {SCRIPT_PATH} failed:\n{text(run.logs.stderr)}")
        lines = [m.text for m in run.logs.stdout if m.text.strip()]
        res = json.loads(lines[-1])
        print(f"scraped with playwright-core {res['playwright']} and Chromium {res['chromium']}")
        print(f"  title:   {res['title']}")
        print(f"  h1:      {res['heading']}")
        print(f"  tagline: {res['tagline']}")
        print(f"  items:   {', '.join(res['items'])}")

        # The screenshot comes back through the files API.
        data = await sandbox.files.read_bytes(SHOT_PATH)
        Path(out).write_bytes(data)
        width, height = png_size(data)
        print(f"screenshot {out}: {width}x{height} PNG, {len(data)} bytes")
    finally:
        await sandbox.kill()
        await sandbox.close()
        print("sandbox killed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="screenshot.png", help="where to save the screenshot")
    asyncio.run(main(parser.parse_args().out))
