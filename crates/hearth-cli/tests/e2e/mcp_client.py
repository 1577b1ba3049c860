"""An MCP client made with the official `mcp` Python SDK, driven by the e2e
test mcp_server.rs: it connects to hearth (over streamable HTTP at a URL, or
over stdio by starting `hearth mcp serve`), lists the tools, calls
send_message and get_run, and prints what it saw as one JSON object.

usage: mcp_client.py http URL [TOKEN]
       mcp_client.py stdio HEARTH_BIN HEARTH_URL [TOKEN]
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def exercise(read, write):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        sent = await session.call_tool(
            "send_message", {"thread_key": "mcp:e2e", "text": "hello over mcp"}
        )
        run_id = sent.structured_content["run_id"]
        got = await session.call_tool("get_run", {"run_id": run_id})
        bad = await session.call_tool("get_run", {"run_id": "run_missing"})
        return {
            "server": init.server_info.name,
            "tools": [t.name for t in tools.tools],
            "answer": [c.text for c in sent.content if c.type == "text"],
            "is_error": sent.is_error,
            "envelope": sent.structured_content,
            "get_run": got.structured_content,
            "missing_is_error": bad.is_error,
        }


async def main():
    mode = sys.argv[1]
    if mode == "http":
        url = sys.argv[2]
        headers = {"Authorization": f"Bearer {sys.argv[3]}"} if len(sys.argv) > 3 else None
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                out = await exercise(streams[0], streams[1])
    elif mode == "stdio":
        args = ["--url", sys.argv[3]]
        if len(sys.argv) > 4:
            args += ["--token", sys.argv[4]]
        params = StdioServerParameters(command=sys.argv[2], args=args + ["mcp", "serve"])
        async with stdio_client(params) as (read, write):
            out = await exercise(read, write)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out))


asyncio.run(main())
