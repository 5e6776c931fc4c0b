"""The browser tests' stand-in for a wallet extension's link to the node.

A wallet extension asks the node from its own process, so the page's Content-Security-Policy
(`connect-src 'self'`) never applies to those requests. The tests' wallet is a script in the page,
whose own `fetch` to the node would be refused by that policy; so it asks through `walletNode`, a
function Playwright exposes to the page and runs in the test process, as an extension would. The
policy then holds the page alone, as it does with a real wallet, and the tests see any violation.
"""

from __future__ import annotations

import urllib.request

from playwright.sync_api import BrowserContext, ConsoleMessage, Page

CSP_VIOLATION = "Content Security Policy"  # how Chromium's console words a refusal by the policy


def link_wallet_to_node(context: BrowserContext, rpc_url: str) -> None:
    """Exposes `window.walletNode(body: string): Promise<string>`, a JSON-RPC call to `rpc_url`."""

    def node(body: str) -> str:
        request = urllib.request.Request(rpc_url, data=body.encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return str(response.read().decode())

    context.expose_function("walletNode", node)


def record_policy_violations(page: Page) -> list[str]:
    """The console's complaints of the page's Content-Security-Policy, as they come."""
    violations: list[str] = []

    def seen(message: ConsoleMessage) -> None:
        if CSP_VIOLATION in message.text:
            violations.append(message.text)

    page.on("console", seen)
    return violations
