//! Config files (placeholder while the DSL is built).
