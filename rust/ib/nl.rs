// SPDX-License-Identifier: GPL-2.0

//! Netlink attributes for `rdma resource show -dd` and `rdma statistic`:
//! the driver's nest, built over the kernel's message helpers.

use crate::bindings as b;
use kernel::ffi::c_int;

/// A nested netlink attribute being filled, cancelled (the message cut
/// back to where it started) unless ended. The kernel's nla_nest_*
/// helpers are inline functions.
///
/// # Invariants
///
/// `msg` is a message under construction, `start` the nest's header in it.
pub(super) struct Nest {
    msg: *mut b::sk_buff,
    start: *mut b::nlattr,
}

impl Nest {
    /// Opens attribute `kind` as a nest at the end of `msg`; `None` if it
    /// does not fit.
    ///
    /// # Safety
    ///
    /// `msg` is a netlink message under construction, and only this nest
    /// adds to it until it is ended or dropped.
    pub(super) unsafe fn start(msg: *mut b::sk_buff, kind: u32) -> Option<Self> {
        // SAFETY: the caller's message; nla_put checks the room.
        unsafe {
            let start = Self::tail(msg).cast();
            (b::nla_put(msg, kind as c_int, 0, core::ptr::null()) == 0)
                .then_some(Nest { msg, start })
        }
    }

    /// # Safety
    ///
    /// `msg` is a live skb.
    unsafe fn tail(msg: *mut b::sk_buff) -> *mut u8 {
        // SAFETY: the caller's skb; `tail` is an offset from `head` on 64-bit.
        unsafe { (*msg).head.add((*msg).tail as usize) }
    }

    /// Closes the nest: its length covers what was added since the start.
    pub(super) fn end(self) {
        // SAFETY: the nest's message and header (type invariant).
        unsafe {
            let len = Self::tail(self.msg).offset_from(self.start.cast::<u8>());
            (*self.start).nla_len = len as u16;
        }
        core::mem::forget(self);
    }
}

impl Drop for Nest {
    fn drop(&mut self) {
        // SAFETY: the nest's message and header (type invariant), which
        // lies after the message's data start.
        unsafe {
            let keep = self.start.cast::<u8>().offset_from((*self.msg).data);
            b::skb_trim(self.msg, keep as u32);
        }
    }
}
