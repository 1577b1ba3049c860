//! Embeddings: one vector per input text, for memory that finds by meaning.
//!
//! Spoken: OpenAI's `POST {base_url}/embeddings` (OpenAI itself and the
//! servers that copy it: Ollama, vLLM, LiteLLM) and Gemini's
//! `models/{model}:batchEmbedContents`. Answers are
//! checked whole (one finite vector per input, all of one dimension) so a
//! lax server cannot hand the store a vector that silently scores wrong.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hearth_core::Usage;
use reqwest::Url;
use serde::Deserialize;

use crate::http::{HttpProvider, Route, WireFormat};
use crate::transport;
use crate::{ErrorKind, LlmError};

/// The most inputs sent in one call; longer lists are split.
pub const MAX_BATCH: usize = 64;
/// The largest answer read: 64 inputs of 3072 floats as JSON fit with room.
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// Which embeddings API a wire format's vendor offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingsApi {
    /// OpenAI's `POST {base_url}/embeddings`.
    OpenAi,
    /// Gemini's `POST {base_url}/models/{model}:batchEmbedContents`.
    Gemini,
}

/// What one embeddings call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// One vector per input, in input order, all of one dimension.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens the provider counted (`input_tokens` only).
    pub usage: Usage,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
    #[serde(default)]
    usage: Option<AnswerUsage>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct GeminiAnswer {
    #[serde(default)]
    embeddings: Vec<GeminiValues>,
}

#[derive(Deserialize)]
struct GeminiValues {
    values: Vec<f32>,
}

#[derive(Deserialize)]
struct AnswerUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

/// The error of a provider without an embeddings API hearth speaks.
pub(crate) fn unsupported(provider: &str) -> LlmError {
    LlmError::new(
        provider,
        ErrorKind::InvalidRequest,
        format!(
            "provider {provider} has no embeddings API hearth speaks; use an openai, \
             openai_compat or gemini provider for [memory] embeddings"
        ),
    )
}

/// Checks an answer against its `inputs` count and puts vectors in order.
pub(crate) fn vectors_in_order(
    provider: &str,
    inputs: usize,
    items: Vec<(usize, Vec<f32>)>,
) -> Result<Vec<Vec<f32>>, LlmError> {
    let bad = |m: String| LlmError::new(provider, ErrorKind::MalformedResponse, m);
    if items.len() != inputs {
        return Err(bad(format!(
            "embeddings answer holds {} vectors for {inputs} inputs",
            items.len()
        )));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (index, v) in items {
        let slot = out
            .get_mut(index)
            .ok_or_else(|| bad(format!("embeddings answer has index {index} out of range")))?;
        if slot.is_some() {
            return Err(bad(format!("embeddings answer repeats index {index}")));
        }
        *slot = Some(v);
    }
    let out: Vec<Vec<f32>> = out.into_iter().flatten().collect();
    let dim = out.first().map_or(0, Vec::len);
    if dim == 0 || out.iter().any(|v| v.len() != dim) {
        return Err(bad(
            "embeddings answer has an empty vector or vectors of different lengths".into(),
        ));
    }
    if out.iter().flatten().any(|x| !x.is_finite()) {
        return Err(bad(
            "embeddings answer holds a value that is not finite".into()
        ));
    }
    Ok(out)
}

impl<W: WireFormat> HttpProvider<W> {
    /// `{base_url}/embeddings`: the endpoint URL with the chat route's path
    /// replaced.
    fn embeddings_url(&self) -> Result<Url, LlmError> {
        let endpoint = self.endpoint();
        let base = match W::ROUTE {
            Route::Fixed(path) => endpoint.as_str().strip_suffix(path),
            Route::PerModel(_) => Some(endpoint.as_str()),
        }
        .unwrap_or(endpoint.as_str())
        .trim_end_matches('/');
        Url::parse(&format!("{base}/embeddings")).map_err(|e| {
            LlmError::new(
                self.name(),
                ErrorKind::InvalidRequest,
                format!("cannot build the embeddings URL: {e}"),
            )
        })
    }

    /// One Gemini `batchEmbedContents` call for at most [`MAX_BATCH`]
    /// inputs. Gemini reports no token counts.
    pub(crate) async fn embed_gemini(
        &self,
        model: &str,
        inputs: &[String],
    ) -> Result<Embeddings, LlmError> {
        let invalid = |m: String| LlmError::new(self.name(), ErrorKind::InvalidRequest, m);
        let (path, resource) = crate::gemini::embed_path(model).map_err(invalid)?;
        let base = self.endpoint().as_str().trim_end_matches('/');
        let url = Url::parse(&format!("{base}{path}"))
            .map_err(|e| invalid(format!("cannot build the embeddings URL: {e}")))?;
        let requests: Vec<serde_json::Value> = inputs
            .iter()
            .map(|t| serde_json::json!({"model": resource, "content": {"parts": [{"text": t}]}}))
            .collect();
        let body =
            crate::http::encode(&serde_json::json!({ "requests": requests })).map_err(invalid)?;
        let (bytes, context) = self.post_json(url, body).await?;
        let answer: GeminiAnswer = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::new(
                self.name(),
                ErrorKind::MalformedResponse,
                format!("batchEmbedContents answer is not Gemini's list of embeddings: {e}"),
            )
            .at(&context)
        })?;
        let items = answer
            .embeddings
            .into_iter()
            .enumerate()
            .map(|(i, e)| (i, e.values))
            .collect();
        let vectors =
            vectors_in_order(self.name(), inputs.len(), items).map_err(|e| e.at(&context))?;
        Ok(Embeddings {
            vectors,
            usage: Usage::default(),
        })
    }

    /// Posts `body` to `url` asking for JSON; the whole answer of a 2xx,
    /// else the provider's error, with the call's context.
    async fn post_json(
        &self,
        url: Url,
        body: Vec<u8>,
    ) -> Result<(Vec<u8>, crate::transport::CallContext), LlmError> {
        let context = self.context_for(&url);
        let started = Instant::now();
        let resp = transport::send_accepting(
            self.name(),
            self.client(),
            url,
            self.header_map(),
            body,
            self.request_timeout(),
            started,
            "application/json",
        )
        .await
        .map_err(|e| e.at(&context))?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp).await.at(&context));
        }
        let bytes = read_capped(self.name(), resp, self.idle_timeout())
            .await
            .map_err(|e| e.at(&context))?;
        Ok((bytes, context))
    }

    /// One OpenAI-style embeddings call for at most [`MAX_BATCH`] inputs.
    pub(crate) async fn embed_openai(
        &self,
        model: &str,
        inputs: &[String],
    ) -> Result<Embeddings, LlmError> {
        let url = self.embeddings_url()?;
        let body = crate::http::encode(&serde_json::json!({
            "model": model,
            "input": inputs,
            "encoding_format": "float",
        }))
        .map_err(|m| LlmError::new(self.name(), ErrorKind::InvalidRequest, m))?;
        let (bytes, context) = self.post_json(url, body).await?;
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::new(
                self.name(),
                ErrorKind::MalformedResponse,
                format!("embeddings answer is not OpenAI's list of embeddings: {e}"),
            )
            .at(&context)
        })?;
        let items = answer
            .data
            .into_iter()
            .map(|i| (i.index, i.embedding))
            .collect();
        let vectors =
            vectors_in_order(self.name(), inputs.len(), items).map_err(|e| e.at(&context))?;
        Ok(Embeddings {
            vectors,
            usage: Usage {
                input_tokens: answer.usage.and_then(|u| u.prompt_tokens),
                ..Usage::default()
            },
        })
    }
}

/// The whole body, at most [`MAX_ANSWER_BYTES`], each chunk within `idle`.
async fn read_capped(
    provider: &str,
    resp: reqwest::Response,
    idle: Duration,
) -> Result<Vec<u8>, LlmError> {
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    loop {
        let next = tokio::time::timeout(idle, chunks.next())
            .await
            .map_err(|_| {
                LlmError::new(
                    provider,
                    ErrorKind::Timeout,
                    format!("embeddings answer stalled for {idle:?}"),
                )
            })?;
        match next {
            None => return Ok(body),
            Some(Err(e)) => return Err(transport::from_reqwest(provider, e)),
            Some(Ok(b)) => {
                if body.len() + b.len() > MAX_ANSWER_BYTES {
                    return Err(LlmError::new(
                        provider,
                        ErrorKind::MalformedResponse,
                        format!("embeddings answer is larger than {MAX_ANSWER_BYTES} bytes"),
                    ));
                }
                body.extend_from_slice(&b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_in_input_order_and_whole() {
        let v = vectors_in_order("p", 2, vec![(1, vec![2.0]), (0, vec![1.0])]).unwrap();
        assert_eq!(v, vec![vec![1.0], vec![2.0]]);
        for (n, items) in [
            (2, vec![(0, vec![1.0])]),
            (2, vec![(0, vec![1.0]), (0, vec![1.0])]),
            (1, vec![(3, vec![1.0])]),
            (2, vec![(0, vec![1.0]), (1, vec![1.0, 2.0])]),
            (1, vec![(0, vec![])]),
            (1, vec![(0, vec![f32::NAN])]),
        ] {
            let e = vectors_in_order("p", n, items).unwrap_err();
            assert_eq!(e.kind, ErrorKind::MalformedResponse, "{e}");
        }
    }
}
