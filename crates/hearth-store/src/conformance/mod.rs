//! Conformance suites: what every `Store` backend must do, one module per
//! aggregate trait, each check a public function that takes a fresh, empty
//! store. [`store_conformance_tests!`](crate::store_conformance_tests)
//! expands every check into its own test, so a failure names its check and
//! hides none of the others:
//!
//! ```text
//! mod my_backend {
//!     /// A fresh, empty store, and what must live as long as it does.
//!     async fn fresh() -> (MyStore, tempfile::TempDir) { ... }
//!     hearth_store::store_conformance_tests!(fresh);
//! }
//! ```
//!
//! Backend-specific behaviour (files, migrations, what a failure inside a
//! transaction looks like) stays in that backend's own tests.

// This module is test code compiled into the library (behind the
// `conformance` feature) so that other backends' tests can call it: a
// failed expectation is reported by panicking, as in any test.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

pub mod apps;
pub mod channels;
pub mod confirmations;
pub mod family;
pub mod fixtures;
pub mod grants;
pub mod history;
pub mod jobs;
pub mod memory;
pub mod retention;
pub mod router;
pub mod runs;
pub mod secrets;
pub mod threads;
pub mod tokens;
pub mod usage;

/// Expands every conformance check into one `#[tokio::test]` (in a module
/// per suite: `runs::create_then_get_round_trips`, ...), each on a store
/// from `fresh`: the name of an `async fn() -> (S, G)` (or
/// `Option<(S, G)>`, where `None` skips the check) in the calling module,
/// where `S` implements [`Store`](crate::Store) and `G` is kept alive until
/// the check ends (a temporary directory, or `()`). The calling
/// crate needs `tokio` with the `macros` and `rt-multi-thread` features.
/// A new check is added here and in its suite's module, and so runs on
/// every backend that expands this macro.
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:ident) => {
        $crate::__conformance_checks!($fresh;
            runs: [
                a_fresh_store_answers_a_ping,
                create_then_get_round_trips,
                permission_context_is_stored_with_the_run,
                run_stats_aggregate_one_scopes_runs_in_the_window,
                concurrent_identical_requests_create_one_run,
                finish_run_is_atomic_and_happens_once,
                steps_upsert_by_index,
                list_runs_filters_newest_first,
                list_runs_narrows_by_user_source_model_and_time,
                list_threads_counts_runs_most_recently_active_first,
                steers_are_stored_in_order_and_follow_ups_commit_with_the_finish,
                of_concurrent_claims_exactly_one_wins,
                claims_respect_terminal_runs_and_live_leases,
                a_run_created_claimed_is_running_under_its_owner_and_a_twin_is_left_alone,
                renew_leases_extends_only_the_named_runs_of_the_owner,
                release_foreign_leases_frees_only_other_owners_unfinished_runs,
                the_end_records_the_model_that_answered_and_the_one_asked_for,
                of_concurrent_finishes_exactly_one_ends_the_run,
                a_thread_is_one_users_until_another_users_run_is_on_it,
                text_holding_a_nul_is_stored_and_its_run_ends,
            ],
            threads: [
                history_is_oldest_first_and_limited,
                thread_state_defaults_updates_and_clear,
                a_run_stored_assuming_defaults_is_held_on_a_thread_with_settings,
                new_session_cancels_the_run_and_clears_history_together,
                the_incognito_flag_is_kept_and_listed,
                concurrent_settings_of_a_new_thread_are_all_kept,
                a_finish_racing_a_new_session_lands_before_it_or_not_at_all,
                thread_modes_are_kept_and_a_run_keeps_its_first_mode,
                threads_are_found_by_key_prefix_and_by_words_of_their_history,
            ],
            usage: [
                model_calls_are_grouped_for_usage,
                anonymous_model_calls_count_without_a_run,
                calls_since_lists_each_call_with_its_thread_and_user,
                a_call_outside_a_run_counts_in_usage_and_budgets,
                usage_days_are_the_utc_days_of_each_call,
                the_daily_rollup_equals_the_sums_of_the_calls,
                a_runs_end_counts_each_of_its_model_calls_once,
            ],
            grants: [
                add_grant_is_idempotent_and_keeps_the_first,
                remove_grant_reports_whether_it_existed,
                list_grants_filters_by_scope_and_sorts,
                grants_for_matches_any_subject_in_any_scope,
                audit_is_newest_first_with_default_and_cap,
                audit_limit_defaults_to_100_and_caps_at_1000,
                audited_grant_changes_write_the_event_only_when_something_changed,
                concurrent_identical_grant_changes_are_audited_once,
            ],
            tokens: [
                tokens_lifecycle,
                tokens_of_one_millisecond_list_in_creation_order_newest_first,
                ui_sessions_last_until_they_expire_or_their_token_is_revoked,
                a_token_bound_to_a_user_names_it,
            ],
            secrets: [
                secrets_are_upserted_listed_without_values_and_deleted,
                sealed_bytes_round_trip_and_names_sort_bytewise,
                community_keys_are_set_listed_removed_and_remembered_per_scope,
            ],
            memory: [
                search_ranks_by_relevance_and_returns_sources,
                a_word_in_more_than_a_thousand_memories_does_not_crowd_out_a_rarer_one,
                saving_the_same_text_again_returns_the_first_memory,
                a_fact_holding_a_nul_is_saved_once_and_found,
                reads_see_only_the_users_own_and_this_threads_memories,
                hostile_queries_never_error,
                forget_removes_only_the_users_own_memory,
                purge_deletes_memories_unused_since_the_cutoff,
                deleting_a_users_memories_stores_its_audit_event_in_the_same_write,
                embeddings_are_stored_per_model_and_read_in_scope,
                search_by_meaning_finds_the_exact_best_of_many_and_nothing_deleted,
                concurrent_saves_of_one_fact_make_one_memory,
                vectors_of_forgotten_and_purged_memories_leave_the_search,
                a_memory_embedded_again_is_searched_by_its_new_vector_only,
                concurrent_embeddings_of_one_user_keep_every_vector,
            ],
            confirmations: [
                a_run_awaiting_confirmation_keeps_its_status_when_claimed,
                a_confirmation_and_an_audit_event_holding_a_nul_are_stored,
                resolving_a_confirmation_stores_its_audit_event_only_when_it_resolves,
                the_end_of_a_run_resolves_its_pending_confirmations,
                a_new_session_that_cancels_a_run_resolves_its_pending_confirmations,
                a_confirmation_is_found_by_its_run_and_call,
                pending_confirmations_of_a_thread_are_its_runs_pending_ones,
                of_concurrent_answers_exactly_one_resolves,
                concurrent_requests_for_one_call_store_one_question,
                an_answer_racing_the_end_of_its_run_is_one_or_the_other,
            ],
            retention: [
                purge_deletes_old_audit_events_and_confirmations_of_finished_runs,
            ],
            channels: [
                outbox_delivers_in_order_per_target,
                one_claimer_is_handed_the_due_heads,
                outbox_retries_fails_and_is_retried,
                a_pairing_and_a_delivery_error_holding_a_nul_are_stored,
                a_run_end_queues_its_replies_only_when_it_ends_the_run,
                a_run_end_queues_several_replies_in_their_order,
                a_confirmation_queues_its_prompt_once,
                pairing_requests_are_bounded_and_decided_once,
                a_denied_user_waits_out_the_cool_down,
                cursors_and_first_sight,
                retention_keeps_pending_replies,
                answer_messages_lead_back_to_their_run,
                of_concurrent_first_sights_exactly_one_is_new,
                concurrent_pairing_requests_keep_one_code_per_user_and_the_bound,
                of_concurrent_decisions_on_a_code_exactly_one_wins,
            ],
            history: [
                summaries_replace_what_they_cover_and_delete_nothing,
                pages_are_newest_first_and_mark_compaction,
                a_runs_start_is_its_journal_and_its_threads_context,
            ],
            jobs: [
                jobs_round_trip_and_list_in_creation_order,
                a_job_whose_text_holds_a_nul_is_stored,
                firings_move_the_job_forward_only,
                delete_returns_the_job_once,
                concurrent_firings_leave_the_latest_run,
            ],
            family: [
                children_are_listed_by_their_parent_run_id,
            ],
            apps: [
                app_versions_are_imported_approved_and_enabled_per_guild,
            ],
            router: [
                observations_commit_with_the_run_end_and_only_once,
                a_rating_counts_once_and_a_new_rating_replaces_it,
                route_steps_round_trip,
                concurrent_ratings_of_a_run_leave_one_rating_counted,
            ],
        );
    };
}

/// What a backend's `fresh` returns: a store and what to keep alive with
/// it, or `None` when the backend cannot run here (a PostgreSQL test without
/// a server, outside CI), which skips the check.
pub trait Fresh<S, G> {
    /// The store and its keep-alive, if there is one.
    fn into_fresh(self) -> Option<(S, G)>;
}

impl<S, G> Fresh<S, G> for (S, G) {
    fn into_fresh(self) -> Option<(S, G)> {
        Some(self)
    }
}

impl<S, G> Fresh<S, G> for Option<(S, G)> {
    fn into_fresh(self) -> Option<(S, G)> {
        self
    }
}

/// The expansion of [`store_conformance_tests!`]: one test per check.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_checks {
    ($fresh:ident; $($suite:ident: [$($check:ident),* $(,)?]),* $(,)?) => {
        $(
            mod $suite {
                $(
                    // Two workers: some checks race writers against each other.
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $check() {
                        let Some((store, _keep)) =
                            $crate::conformance::Fresh::into_fresh(super::$fresh().await)
                        else {
                            // The backend is not available here (said once by `fresh`).
                            return;
                        };
                        $crate::conformance::$suite::$check(store).await;
                    }
                )*
            }
        )*
    };
}
