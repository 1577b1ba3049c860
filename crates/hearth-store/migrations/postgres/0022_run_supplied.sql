-- What a surface supplied for a run beyond its message (issue 19, several
-- replicas): the OpenAI-compatible surface sends a model for the request
-- and the client's own conversation, which replace the thread's. The
-- replica that took the message keeps them in memory for its run. A run it
-- stores queued (its thread is busy, here or on another replica) may be
-- claimed by another replica, which ran it with the thread's model and
-- history instead: the client got an answer to another conversation.
--
-- Such a run's supplied part is now written here in the statement that
-- stores the run, only when the run is stored queued, and a claim returns it
-- (`claim_next`), so whichever replica runs it runs it as asked. A run
-- stored claimed by the replica that took it writes nothing: that replica
-- runs it. Rows of finished runs are removed by the retention pass.
CREATE TABLE run_supplied (
    run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
    body JSONB NOT NULL
);
