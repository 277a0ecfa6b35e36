"""Drives the registry's MCP server with the official MCP Python SDK (`mcp` on PyPI).

Usage:
  mcp_client.py stdio <registry-binary> <data-dir>   (key in REGISTRY_API_KEY)
  mcp_client.py http <url> <key> [Header=value ...]   (extra request headers, e.g. X-Project=web)
Reads a JSON plan on stdin: {"calls": [{"tool": name, "args": {...}}, ...]}; a call may be
{"resource": uri} instead (resources/read).
Prints one JSON object: protocol, server extensions, tool names with their input schemas, and
for each call its structuredContent and isError (for a resource: its contents, or the error).
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


def result_of(r):
    text = [c.text for c in r.content if getattr(c, "type", "") == "text"]
    return {
        "is_error": bool(r.is_error),
        "structured": r.structured_content,
        "text": text,
    }


async def read_resource(client, uri):
    try:
        r = await client.read_resource(uri, cache_mode="bypass")
    except Exception as e:  # the server's JSON-RPC error, as the SDK raises it
        return {"is_error": True, "error": str(e), "code": getattr(getattr(e, "error", None), "code", None)}
    contents = []
    for c in r.contents:
        contents.append({"uri": str(c.uri), "text": getattr(c, "text", None), "blob": getattr(c, "blob", None)})
    return {"is_error": False, "contents": contents}


async def drive(client, plan):
    out = {
        "protocol": str(client.protocol_version),
        "extensions": sorted((client.server_capabilities.extensions or {}).keys()),
    }
    tools = (await client.list_tools()).tools
    out["tools"] = {t.name: {"description": t.description, "input_schema": t.input_schema} for t in tools}
    out["calls"] = []
    for call in plan.get("calls", []):
        if "resource" in call:
            out["calls"].append(await read_resource(client, call["resource"]))
            continue
        r = await client.call_tool(call["tool"], call.get("args", {}))
        out["calls"].append(result_of(r))
    return out


async def main():
    mode = sys.argv[1]
    plan = json.load(sys.stdin)
    if mode == "stdio":
        binary, data_dir = sys.argv[2], sys.argv[3]
        env = {
            "REGISTRY_API_KEY": os.environ["REGISTRY_API_KEY"],
            "REGISTRY_LOG": "warn",
        }
        # The store settings too, when the tests run on PostgreSQL.
        for k in (
            "REGISTRY_MODEL_DIR",
            "ORT_DYLIB_PATH",
            "HOME",
            "REGISTRY_STORE__URL",
            "REGISTRY_STORE__SCHEMA",
        ):
            if k in os.environ:
                env[k] = os.environ[k]
        params = StdioServerParameters(
            command=binary,
            args=["--data-dir", data_dir, "mcp"],
            env=env,
        )
        async with Client(params) as client:
            out = await drive(client, plan)
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        url, key = sys.argv[2], sys.argv[3]
        headers = {"Authorization": f"Bearer {key}"}
        for h in sys.argv[4:]:
            name, _, value = h.partition("=")
            headers[name] = value
        http = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(60, read=300),
        )
        async with http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                out = await drive(client, plan)
    json.dump(out, sys.stdout)


asyncio.run(main())
