"""The vscode example with the official OpenSandbox Python SDK.

Starts code-server in an opensandbox/vscode sandbox and prints its endpoint
(port 8443). A browser cannot send the endpoint's access token, so open it
through `osb sandbox forward <id> -p 8443`. Not run by this repository's
tests (the SDK is not installable on its build machine).

    pip install opensandbox
    OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... python main.py
"""

import asyncio
import os
from datetime import timedelta

from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.filesystem import WriteEntry


async def main() -> None:
    config = ConnectionConfig(
        domain=os.getenv("OPEN_SANDBOX_DOMAIN", "localhost:8080"),
        api_key=os.getenv("OPEN_SANDBOX_API_KEY"),
    )
    sandbox = await Sandbox.create(
        os.getenv("EXAMPLE_IMAGE", "opensandbox/vscode:latest"),
        entrypoint=["tail", "-f", "/dev/null"],
        timeout=timedelta(minutes=10),
        connection_config=config,
    )
    try:
        await sandbox.files.write_files([
            WriteEntry(path="/workspace/hello_from_the_sandbox.py", data="print('hello from the sandbox')\n", mode=644),
        ])
        await sandbox.commands.run("/opt/opensandbox/vscode.sh", opts=RunCommandOpts(background=True))
        endpoint = await sandbox.get_endpoint(8443)
        print(f"sandbox {sandbox.id}")
        print(f"code-server endpoint: {endpoint.endpoint}")
        print(f"in a browser: osb sandbox forward {sandbox.id} -p 8443, then open <url>/?folder=/workspace")
        await asyncio.sleep(300)
    finally:
        await sandbox.kill()


if __name__ == "__main__":
    asyncio.run(main())
