//! The conformance suite of [`mnemo_store::Store`]: every backend passes the same tests, the
//! concurrency stories a multi-writer backend can fail included.
//!
//! A backend is reached through a [`StoreFactory`], which opens a fresh, empty store per test.
//! [`from_env`] picks one from `MNEMO_TEST_DATABASE` (unset or `sqlite`: an SQLite file in a
//! temporary folder; `postgres`: a fresh schema in the database `MNEMO_TEST_POSTGRES` names),
//! so the server's integration tests can run against every backend too.
//! [`conformance!`] expands to one test per case of [`cases`] for a factory; the module doc of
//! [`cases`] lists the invariants each section checks. A new backend's crate runs the suite
//! with one line, e.g. `mnemo_store_tests::conformance!(mnemo_store_tests::Sqlite);`.

use std::ops::Deref;
use std::sync::Arc;

use async_trait::async_trait;
use mnemo_store::{Limits, Store};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};

pub mod cases;

/// A store opened for one test, with whatever must outlive it (a temporary folder).
pub struct TestStore {
    pub store: Arc<dyn Store>,
    _keep: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for TestStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestStore").finish_non_exhaustive()
    }
}

impl Deref for TestStore {
    type Target = dyn Store;

    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

/// Opens fresh, empty stores of one backend.
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// The backend's name, for messages.
    fn name(&self) -> &'static str;
    /// A new empty store with these limits.
    async fn open(&self, limits: Limits) -> TestStore;
}

/// SQLite files in temporary folders (`synchronous=normal`: tests need no power-loss safety).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sqlite;

#[async_trait]
impl StoreFactory for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn open(&self, limits: Limits) -> TestStore {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/test.sqlite", dir.path().display()))
            .expect("a valid sqlite URL");
        settings.durability = Durability::Normal;
        settings.limits = limits;
        let store = SqliteStore::open(&settings).expect("open a fresh SQLite store");
        TestStore { store: Arc::new(store), _keep: Some(dir) }
    }
}

/// Fresh schemas in the PostgreSQL database that `MNEMO_TEST_POSTGRES` names (`.ci/postgres
/// start` runs a throw-away one and prints its URL). Each store lives in its own schema, so
/// tests run side by side on one database; the schemas go with the cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct Postgres;

impl Postgres {
    /// The database URL tests use.
    ///
    /// # Panics
    /// When `MNEMO_TEST_POSTGRES` is unset: a PostgreSQL test must never pass by not running.
    pub fn url() -> String {
        std::env::var("MNEMO_TEST_POSTGRES").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| {
            panic!(
                "MNEMO_TEST_POSTGRES is not set: start a throw-away PostgreSQL with \
                 `export MNEMO_TEST_POSTGRES=$(.ci/postgres start)` (scripts/test does this)"
            )
        })
    }

    /// Creates an empty schema with a fresh name and returns the name.
    pub async fn fresh_schema() -> String {
        let url = Self::url();
        // A loaded machine may refuse a connection now and then: try a few times, waiting
        // 200 ms, 400 ms… 1 s.
        const CONNECT_RETRY: mnemo_api::Backoff =
            mnemo_api::Backoff::linear(std::time::Duration::from_millis(200), std::time::Duration::from_secs(1))
                .with_retries(5);
        let mut attempt = 0;
        let (client, connection) = loop {
            match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                Ok(pair) => break pair,
                Err(e) => match CONNECT_RETRY.retry(attempt) {
                    Some(delay) => {
                        attempt += 1;
                        eprintln!("connect to MNEMO_TEST_POSTGRES failed ({e}); retrying");
                        tokio::time::sleep(delay).await;
                    }
                    None => panic!("connect to MNEMO_TEST_POSTGRES: {e}"),
                },
            }
        };
        let driver = tokio::spawn(connection);
        let schema = format!("t_{:016x}", rand::random::<u64>());
        client.batch_execute(&format!("CREATE SCHEMA {schema}")).await.expect("create a test schema");
        drop(client);
        let _ = driver.await;
        schema
    }

    /// Settings reaching `schema` in the test database.
    pub fn settings(schema: &str, limits: Limits) -> PostgresSettings {
        let mut settings = PostgresSettings::from_url(&Self::url()).expect("MNEMO_TEST_POSTGRES is a postgres:// URL");
        settings.config.options(format!("-c search_path={schema}"));
        settings.pool_size = 8;
        settings.limits = limits;
        settings
    }
}

#[async_trait]
impl StoreFactory for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn open(&self, limits: Limits) -> TestStore {
        let schema = Self::fresh_schema().await;
        let store = PostgresStore::open(&Self::settings(&schema, limits)).await.expect("open a fresh PostgreSQL store");
        TestStore { store: Arc::new(store), _keep: None }
    }
}

/// The backend `MNEMO_TEST_DATABASE` names: unset or `sqlite` for [`Sqlite`], `postgres` for
/// [`Postgres`].
///
/// # Panics
/// On a value naming no backend this build knows, so a misconfigured run fails loudly rather
/// than silently testing SQLite.
pub fn from_env() -> Arc<dyn StoreFactory> {
    match std::env::var("MNEMO_TEST_DATABASE").ok().as_deref() {
        None | Some("" | "sqlite") => Arc::new(Sqlite),
        Some("postgres" | "postgresql") => Arc::new(Postgres),
        Some(other) => {
            let scheme = other.split(':').next().unwrap_or_default();
            panic!("MNEMO_TEST_DATABASE names an unknown backend `{scheme}` (known: sqlite, postgres)")
        }
    }
}

/// One test per conformance case, each with a fresh store from `$factory`, grouped in one module
/// per section of [`cases`] (so `cargo nextest run -E 'test(/concurrency::/)'` runs a section).
///
/// A case may carry attributes (`#[ignore = "why"]` for a known backend bug, with the bug
/// described on the case). Async cases run as `#[tokio::test]` on a multi-thread runtime with four workers, so the
/// concurrency stories really run in parallel; blocking cases (the property test, which drives
/// its own runtime) run as plain `#[test]`s.
///
/// ```ignore
/// mnemo_store_tests::conformance!(mnemo_store_tests::Sqlite);
/// ```
#[macro_export]
macro_rules! conformance {
    ($factory:expr) => {
        $crate::conformance!(@async $factory; credentials {
            api_keys_are_found_by_hash_and_counted,
            credentials_resolve_to_their_kind,
            a_closed_store_refuses_calls,
            console_sessions_expire_and_are_revoked,
            credentials_resolve_in_the_lookup_order,
            an_absurd_console_ttl_ends_at_a_showable_time,
        });
        $crate::conformance!(@async $factory; audit {
            audit_entries_are_listed_newest_first_through_filters_and_pages,
            audit_entries_of_the_organization_name_no_workspace,
            audit_details_never_hold_a_secret,
        });
        $crate::conformance!(@async $factory; environments {
            environments_are_created_updated_listed_archived_and_deleted,
            environment_keys_are_scoped_to_their_environment,
        });
        $crate::conformance!(@async $factory; isolation_environments {
            environments_and_keys_of_another_workspace_are_unknown,
            work_of_another_workspace_is_unknown,
            webhook_endpoints_of_another_workspace_are_unknown,
            webhook_events_reach_only_their_workspaces_endpoints,
        });
        $crate::conformance!(@async $factory; agents {
            agents_are_versioned_and_updates_build_on_the_latest,
            agents_are_listed_and_archived,
        });
        $crate::conformance!(@async $factory; sessions {
            sessions_snapshot_their_agent_and_stores,
            sessions_refuse_what_they_cannot_run,
            sessions_are_updated_listed_archived_and_deleted,
            archiving_or_deleting_a_session_stops_its_work,
        });
        $crate::conformance!(@async $factory; events {
            events_are_listed_in_order_with_filters_and_cursors,
            the_session_state_machine_runs_through_the_store,
            confirmations_gate_tool_calls,
            only_the_agent_side_posts_agent_events,
            workers_post_results_only_and_every_event_names_its_poster,
            terminated_sessions_accept_no_events,
            input_enqueues_work_only_without_live_work,
        });
        $crate::conformance!(@async $factory; isolation_sessions {
            agents_are_invisible_to_other_workspaces,
            sessions_and_their_events_are_invisible_to_other_workspaces,
            session_bodies_reference_only_their_workspace,
            api_keys_are_minted_in_their_workspace,
        });
        $crate::conformance!(@async $factory; work {
            work_is_polled_acknowledged_heartbeaten_and_stopped,
            work_items_are_scoped_listed_annotated_and_counted,
            healthchecks_queue_oldest_first,
            a_healthcheck_token_resolves_to_its_item,
            an_unacknowledged_delivery_is_reclaimed,
        });
        $crate::conformance!(@async $factory; leases {
            a_lapsed_lease_returns_the_item_to_the_queue,
            the_store_tells_when_the_next_lease_lapses,
            a_sessions_token_lives_exactly_as_long_as_its_lease,
        });
        $crate::conformance!(@async $factory; isolation_memory {
            memory_operations_on_another_workspaces_store_answer_as_for_an_unknown_one,
            a_workspaces_listings_and_usage_show_only_its_stores,
            an_api_key_made_in_a_workspace_resolves_to_it,
        });
        $crate::conformance!(@async $factory; memories {
            memory_stores_are_created_updated_listed_archived_and_deleted,
            an_archived_store_is_read_and_emptied_but_not_written,
            memories_are_created_read_updated_and_deleted,
            paths_never_overlap,
            the_store_cap_counts_live_memories,
            the_first_failing_check_wins,
            memory_listings_roll_up_prefixes_and_paginate,
            memory_change_seq_moves_on_every_change,
            a_batch_of_writes_applies_in_order_each_with_its_own_outcome,
            memory_store_usage_counts_live_memories_and_their_bytes,
            an_export_reads_every_live_memory_from_one_snapshot,
            cursors_of_another_list_are_refused,
        });
        $crate::conformance!(@async $factory; search {
            a_memory_is_found_from_its_write_and_never_after_its_deletion,
            every_query_form_finds_what_it_should,
            a_short_memory_naming_a_term_often_outranks_one_mention_in_a_long_one,
            search_keeps_to_its_workspace_and_the_named_stores,
            search_results_page_by_cursor,
        });
        $crate::conformance!(@async $factory; semantic {
            embeddings_follow_each_memorys_current_version,
            ranking_by_meaning_keeps_to_its_scope_and_narrowing_terms,
            by_meaning_fuses_full_text_and_meaning,
        });
        $crate::conformance!(@async $factory; versions {
            versions_record_every_change_and_filter,
            redaction_clears_a_version_but_never_the_current_one,
            the_change_feed_lists_a_stores_versions_in_commit_order,
            memory_signals_follow_every_committed_version,
        });
        $crate::conformance!(@async $factory; concurrency {
            racing_creates_of_one_path_have_one_winner,
            overlapping_paths_created_concurrently_never_coexist,
            concurrent_creates_fill_the_cap_exactly,
            concurrent_updates_with_one_precondition_have_one_winner,
            concurrent_writers_stamp_versions_in_their_order,
            concurrent_pollers_never_share_a_delivery,
            a_concurrent_reader_sees_every_event_in_order,
            a_concurrent_feed_reader_sees_every_version_in_order,
        });
        $crate::conformance!(@async $factory; webhooks {
            webhook_endpoints_are_created_listed_updated_and_deleted,
            changes_yield_webhook_deliveries_in_their_transaction,
            deliveries_are_claimed_retried_and_finished,
            concurrent_claimers_never_share_a_delivery,
            claims_take_the_oldest_due_first_and_return_them_in_that_order,
            a_rotated_secret_signs_beside_the_new_one_until_it_expires,
            the_next_attempt_is_due_when_the_earliest_pending_delivery_is,
        });
        $crate::conformance!(@async $factory; workspaces {
            the_organization_is_read_and_renamed,
            workspaces_are_created_updated_listed_and_archived,
            api_keys_are_minted_listed_and_changed,
            workspace_rate_limits_are_overridden_and_cleared,
        });
        $crate::conformance!(@async $factory; people {
            a_setup_link_makes_the_first_admin_once,
            invites_are_made_listed_accepted_and_deleted,
            roles_change_and_the_last_admin_stays,
            members_are_added_changed_listed_and_removed,
            concurrent_invites_for_one_email_have_one_winner,
            person_sessions_end_by_sign_out_everywhere_and_removal,
            a_person_acts_in_their_workspaces_with_their_roles,
            a_persons_live_sessions_are_listed,
            ending_person_sessions_is_signalled,
        });
        $crate::conformance!(@async $factory; dreams {
            a_create_checks_its_inputs_and_the_queue,
            an_idempotency_key_answers_the_same_dream,
            cancel_and_archive_follow_the_lifecycle_and_lists_filter,
            a_dream_has_one_runner_until_its_lease_lapses,
            a_start_makes_the_session_and_the_copy_is_whole_and_once,
            a_finish_keeps_a_cancel_and_frees_the_store,
            the_dreams_environment_is_mnemos_own,
        });
        $crate::conformance!(@async $factory; retention {
            a_purge_keeps_each_live_memorys_newest_version_and_the_young_ones,
            a_stores_own_retention_is_set_read_and_cleared,
            writes_during_a_purge_lose_nothing,
        });
        $crate::conformance!(@async $factory; sso {
            sso_people_are_created_once_and_get_their_groups_roles_at_every_sign_in,
        });
        $crate::conformance!(@async $factory; rate_limits {
            a_bucket_admits_its_capacity_then_refuses_with_a_wait,
            buckets_refill_by_the_store_clock,
            workspaces_and_entries_have_buckets_of_their_own,
            concurrent_takers_together_admit_one_buckets_worth,
            model_tokens_leave_a_debt_the_next_call_waits_out,
        });
        $crate::conformance!(@async $factory; turns {
            turn_leases_go_to_one_holder_until_released_or_lapsed,
            concurrent_claimers_get_one_turn_lease,
            model_calls_add_their_usage_to_the_session,
        });
        $crate::conformance!(@blocking $factory; model {
            memory_model,
        });
    };
    (@async $factory:expr; $section:ident { $($(#[$attr:meta])* $case:ident,)* }) => {
        mod $section {
            #[allow(unused_imports)]
            use super::*;

            $(
                $(#[$attr])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let factory = $factory;
                    $crate::cases::$section::$case(&factory).await;
                }
            )*
        }
    };
    (@blocking $factory:expr; $section:ident { $($(#[$attr:meta])* $case:ident,)* }) => {
        mod $section {
            #[allow(unused_imports)]
            use super::*;

            $(
                $(#[$attr])*
                #[test]
                fn $case() {
                    let factory = $factory;
                    $crate::cases::$section::$case(&factory);
                }
            )*
        }
    };
}
