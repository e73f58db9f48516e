"""The flow of main.go with the official Python SDK (`pip install opensandbox`).

Claude Code runs in a sandbox from opensandbox/coding-agent that may reach
only the API host; the real key goes into the sandbox's credential vault,
held by the egress sidecar, which adds it as x-api-key to the requests the
CLI sends there. The CLI gets a placeholder. Afterwards keyscan.py (next to
this file) looks for the key in every file under / and in the environment
and command line of every process, given only the key's SHA-256, length
and first six characters.

    OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... \\
    ANTHROPIC_API_KEY=sk-ant-... python3 examples/coding-agent/main.py

The environment variables are main.go's. This file is documentation: the
machine this project is built on reaches no Python package index, so it is
not run in the tests (main.go is, in test/e2e/example_coding_agent_test.go).
"""

import asyncio
import hashlib
import json
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.sandboxes import CredentialProxyConfig, NetworkPolicy, NetworkRule

PLACEHOLDER = "sk-ant-placeholder-the-vault-injects-the-real-key"
CA_IN_SANDBOX = "/opt/opensandbox/egress-ca.pem"  # put there by the server
SANDBOX_UID = 1000  # the image's user `sandbox`


def target(name: str, secret: str, n: int) -> str:
    """keyscan.py's description of a secret: SHA-256, length, first n bytes."""
    raw = secret.encode()
    return f"{name}:{hashlib.sha256(raw).hexdigest()}:{len(raw)}:{raw[:n].hex()}"


def stdout_text(execution) -> str:
    return "\n".join(m.text for m in execution.logs.stdout)


async def main() -> int:
    key = os.environ.get("ANTHROPIC_API_KEY", "")
    if len(key) < 16:
        sys.exit("set ANTHROPIC_API_KEY to your Anthropic API key (it is never sent into the sandbox)")
    base_url = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
    parts = urlsplit(base_url)
    if parts.scheme != "https" or not parts.hostname:
        sys.exit(f"ANTHROPIC_BASE_URL {base_url!r}: want an https URL")
    api_host = parts.hostname
    image = os.environ.get("EXAMPLE_IMAGE", "opensandbox/coding-agent:latest")
    prompt = os.environ.get("EXAMPLE_PROMPT", "What is 6 times 7? Reply with the equation and its result only.")

    config = ConnectionConfig(
        domain=os.environ.get("OPEN_SANDBOX_DOMAIN", "localhost:8080"),
        api_key=os.environ.get("OPEN_SANDBOX_API_KEY"),
    )
    sandbox = await Sandbox.create(
        image,
        connection_config=config,
        timeout=timedelta(minutes=15),
        ready_timeout=timedelta(minutes=2),
        network_policy=NetworkPolicy(
            default_action="deny", egress=[NetworkRule(action="allow", target=api_host)]
        ),
        credential_proxy=CredentialProxyConfig(enabled=True),
    )
    try:
        print(f"sandbox {sandbox.id} ready (egress: only {api_host})")
        # The key goes to the sidecar, never to a process in the sandbox.
        await sandbox.credential_vault.create(
            credentials=[{"name": "anthropic", "source": {"type": "inline", "value": key}}],
            bindings=[{
                "name": "anthropic-api",
                "match": {"hosts": [api_host]},
                "auth": {"type": "apiKey", "name": "x-api-key", "credential": "anthropic"},
            }],
        )

        execution = await sandbox.commands.run(
            'claude -p "$PROMPT"',
            opts=RunCommandOpts(
                working_directory="/workspace",
                uid=SANDBOX_UID,
                gid=SANDBOX_UID,
                timeout=timedelta(minutes=5),
                envs={
                    "PROMPT": prompt,
                    "ANTHROPIC_BASE_URL": base_url,
                    "ANTHROPIC_API_KEY": PLACEHOLDER,
                    "NODE_EXTRA_CA_CERTS": CA_IN_SANDBOX,
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "DISABLE_AUTOUPDATER": "1",
                },
            ),
        )
        if execution.error:
            print(f"claude -p failed: {execution.error}", file=sys.stderr)
            return 1
        print(f"claude -p {prompt!r} answered:\n{stdout_text(execution)}")

        # The scan: a canary shows it finds what is there.
        canary = "canary-" + secrets.token_hex(16)
        await sandbox.files.write_file("/tmp/coding-agent-canary.txt", canary + "\n")
        await sandbox.files.write_file(
            "/tmp/keyscan.py", (Path(__file__).parent / "keyscan.py").read_text()
        )
        scan = await sandbox.commands.run(
            "python3 /tmp/keyscan.py",
            opts=RunCommandOpts(
                uid=0, gid=0, timeout=timedelta(minutes=5),
                envs={"SCAN_TARGETS": target("key", key, 6) + "," + target("canary", canary, 7)},
            ),
        )
        res = json.loads(scan.logs.stdout[-1].text)
        print(f"key scan: {res['files']} files under /, {res['processes']} processes")
        if not res["found"]["canary"]:
            print("the scan did not find the canary: it cannot be trusted", file=sys.stderr)
            return 1
        if res["found"]["key"]:
            print("the API key IS inside the sandbox: " + ", ".join(res["found"]["key"]), file=sys.stderr)
            return 1
        print("key scan: API key found nowhere in the sandbox")
        return 0
    finally:
        await sandbox.kill()
        await sandbox.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
