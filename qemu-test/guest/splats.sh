# Kernel reports that fail a guest run wherever they appear in dmesg. Sourced by
# lib.sh in the guest and by scripts/test-setup.sh on the host, which checks the
# pattern against real report lines and the debug kernel's benign boot lines.
#
# Every lockdep report opens with "WARNING: possible ..." or "WARNING:
# inconsistent lock state" and a KASAN report with "BUG: KASAN:"; the other
# phrases catch what lockdep says when it gives up. A bare "lockdep" would also
# match "RCU lockdep checking is enabled.", which every lockdep kernel prints at
# boot. Hung tasks say "blocked for more than".
SPLAT_RE='WARNING:|BUG:|Oops|KASAN:|UBSAN|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|lockdep is turned off|turning off the locking correctness validator|DEBUG_LOCKS_WARN_ON|blocked for more than|soft lockup|detected stall|hard LOCKUP|general protection fault|kernel BUG|Call Trace:|refcount_t:'
