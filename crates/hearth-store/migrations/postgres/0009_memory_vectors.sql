-- The compact copy of each embedding (one signed byte per component after
-- its scale and norm), apart from the memories so a search by meaning reads
-- nothing else; the rows a search reads are one user's, by the primary key.
-- Memories embedded before this migration get theirs from hearth at
-- migration time (their f32 bytes cannot be read as floats in SQL).
CREATE TABLE memory_vectors (
    user_key TEXT NOT NULL,
    memory_id BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    thread_key TEXT,
    model TEXT NOT NULL,
    compact BYTEA NOT NULL,
    PRIMARY KEY (user_key, memory_id)
);
-- Found by the cascade when a memory is deleted.
CREATE INDEX memory_vectors_memory ON memory_vectors (memory_id);
