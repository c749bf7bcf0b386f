//! What the adapters share, below every adapter and the registry: the common hook wire
//! format, the files facet's helpers, and reading a harness's logs.

pub mod files;
pub mod log;
pub mod wire;
