"""The console for a team that lives in it: editing, tokens, audit log, auto-refresh and layout.

Headless Debian chromium against the real gateway with the built-in mock provider (same
fixtures as tests/test_console_browser.py). Screenshots go to $CONSOLE_SCREENSHOTS when set.
"""

from __future__ import annotations

import re

import pytest
from openai import AsyncOpenAI

from modelgate.errors import ErrorType, UpstreamError
from modelgate.providers.mock import MOCK_UPSTREAM
from modelgate.routing.breaker import BreakerState, EventContext
from tests import test_console_browser as base
from tests.test_console_browser import ADMIN, PASSWORD, eventually, expect, open_page, sign_in

pytestmark = base.pytestmark
browser, page, shots = base.browser, base.page, base.shots


@pytest.fixture(autouse=True)
async def _stop_mock():
    yield
    await MOCK_UPSTREAM.stop()


async def _wire_mock(gateway, models=("demo",), name="mock") -> str:
    svc = gateway.services
    provider = await svc.providers.create(f"{name}-provider", "mock", keys=["mock-key-000000001"])
    channel = await svc.channels.create(f"{name}-channel", provider.id, models=list(models))
    app = await svc.applications.create(f"{name}-app")
    await svc.applications.authorize_channel(app.id, channel.id)
    key = (await svc.api_keys.create(app.id, name="ci")).plaintext
    await gateway.runtime.refresh()
    return key


async def test_edit_provider_keys_mapping_rate_limit_and_app(page, gateway, shots):
    await _wire_mock(gateway)
    await sign_in(page)
    await open_page(page, "Providers & channels", "Providers & channels")
    providers = page.get_by_role("table", name="Providers")

    # Edit a provider: base URL and options, then manage its upstream keys in the same dialog.
    await providers.get_by_role("row", name="mock-provider").get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name="Edit mock-provider")
    await dialog.get_by_label("Base URL").fill("http://mock-two.modelgate.invalid/v1")
    await dialog.get_by_label("Options (JSON)").fill('{"latency_ms": 5}')
    await expect(dialog.get_by_test_id("provider-keys")).to_contain_text("••••0001")
    await page.screenshot(path=str(shots / "provider-edit.png"))
    await dialog.get_by_role("button", name="Remove key 0001").click()
    await expect(dialog.get_by_test_id("provider-keys")).to_contain_text("No keys")
    await dialog.get_by_role("button", name="Save").click()
    await expect(dialog).to_be_hidden()
    provider = await gateway.services.providers.get("mock-provider")
    assert provider.base_url == "http://mock-two.modelgate.invalid/v1" and provider.options == {"latency_ms": 5}
    assert provider.keys == []
    await providers.get_by_role("row", name="mock-provider").get_by_role("button", name="Add key").click()
    dialog = page.get_by_role("dialog", name="Add key to mock-provider")
    await dialog.get_by_label("Upstream API key").fill("mock-key-000000002")
    await dialog.get_by_role("button", name="Add key").click()
    await expect(providers.get_by_role("row", name="mock-provider")).to_contain_text("••••0002")

    # alias=upstream maps a gateway model id to the upstream name (no bogus "a=b" model id).
    await page.get_by_role("button", name="Add channel").first.click()
    dialog = page.get_by_role("dialog", name="Add channel")
    await dialog.get_by_label("Name").fill("mapped")
    await dialog.get_by_label("Models").fill("fast=mock-upstream-name, plain")
    await dialog.get_by_role("button", name="Add channel").click()
    await expect(dialog).to_be_hidden()
    mapped = await gateway.services.channels.get("mapped")
    assert {(m.model_id, m.upstream_model) for m in mapped.models} == {("fast", "mock-upstream-name"),
                                                                       ("plain", "plain")}
    row = page.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="mapped")
    await expect(row).to_contain_text("fast → mock-upstream-name")
    await row.get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name="Edit mapped")
    await expect(dialog.get_by_label("Models")).to_have_value("fast=mock-upstream-name, plain")
    await dialog.get_by_label("Models").fill("fast=other-upstream")
    await dialog.get_by_role("button", name="Save").click()
    await expect(dialog).to_be_hidden()
    mapped = await gateway.services.channels.get("mapped")
    assert [(m.model_id, m.upstream_model) for m in mapped.models] == [("fast", "other-upstream")]

    # An application's timeout and description; a key's rate limit.
    await open_page(page, "Applications & keys", "Applications & keys")
    apps = page.get_by_role("table", name="Applications")
    await apps.get_by_role("row", name="mock-app").get_by_role("button", name="Edit").click()
    dialog = page.get_by_role("dialog", name=re.compile("mock-app"))
    await dialog.get_by_label("Timeout").fill("42")
    await dialog.get_by_label("Description").fill("the mock team")
    await dialog.get_by_role("button", name="Save").click()
    await expect(dialog).to_be_hidden()
    await expect(apps.get_by_role("row", name=re.compile("mock-app"))).to_contain_text("42 s")
    app = await gateway.services.applications.get("mock-app")
    assert (app.timeout_seconds, app.description) == (42, "the mock team")
    keys = page.get_by_role("table", name="Keys")
    await keys.get_by_role("button", name="Rate limit").click()
    dialog = page.get_by_role("dialog", name=re.compile("Rate limit of"))
    await dialog.get_by_label("Burst (requests)").fill("30")
    await dialog.get_by_label("Refill per second").fill("0.5")
    await dialog.get_by_role("button", name="Save").click()
    await expect(keys).to_contain_text("30 burst · 0.5/s")
    (key,) = await gateway.services.api_keys.list("mock-app")
    assert (key.rate_capacity, key.rate_refill_per_second) == (30, 0.5)


async def test_dashboard_and_call_log_refresh_themselves(page, gateway, shots):
    key = await _wire_mock(gateway)
    client = AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    await sign_in(page)
    assert await page.get_by_test_id("kpi-requests").inner_text() == "0"
    for _ in range(3):
        await client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hello"}])
    # a call refused before naming a model must not make a blank "top model"
    import httpx

    async with httpx.AsyncClient() as http:
        r = await http.post(f"{gateway.url}/v1/chat/completions", json={"messages": []},
                            headers={"authorization": f"Bearer {key}"})
        assert r.status_code == 400
    await expect(page.get_by_test_id("kpi-requests")).to_have_text("4", timeout=15_000)  # no click
    top = page.get_by_role("table", name="Top models")
    await expect(top.get_by_role("row").filter(has_text="demo")).to_be_visible()
    await expect(top.get_by_role("row")).to_have_count(2)  # header + demo: no blank model
    ticks = await page.locator(".chart-axis").all_text_contents()
    y_ticks = [t for t in ticks if not re.fullmatch(r"\d\d-\d\d", t)]
    assert y_ticks and all(re.fullmatch(r"\d+", t) for t in y_ticks), y_ticks  # whole numbers for counts

    pause = page.get_by_role("button", name="Pause auto-refresh")
    await pause.click()
    await expect(page.get_by_role("button", name="Resume auto-refresh")).to_be_visible()

    await open_page(page, "Call log", "Call log")
    calls = page.get_by_role("table", name="Calls")
    await expect(calls.get_by_role("row")).to_have_count(5)  # header + 4
    await client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "again"}])
    await expect(calls.get_by_role("row")).to_have_count(6, timeout=15_000)


async def test_password_tokens_and_audit_pages(page, gateway, shots):
    await sign_in(page)
    # change your own password
    await page.get_by_role("button", name="Change password").click()
    dialog = page.get_by_role("dialog", name="Change your password")
    await dialog.get_by_label("Current password").fill(PASSWORD)
    await dialog.get_by_label("New password", exact=True).fill("console-pass-2")
    await dialog.get_by_label("Repeat new password").fill("console-pass-2")
    await dialog.get_by_role("button", name="Change password").click()
    await expect(dialog).to_be_hidden()
    assert await gateway.services.users.authenticate(ADMIN, "console-pass-2") is not None

    # API tokens: created, shown once, used, revoked
    await open_page(page, "API tokens", "API tokens")
    await page.get_by_role("button", name="Create token").click()
    dialog = page.get_by_role("dialog", name="Create API token")
    await dialog.get_by_label("Name").fill("deploy")
    await dialog.get_by_role("button", name="Create token").click()
    shown = page.get_by_test_id("new-token")
    await expect(shown).to_contain_text("mgt_")
    token = await shown.inner_text()
    await page.screenshot(path=str(shots / "api-token.png"))
    await page.get_by_role("button", name="I have stored the token").click()
    tokens = page.get_by_role("table", name="API tokens")
    await expect(tokens.get_by_role("row", name=re.compile("deploy"))).to_contain_text("active")
    await expect(tokens).not_to_contain_text(token)
    import httpx

    async with httpx.AsyncClient(base_url=gateway.url, headers={"authorization": f"Bearer {token}"}) as bot:
        assert (await bot.post("/api/v1/ip-blacklist", json={"cidr": "198.51.100.7"})).status_code in (200, 201)
        await tokens.get_by_role("row", name=re.compile("deploy")).get_by_role("button", name="Revoke").click()
        await page.get_by_role("dialog", name="Revoke token").get_by_role("button", name="Revoke token").click()
        await expect(tokens.get_by_role("row", name=re.compile("deploy"))).to_contain_text("revoked")
        assert (await bot.get("/api/v1/channels")).status_code == 401

    # the audit log shows who did what, from where
    await open_page(page, "Audit log", "Audit log")
    audit = page.get_by_role("table", name="Audit log")
    token_row = audit.get_by_role("row").filter(has_text="POST /ip-blacklist")
    await expect(token_row).to_contain_text("API token #")
    await expect(token_row).to_contain_text("127.0.0.1")
    await expect(audit.get_by_role("row").filter(has_text="POST /auth/password")).to_contain_text(ADMIN)
    await expect(audit.get_by_role("row").filter(has_text="POST /auth/login").first).to_contain_text("login")
    await page.get_by_label("Action").fill("api-tokens")
    await page.get_by_role("button", name="Filter").click()
    await expect(audit.get_by_role("row")).to_have_count(3)  # header, create, revoke
    await page.screenshot(path=str(shots / "audit-log.png"))


FITS = """() => {
  const problems = [];
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width + 1) problems.push(`page ${document.documentElement.scrollWidth}px wide`);
  for (const wrap of document.querySelectorAll('.table-wrap')) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) {
      problems.push(`table ${wrap.querySelector('table')?.getAttribute('aria-label')}: ${wrap.scrollWidth} > ${wrap.clientWidth}`);
    }
  }
  for (const button of document.querySelectorAll('main button')) {
    const box = button.getBoundingClientRect();
    if (box.width && (box.right > width + 1 || box.left < 0)) problems.push(`button "${button.textContent}" off-screen`);
  }
  for (const cell of document.querySelectorAll('main td')) {
    const box = cell.getBoundingClientRect();
    if (cell.textContent.trim().length > 30 && box.width < 80) problems.push(`cell squeezed to ${box.width}px: ${cell.textContent.slice(0, 30)}`);
  }
  return problems;
}"""

PAGES = [("dashboard", "Dashboard"), ("calls", "Call log"), ("events", "Resilience events"),
         ("providers", "Providers & channels"), ("applications", "Applications & keys"),
         ("catalog", "Plan catalog"), ("users", "Users"), ("blacklist", "IP blacklist"),
         ("tokens", "API tokens"), ("audit", "Audit log")]


async def _open_breaker(gateway) -> None:
    channel = await gateway.services.channels.get("mock-channel")
    provider = await gateway.services.providers.get("mock-provider")
    endpoint = f"p{provider.id}:k{provider.keys[0].id}"
    breakers = gateway.runtime.executor.breakers
    ctx = EventContext(channel_id=channel.id, model="demo")
    while breakers.state(endpoint) is not BreakerState.OPEN:
        breakers.record(endpoint, UpstreamError(ErrorType.SERVICE_UNAVAILABLE,
                                                "upstream answered 503 Service Unavailable", 503), ctx)


@pytest.mark.parametrize("width", [1280, 1440])
async def test_every_page_fits_wide_screens_with_a_breaker_open(page, gateway, shots, width):
    key = await _wire_mock(gateway, models=("demo", "a-rather-long-model-name-for-layout"))
    client = AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    await client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hello"}])
    await _open_breaker(gateway)

    async def events_written() -> bool:
        return (await gateway.services.call_log.query(limit=1)).total >= 1

    await eventually(events_written, "the call log row")
    await page.set_viewport_size({"width": width, "height": 900})
    await sign_in(page)
    for route, heading in PAGES:
        await page.goto(f"/console/{route}")
        await expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        await expect(page.locator(".loading")).to_have_count(0)
        assert await page.evaluate(FITS) == [], f"{route} at {width}px"
        if route == "providers":
            row = page.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="mock-channel")
            await expect(row).to_contain_text("OPEN")
            for name in ("Force recovery", "Check now", "Disable", "Edit"):
                await expect(row.get_by_role("button", name=name)).to_be_in_viewport()
            if width == 1440:
                await page.screenshot(path=str(shots / "breaker-open-1440.png"))


async def test_narrow_phone_screen_stays_usable(page, gateway, shots):
    key = await _wire_mock(gateway)
    client = AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    await client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hello"}])
    await _open_breaker(gateway)
    await page.set_viewport_size({"width": 390, "height": 844})
    await sign_in(page)
    await page.get_by_role("button", name="Open menu").click()
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Providers & channels").click()
    await expect(page.get_by_role("heading", name="Providers & channels", exact=True)).to_be_visible()
    row = page.get_by_role("table", name="Channels").get_by_role("row").filter(has_text="mock-channel")
    recover = row.get_by_role("button", name="Force recovery")
    await recover.scroll_into_view_if_needed()
    await expect(recover).to_be_in_viewport()
    await recover.click()
    await expect(row).to_contain_text("CLOSED")
    for route, heading in (("calls", "Call log"), ("events", "Resilience events"), ("audit", "Audit log")):
        await page.goto(f"/console/{route}")
        await expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        # nothing but the tables themselves may scroll sideways
        assert await page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1")
    await page.goto("/console/calls")
    trace = page.get_by_role("table", name="Calls").locator("code.trace").first
    await trace.scroll_into_view_if_needed()
    await expect(trace).to_be_in_viewport()
    await page.screenshot(path=str(shots / "phone-call-log.png"))


async def test_add_provider_with_kind_options_and_a_keyless_cloud_identity(page, gateway, shots):
    """The add form takes the provider options, names those the chosen kind reads, and needs no
    key when `auth` names a cloud identity chain."""
    await sign_in(page)
    await open_page(page, "Providers & channels", "Providers & channels")
    await page.get_by_role("button", name="Add provider").first.click()
    dialog = page.get_by_role("dialog", name="Add provider")
    await dialog.locator("select[name=kind]").select_option("ollama")
    options = dialog.get_by_label("Options (JSON)")
    hint = page.locator(f"#{await options.get_attribute('aria-describedby')}")
    for name in ("num_ctx", "keep_alive", "think"):
        await expect(hint).to_contain_text(name)
    await dialog.get_by_label("Name").fill("local-ollama")
    await options.fill('{"num_ctx": 32768, "keep_alive": "30m", "think": false}')
    await dialog.get_by_role("button", name="Add provider").click()
    await expect(dialog).to_be_hidden()
    provider = await gateway.services.providers.get("local-ollama")
    assert provider.options == {"num_ctx": 32768, "keep_alive": "30m", "think": False}

    await page.get_by_role("button", name="Add provider").first.click()
    dialog = page.get_by_role("dialog", name="Add provider")
    await dialog.locator("select[name=kind]").select_option("aws-bedrock")
    await dialog.get_by_label("Name").fill("bedrock-irsa")
    key = dialog.get_by_label("Upstream API key")
    await expect(key).to_have_attribute("required", "")
    await dialog.get_by_label("Options (JSON)").fill('{"auth": "aws", "region": "eu-west-1"}')
    await expect(key).not_to_have_attribute("required", "")
    await page.screenshot(path=str(shots / "provider-add-options.png"))
    await dialog.get_by_role("button", name="Add provider").click()
    await expect(dialog).to_be_hidden()
    provider = await gateway.services.providers.get("bedrock-irsa")
    assert provider.options == {"auth": "aws", "region": "eu-west-1"} and provider.keys == []

    # options that are not a JSON object are refused in the form, nothing is created
    await page.get_by_role("button", name="Add provider").first.click()
    dialog = page.get_by_role("dialog", name="Add provider")
    await dialog.locator("select[name=kind]").select_option("ollama")
    await dialog.get_by_label("Name").fill("bad-options")
    await dialog.get_by_label("Options (JSON)").fill('["num_ctx"]')
    await dialog.get_by_role("button", name="Add provider").click()
    await expect(dialog).to_contain_text("Options must be a JSON object")
    assert "bad-options" not in [p.name for p in await gateway.services.providers.list()]
