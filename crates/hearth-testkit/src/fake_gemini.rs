//! A fake Gemini API server (being built).
