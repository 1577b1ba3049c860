//! Context windows of the models hearth knows, in tokens, by model-name
//! prefix (a dated variant such as `claude-sonnet-4-5-20250929` matches
//! `claude-sonnet-4-5`). Config overrides them per provider or per model;
//! a model found nowhere gets `[agent] default_context_tokens`.

/// Built-in windows from the providers' published model pages (2026-11).
const BUILTIN: &[(&str, u32)] = &[
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4", 200_000),
    ("claude-3-7-sonnet", 200_000),
    ("claude-3-5-haiku", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("gemini-2.5", 1_048_576),
    ("gemini-2.0-flash", 1_048_576),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("qwen2.5", 32_768),
    ("mistral", 32_768),
];

/// The built-in window of `model` (a bare model name, or `<provider>/<model>`
/// whose model part is looked up), by longest matching prefix.
pub fn known_context_window(model: &str) -> Option<u32> {
    // `openrouter/anthropic/claude-...` and `ollama/llama3.2:3b` carry the
    // vendor's name after the last slash.
    let name = model.rsplit('/').next().unwrap_or(model);
    BUILTIN
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|&(_, window)| window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_by_longest_prefix() {
        assert_eq!(
            known_context_window("claude-sonnet-4-5-20250929"),
            Some(200_000)
        );
        assert_eq!(known_context_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(known_context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(
            known_context_window("anthropic/claude-haiku-4-5"),
            Some(200_000)
        );
        assert_eq!(known_context_window("llama3.2:3b"), Some(131_072));
        assert_eq!(known_context_window("echo"), None);
        assert_eq!(known_context_window("my-finetune"), None);
    }
}
