//! Gemini generateContent adapter (being built; not wired into the catalog yet).
