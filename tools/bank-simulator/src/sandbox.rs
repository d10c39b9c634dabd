//! The sandbox rule: accounts named `decline…` are always declined.
//!
//! Demos and tests need a decline they can ask for without touching the knobs or counting on
//! the random generator: a debit from a UPI address whose name part (before the `@`) starts with
//! `decline`, in any case (`decline@okbank`, `Decline.Me@upi`), is declined for insufficient
//! funds every time, whatever `decline_rate` says.

/// The name-part prefix that always declines.
pub const ALWAYS_DECLINED_PREFIX: &str = "decline";

/// Whether the sandbox rule declines debits from this account.
pub fn is_always_declined(account: &str) -> bool {
    let name = account.split('@').next().unwrap_or_default();
    name.get(..ALWAYS_DECLINED_PREFIX.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(ALWAYS_DECLINED_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_name_part_decides() {
        assert!(is_always_declined("decline@okbank"));
        assert!(is_always_declined("Decline.Me@upi"));
        assert!(is_always_declined("declined-user"));
        assert!(!is_always_declined("asha@decline"));
        assert!(!is_always_declined("dec@okbank"));
        assert!(!is_always_declined("ashadecline@okbank"));
        assert!(!is_always_declined("déclin@okbank"));
    }
}
