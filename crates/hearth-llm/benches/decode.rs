//! Stream decoding benchmarks: bytes of a streamed answer in, events out.
//!
//! Each adapter gets synthetic bodies shaped byte for byte like its
//! provider's (Chat Completions chunks, Responses API named events with the
//! whole output echoed by the `.done` events and `response.completed`,
//! Anthropic's `event:`/`data:` pairs, Gemini's CRLF `data:` lines), about
//! 2 MB each: many short text deltas
//! (3-20 bytes, the usual case), fewer long ones (~300 bytes), and tool-call
//! arguments. They are fed in reads of 1-4 KiB as a socket hands them over,
//! through
//!
//! - `sse/*`: the `SseDecoder` alone (events recycled, as the adapters do);
//! - `decode/*`: the adapter's decoder, the code its `Provider::stream` runs
//!   (SSE, JSON, `StreamEvent`s);
//! - `accumulate/*`: the same plus an `Accumulator` building the turn.
//!
//! Throughput is body bytes per second. Run with
//! `cargo bench -p hearth-llm --bench decode`.

#![expect(
    clippy::unwrap_used,
    reason = "a benchmark unwraps what it set up; a failure there is a broken benchmark"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use hearth_core::StreamEvent;
use hearth_llm::anthropic::AnthropicDecoder;
use hearth_llm::gemini::GeminiDecoder;
use hearth_llm::openai::OpenAiDecoder;
use hearth_llm::openai_compat::OpenAiCompatDecoder;
use hearth_llm::sse::SseDecoder;
use hearth_llm::{Accumulator, LlmError};

/// Bytes of body each stream grows to (it stops at the first delta past it).
const TARGET: usize = 2 * 1024 * 1024;
/// Read sizes cycled through when feeding a body: TLS records and TCP
/// segments of a real connection vary in the 1-4 KiB range.
const READS: [usize; 6] = [1024, 4096, 1460, 2920, 2048, 3500];

/// A deterministic generator (xorshift), so every run sees the same bodies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: [&str; 24] = [
    "the", "model", "answer", "is", "streamed", "token", "by", "a", "of", "über", "naïve", "and",
    "with", "function", "returns", "value", "🌍", "x", "config", "Rust", "async", "error", "code",
    "in",
];

/// Prose of about `len` bytes: words, spaces, now and then punctuation, a
/// newline or quotes (which JSON escapes).
fn prose(rng: &mut Rng, len: usize) -> String {
    let mut s = String::new();
    while s.len() < len {
        if !s.is_empty() || rng.below(2) == 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len())]);
        match rng.below(40) {
            0 => s.push_str(".\n"),
            1 => s.push_str(", \"quoted\""),
            2 | 3 => s.push(','),
            _ => {}
        }
    }
    s
}

/// Text deltas: `min..=max` bytes of prose each.
fn deltas(seed: u64, min: usize, max: usize) -> impl FnMut() -> String {
    let mut rng = Rng(seed);
    move || {
        let len = min + rng.below(max - min + 1);
        prose(&mut rng, len)
    }
}

/// Tool-call argument fragments of a long JSON argument, as models stream them.
fn arg_fragments(seed: u64) -> impl FnMut() -> String {
    let mut rng = Rng(seed);
    move || match rng.below(6) {
        0 => "{\"path\": \"".to_owned(),
        1 => "src/main.rs\", ".to_owned(),
        2 => "\"content\": \"".to_owned(),
        3 => format!(
            "fn main() {{\\n    println!(\\\"{}\\\");\\n}}",
            rng.below(1000)
        ),
        4 => "\", \"line\": ".to_owned(),
        _ => format!("{}}}", rng.below(10_000)),
    }
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// What a body's deltas carry.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Tool,
}

const OPENAI_HEAD: &str = r#""id":"chatcmpl-AJ9xYb2kLq","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1""#;

fn openai_body(kind: Kind, mut next: impl FnMut() -> String) -> Vec<u8> {
    let mut b = Vec::with_capacity(TARGET + 4096);
    let frame = |b: &mut Vec<u8>, rest: &str| {
        b.extend_from_slice(b"data: {");
        b.extend_from_slice(OPENAI_HEAD.as_bytes());
        b.extend_from_slice(rest.as_bytes());
        b.extend_from_slice(b"}\n\n");
    };
    match kind {
        Kind::Text => frame(
            &mut b,
            r#","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]"#,
        ),
        Kind::Tool => frame(
            &mut b,
            r#","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Qx3b7hJd9","type":"function","function":{"name":"write_file","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]"#,
        ),
    }
    while b.len() < TARGET {
        let d = json(&next());
        let rest = match kind {
            Kind::Text => format!(
                r#","choices":[{{"index":0,"delta":{{"content":{d}}},"logprobs":null,"finish_reason":null}}]"#
            ),
            Kind::Tool => format!(
                r#","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{d}}}}}]}},"logprobs":null,"finish_reason":null}}]"#
            ),
        };
        frame(&mut b, &rest);
    }
    let finish = match kind {
        Kind::Text => "stop",
        Kind::Tool => "tool_calls",
    };
    frame(
        &mut b,
        &format!(
            r#","choices":[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"{finish}"}}]"#
        ),
    );
    frame(
        &mut b,
        r#","choices":[],"usage":{"prompt_tokens":1021,"completion_tokens":20480,"total_tokens":21501,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}"#,
    );
    b.extend_from_slice(b"data: [DONE]\n\n");
    b
}

const RESPONSES_HEAD: &str = r#""id":"resp_68af4d3c9b5c8190a1b2c3d4e5f60718","object":"response","created_at":1756318012,"model":"gpt-5-mini-2025-08-07","parallel_tool_calls":true,"store":false,"temperature":1.0,"tool_choice":"auto","top_p":1.0,"truncation":"disabled""#;
const RESPONSES_MSG_ID: &str = "msg_68af4d3d1e8c8190b7c6d5e4f3a2b1c0";
const RESPONSES_CALL_ID: &str = "fc_68af4d3d1e8c8190c4d3e2f1a0b9c8d7";

/// A Responses API stream: every event named, numbered and typed; deltas
/// padded with `obfuscation`; the whole output echoed three (arguments) or
/// four (text) times at the end, which counts towards the body's size.
fn responses_body(kind: Kind, mut next: impl FnMut() -> String) -> Vec<u8> {
    let mut b = Vec::with_capacity(TARGET + 4096);
    let mut seq = 0u64;
    let mut event = |b: &mut Vec<u8>, name: &str, rest: &str| {
        b.extend_from_slice(
            format!(
                "event: {name}\ndata: {{\"type\":\"{name}\",\"sequence_number\":{seq},{rest}}}\n\n"
            )
            .as_bytes(),
        );
        seq += 1;
    };
    let response = |status: &str, output: &str, usage: &str| {
        format!(
            r#""response":{{{RESPONSES_HEAD},"status":"{status}","output":[{output}],"usage":{usage}}}"#
        )
    };
    event(
        &mut b,
        "response.created",
        &response("in_progress", "", "null"),
    );
    event(
        &mut b,
        "response.in_progress",
        &response("in_progress", "", "null"),
    );
    let item = |status: &str, full: &str| match kind {
        Kind::Text => format!(
            r#"{{"id":"{RESPONSES_MSG_ID}","type":"message","status":"{status}","content":[{full}],"role":"assistant"}}"#
        ),
        Kind::Tool => format!(
            r#"{{"id":"{RESPONSES_CALL_ID}","type":"function_call","status":"{status}","arguments":{full},"call_id":"call_Qx3b7hJd9kLmN0pR","name":"write_file"}}"#
        ),
    };
    let empty = match kind {
        Kind::Text => "",
        Kind::Tool => r#""""#,
    };
    event(
        &mut b,
        "response.output_item.added",
        &format!(r#""output_index":0,"item":{}"#, item("in_progress", empty)),
    );
    let text_at = format!(r#""item_id":"{RESPONSES_MSG_ID}","output_index":0,"content_index":0"#);
    let call_at = format!(r#""item_id":"{RESPONSES_CALL_ID}","output_index":0"#);
    if let Kind::Text = kind {
        event(
            &mut b,
            "response.content_part.added",
            &format!(
                r#"{text_at},"part":{{"type":"output_text","annotations":[],"logprobs":[],"text":""}}"#
            ),
        );
    }
    let (name, at, copies) = match kind {
        Kind::Text => ("response.output_text.delta", &text_at, 4),
        Kind::Tool => ("response.function_call_arguments.delta", &call_at, 3),
    };
    let mut full = String::new();
    let mut escaped = 2;
    let mut pad = Rng(5);
    while b.len() + copies * escaped < TARGET {
        let d = next();
        let j = json(&d);
        escaped += j.len() - 2;
        full.push_str(&d);
        let obfuscation = &"Xq3vT9kLm2Pz7wYb"[..pad.below(16)];
        let logprobs = match kind {
            Kind::Text => r#","logprobs":[]"#,
            Kind::Tool => "",
        };
        event(
            &mut b,
            name,
            &format!(r#"{at},"delta":{j}{logprobs},"obfuscation":"{obfuscation}""#),
        );
    }
    let full = json(&full);
    let done = match kind {
        Kind::Text => {
            event(
                &mut b,
                "response.output_text.done",
                &format!(r#"{text_at},"text":{full},"logprobs":[]"#),
            );
            let part =
                format!(r#"{{"type":"output_text","annotations":[],"logprobs":[],"text":{full}}}"#);
            event(
                &mut b,
                "response.content_part.done",
                &format!(r#"{text_at},"part":{part}"#),
            );
            item("completed", &part)
        }
        Kind::Tool => {
            event(
                &mut b,
                "response.function_call_arguments.done",
                &format!(r#"{call_at},"arguments":{full}"#),
            );
            item("completed", &full)
        }
    };
    event(
        &mut b,
        "response.output_item.done",
        &format!(r#""output_index":0,"item":{done}"#),
    );
    event(
        &mut b,
        "response.completed",
        &response(
            "completed",
            &done,
            r#"{"input_tokens":1021,"input_tokens_details":{"cached_tokens":0},"output_tokens":20480,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":21501}"#,
        ),
    );
    b
}

fn anthropic_body(kind: Kind, mut next: impl FnMut() -> String) -> Vec<u8> {
    let mut b = Vec::with_capacity(TARGET + 4096);
    let event = |b: &mut Vec<u8>, name: &str, data: &str| {
        b.extend_from_slice(b"event: ");
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(b"\ndata: ");
        b.extend_from_slice(data.as_bytes());
        b.extend_from_slice(b"\n\n");
    };
    event(
        &mut b,
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1021,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}"#,
    );
    match kind {
        Kind::Text => event(
            &mut b,
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        Kind::Tool => event(
            &mut b,
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"write_file","input":{}}}"#,
        ),
    }
    event(&mut b, "ping", r#"{"type": "ping"}"#);
    while b.len() < TARGET {
        let d = json(&next());
        let data = match kind {
            Kind::Text => format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{d}}}}}"#
            ),
            Kind::Tool => format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{d}}}}}"#
            ),
        };
        event(&mut b, "content_block_delta", &data);
    }
    event(
        &mut b,
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    );
    let stop = match kind {
        Kind::Text => "end_turn",
        Kind::Tool => "tool_use",
    };
    event(
        &mut b,
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop}","stop_sequence":null}},"usage":{{"output_tokens":20480}}}}"#
        ),
    );
    event(&mut b, "message_stop", r#"{"type":"message_stop"}"#);
    b
}

fn gemini_body(kind: Kind, mut next: impl FnMut() -> String) -> Vec<u8> {
    let mut b = Vec::with_capacity(TARGET + 4096);
    let mut n = 0u64;
    let frame = |b: &mut Vec<u8>, part: &str, finish: &str, n: u64| {
        b.extend_from_slice(format!(
            r#"data: {{"candidates": [{{"content": {{"parts": [{part}],"role": "model"}}{finish},"index": 0}}],"usageMetadata": {{"promptTokenCount": 1021,"candidatesTokenCount": {n},"totalTokenCount": {}}},"modelVersion": "gemini-2.5-flash","responseId": "mXvOaKr2BtK7nvgPqNzUwQE"}}"#,
            1021 + n
        ).as_bytes());
        b.extend_from_slice(b"\r\n\r\n");
    };
    while b.len() < TARGET {
        n += 1;
        let part = match kind {
            Kind::Text => format!(r#"{{"text": {}}}"#, json(&next())),
            // Gemini sends whole calls, never argument fragments.
            Kind::Tool => format!(
                r#"{{"functionCall": {{"name": "write_file","args": {{"path": "src/main.rs","content": {}}}}}}}"#,
                json(&next())
            ),
        };
        frame(&mut b, &part, "", n);
    }
    frame(
        &mut b,
        r#"{"text": ""}"#,
        r#","finishReason": "STOP""#,
        n + 1,
    );
    b
}

/// A body cut into reads of `READS` sizes.
fn reads(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    for &n in READS.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (read, tail) = rest.split_at(n.min(rest.len()));
        out.push(read);
        rest = tail;
    }
    out
}

/// The adapters' decoders behind one face.
trait Decode {
    fn make() -> Self;
    fn push(&mut self, bytes: &[u8]);
    fn end_of_body(&mut self);
    fn next_event(&mut self) -> Result<Option<StreamEvent>, LlmError>;
}

macro_rules! impl_decode {
    ($($t:ty),*) => {$(
        impl Decode for $t {
            fn make() -> Self {
                <$t>::new("bench")
            }
            fn push(&mut self, bytes: &[u8]) {
                <$t>::push(self, bytes);
            }
            fn end_of_body(&mut self) {
                <$t>::end_of_body(self);
            }
            fn next_event(&mut self) -> Result<Option<StreamEvent>, LlmError> {
                <$t>::next_event(self)
            }
        }
    )*};
}
impl_decode!(
    OpenAiCompatDecoder,
    OpenAiDecoder,
    AnthropicDecoder,
    GeminiDecoder
);

/// SSE only: events are counted and recycled.
fn sse(reads: &[&[u8]]) -> usize {
    let mut dec = SseDecoder::new();
    let mut events = 0;
    for r in reads {
        dec.push(r);
        while let Some(ev) = dec.next_event().unwrap() {
            events += black_box(&ev).data.len() & 1;
            dec.recycle(ev);
        }
    }
    events
}

/// Adapter decoding; every event is looked at and dropped.
fn decode<D: Decode>(reads: &[&[u8]]) -> usize {
    let mut dec = D::make();
    let mut events = 0;
    for r in reads {
        dec.push(r);
        while let Some(ev) = dec.next_event().unwrap() {
            black_box(&ev);
            events += 1;
        }
    }
    dec.end_of_body();
    while let Some(ev) = dec.next_event().unwrap() {
        black_box(&ev);
        events += 1;
    }
    events
}

/// Adapter decoding into an `Accumulator`, finished into the turn.
fn accumulate<D: Decode>(reads: &[&[u8]]) -> hearth_llm::AssistantTurn {
    let mut dec = D::make();
    let mut acc = Accumulator::new();
    for r in reads {
        dec.push(r);
        while let Some(ev) = dec.next_event().unwrap() {
            acc.push(&ev);
        }
    }
    dec.end_of_body();
    while let Some(ev) = dec.next_event().unwrap() {
        acc.push(&ev);
    }
    acc.finish("bench").unwrap()
}

/// Adapter decoding into an `Accumulator`; a size of the turn, for checking.
fn accumulated<D: Decode>(reads: &[&[u8]]) -> usize {
    let turn = accumulate::<D>(reads);
    turn.text().len() + turn.tool_calls().count()
}

type Run = fn(&[&[u8]]) -> usize;

/// One body of one adapter and the adapter's two ways to take it in.
struct Case {
    adapter: &'static str,
    body: &'static str,
    bytes: Vec<u8>,
    decode: Run,
    accumulate: Run,
}

impl Case {
    fn new<D: Decode>(adapter: &'static str, body: &'static str, bytes: Vec<u8>) -> Self {
        Self {
            adapter,
            body,
            bytes,
            decode: decode::<D>,
            accumulate: accumulated::<D>,
        }
    }

    fn id(&self) -> String {
        format!("{}/{}", self.adapter, self.body)
    }
}

fn cases() -> Vec<Case> {
    let short = || deltas(1, 3, 20);
    let long = || deltas(2, 200, 400);
    type Oc = OpenAiCompatDecoder;
    vec![
        Case::new::<Oc>(
            "openai_compat",
            "short_text",
            openai_body(Kind::Text, short()),
        ),
        Case::new::<Oc>(
            "openai_compat",
            "long_text",
            openai_body(Kind::Text, long()),
        ),
        Case::new::<Oc>(
            "openai_compat",
            "tool_args",
            openai_body(Kind::Tool, arg_fragments(3)),
        ),
        Case::new::<OpenAiDecoder>(
            "openai_responses",
            "short_text",
            responses_body(Kind::Text, short()),
        ),
        Case::new::<OpenAiDecoder>(
            "openai_responses",
            "long_text",
            responses_body(Kind::Text, long()),
        ),
        Case::new::<OpenAiDecoder>(
            "openai_responses",
            "tool_args",
            responses_body(Kind::Tool, arg_fragments(3)),
        ),
        Case::new::<AnthropicDecoder>(
            "anthropic",
            "short_text",
            anthropic_body(Kind::Text, short()),
        ),
        Case::new::<AnthropicDecoder>("anthropic", "long_text", anthropic_body(Kind::Text, long())),
        Case::new::<AnthropicDecoder>(
            "anthropic",
            "tool_args",
            anthropic_body(Kind::Tool, arg_fragments(3)),
        ),
        Case::new::<GeminiDecoder>("gemini", "short_text", gemini_body(Kind::Text, short())),
        Case::new::<GeminiDecoder>("gemini", "long_text", gemini_body(Kind::Text, long())),
        // Gemini sends whole calls, never argument fragments.
        Case::new::<GeminiDecoder>(
            "gemini",
            "function_calls",
            gemini_body(Kind::Tool, deltas(4, 3, 20)),
        ),
    ]
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
}

fn benches(c: &mut Criterion) {
    let cases = cases();
    for case in &cases {
        let size = (case.accumulate)(&reads(&case.bytes));
        assert!(size > 0, "{}: empty answer", case.id());
    }

    let mut group = c.benchmark_group("sse");
    configure(&mut group);
    for case in cases.iter().filter(|c| c.body.ends_with("_text")) {
        let r = reads(&case.bytes);
        group.throughput(Throughput::Bytes(case.bytes.len() as u64));
        group.bench_function(case.id(), |b| b.iter(|| sse(black_box(&r))));
    }
    group.finish();

    for (name, pick) in [
        ("decode", (|c: &Case| c.decode) as fn(&Case) -> Run),
        ("accumulate", |c: &Case| c.accumulate),
    ] {
        let mut group = c.benchmark_group(name);
        configure(&mut group);
        for case in &cases {
            let r = reads(&case.bytes);
            let run = pick(case);
            group.throughput(Throughput::Bytes(case.bytes.len() as u64));
            group.bench_function(case.id(), |b| b.iter(|| run(black_box(&r))));
        }
        group.finish();
    }
}

criterion_group!(decoding, benches);
criterion_main!(decoding);
