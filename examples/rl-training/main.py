"""The rl-training example with the official OpenSandbox Python SDK.

The same flow as main.go: upload train.py, run it with streamed output,
then read the checkpoints and summary back through the files API. Not run
by this repository's tests (the SDK is not installable on its build
machine); see README.md.

    pip install opensandbox
    OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... python main.py
"""

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path

from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import ExecutionHandlers, RunCommandOpts
from opensandbox.models.filesystem import SearchEntry, WriteEntry

WORK_DIR = "/workspace/rl"


async def main() -> None:
    config = ConnectionConfig(
        domain=os.getenv("OPEN_SANDBOX_DOMAIN", "localhost:8080"),
        api_key=os.getenv("OPEN_SANDBOX_API_KEY"),
    )
    iterations = int(os.getenv("RL_ITERATIONS", "20"))
    sandbox = await Sandbox.create(
        os.getenv("EXAMPLE_IMAGE", "opensandbox/code-interpreter:latest"),
        entrypoint=["tail", "-f", "/dev/null"],
        timeout=timedelta(minutes=15),
        metadata={"example": "rl-training"},
        connection_config=config,
    )
    try:
        script = (Path(__file__).parent / "train.py").read_text()
        await sandbox.files.write_files([WriteEntry(path=f"{WORK_DIR}/train.py", data=script, mode=644)])

        async def on_stdout(msg):
            print("  train:", msg.text)

        execution = await sandbox.commands.run(
            f"python3 train.py --iterations {iterations} --out runs",
            opts=RunCommandOpts(working_directory=WORK_DIR),
            handlers=ExecutionHandlers(on_stdout=on_stdout),
        )
        if execution.error:
            raise RuntimeError(f"training failed: {execution.error.name}: {execution.error.value}")

        found = await sandbox.files.search(SearchEntry(path=f"{WORK_DIR}/runs/checkpoints", pattern="*.npz"))
        for f in sorted(found, key=lambda f: f.path):
            print(f"checkpoint {f.path} ({f.size} bytes)")

        summary = json.loads(await sandbox.files.read_file(f"{WORK_DIR}/runs/summary.json"))
        print(
            f"summary: {summary['iterations']} iterations in {summary['seconds']:.1f}s, "
            f"reward {summary['baseline_reward']:.1f} -> {summary['final_reward']:.1f}, "
            f"solved {summary['solved']}, {len(summary['checkpoints'])} checkpoints"
        )
    finally:
        await sandbox.kill()


if __name__ == "__main__":
    asyncio.run(main())
