"""The official `openai` Python package against hearth's /openai/v1.

Usage: openai_client.py <base_url> <api_key>

Makes the calls an OpenAI client makes (models, a plain and a streaming chat
completion, both again for a run with a tool call in the middle, client-side
tools) and prints what it got as one JSON object; the
Rust test (openai.rs) asserts on it. Any exception fails the script.
"""

import json
import sys

import openai


def main() -> None:
    base_url, api_key = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    out = {"version": openai.__version__}

    out["models"] = [m.id for m in client.models.list()]

    messages = [
        {"role": "system", "content": "answer briefly"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "plain question"},
    ]
    r = client.chat.completions.create(model="hearth", messages=messages, user="py")
    out["plain"] = {
        "object": r.object,
        "model": r.model,
        "content": r.choices[0].message.content,
        "role": r.choices[0].message.role,
        "finish_reason": r.choices[0].finish_reason,
        "usage": [r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens],
    }

    stream = client.chat.completions.create(
        model="hearth/fake/fake-model",
        messages=[{"role": "user", "content": "streamed question"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage, chunks = "", None, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens, chunk.usage.total_tokens]
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    out["stream"] = {"content": text, "finish_reason": finish, "usage": usage, "chunks": chunks}

    # The model says something, calls a tool, then answers: plain and
    # streamed, the client gets the same answer.
    ask = [{"role": "user", "content": "what time is it?"}]
    plain = client.chat.completions.create(model="hearth", messages=ask).choices[0].message.content
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model="hearth", messages=ask, stream=True)
        if c.choices
    )
    out["tool_turn"] = {"plain": plain, "stream": streamed}

    try:
        client.chat.completions.create(
            model="hearth",
            messages=[{"role": "user", "content": "use my tool"}],
            tools=[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        )
        out["tools"] = "accepted"
    except openai.BadRequestError as e:
        out["tools"] = {"status": e.status_code, "param": e.param, "type": e.type}

    try:
        openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
        out["bad_key"] = "accepted"
    except openai.AuthenticationError as e:
        out["bad_key"] = {"status": e.status_code, "code": e.code}

    print(json.dumps(out))


if __name__ == "__main__":
    main()
