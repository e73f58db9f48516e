"""The desktop example with the official OpenSandbox Python SDK.

Starts the XFCE desktop of an opensandbox/desktop sandbox and prints the
endpoint of noVNC (port 6080). A browser cannot send the endpoint's access
token, so open it through `osb sandbox forward <id> -p 6080`. Not run by
this repository's tests (the SDK is not installable on its build machine).

    pip install opensandbox
    OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... python main.py
"""

import asyncio
import os
from datetime import timedelta

from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import RunCommandOpts


async def main() -> None:
    config = ConnectionConfig(
        domain=os.getenv("OPEN_SANDBOX_DOMAIN", "localhost:8080"),
        api_key=os.getenv("OPEN_SANDBOX_API_KEY"),
    )
    password = os.getenv("VNC_PASSWORD", "opensandbox")
    sandbox = await Sandbox.create(
        os.getenv("EXAMPLE_IMAGE", "opensandbox/desktop:latest"),
        entrypoint=["tail", "-f", "/dev/null"],
        timeout=timedelta(minutes=10),
        env={"VNC_PASSWORD": password},
        connection_config=config,
    )
    try:
        await sandbox.commands.run("/opt/opensandbox/desktop.sh", opts=RunCommandOpts(background=True))
        novnc = await sandbox.get_endpoint(6080)
        print(f"sandbox {sandbox.id}")
        print(f"noVNC endpoint: {novnc.endpoint} (headers: {sorted((novnc.headers or {}).keys())})")
        print(f"in a browser: osb sandbox forward {sandbox.id} -p 6080, then open <url>/vnc.html?autoconnect=true")
        await asyncio.sleep(300)
    finally:
        await sandbox.kill()


if __name__ == "__main__":
    asyncio.run(main())
