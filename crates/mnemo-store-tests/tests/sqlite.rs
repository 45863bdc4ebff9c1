//! The SQLite backend passes the conformance suite.

mnemo_store_tests::conformance!(mnemo_store_tests::Sqlite);
