//! One queue's consumer offset as the client sees it (`ControllableOffset` plus a persisted mark).

/// The offset to commit for one queue.
///
/// Concurrent consumption only ever raises it (out-of-order completions cannot pull it back);
/// a broker-ordered move (OFFSET_MOVED, reset) sets it outright. It is dirty until the broker
/// has acknowledged an UPDATE_CONSUMER_OFFSET carrying the current value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OffsetCell {
    value: i64,
    persisted: i64,
}

impl Default for OffsetCell {
    fn default() -> Self {
        Self { value: -1, persisted: -1 }
    }
}

impl OffsetCell {
    /// A cell holding `value`, already stored on the broker.
    pub(crate) fn stored(value: i64) -> Self {
        Self { value, persisted: value }
    }

    /// The offset; −1 when there is none yet.
    pub(crate) fn value(&self) -> i64 {
        self.value
    }

    /// Raise to `v` (never lower).
    pub(crate) fn advance(&mut self, v: i64) {
        if v > self.value {
            self.value = v;
        }
    }

    /// Set to `v`, up or down (the broker moved the queue).
    pub(crate) fn force(&mut self, v: i64) {
        self.value = v;
    }

    /// Needs an UPDATE_CONSUMER_OFFSET.
    pub(crate) fn is_dirty(&self) -> bool {
        self.value >= 0 && self.value != self.persisted
    }

    /// What the broker holds is unknown again (it may have lost it): dirty if there is a value.
    pub(crate) fn unconfirm(&mut self) {
        self.persisted = -1;
    }

    /// The broker acknowledged `v`.
    pub(crate) fn persisted(&mut self, v: i64) {
        self.persisted = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increase_only_unless_forced() {
        let mut c = OffsetCell::default();
        assert!(!c.is_dirty());
        c.advance(5);
        c.advance(3);
        assert_eq!(c.value(), 5);
        assert!(c.is_dirty());
        c.persisted(5);
        assert!(!c.is_dirty());
        c.force(2);
        assert_eq!(c.value(), 2);
        assert!(c.is_dirty());
        assert!(!OffsetCell::stored(9).is_dirty());
        let mut c = OffsetCell::stored(9);
        c.unconfirm();
        assert!(c.is_dirty());
        let mut none = OffsetCell::default();
        none.unconfirm();
        assert!(!none.is_dirty(), "nothing to send");
    }
}
