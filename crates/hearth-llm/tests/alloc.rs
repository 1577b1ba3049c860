//! Decoding a stream allocates nothing per text delta beyond the delta's own
//! text: the adapters' decoders are driven on plain bytes under a counting
//! global allocator, and the marginal allocations per delta are measured.

// A global allocator needs `unsafe impl`; helpers outside #[test] functions
// fail the test just as an assert would.
#![expect(
    unsafe_code,
    clippy::unwrap_used,
    reason = "a counting global allocator needs unsafe, and test helpers unwrap what the test set up"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use hearth_core::StreamEvent;
use hearth_llm::anthropic::AnthropicDecoder;
use hearth_llm::gemini::GeminiDecoder;
use hearth_llm::openai::OpenAiDecoder;
use hearth_llm::openai_compat::OpenAiCompatDecoder;
use hearth_llm::{Accumulator, LlmError};

/// Counts allocations (and reallocations) of the current thread, so tests
/// running in parallel do not see each other's.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn bump() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// The adapters' decoders behind one face.
trait Decode {
    fn push(&mut self, bytes: &[u8]);
    fn end_of_body(&mut self);
    fn next_event(&mut self) -> Result<Option<StreamEvent>, LlmError>;
}

macro_rules! impl_decode {
    ($($t:ty),*) => {$(
        impl Decode for $t {
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

/// A text delta of 3 to 20 bytes, plain (no JSON escapes), sometimes non-ASCII.
fn plain_delta(i: usize) -> String {
    const WORDS: [&str; 8] = [
        "the",
        " quick brown",
        " fox",
        " jumps over",
        " lazy",
        " dögs and",
        " 🌍 cats",
        ".",
    ];
    let mut s = String::from(WORDS[i % WORDS.len()]);
    if s.len() < 3 {
        s.push_str("..");
    }
    s
}

/// A delta holding JSON escapes (a newline and quotes), as code answers have.
fn escaped_delta(i: usize) -> String {
    format!("line {}\n\"q\"", i % 100)
}

fn openai_body(deltas: &[String]) -> Vec<u8> {
    let mut b = Vec::new();
    let head = r#"data: {"id":"chatcmpl-9x8Yz","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}"#;
    b.extend_from_slice(head.as_bytes());
    b.extend_from_slice(b"\n\n");
    for d in deltas {
        let content = serde_json::to_string(d).unwrap();
        b.extend_from_slice(format!(
            r#"data: {{"id":"chatcmpl-9x8Yz","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{{"index":0,"delta":{{"content":{content}}},"logprobs":null,"finish_reason":null}}]}}"#
        ).as_bytes());
        b.extend_from_slice(b"\n\n");
    }
    b.extend_from_slice(br#"data: {"id":"chatcmpl-9x8Yz","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#);
    b.extend_from_slice(b"\n\n");
    b.extend_from_slice(br#"data: {"id":"chatcmpl-9x8Yz","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":40,"total_tokens":52}}"#);
    b.extend_from_slice(b"\n\ndata: [DONE]\n\n");
    b
}

fn anthropic_body(deltas: &[String]) -> Vec<u8> {
    let mut b = Vec::new();
    let mut event = |name: &str, data: &str| {
        b.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    };
    event(
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
    );
    event(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    );
    event("ping", r#"{"type": "ping"}"#);
    for d in deltas {
        let text = serde_json::to_string(d).unwrap();
        event(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{text}}}}}"#
            ),
        );
    }
    event(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    );
    event(
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
    );
    event("message_stop", r#"{"type":"message_stop"}"#);
    b
}

fn gemini_body(deltas: &[String]) -> Vec<u8> {
    let mut b = Vec::new();
    let n = deltas.len();
    for (i, d) in deltas.iter().enumerate() {
        let text = serde_json::to_string(d).unwrap();
        let finish = if i + 1 == n {
            r#","finishReason":"STOP""#
        } else {
            ""
        };
        b.extend_from_slice(format!(
            r#"data: {{"candidates": [{{"content": {{"parts": [{{"text": {text}}}],"role": "model"}}{finish},"index": 0}}],"usageMetadata": {{"promptTokenCount": 9,"candidatesTokenCount": {i},"totalTokenCount": {}}},"modelVersion": "gemini-2.5-flash","responseId": "mXvOaKr2BtK7nvgPqNzUwQE"}}"#,
            i + 9
        ).as_bytes());
        b.extend_from_slice(b"\r\n\r\n");
    }
    b
}

/// A Responses API stream as OpenAI sends it: named events, a
/// `sequence_number` on each, and the whole text echoed by the `.done` events
/// and `response.completed`.
fn responses_body(deltas: &[String]) -> Vec<u8> {
    let mut b = Vec::new();
    let mut seq = 0u64;
    let mut event = |name: &str, data: &str| {
        let data = data.replacen(
            '{',
            &format!(r#"{{"type":"{name}","sequence_number":{seq},"#),
            1,
        );
        seq += 1;
        b.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    };
    let response = r#""id":"resp_68af4d3c9b5c8190a1b2c3d4e5f60718","object":"response","created_at":1756318012,"model":"gpt-5-mini-2025-08-07","store":false"#;
    let item =
        r#""item_id":"msg_68af4d3d1e8c8190b7c6d5e4f3a2b1c0","output_index":0,"content_index":0"#;
    event(
        "response.created",
        &format!(
            r#"{{"response":{{{response},"status":"in_progress","output":[],"usage":null}}}}"#
        ),
    );
    event(
        "response.in_progress",
        &format!(
            r#"{{"response":{{{response},"status":"in_progress","output":[],"usage":null}}}}"#
        ),
    );
    let message = |status: &str, content: &str| {
        format!(
            r#"{{"id":"msg_68af4d3d1e8c8190b7c6d5e4f3a2b1c0","type":"message","status":"{status}","content":[{content}],"role":"assistant"}}"#
        )
    };
    event(
        "response.output_item.added",
        &format!(
            r#"{{"output_index":0,"item":{}}}"#,
            message("in_progress", "")
        ),
    );
    event(
        "response.content_part.added",
        &format!(
            r#"{{{item},"part":{{"type":"output_text","annotations":[],"logprobs":[],"text":""}}}}"#
        ),
    );
    for (i, d) in deltas.iter().enumerate() {
        let text = serde_json::to_string(d).unwrap();
        event(
            "response.output_text.delta",
            &format!(
                r#"{{{item},"delta":{text},"logprobs":[],"obfuscation":"{}"}}"#,
                &"Xq3vT9kLm2Pz"[..i % 12]
            ),
        );
    }
    let full = serde_json::to_string(&deltas.concat()).unwrap();
    let part = format!(r#"{{"type":"output_text","annotations":[],"logprobs":[],"text":{full}}}"#);
    event(
        "response.output_text.done",
        &format!(r#"{{{item},"text":{full},"logprobs":[]}}"#),
    );
    event(
        "response.content_part.done",
        &format!(r#"{{{item},"part":{part}}}"#),
    );
    let done = message("completed", &part);
    event(
        "response.output_item.done",
        &format!(r#"{{"output_index":0,"item":{done}}}"#),
    );
    event(
        "response.completed",
        &format!(
            r#"{{"response":{{{response},"status":"completed","output":[{done}],"usage":{{"input_tokens":12,"input_tokens_details":{{"cached_tokens":0}},"output_tokens":40,"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":52}}}}}}"#
        ),
    );
    b
}

/// Decodes `body` in 2 KiB reads into an `Accumulator`, and returns the
/// allocations made doing so and the text decoded.
fn measure(mut dec: impl Decode, body: &[u8]) -> (u64, String) {
    let mut acc = Accumulator::new();
    let before = allocs();
    for chunk in body.chunks(2048) {
        dec.push(chunk);
        while let Some(ev) = dec.next_event().unwrap() {
            acc.push(&ev);
        }
    }
    dec.end_of_body();
    while let Some(ev) = dec.next_event().unwrap() {
        acc.push(&ev);
    }
    let after = allocs();
    drop(dec);
    let turn = acc.finish("p").unwrap();
    (after - before, turn.text().to_owned())
}

const SHORT: usize = 200;
const LONG: usize = 2200;
/// Allowance for amortised growth (accumulated text, buffers reaching the
/// stream's largest event) between the short and the long stream.
const SLACK: u64 = 24;

/// Allocations per delta of the long stream over the short one, with its
/// bound checked: at most `per_delta` per delta plus `SLACK`.
fn check<D: Decode>(
    name: &str,
    new: impl Fn() -> D,
    body: fn(&[String]) -> Vec<u8>,
    delta: fn(usize) -> String,
    per_delta: u64,
) -> f64 {
    let short: Vec<String> = (0..SHORT).map(delta).collect();
    let long: Vec<String> = (0..LONG).map(delta).collect();
    let (short_body, long_body) = (body(&short), body(&long));
    // A first run warms up lazily allocated process state (tracing, etc.).
    measure(new(), &short_body);
    let (a_short, text_short) = measure(new(), &short_body);
    let (a_long, text_long) = measure(new(), &long_body);
    assert_eq!(text_short, short.concat(), "{name}: text");
    assert_eq!(text_long, long.concat(), "{name}: text");
    let extra = a_long - a_short;
    let deltas = (LONG - SHORT) as u64;
    let per = extra as f64 / deltas as f64;
    eprintln!(
        "{name}: {a_short} allocations for {SHORT} deltas, {a_long} for {LONG}: {per:.3} per delta"
    );
    assert!(
        extra <= per_delta * deltas + SLACK,
        "{name}: {extra} allocations for {deltas} more deltas ({per:.3} per delta), \
         bound {per_delta} per delta + {SLACK}"
    );
    per
}

#[test]
fn openai_compat_allocates_only_the_text_per_delta() {
    let per = check(
        "openai_compat",
        || OpenAiCompatDecoder::new("p"),
        openai_body,
        plain_delta,
        1,
    );
    assert!(per >= 0.99, "each delta's text is its own String: {per}");
}

#[test]
fn anthropic_allocates_only_the_text_per_delta() {
    let per = check(
        "anthropic",
        || AnthropicDecoder::new("p"),
        anthropic_body,
        plain_delta,
        1,
    );
    assert!(per >= 0.99, "each delta's text is its own String: {per}");
}

#[test]
fn gemini_allocates_only_the_text_per_delta() {
    let per = check(
        "gemini",
        || GeminiDecoder::new("p"),
        gemini_body,
        plain_delta,
        1,
    );
    assert!(per >= 0.99, "each delta's text is its own String: {per}");
}

#[test]
fn openai_responses_allocates_only_the_text_per_delta() {
    let per = check(
        "openai_responses",
        || OpenAiDecoder::new("p"),
        responses_body,
        plain_delta,
        1,
    );
    assert!(per >= 0.99, "each delta's text is its own String: {per}");
}

/// Text with JSON escapes is unescaped by serde_json through a scratch buffer
/// of its own per parse: one more allocation (two while the buffer grows past
/// its first size), and no more than that.
#[test]
fn escaped_text_costs_at_most_the_scratch_buffer_more() {
    check(
        "openai_compat escaped",
        || OpenAiCompatDecoder::new("p"),
        openai_body,
        escaped_delta,
        3,
    );
    check(
        "anthropic escaped",
        || AnthropicDecoder::new("p"),
        anthropic_body,
        escaped_delta,
        3,
    );
    check(
        "gemini escaped",
        || GeminiDecoder::new("p"),
        gemini_body,
        escaped_delta,
        3,
    );
    check(
        "openai_responses escaped",
        || OpenAiDecoder::new("p"),
        responses_body,
        escaped_delta,
        3,
    );
}
