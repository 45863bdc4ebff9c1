//! Limits of the memory-stores API, as documented by the reference client.

/// Largest memory content, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 102_400;
/// Largest memory path, in UTF-8 bytes.
pub const MAX_PATH_BYTES: usize = 1_024;
/// Most segments in a memory path.
pub const MAX_PATH_SEGMENTS: usize = 20;
/// Default cap on live memories per store (the current hosted documentation's figure).
pub const DEFAULT_MAX_MEMORIES_PER_STORE: u32 = 10_000;
/// Longest store name, in characters.
pub const MAX_STORE_NAME_CHARS: usize = 255;
/// Longest store description, in characters.
pub const MAX_STORE_DESCRIPTION_CHARS: usize = 1_024;
/// Most metadata pairs on a store.
pub const MAX_METADATA_PAIRS: usize = 16;
/// Longest metadata key, in characters.
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// Longest metadata value, in characters.
pub const MAX_METADATA_VALUE_CHARS: usize = 512;
/// Default page size of every list.
pub const DEFAULT_PAGE_LIMIT: u32 = 20;
/// Largest page size of every list.
pub const MAX_PAGE_LIMIT: u32 = 100;
/// Largest page when items carry their content (`view=full`).
pub const MAX_FULL_VIEW_PAGE_LIMIT: u32 = 20;
/// Most bytes of a request's headers, names and values counted (a bigger head is refused with
/// `431`). Far above what any client of the API sends; it bounds what one request may make the
/// server buffer and scan.
pub const MAX_HEADER_BYTES: usize = 65_536;
/// Most headers on one request (`431` past it).
pub const MAX_HEADERS: usize = 100;
/// Longest request target (path and query string), in bytes (`414` past it): room for the
/// longest `path_prefix` percent-encoded (about 3 KiB), a page cursor and every other list
/// parameter, several times over.
pub const MAX_URI_BYTES: usize = 16_384;
/// Most writes in one memory batch (`POST /v1/memory_stores/{id}/memories:batch`, a mnemo
/// extension); the request body's size limit applies as well.
pub const MAX_BATCH_WRITES: usize = 100;

/// The defaults of `[dreams]` in the models file: dreams running at once on one database,
/// waiting per workspace, wall time and model calls of one dream, bytes of an input store, and
/// characters a transcript keeps of each tool result.
pub const DEFAULT_DREAM_MAX_RUNNING: u32 = 2;
pub const DEFAULT_DREAM_MAX_PENDING: u32 = 100;
pub const DEFAULT_DREAM_TIMEOUT_SECS: u64 = 3600;
pub const DEFAULT_DREAM_MAX_MODEL_CALLS: u32 = 300;
pub const DEFAULT_DREAM_MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;
pub const DEFAULT_DREAM_TRANSCRIPT_RESULT_CHARS: usize = 2000;

/// The change feed's keep-alive `ping` interval when the client names none (seconds).
pub const DEFAULT_FEED_PING_SECS: u64 = 15;
/// The shortest keep-alive interval a change feed's client may ask for with `ping` (seconds).
pub const MIN_FEED_PING_SECS: u64 = 5;
/// The longest keep-alive interval a change feed's client may ask for with `ping` (seconds).
pub const MAX_FEED_PING_SECS: u64 = 300;
/// The largest content a change feed entry carries inline (`content=inline`): a mount pulls a
/// small memory from the entry itself, with no request; a larger one it fetches.
pub const MAX_INLINE_CHANGE_BYTES: u64 = 64 * 1024;
