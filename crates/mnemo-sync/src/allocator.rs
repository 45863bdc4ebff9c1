//! The allocator's setting for the sandbox side: `mnemo worker` and `mnemo mount` call
//! [`single_arena`] first thing (and so does the `sync_engine` bench, which stands in for
//! `mnemo mount`).
//!
//! glibc's allocator gives every thread that allocates under contention an arena of its own (up
//! to eight per core) and keeps what is freed in each arena for that arena's later use. On the
//! sandbox side the threads are few and their allocations short-lived, so those arenas mostly
//! hold memory that another thread freed and nobody reuses: with one arena the worker's peak
//! memory (8 stores × 2,000 memories, teardown included) fell from 36 to 30 MiB in
//! `bench/worker`, at no measurable cost in time (each thread keeps its own small cache in front
//! of the arena). The server keeps glibc's default: its threads allocate concurrently all the
//! time, and there an arena each is what keeps them from waiting on one another.
//!
//! The same call fixes the size from which glibc maps a block on its own (64 KiB). By default
//! that threshold starts at 128 KiB and rises to the size of any mapped block freed, so after the
//! first download's read buffers (about 400 KB each) were freed, later big blocks came from the
//! heap and left holes there: the worker's peak fell from 23.9 to 23.0 MiB with the fixed
//! threshold.

/// Limits glibc's allocator to one arena. Call before any other thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code, reason = "a glibc tunable, see the SAFETY note")]
pub fn single_arena() {
    // SAFETY: `mallopt` takes two plain integers and only records an allocator tunable; it
    // reads or writes no memory of ours, has no precondition beyond a valid parameter (a
    // documented constant), and is called from `main` before the runtime's threads exist.
    // Its result (0 if glibc refused the value) needs no handling: the default stays in force.
    let _ = unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    // SAFETY: as above. Blocks of 64 KiB and more (a connection's read buffer, a journal's
    // bytes, a batch of memories) are mapped on their own and given back whole when freed;
    // glibc otherwise raises this threshold after the first such free, and later big blocks
    // then come from the heap, where they leave holes that keep the peak high.
    let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
}

/// The size from which a block is mapped on its own ([`single_arena`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 64 * 1024;

/// Other C libraries have no such arenas: nothing to set.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn single_arena() {}
