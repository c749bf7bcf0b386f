//! Unit cases for assertion specs.
