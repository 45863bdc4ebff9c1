//! The PostgreSQL backend passes the conformance suite (needs `MNEMO_TEST_POSTGRES`).

mnemo_store_tests::conformance!(mnemo_store_tests::Postgres);
