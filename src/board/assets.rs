//! The page and its assets, embedded in the binary: no CDN, no build step, nothing fetched
//! at run time (the board works on a machine with no network).

pub const HTML: &str = include_str!("assets/index.html");
pub const CSS: &str = include_str!("assets/board.css");
pub const JS: &str = include_str!("assets/board.js");
pub const MANIFEST: &str = include_str!("assets/manifest.webmanifest");
pub const ICON: &str = include_str!("assets/icon.svg");
pub const ICON_192: &[u8] = include_bytes!("assets/icon-192.png");
pub const ICON_512: &[u8] = include_bytes!("assets/icon-512.png");
