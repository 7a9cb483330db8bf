//! The conformance suite against SQLite: each case on its own new database file.

waymark_store::conformance_tests!(waymark_store::conformance::fixtures::sqlite);
