// SPDX-License-Identifier: GPL-2.0

//! oxe's trace events (`oxe_trace.h`, trace system `oxe`), one safe
//! function each. A call tests the event's static key and goes no further
//! unless someone enabled it (tracefs, perf, bpftrace); on a kernel
//! without tracepoints it compiles to nothing.

/// Declares the Rust side of events of `oxe_trace.h`: `name(args)` emits
/// event `oxe_<name>`. As the kernel crate's `declare_trace!`, over this
/// module's bindings rather than the kernel's.
macro_rules! events {
    ($($(#[$attr:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        $(#[$attr])*
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $name($($arg: $ty),*) {
            #[cfg(CONFIG_TRACEPOINTS)]
            kernel::macros::paste! {
                // SAFETY: the tracepoint is a static trace.c defines; its
                // key may be read at any time.
                let on = unsafe {
                    kernel::jump_label::static_branch_unlikely!(
                        super::[< __tracepoint_oxe_ $name >],
                        super::tracepoint,
                        key
                    )
                };
                if on {
                    // SAFETY: the emitter trace.c generates takes the
                    // event's fields by value and has no precondition.
                    unsafe { super::[< rust_do_trace_oxe_ $name >]($($arg),*) };
                }
            }
            #[cfg(not(CONFIG_TRACEPOINTS))]
            {
                $(let _ = $arg;)*
            }
        }
    )*};
}

events! {
    /// An MR was made and its key published: `kind` 0 user memory, 1 fast
    /// registration, 2 indirect key; `start` is the process address of
    /// user memory (0 otherwise).
    fn mr_reg(guid: u64, key: u32, kind: u32, iova: u64, length: u64, start: u64, access: u32, odp: bool);
    /// `ibv_rereg_mr` changed an MR (`flags` as the verb's).
    fn mr_rereg(
        guid: u64,
        key: u32,
        flags: u32,
        old_iova: u64,
        old_length: u64,
        old_access: u32,
        iova: u64,
        length: u64,
        access: u32,
    );
    /// An MR's key stopped resolving (deregistration).
    fn mr_dereg(guid: u64, key: u32);
    /// A fault mapped `[start, end)` of a process's memory for a device,
    /// `pages` of them new.
    fn odp_fault(start: u64, end: u64, pages: u64);
    /// The kernel took `[start, end)` away from a device; `pages` of it
    /// were mapped.
    fn odp_invalidate(start: u64, end: u64, pages: u64);
    /// A peer's access through `key` was refused: `op` and `reason` as
    /// `oxe_trace.h` names them.
    fn key_refused(guid: u64, qpn: u32, key: u32, va: u64, length: u64, op: u32, reason: u32);
    /// A QP moved from state `old` to `new` (`ib_qp_state` numbers).
    fn qp_state(guid: u64, qpn: u32, old: u32, new: u32);
    /// A requester goes back to `psn` and sends again from there: `why` 0
    /// a timeout, 1 a sequence-error NAK, 2 an RNR NAK, 3 a gap before a
    /// read response; `retries_left` of the QP's retry count.
    fn qp_go_back(guid: u64, qpn: u32, psn: u32, why: u32, retries_left: u32);
}
