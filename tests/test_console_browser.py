"""The web console in headless Chromium against the real gateway.

An administrator signs in, adds a provider and a channel, creates an
application and a key, a client calls the gateway with that key through the
official openai SDK, and the console shows the call on the dashboard and in
the call log. Uses Debian's chromium (never a downloaded browser).

Screenshots go to $CONSOLE_SCREENSHOTS when set (docs/screenshots is made
that way), else to the test's temporary directory.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from openai import AsyncOpenAI

CHROMIUM = Path("/usr/bin/chromium")
DIST_INDEX = Path(__file__).resolve().parent.parent / "modelgate" / "console" / "dist" / "index.html"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (make system-deps)"),
    pytest.mark.skipif(not DIST_INDEX.exists(), reason="console not built: run `make console` first"),
]

playwright_api = pytest.importorskip("playwright.async_api")
expect = playwright_api.expect

ADMIN = "console-admin"
PASSWORD = "console-pass-1"


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 5.0) -> None:
    """Waits for a background effect of the gateway (snapshot reload, usage flush)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
def shots(tmp_path) -> Path:
    target = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path / "screenshots")
    target.mkdir(parents=True, exist_ok=True)
    return target


@pytest.fixture
async def browser():
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def page(browser, gateway):
    await gateway.services.users.create(ADMIN, PASSWORD, "ADMIN")
    context = await browser.new_context(viewport={"width": 1360, "height": 860}, base_url=gateway.url)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    await context.close()
    assert errors == [], f"JavaScript errors in the console: {errors}"


async def sign_in(page) -> None:
    await page.goto("/console/")
    await expect(page.get_by_role("heading", name="Sign in to the console")).to_be_visible()
    await page.get_by_label("Username").fill(ADMIN)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    # Wait until the dashboard's own API calls have answered.
    await expect(page.get_by_test_id("kpi-requests")).to_be_visible()
    await expect(page.get_by_role("img", name="requests per day")).to_be_visible()
    await expect(page.locator(".loading")).to_have_count(0)


async def open_page(page, label: str, heading: str) -> None:
    await page.get_by_role("navigation", name="Main").get_by_role("link", name=label).click()
    await expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()


async def test_admin_configures_gateway_and_sees_the_call(page, gateway, openai_upstream, shots):
    await sign_in(page)
    assert (await page.get_by_test_id("kpi-requests").inner_text()) == "0"

    # Provider: kind from the registry, the fake upstream's base URL, an upstream key.
    await open_page(page, "Providers & channels", "Providers & channels")
    await page.get_by_role("button", name="Add provider").first.click()
    dialog = page.get_by_role("dialog", name="Add provider")
    await dialog.locator("select[name=kind]").select_option("openai-compatible")
    await dialog.get_by_label("Name").fill("fake-openai")
    await dialog.get_by_label("Base URL").fill(openai_upstream.base_url)
    await dialog.get_by_label("Upstream API key").fill("up-key-1")
    await dialog.get_by_role("button", name="Add provider").click()
    await expect(dialog).to_be_hidden()
    providers = page.get_by_role("table", name="Providers")
    await expect(providers.get_by_role("row", name="fake-openai")).to_be_visible()
    await expect(providers).to_contain_text("OpenAI-compatible")
    await expect(providers).not_to_contain_text("up-key-1")  # the key is never shown back

    # Channel serving gpt-test.
    await page.get_by_role("button", name="Add channel").first.click()
    dialog = page.get_by_role("dialog", name="Add channel")
    await dialog.get_by_label("Name").fill("main")
    await dialog.get_by_label("Models").fill("gpt-test")
    await dialog.get_by_label("Priority").fill("0")
    await dialog.get_by_label("Weight").fill("2")
    await dialog.get_by_role("button", name="Add channel").click()
    await expect(dialog).to_be_hidden()
    channel_row = page.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="gpt-test")
    await expect(channel_row).to_contain_text("main")
    await expect(channel_row).to_contain_text("CLOSED")
    channel = (await gateway.services.channels.list())[0]
    assert (channel.name, channel.priority, channel.weight, [m.model_id for m in channel.models]) == \
        ("main", 0, 2, ["gpt-test"])

    # Health check against the fake upstream, once the gateway has loaded the new channel.
    async def channel_loaded() -> bool:
        return any(r.channel_id == channel.id for rs in gateway.runtime.snapshot.routes_by_model.values() for r in rs)

    await eventually(channel_loaded, "the channel to reach the routing snapshot")
    await channel_row.get_by_role("button", name="Check now").click()
    health = page.get_by_test_id(f"health-{channel.id}")
    await expect(health).to_contain_text("Healthy")
    await expect(health).to_contain_text(" ms")
    await page.screenshot(path=str(shots / "providers.png"))

    # Application authorised for the channel, then a key shown once.
    await open_page(page, "Applications & keys", "Applications & keys")
    await page.get_by_role("button", name="New application").first.click()
    dialog = page.get_by_role("dialog", name="New application")
    await dialog.get_by_label("Name").fill("browser-app")
    await dialog.get_by_label("Timeout (seconds)").fill("30")
    await dialog.locator("input[name=channel]").check()
    await dialog.get_by_role("button", name="Create application").click()
    await expect(dialog).to_be_hidden()
    await expect(page.get_by_role("table", name="Applications").get_by_role("row", name="browser-app")).to_contain_text("30 s")

    await page.get_by_role("button", name="Create key").click()
    dialog = page.get_by_role("dialog", name="Create key for browser-app")
    await dialog.get_by_label("Name").fill("ci")
    await dialog.get_by_role("button", name="Create key").click()
    secret_dialog = page.get_by_role("dialog", name="Your new API key")
    await expect(secret_dialog).to_contain_text("only once")
    await expect(secret_dialog.get_by_role("button", name="Copy")).to_be_visible()
    key = (await secret_dialog.get_by_test_id("new-key").inner_text()).strip()
    assert key.startswith("sk-")
    await page.screenshot(path=str(shots / "new-key.png"))
    await secret_dialog.get_by_role("button", name="I have stored the key").click()
    await expect(secret_dialog).to_be_hidden()
    keys_table = page.get_by_role("table", name="Keys")
    await expect(keys_table).to_contain_text(key[:8])
    await expect(keys_table).not_to_contain_text(key)  # the list shows the prefix only
    app = (await gateway.services.applications.list())[0]
    assert (app.name, app.timeout_seconds, app.channel_ids) == ("browser-app", 30, [channel.id])

    # A client calls the gateway with that key through the official SDK.
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)

    async def key_works() -> bool:
        try:
            return "gpt-test" in [m.id async for m in client.models.list()]
        except Exception:
            return False

    await eventually(key_works, "the new key to reach the gateway")
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": "hello from the console test"}])
    completion = raw.parse()
    trace_id = raw.headers["x-trace-id"]
    assert completion.choices[0].message.content == "Echo: hello from the console test"
    tokens = completion.usage.total_tokens
    for text in ("a second call", "and a third one with more words in it"):
        more = await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": text}])
        tokens += more.usage.total_tokens

    async def logged() -> bool:
        return (await gateway.services.call_log.query()).total == 3

    await eventually(logged, "the call log rows")

    # The dashboard counts them.
    await open_page(page, "Dashboard", "Dashboard")
    await expect(page.get_by_test_id("kpi-requests")).to_have_text("3")
    await expect(page.get_by_test_id("kpi-tokens")).to_have_text(str(tokens))
    await expect(page.get_by_test_id("kpi-errors")).to_have_text("0")
    await expect(page.get_by_role("table", name="Top models")).to_contain_text("gpt-test")
    await page.screenshot(path=str(shots / "dashboard.png"))

    # The call log lists it, found by trace id and by key.
    await open_page(page, "Call log", "Call log")
    calls = page.get_by_role("table", name="Calls")
    await expect(calls.get_by_role("row").filter(has_text=trace_id)).to_contain_text("gpt-test")
    await page.get_by_label("Trace id").fill(trace_id)
    await page.get_by_role("button", name="Filter").click()
    await expect(calls.get_by_role("row")).to_have_count(2)  # header + the one call
    row = calls.get_by_role("row").filter(has_text=trace_id)
    await expect(row).to_contain_text("200")
    await expect(row).to_contain_text(key[:8])
    await page.get_by_label("Trace id").fill("00000000-0000-0000-0000-000000000000")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.get_by_text("No calls found")).to_be_visible()
    await page.get_by_role("button", name="Clear").click()
    await expect(calls.get_by_role("row")).to_have_count(4)
    await page.screenshot(path=str(shots / "call-log.png"))

    # Signing out returns to the login page; the session is gone server-side.
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in to the console")).to_be_visible()
    response = await page.request.get("/api/v1/auth/me")
    assert response.status == 401


async def test_wrong_password_and_expired_session(page, gateway):
    await page.goto("/console/")
    await page.get_by_label("Username").fill(ADMIN)
    await page.get_by_label("Password").fill("not-the-password")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("Wrong username or password.")

    await sign_in(page)
    # The session ends behind the console's back (e.g. an admin reset the password): the
    # next API answer is 401 and the console goes back to the login page.
    await page.context.clear_cookies()
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Plan catalog").click()
    await expect(page.get_by_role("heading", name="Sign in to the console")).to_be_visible()


async def test_catalog_filters_and_error_envelope(page, gateway, shots):
    await sign_in(page)
    await open_page(page, "Plan catalog", "Plan catalog")
    table = page.get_by_role("table", name="Catalog models")
    await page.get_by_label("Capability").select_option("vision")
    await page.get_by_label("Keyword").fill("gpt-4o")
    await expect(table.get_by_role("row").filter(has_text="gpt-4o-mini").first).to_be_visible()
    for caps in await table.locator("tbody tr td:last-child").all_inner_texts():
        assert "Vision" in caps
    await page.screenshot(path=str(shots / "catalog.png"))

    # A refused change shows the API's error envelope as a readable message.
    await open_page(page, "IP blacklist", "IP blacklist")
    await page.get_by_label("Address or network").fill("not-an-address")
    await page.get_by_role("button", name="Block").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("VALIDATION_ERROR")
    await page.get_by_label("Address or network").fill("203.0.113.0/24")
    await page.get_by_role("button", name="Block").click()
    await expect(page.get_by_role("table", name="Blocked addresses")).to_contain_text("203.0.113.0/24")
    assert [e.cidr for e in await gateway.services.blacklist.list()] == ["203.0.113.0/24"]



async def test_open_breaker_force_recovery_and_events(page, gateway, openai_upstream, shots):
    from modelgate.errors import ErrorType, UpstreamError
    from modelgate.routing.breaker import BreakerState, EventContext
    from modelgate.services.events import EventService

    wiring = await gateway.wire(openai_upstream.base_url, ["gpt-test"], name="flaky")
    channel_id = wiring.channel_ids[0]
    provider = await gateway.services.providers.get(wiring.provider_id)
    endpoint = f"p{provider.id}:k{provider.keys[0].id}"
    breakers = gateway.runtime.executor.breakers
    # The upstream faults the executor would report, until the breaker opens.
    ctx = EventContext(channel_id=channel_id, model="gpt-test")
    while breakers.state(endpoint) is not BreakerState.OPEN:
        breakers.record(endpoint, UpstreamError(ErrorType.SERVICE_UNAVAILABLE, "upstream answered 503", 503), ctx)

    await sign_in(page)
    await open_page(page, "Providers & channels", "Providers & channels")
    row = page.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="flaky-channel")
    await expect(row).to_contain_text("OPEN")
    await expect(row).to_contain_text("retry in")
    await page.screenshot(path=str(shots / "breaker-open.png"))
    await row.get_by_role("button", name="Force recovery").click()
    await expect(row).to_contain_text("CLOSED")
    await expect(row.get_by_role("button", name="Force recovery")).to_have_count(0)
    assert breakers.state(endpoint) is BreakerState.CLOSED

    recorded = EventService(gateway.runtime.db)

    async def events_written() -> bool:
        page_ = await recorded.list(event_type="BREAKER_FORCED", channel_id=None, limit=10, offset=0)
        return page_.total == 1

    await eventually(events_written, "the resilience events to be stored")
    await open_page(page, "Resilience events", "Resilience events")
    events = page.get_by_role("table", name="Events")
    await expect(events.get_by_role("row").filter(has_text="Forced recovery")).to_contain_text(endpoint)
    await page.get_by_label("Event type").select_option("BREAKER_OPENED")
    await expect(events.get_by_role("row")).to_have_count(2)
    opened = events.get_by_role("row").filter(has_text="Breaker opened")
    await expect(opened).to_contain_text("flaky-channel")
    await expect(opened).to_contain_text("SERVICE_UNAVAILABLE")


async def test_deprecated_model_is_reactivated_from_the_console(page, gateway, openai_upstream):
    await gateway.wire(openai_upstream.base_url, ["gpt-test", "gpt-old"], name="lifecycle")
    instance = next(m for m in await gateway.services.models.list() if m.model_id == "gpt-old")
    await gateway.services.models.update(instance.id, state="DEPRECATED")  # as the lifecycle probe does

    await sign_in(page)
    await open_page(page, "Providers & channels", "Providers & channels")
    row = page.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="lifecycle-channel")
    await expect(row).to_contain_text("gpt-old · deprecated")
    await expect(row.get_by_role("button", name="Re-activate")).to_have_count(1)  # only the deprecated one
    await row.get_by_role("button", name="Re-activate").click()
    await expect(row.get_by_role("button", name="Re-activate")).to_have_count(0)
    await expect(row).not_to_contain_text("deprecated")
    assert (await gateway.services.models.get(instance.id)).state == "ACTIVE"
