"""The API docs page: the OpenAPI document rendered as plain HTML on the server.

FastAPI's own pages load Swagger UI / ReDoc scripts from a CDN: a blank page offline and a third
party's script in the admin's browser. This page needs no script at all.
"""

from __future__ import annotations

from html import escape
from typing import Any

STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
.op{border:1px solid #e3e3e3;border-radius:6px;padding:.6rem .9rem;margin:.7rem 0}
.m{display:inline-block;min-width:4.2rem;font-weight:700;font-family:monospace}
code{font-family:monospace;background:#f4f4f4;padding:0 .25rem}
table{border-collapse:collapse;margin:.3rem 0}td,th{border:1px solid #e3e3e3;padding:.15rem .5rem;text-align:left}
details{margin:.25rem 0}pre{background:#f7f7f7;padding:.5rem;overflow:auto}
"""


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    return str(schema.get("type", "object"))


def _schema_ref(content: dict[str, Any]) -> str:
    schema = (content.get("application/json") or {}).get("schema") or {}
    return escape(_type(schema)) if schema else ""


def render(doc: dict[str, Any], openapi_url: str) -> str:
    info = doc.get("info", {})
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in doc.get("paths", {}).items():
        for method, op in methods.items():
            for tag in op.get("tags") or ["other"]:
                by_tag.setdefault(tag, []).append((method.upper(), path, op))
    tag_notes = {t["name"]: t.get("description", "") for t in doc.get("tags", [])}
    base = (doc.get("servers") or [{"url": ""}])[0]["url"]
    out = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(info.get('title', 'API'))}</title>",
           f"<style>{STYLE}</style></head><body>",
           f"<h1>{escape(info.get('title', 'API'))}</h1><p>{escape(info.get('description', ''))}</p>",
           f'<p>The machine-readable document: <a href="{escape(openapi_url)}">{escape(openapi_url)}</a></p>']
    for tag, ops in by_tag.items():
        out.append(f"<h2 id=\"{escape(tag)}\">{escape(tag)}</h2><p>{escape(tag_notes.get(tag, ''))}</p>")
        for method, path, op in ops:
            out.append(f"<div class=op><span class=m>{method}</span> <code>{escape(base + path)}</code>"
                       f" {escape(op.get('summary', ''))}")
            params = op.get("parameters", [])
            if params:
                out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>required</th></tr>")
                for p in params:
                    out.append(f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p.get('in', ''))}</td>"
                               f"<td>{escape(_type(p.get('schema', {})))}</td><td>{'yes' if p.get('required') else ''}"
                               "</td></tr>")
                out.append("</table>")
            body = op.get("requestBody")
            if body:
                out.append(f"<div>body: <code>{_schema_ref(body.get('content', {}))}</code></div>")
            codes = ", ".join(f"{escape(code)} {_schema_ref(r.get('content', {}))}".strip()
                              for code, r in op.get("responses", {}).items())
            out.append(f"<div>answers: {codes}</div></div>")
    schemas = doc.get("components", {}).get("schemas", {})
    if schemas:
        out.append("<h2 id=schemas>schemas</h2>")
        for name, schema in schemas.items():
            rows = "".join(
                f"<tr><td><code>{escape(field)}</code></td><td>{escape(_type(spec))}</td>"
                f"<td>{'yes' if field in schema.get('required', []) else ''}</td>"
                f"<td>{escape(str(spec.get('description', '')))}</td></tr>"
                for field, spec in schema.get("properties", {}).items())
            out.append(f"<details id=\"schema-{escape(name)}\"><summary><code>{escape(name)}</code></summary>"
                       f"<table><tr><th>field</th><th>type</th><th>required</th><th>note</th></tr>{rows}</table>"
                       "</details>")
    out.append("</body></html>")
    return "".join(out)
